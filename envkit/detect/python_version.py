"""``--python 3.11`` on a command that inspects an interpreter (doctor, verify, preflight): the
interpreter of that version, found as uv finds one (docs.astral.sh/uv/concepts/python-versions/:
the active environment, then the interpreters on PATH, then the ones uv manages), or an InputError
that says where it looked.

- The active environment (``VIRTUAL_ENV``, then ``CONDA_PREFIX``) when it is of that version: read
  from the files that say so without running it, a venv's ``pyvenv.cfg`` (``version = 3.11.7``,
  uv's ``version_info = 3.11.7``) and a conda environment's ``conda-meta/python-3.11.7-*.json``.
- ``python3.11`` on PATH (``python3`` for ``--python 3``).
- ``uv python find 3.11`` where uv is installed: the interpreters uv manages, among others.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Final, Optional

from envkit.errors import InputError

if TYPE_CHECKING:
    from envkit.system import System

__all__ = ["bin_python", "is_python_version", "python_of_version"]

# What --python takes as a version (uv's "3", "3.11", "3.11.4"); anything else names an interpreter.
_VERSION: Final = re.compile(r"^\d+(?:\.\d+){0,2}$")
_CFG: Final = re.compile(r"^\s*version(?:_info)?\s*=\s*(\d+(?:\.\d+)+)", re.MULTILINE)
_CONDA_PYTHON: Final = re.compile(r"^python-(\d+\.\d+(?:\.\d+)?)-.*\.json$")
UV_FIND_TIMEOUT_S: Final = 10.0


def is_python_version(text: str) -> bool:
    """Whether ``--python`` names a version (3.11) rather than an interpreter (a path, python3.11)."""
    return bool(_VERSION.match(text.strip()))


def bin_python(prefix: Path) -> Optional[Path]:
    """The interpreter of the environment at ``prefix`` (a venv's or conda's, on POSIX or Windows);
    None where it has none."""
    for rel in ("bin/python", "bin/python3", "python.exe", "Scripts/python.exe"):
        candidate = prefix / rel
        if candidate.is_file():
            return candidate
    return None


def _matches(found: str, wanted: str) -> bool:
    want = wanted.split(".")
    return found.split(".")[: len(want)] == want


def _env_version(prefix: Path) -> Optional[str]:
    """The Python version of an environment, from its files (None when they do not say)."""
    try:
        cfg = (prefix / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace")
    except OSError:
        cfg = ""
    found = _CFG.search(cfg)
    if found:
        return found.group(1)
    try:
        names = [p.name for p in (prefix / "conda-meta").iterdir()]
    except OSError:
        return None
    for name in names:
        conda = _CONDA_PYTHON.match(name)
        if conda:
            return conda.group(1)
    return None


def _runs_as(system: System, python: str, version: str) -> bool:
    """Whether ``python`` runs and is of ``version`` (what a name on PATH promises, it may not keep)."""
    code = "import sys; print('.'.join(map(str, sys.version_info[:3])))"
    result = system.run_within([python, "-c", code], timeout=UV_FIND_TIMEOUT_S)
    return result.ok and _matches(result.stdout.strip(), version)


def python_of_version(system: System, version: str) -> tuple[str, str]:
    """(the interpreter's path, what found it) for ``--python VERSION``; InputError naming where it
    looked when nothing of that version is there."""
    version = version.strip()
    looked: list[str] = []
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        prefix = system.env.get(var)
        if not prefix:
            continue
        have = _env_version(Path(prefix))
        found = bin_python(Path(prefix))
        if have is not None and found is not None and _matches(have, version):
            return str(found), f"--python {version} ({var})"
        looked.append(f"the active environment ({var}) is Python {have or 'of unknown version'}")
    name = f"python{version}" if version.count(".") <= 1 else f"python{'.'.join(version.split('.')[:2])}"
    on_path = system.which(name)
    if on_path and _runs_as(system, on_path, version):
        return on_path, f"--python {version} (PATH)"
    # A pyenv shim of a version pyenv does not have is on PATH and does not run.
    looked.append(f"{name} on PATH does not run as Python {version}" if on_path else f"no {name} on PATH")
    uv = system.which("uv")
    if uv is not None:
        result = system.run_within([uv, "python", "find", version], timeout=UV_FIND_TIMEOUT_S)
        lines = result.stdout.strip().splitlines() if result.ok else []
        if lines and Path(lines[-1]).is_file() and _runs_as(system, lines[-1], version):
            return lines[-1], f"--python {version} (uv python find)"
        looked.append(f"`uv python find {version}` found none")
    else:
        looked.append("uv is not installed (it would look among the Pythons it manages)")
    raise InputError(
        f"--python {version}: no Python {version} found: {'; '.join(looked)}",
        hint=f"give the interpreter's path (--python /path/to/python{version}) or its environment "
        f"(--env NAME), or install it: uv python install {version}",
    )
