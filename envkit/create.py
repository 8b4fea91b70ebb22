"""``envkit create``: resolve, write the specs, install with the user's installer, verify; all or
nothing.

The environment is built in place (venvs and conda environments are not relocatable), so "nothing"
is done by removal: when a step fails, or Ctrl-C arrives, the half-made environment is deleted, and
an environment that ``--force`` replaced is put back from where it was moved aside. An existing
environment is never touched without ``--force``.

Backends: ``venv`` (python -m venv + pip), ``uv`` (uv venv + uv pip), and the conda family
(``conda``, ``mamba``, ``micromamba``) from an environment.yml. ``auto`` takes the conda family when
the plan is for conda and one is installed, else uv when present, else venv.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Final, Optional

from envkit.detect.pyenv import conda_env_dirs, envkit_envs_dir
from envkit.errors import EnvkitError, InputError
from envkit.resolve import Plan

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.report import Report
    from envkit.system import System

__all__ = [
    "BACKENDS",
    "CreateFailed",
    "Installation",
    "Step",
    "backend_exe",
    "build_steps",
    "choose_backend",
    "execute",
    "find_tool",
]

BACKENDS: Final = ("auto", "conda", "mamba", "micromamba", "uv", "venv")
CONDA_FAMILY: Final = ("micromamba", "mamba", "conda")
# Installers download gigabytes (a CUDA torch is ~3 GB with its nvidia-* wheels).
INSTALL_TIMEOUT_S: Final = 3600.0
VENV_TIMEOUT_S: Final = 300.0
CREATE_SCHEMA: Final = "envkit.create/1"


class CreateFailed(EnvkitError):
    """A step failed; the environment was removed (or restored). Exit code 1, like a failed check."""

    exit_code = 1


@dataclass(frozen=True)
class Step:
    title: str
    argv: tuple[str, ...]
    timeout: float

    def shown(self) -> str:
        from envkit.webprobe import redact

        return redact(" ".join(_quote(a) for a in self.argv))


@dataclass(frozen=True)
class Installation:
    """Everything ``envkit create`` will do, decided before anything is done (``--dry-run`` shows it)."""

    name: Optional[str]
    prefix: Path
    backend: str
    plan: Plan
    steps: tuple[Step, ...]
    spec_files: dict[str, str]  # file name -> content, written into <prefix>/envkit/
    staging: Path  # where the specs live while the installer reads them
    python: Path  # the new environment's interpreter
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": CREATE_SCHEMA,
            "name": self.name,
            "prefix": str(self.prefix),
            "backend": self.backend,
            "python": str(self.python),
            "plan": self.plan.to_json(),
            "commands": [s.shown() for s in self.steps],
            "spec_files": [str(self.prefix / "envkit" / n) for n in self.spec_files],
            "notes": list(self.notes),
        }


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def backend_exe(system: System, wanted: str) -> str:
    """The executable of a ``--backend`` ("" for venv and auto); InputError when unknown or missing."""
    if wanted not in BACKENDS:
        raise InputError(f"--backend {wanted!r}: one of {', '.join(BACKENDS)}")
    if wanted in ("auto", "venv"):
        return ""
    exe = find_tool(system, wanted)
    if exe is None:
        raise InputError(f"--backend {wanted}: `{wanted}` is not installed (not on PATH)")
    return exe


def choose_backend(system: System, wanted: str, plan: Plan) -> tuple[str, str]:
    """(backend, its executable). ``auto``: the conda family for a conda plan, else uv, else venv."""
    exe = backend_exe(system, wanted)
    if wanted == "auto":
        if plan.channel == "conda":
            for name in CONDA_FAMILY:
                found = find_tool(system, name)
                if found:
                    return name, found
            raise InputError(
                "the plan is for conda but no conda, mamba or micromamba is installed",
                hint="install micromamba (https://mamba.readthedocs.io) or use --channel pip",
            )
        uv = find_tool(system, "uv")
        return ("uv", uv) if uv else ("venv", "")
    if wanted == "venv":
        return "venv", ""
    if wanted in CONDA_FAMILY and plan.channel != "conda":
        raise InputError(f"--backend {wanted} installs conda packages: add --channel conda")
    if wanted in ("uv", "venv") and plan.channel == "conda":
        raise InputError(f"--backend {wanted} installs pip packages: drop --channel conda")
    return wanted, exe


def find_tool(system: System, name: str) -> Optional[str]:
    env_var = {"conda": "CONDA_EXE", "mamba": "MAMBA_EXE"}.get(name)
    return (system.env.get(env_var) if env_var else None) or system.which(name)


def default_prefix(system: System, name: str, backend: str) -> Path:
    """Where an environment made by name goes: conda's envs folder for the conda family, else
    envkit's own envs folder ($ENVKIT_ENVS_DIR, default ~/.local/share/envkit/envs)."""
    if backend in CONDA_FAMILY:
        for folder in conda_env_dirs(system):
            if folder.is_dir() and os.access(folder, os.W_OK):
                return folder / name
    return envkit_envs_dir(system) / name


