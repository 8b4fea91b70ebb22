"""The inspected Python environment and its torch build, read without importing torch.

envkit is often installed on its own (pipx, ``uv tool``) while the user's torch lives in the active
conda env or venv, so the environment inspected is the ACTIVE one: ``VIRTUAL_ENV``, then
``CONDA_PREFIX``, then the first ``python`` on PATH, then envkit's own; ``--python`` and ``--env``
pick another. Under a launcher (torchrun, srun) with no environment active, it is the interpreter
envkit runs in: ``torchrun python -m envkit verify`` starts every rank with that interpreter, which
may be a venv's that was never activated, while the first ``python`` on PATH is the system's.
A stdlib probe runs in that interpreter and reports its distributions, its conda-meta records
and the text of ``torch/version.py``, which envkit parses here.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Optional

from envkit.detect.python_version import bin_python, is_python_version, python_of_version
from envkit.errors import InputError
from envkit.facts import CondaPackage, Distribution, EnvKind, PythonFacts, TorchFacts
from envkit.system import run_probe
from envkit.versions import Version, parse_version

if TYPE_CHECKING:
    from collections.abc import Iterable

    from envkit.system import System

__all__ = [
    "Interpreter",
    "conda_env_dirs",
    "detect_python",
    "parse_torch_version_py",
    "select_interpreter",
]

PROBE_TIMEOUT_S: Final = 20.0
INSTALLERS: Final = ("uv", "conda", "mamba", "micromamba")


@dataclass(frozen=True)
class Interpreter:
    """The interpreter to inspect, and what chose it."""

    path: str
    selected_by: str
    env_name: Optional[str] = None


# What an interpreter's file name holds (a wrapper of one's own is welcome: my-python, hungpython).
INTERPRETER_NAME: Final = re.compile(r"python|pypy|graalpy", re.IGNORECASE)


def envkit_envs_dir(system: System) -> Path:
    """Where ``envkit create`` puts venv/uv environments made by name."""
    if system.env.get("ENVKIT_ENVS_DIR"):
        return Path(system.env["ENVKIT_ENVS_DIR"])
    data = system.env.get("XDG_DATA_HOME") or os.path.join(
        system.env.get("HOME", os.path.expanduser("~")), ".local", "share"
    )
    return Path(data) / "envkit" / "envs"


def conda_env_dirs(system: System) -> list[Path]:
    """Folders that hold named conda environments, most specific first."""
    home = Path(system.env.get("HOME", os.path.expanduser("~")))
    dirs: list[Path] = []
    for var in ("CONDA_ENVS_PATH", "CONDA_ENVS_DIRS"):
        dirs += [Path(p) for p in system.env.get(var, "").split(os.pathsep) if p]
    for var in ("MAMBA_ROOT_PREFIX", "CONDA_ROOT"):
        if system.env.get(var):
            dirs.append(Path(system.env[var]) / "envs")
    for var in ("CONDA_EXE", "MAMBA_EXE"):
        exe = system.env.get(var)
        if exe:  # <root>/bin/conda -> <root>/envs
            dirs.append(Path(exe).resolve().parent.parent / "envs")
    prefix = system.env.get("CONDA_PREFIX")
    if prefix:
        path = Path(prefix)
        dirs.append(path.parent if path.parent.name == "envs" else path / "envs")
    for name in ("miniforge3", "miniconda3", "anaconda3", "mambaforge", "micromamba", ".conda"):
        dirs.append(home / name / "envs")
    unique: list[Path] = []
    for d in dirs:
        if d not in unique:
            unique.append(d)
    return unique


def _conda_registry(system: System) -> list[Path]:
    """Environments conda has registered in ~/.conda/environments.txt."""
    home = Path(system.env.get("HOME", os.path.expanduser("~")))
    try:
        lines = (home / ".conda" / "environments.txt").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return [Path(line.strip()) for line in lines if line.strip()]


# What a launcher sets in each process it starts: torchrun's elastic agent sets LOCAL_RANK and
# TORCHELASTIC_RUN_ID (pytorch/pytorch torch/distributed/elastic/agent/server/local_elastic_agent.py
# @v2.5.0, worker_env), srun sets SLURM_PROCID (slurm.schedmd.com/srun.html, OUTPUT ENVIRONMENT VARIABLES).
LAUNCHER_VARS: Final = (
    ("TORCHELASTIC_RUN_ID", "torchrun"),
    ("LOCAL_RANK", "torchrun"),
    ("SLURM_PROCID", "srun"),
)


def select_interpreter(
    system: System, *, python: Optional[str] = None, env_name: Optional[str] = None
) -> Interpreter:
    """Pick the interpreter to inspect (see the module docstring for the order).

    Raises:
        InputError: ``--python`` names nothing runnable, or ``--env`` names no known environment.
    """
    if python and env_name:
        raise InputError("--python and --env both name an interpreter; give one of them")
    if python and is_python_version(python):  # a version, as uv takes it: find that interpreter
        path_of, how = python_of_version(system, python)
        return Interpreter(path_of, how)
    if python:
        path = Path(python).expanduser()
        if os.sep not in python and not path.exists():  # a bare name: "python3", "python3.10"
            on_path = system.which(python)
            path = Path(on_path) if on_path else path
        found = bin_python(path) if path.is_dir() else path
        if found is None or not found.is_file() or not os.access(found, os.X_OK):
            raise InputError(
                f"--python {python}: neither a Python version (3.11) nor a runnable interpreter there",
                hint="give a version, a python executable (a path or a name on PATH) or an "
                "environment's folder",
            )
        if not path.is_dir() and not INTERPRETER_NAME.search(found.name):
            # envkit runs the interpreter with its probe's path as the argument: `--python rm` (or
            # pip, or a shell) would be handed envkit's own file. uv's names for interpreters
            # (python, python3.12, pypy3, graalpy, python.exe) all carry one of these words.
            raise InputError(
                f"--python {python}: {found.name} is not a Python interpreter's name",
                hint="give a version (3.11), an interpreter (python3.11, /path/to/bin/python) or an "
                "environment's folder",
            )
        return Interpreter(str(found), "--python")
    if env_name:
        return _named_env(system, env_name)
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        prefix = system.env.get(var)
        if prefix:
            found = bin_python(Path(prefix))
            if found is not None:
                return Interpreter(str(found), var, Path(prefix).name)
    launcher = next((who for var, who in LAUNCHER_VARS if system.env.get(var)), None)
    if launcher is not None:
        return Interpreter(sys.executable, launcher)
    for name in ("python", "python3"):
        on_path = system.which(name)
        if on_path:
            return Interpreter(on_path, "PATH")
    return Interpreter(sys.executable, "envkit")


def _named_env(system: System, name: str) -> Interpreter:
    places = [envkit_envs_dir(system), *conda_env_dirs(system)]
    for folder in places:
        found = bin_python(folder / name)
        if found is not None:
            return Interpreter(str(found), "--env", name)
    for prefix in _conda_registry(system):
        if prefix.name == name:
            found = bin_python(prefix)
            if found is not None:
                return Interpreter(str(found), "--env", name)
    looked = ", ".join(str(p) for p in places[:6])
    raise InputError(
        f"--env {name}: no environment of that name (looked in {looked} and ~/.conda/environments.txt)",
        hint="list conda environments with `conda env list`, or pass --python PATH",
    )


def parse_torch_version_py(text: str) -> dict[str, Optional[str]]:
    """Read the constants of ``torch/version.py`` without running it.

    >>> parse_torch_version_py("__version__ = '2.5.1+cu121'\\ncuda: Optional[str] = '12.1'")
    {'__version__': '2.5.1+cu121', 'cuda': '12.1'}

    Raises:
        ValueError: the text is not Python.
    """
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise ValueError(f"torch/version.py is not valid Python ({exc.msg}, line {exc.lineno})") from None
    values: dict[str, Optional[str]] = {}
    for node in tree.body:
        target: Optional[ast.expr] = None
        value: Optional[ast.expr] = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            constant = value.value
            if constant is None or isinstance(constant, str):
                values[target.id] = constant
    return values


def _platform(system_name: str, machine: str) -> str:
    machine = machine.lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64" if system_name == "Linux" else "arm64"}.get(
        machine, machine
    )
    name = {"Linux": "linux", "Windows": "windows", "Darwin": "macos"}.get(system_name, system_name.lower())
    return f"{name}-{machine}"


def _installers(system: System, data: dict[str, Any], python: str) -> dict[str, str]:
    found: dict[str, str] = {}
    if data.get("has_pip"):
        found["pip"] = f"{python} -m pip"
    for name in INSTALLERS:
        path = system.env.get(f"{name.upper()}_EXE") if name in ("conda", "mamba") else None
        path = path or system.which(name)
        if path:
            found[name] = path
    return found


def _dists(rows: Iterable[Any]) -> tuple[Distribution, ...]:
    dists = []
    for row in rows:
        if isinstance(row, list) and len(row) in (3, 4) and isinstance(row[0], str):
            version = parse_version(row[1]) if isinstance(row[1], str) else None
            pins = row[3] if len(row) == 4 and isinstance(row[3], list) else []
            requires = tuple(p for p in pins if isinstance(p, str))
            dists.append(Distribution(row[0], version, row[2], requires_torch=requires))
    return tuple(sorted(dists, key=lambda d: (d.name, str(d.location))))


def _conda(rows: Iterable[Any]) -> tuple[CondaPackage, ...]:
    pkgs = []
    for row in rows:
        if isinstance(row, list) and len(row) == 4 and isinstance(row[0], str):
            version = parse_version(row[1]) if isinstance(row[1], str) else None
            pkgs.append(CondaPackage(row[0], version, str(row[2]), row[3]))
    return tuple(pkgs)


def detect_python(system: System, interp: Interpreter) -> tuple[PythonFacts, TorchFacts]:
    """Probe the interpreter (one subprocess) and read its environment and torch build."""
    outcome = run_probe(system, interp.path, "pyenv_probe.py", timeout=PROBE_TIMEOUT_S)
    data = outcome.data
    if data is None:
        facts = PythonFacts(
            executable=interp.path,
            selected_by=interp.selected_by,
            env_name=interp.env_name,
            error=f"the environment probe failed: {outcome.error}",
        )
        return facts, TorchFacts(error="not inspected: the environment probe failed")
    prefix = str(data.get("prefix") or "")
    kind = (
        EnvKind.CONDA
        if data.get("conda")
        else EnvKind.VENV
        if prefix != data.get("base_prefix")
        else EnvKind.SYSTEM
    )
    libc = data.get("libc") or ["", ""]
    managed = data.get("externally_managed")  # PEP 668; absent from an older probe's answer
    python = PythonFacts(
        executable=str(data.get("executable") or interp.path),
        selected_by=interp.selected_by,
        version=parse_version(str(data.get("version", ""))),
        implementation=data.get("implementation"),
        platform=_platform(str(data.get("system", "")), str(data.get("machine", ""))),
        glibc=parse_version(libc[1]) if libc[0] == "glibc" and libc[1] else None,
        prefix=prefix or None,
        kind=kind,
        env_name=interp.env_name or (Path(prefix).name if kind is not EnvKind.SYSTEM else None),
        include_dir=data.get("include") or None,
        has_python_h=data.get("has_python_h"),
        installers=_installers(system, data, interp.path),
        externally_managed=managed if isinstance(managed, bool) else None,
    )
    return python, _torch(data)


def _torch(data: dict[str, Any]) -> TorchFacts:
    dists = _dists(data.get("distributions") or [])
    conda = _conda(data.get("conda_packages") or [])
    torch_dir = data.get("torch_dir")
    error = data.get("torch_error")
    constants: dict[str, Optional[str]] = {}
    text = data.get("torch_version_py")
    if isinstance(text, str):
        try:
            constants = parse_torch_version_py(text)
        except ValueError as exc:
            error = str(exc)
    # The distribution that owns the importable torch decides the version; a second one is a
    # duplicate (torch.duplicates), not a second answer.
    owner = None
    torch_dists = [d for d in dists if d.name == "torch"]
    if torch_dir:
        site = os.path.dirname(str(torch_dir))
        owner = next((d for d in torch_dists if d.location == site), None)
    if owner is None and torch_dists:
        owner = torch_dists[0]
    version: Optional[Version] = owner.version if owner else None
    # torch/version.py carries the local tag that PyPI's metadata lacks: the PyPI wheel's dist-info
    # says 2.11.0 while torch.__version__ is 2.11.0+cu130 (recorded on an H200, tests/data/reports).
    own = parse_version(str(constants["__version__"])) if constants.get("__version__") else None
    if own is not None and (version is None or own.public == version.public):
        version = own
    cuda = constants.get("cuda")
    if torch_dir is None and not torch_dists:
        return TorchFacts(distributions=dists, conda_packages=conda, error=error)
    if text is None and error is None and torch_dir:
        error = "torch/version.py is missing"
    return TorchFacts(
        version=version,
        cuda=parse_version(cuda) if cuda else None,
        hip=constants.get("hip"),
        git_version=constants.get("git_version"),
        location=torch_dir,
        distributions=dists,
        conda_packages=conda,
        error=error,
    )
