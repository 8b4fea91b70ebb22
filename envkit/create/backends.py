"""The installers ``envkit create`` drives, and the exact command lines it runs with them.

Backends: ``venv`` (python -m venv + pip), ``uv`` (uv venv + uv pip), and the conda family
(``conda``, ``mamba``, ``micromamba``) from an environment.yml. ``auto`` takes the conda family when
the plan is for conda and one is installed, else uv when present, else venv. Index credentials go
into the installer's own environment variables, never its argv (``ps`` shows argv to every user).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Optional

from envkit._serial import StrEnum
from envkit.detect.pyenv import conda_env_dirs, envkit_envs_dir
from envkit.errors import InputError
from envkit.redact import MASK, redact
from envkit.resolve import Channel, Plan

if TYPE_CHECKING:
    from envkit.resolve.extensions import ExtensionPick

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from envkit.system import System

__all__ = [
    "BACKENDS",
    "CONDA_FAMILY",
    "Backend",
    "Step",
    "backend_exe",
    "build_steps",
    "choose_backend",
    "find_tool",
    "parse_backend",
]


class Backend(StrEnum):
    """An installer ``envkit create`` drives (``--backend``); ``auto`` chooses one of the others."""

    AUTO = "auto"
    CONDA = "conda"
    MAMBA = "mamba"
    MICROMAMBA = "micromamba"
    UV = "uv"
    VENV = "venv"


BACKENDS: Final = tuple(b.value for b in Backend)
CONDA_FAMILY: Final = (Backend.MICROMAMBA, Backend.MAMBA, Backend.CONDA)  # auto's order of preference
# Installers download gigabytes (a CUDA torch is ~3 GB with its nvidia-* wheels).
INSTALL_TIMEOUT_S: Final = 3600.0
VENV_TIMEOUT_S: Final = 300.0
# A source build of flash-attn takes about 2 h without ninja (its README); apex and xformers alike.
BUILD_TIMEOUT_S: Final = 4 * 3600.0


@dataclass(frozen=True)
class Step:
    """One command line. ``env``: variables the child gets on top of envkit's environment; an
    installer's index credentials travel there, never in ``argv`` (see _hide_credentials)."""

    title: str
    argv: tuple[str, ...]
    timeout: float
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # repr: it holds secrets
    # Plain settings of a source build (MAX_JOBS, TORCH_CUDA_ARCH_LIST): shown as they are.
    settings: tuple[tuple[str, str], ...] = ()

    def shown(self) -> str:
        """The command as a shell would run it, ``NAME=value`` first, redacted: ``env`` holds only
        credentials, so a value redact() leaves alone (a user name) is ``***`` too."""
        assigned = [f"{name}={_quote(v)}" for name, v in self.settings]
        assigned += [f"{name}={_quote(v) if redact(v) != v else MASK}" for name, v in self.env]
        return redact(" ".join([*assigned, *(_quote(a) for a in self.argv)]))

    def child_env(self, base: Mapping[str, str]) -> Optional[dict[str, str]]:
        """The child's whole environment: ``base`` plus ``settings`` and ``env``; None (inherit) when
        both are empty."""
        extra = (*self.settings, *self.env)
        return {**base, **dict(extra)} if extra else None


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def parse_backend(text: str) -> Backend:
    """``--backend`` as given; InputError when unknown."""
    try:
        return Backend(text)
    except ValueError:
        raise InputError(f"--backend {text!r}: one of {', '.join(BACKENDS)}") from None


def backend_exe(system: System, text: str) -> str:
    """The executable of a ``--backend`` ("" for venv and auto); InputError when unknown or missing."""
    wanted = parse_backend(text)
    if wanted in (Backend.AUTO, Backend.VENV):
        return ""
    exe = find_tool(system, wanted)
    if exe is None:
        raise InputError(f"--backend {wanted}: `{wanted}` is not installed (not on PATH)")
    return exe


def choose_backend(system: System, text: str, plan: Plan) -> tuple[Backend, str]:
    """(backend, its executable). ``auto``: the conda family for a conda plan, else uv, else venv."""
    exe = backend_exe(system, text)
    wanted = Backend(text)
    if wanted is Backend.AUTO:
        if plan.channel is Channel.CONDA:
            for name in CONDA_FAMILY:
                found = find_tool(system, name)
                if found:
                    return name, found
            raise InputError(
                "the plan is for conda but no conda, mamba or micromamba is installed",
                hint="install micromamba (https://mamba.readthedocs.io) or use --channel pip",
            )
        uv = find_tool(system, Backend.UV)
        return (Backend.UV, uv) if uv else (Backend.VENV, "")
    if wanted is Backend.VENV:
        return Backend.VENV, ""
    if wanted in CONDA_FAMILY and plan.channel is not Channel.CONDA:
        raise InputError(f"--backend {wanted} installs conda packages: add --channel conda")
    if wanted in (Backend.UV, Backend.VENV) and plan.channel is Channel.CONDA:
        raise InputError(f"--backend {wanted} installs pip packages: drop --channel conda")
    return wanted, exe


def find_tool(system: System, name: str) -> Optional[str]:
    env_var = {"conda": "CONDA_EXE", "mamba": "MAMBA_EXE"}.get(name)
    return (system.env.get(env_var) if env_var else None) or system.which(name)


def default_prefix(system: System, name: str, backend: Backend) -> Path:
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