def base_python(system: System, version: Optional[str]) -> str:
    """An interpreter of the plan's Python for ``python -m venv``."""
    if version:
        for name in (f"python{version}", f"python{version.split('.')[0]}", "python3", "python"):
            exe = system.which(name)
            if exe and _version_of(system, exe) == version:
                return exe
        raise InputError(
            f"no Python {version} found on PATH for the new environment",
            hint=f"install Python {version}, use --backend uv (it fetches Pythons), or pass --python",
        )
    exe = system.which("python3") or system.which("python")
    if exe is None:
        raise InputError("no python3 on PATH for the new environment")
    return exe


def _version_of(system: System, exe: str) -> Optional[str]:
    result = system.run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], timeout=20)
    return result.stdout.strip() if result.ok else None


def _index_args(index: Sequence[str], *, wheelhouse: Optional[str], offline: bool) -> list[str]:
    """Where pip looks: ``index`` and the wheelhouse, or offline the wheelhouse alone (prepare()
    refuses --offline without one)."""
    local = ["--find-links", wheelhouse] if wheelhouse else []
    return ["--no-index", *local] if offline else [*index, *local]


def build_steps(
    system: System,
    *,
    backend: str,
    exe: str,
    prefix: Path,
    plan: Plan,
    torch_requirements: Sequence[str],
    extra_pip: Sequence[str],
    staging: Path,
    spec_files: dict[str, str],
    torch_index: Sequence[str] = (),
    extra_index: Sequence[str] = (),
    wheelhouse: Optional[str] = None,
    offline: bool = False,
) -> tuple[Path, tuple[Step, ...]]:
    """The exact command lines of one backend: (the new interpreter, the steps)."""
    python = prefix / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    version = str(plan.python) if plan.python else None
    if backend in CONDA_FAMILY:
        if "environment.yml" not in spec_files:
            raise InputError(f"--backend {backend} needs a conda plan (--channel conda)")
        spec = str(staging / "environment.yml")
        verb = ["create", "--yes"] if backend == "micromamba" else ["env", "create"]
        argv = [exe, *verb, "--prefix", str(prefix), "--file", spec]
        if offline:
            argv.append("--offline")
        return python, (Step(f"{backend}: create the environment", tuple(argv), INSTALL_TIMEOUT_S),)
    index = _index_args(torch_index, wheelhouse=wheelhouse, offline=offline)
    constraints = str(staging / "constraints.txt")
    if backend == "uv":
        create = [exe, "venv", str(prefix), "--seed"] + (["--python", version] if version else [])
        install = [exe, "pip", "install", "--python", str(python), *torch_requirements, *index]
        extra = [exe, "pip", "install", "--python", str(python), *extra_pip, "--constraint", constraints]
    else:
        create = [base_python(system, version), "-m", "venv", str(prefix)]
        install = [str(python), "-m", "pip", "install", *torch_requirements, *index]
        extra = [str(python), "-m", "pip", "install", *extra_pip, "--constraint", constraints]
    extra += _index_args(extra_index, wheelhouse=wheelhouse, offline=offline)
    steps = [
        Step("create the environment", tuple(create), VENV_TIMEOUT_S),
        Step(f"install torch {plan.torch}+{plan.variant}", tuple(install), INSTALL_TIMEOUT_S),
    ]
    if extra_pip:
        steps.append(Step("install the template's other packages", tuple(extra), INSTALL_TIMEOUT_S))
    return python, tuple(steps)


@dataclass
class _Undo:
    """How to put things back: remove what was made, restore what --force moved aside."""

    prefix: Path
    staging: Path
    backup: Optional[Path] = None
    created: bool = False

    def rollback(self) -> list[str]:
        done = []
        if self.created and self.prefix.exists():
            shutil.rmtree(self.prefix, ignore_errors=True)
            done.append(f"removed the half-made {self.prefix}")
        if self.backup is not None and self.backup.exists():
            os.replace(self.backup, self.prefix)
            done.append(f"restored the previous {self.prefix}")
        shutil.rmtree(self.staging, ignore_errors=True)
        return done


def _write_staging(staging: Path, files: dict[str, str]) -> None:
    staging.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        tmp = staging / f".{name}.tmp"
        tmp.write_text(content, encoding="utf-8")
        os.replace(tmp, staging / name)


def execute(
    system: System,
    install: Installation,
    *,
    force: bool = False,
    on_step: Callable[[Step], None] = lambda _s: None,
    on_line: Callable[[str], None] = lambda _l: None,
    verify: Optional[Callable[[Path], Report]] = None,
) -> Optional[Report]:
    """Carry out ``install``; on any failure (or Ctrl-C) leave things as they were.

    Raises:
        InputError: the target exists and ``force`` is off.
        CreateFailed: a step failed (the message ends with the installer's last lines).
    """
    prefix = install.prefix
    if prefix.exists() and not force:
        raise InputError(
            f"{prefix} already exists; envkit never touches an existing environment",
            hint="pass --force to replace it, or choose another name or --prefix",
        )
    undo = _Undo(prefix, install.staging)
    try:
        if prefix.exists():  # --force: move it aside, put it back if anything fails
            undo.backup = prefix.with_name(f".{prefix.name}.envkit-old-{int(time.time())}")
            os.replace(prefix, undo.backup)
        _write_staging(install.staging, install.spec_files)
        undo.created = True
        for step in install.steps:
            on_step(step)
            result = system.run(step.argv, timeout=step.timeout, on_line=on_line)
            if not result.ok:
                tail = "\n".join(result.stdout.strip().splitlines()[-15:])
                raise CreateFailed(f"{step.title} failed: {result.describe()}\n{tail}".rstrip())
        if not install.python.exists():
            raise CreateFailed(f"the installer finished but {install.python} does not exist")
        report = verify(install.python) if verify is not None else None
        if report is not None and any(
            c.id == "verify.device" and c.status.value == "fail" for c in report.checks
        ):
            device = next(c for c in report.checks if c.id == "verify.device")
            raise CreateFailed(
                f"the new environment's torch does not work: {device.summary}\n{device.detail}"
            )
        _keep_specs(install)
    except BaseException as exc:
        done = undo.rollback()
        if isinstance(exc, CreateFailed) and done:
            exc.hint = "; ".join(done)
        raise
    if undo.backup is not None:
        shutil.rmtree(undo.backup, ignore_errors=True)
    shutil.rmtree(install.staging, ignore_errors=True)
    return report


def _keep_specs(install: Installation) -> None:
    """The specs and the plan go into <prefix>/envkit/, so the environment says how it was made."""
    target = install.prefix / "envkit"
    target.mkdir(parents=True, exist_ok=True)
    files = dict(install.spec_files)
    files["plan.json"] = json.dumps(install.plan.to_json(), indent=2) + "\n"
    files["commands.txt"] = "\n".join(s.shown() for s in install.steps) + "\n"
    _write_staging(target, files)