# The installers' own environment variables for their index options, and how each joins several
# values. A child's environment is readable only by its user (/proc/PID/environ is mode 0400), its
# argv by everybody (`ps`), so URLs with credentials go there.
# pip: every option is PIP_<UPPER_LONG_NAME>, several values space-separated, and the command line
# wins over the environment (https://pip.pypa.io/en/stable/topics/configuration/#environment-variables).
# uv: UV_INDEX_URL, UV_EXTRA_INDEX_URL (space-separated), UV_FIND_LINKS (comma-separated)
# (https://docs.astral.sh/uv/reference/environment/; `uv pip install --help` names them too).
_INDEX_ENV: Final = {
    "pip": {
        "--index-url": ("PIP_INDEX_URL", " "),
        "--extra-index-url": ("PIP_EXTRA_INDEX_URL", " "),
        "--find-links": ("PIP_FIND_LINKS", " "),
    },
    "uv": {
        "--index-url": ("UV_INDEX_URL", " "),
        "--extra-index-url": ("UV_EXTRA_INDEX_URL", " "),
        "--find-links": ("UV_FIND_LINKS", ","),
    },
}


def _hide_credentials(
    argv: Sequence[str], installer: str
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """(argv, env): every index option of which one value carries a credential (what redact()
    would hide) moves, with all its values, from ``argv`` into the installer's variable. All of
    them: the command line would override the variable."""
    options = _INDEX_ENV[installer]
    values: dict[str, list[str]] = {}
    kept: list[tuple[str, str]] = []  # (option, value) pairs in their order
    rest: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in options and i + 1 < len(argv):
            values.setdefault(argv[i], []).append(argv[i + 1])
            kept.append((argv[i], argv[i + 1]))
            rest.append(argv[i])  # a slot, filled or dropped below
            i += 2
            continue
        rest.append(argv[i])
        i += 1
    secret = {opt for opt, vals in values.items() if any(redact(v) != v for v in vals)}
    out: list[str] = []
    pairs = iter(kept)
    for arg in rest:
        if arg in options:
            option, value = next(pairs)
            if option not in secret:
                out += [option, value]
        else:
            out.append(arg)
    env = []
    for option in sorted(secret):
        name, sep = options[option]
        # A local folder holding the separator goes as a file:// URL (percent-encoded), which both
        # installers take for --find-links.
        vals = [Path(v).as_uri() if sep in v and os.path.isabs(v) else v for v in values[option]]
        env.append((name, sep.join(vals)))
    return tuple(out), tuple(env)


def build_steps(
    system: System,
    *,
    backend: Backend,
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
    placeholders: Sequence[tuple[str, str]] = (),
    extra_options: Sequence[str] = (),
    builds: Sequence[ExtensionPick] = (),
) -> tuple[Path, tuple[Step, ...]]:
    """The exact command lines of one backend: (the new interpreter, the steps). ``placeholders``:
    the values of the spec files' ``${ENVKIT_*}`` credentials (spec_pip.placeholder_values), for
    the conda family, whose pip reads them from environment.yml's ``pip:`` section."""
    python = prefix / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    version = str(plan.python) if plan.python else None
    if backend in CONDA_FAMILY:
        if "environment.yml" not in spec_files:
            raise InputError(f"--backend {backend} needs a conda plan (--channel conda)")
        spec = str(staging / "environment.yml")
        verb = ["create", "--yes"] if backend is Backend.MICROMAMBA else ["env", "create"]
        argv = [exe, *verb, "--prefix", str(prefix), "--file", spec]
        if offline:
            argv.append("--offline")
        env = tuple((n, v) for n, v in placeholders if f"${{{n}}}" in spec_files["environment.yml"])
        step = Step(f"{backend}: create the environment", tuple(argv), INSTALL_TIMEOUT_S, env)
        return python, (step,)
    index = _index_args(torch_index, wheelhouse=wheelhouse, offline=offline)
    constraints = str(staging / "constraints.txt")
    if backend is Backend.UV:
        create = [exe, "venv", str(prefix), "--seed"] + (["--python", version] if version else [])
        install = [exe, "pip", "install", "--python", str(python), *torch_requirements, *index]
        head = [exe, "pip", "install", "--python", str(python)]
        extra = [*head, *extra_pip, "--constraint", constraints]
    else:
        create = [base_python(system, version), "-m", "venv", str(prefix)]
        install = [str(python), "-m", "pip", "install", *torch_requirements, *index]
        head = [str(python), "-m", "pip", "install"]
        extra = [*head, *extra_pip, "--constraint", constraints]
    extra += _index_args(extra_index, wheelhouse=wheelhouse, offline=offline)
    if not offline:
        extra += extra_options
    installer = "uv" if backend is Backend.UV else "pip"
    steps = [
        Step("create the environment", tuple(create), VENV_TIMEOUT_S),
        _install_step(f"install torch {plan.torch}+{plan.variant}", install, installer),
    ]
    if extra_pip:
        what = "the extensions and other packages" if plan.extensions else "the template's other packages"
        steps.append(_install_step(f"install {what} (torch held by constraints.txt)", extra, installer))
    for pick in builds:
        assert pick.build is not None
        b = pick.build
        settings = (*b.env, (b.arch_env or "TORCH_CUDA_ARCH_LIST", b.arch_list))
        tail = [
            "--constraint",
            constraints,
            *_index_args(extra_index, wheelhouse=wheelhouse, offline=offline),
        ]
        if b.requires:
            steps.append(
                _install_step(
                    f"install what {pick.name}'s build needs", [*head, *b.requires, *tail], installer
                )
            )
        argv = [*head, "--no-build-isolation", pick.requirement, *tail]
        argv += [f"--config-settings={c}" for c in b.config_settings]
        step = _install_step(f"build {pick.name} {pick.version} from source ({b.time})", argv, installer)
        steps.append(dataclasses.replace(step, settings=settings, timeout=BUILD_TIMEOUT_S))
    return python, tuple(steps)


def _install_step(title: str, argv: Sequence[str], installer: str) -> Step:
    hidden, env = _hide_credentials(argv, installer)
    return Step(title, hidden, INSTALL_TIMEOUT_S, env)
