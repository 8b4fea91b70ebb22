"""The installers ``envkit create`` drives, and the exact command lines it runs with them.

One module per installer, each satisfying ``Installer`` (_base.py), named in ``INSTALLERS`` below
(no registry magic, the way pre-commit's ``languages/*.py`` each satisfy ``lang_base.Language``):

- ``venv`` (pip.py): python -m venv + pip;   ``uv`` (uv.py): uv venv + uv pip;
- ``conda`` / ``mamba`` / ``micromamba`` (conda.py): from the plan's environment.yml;
- ``rattler`` (rattler.py): py-rattler solves and installs environment.yml in a child process; a
  conda environment without any conda binary.

``auto`` takes, for a conda plan, the conda family where one is installed, else rattler where
py-rattler is; for a pip plan uv when present, else venv. Index credentials go into the
installer's own environment variables, never its argv (``ps`` shows argv to every user).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final, Optional

from envkit.create.backends._base import (
    INSTALL_TIMEOUT_S,
    VENV_TIMEOUT_S,
    Backend,
    Installer,
    Job,
    Laid,
    Step,
)
from envkit.create.backends.conda import CondaFamily
from envkit.create.backends.pip import VENV, base_python
from envkit.create.backends.rattler import RATTLER
from envkit.create.backends.uv import UV
from envkit.detect.pyenv import conda_env_dirs, envkit_envs_dir
from envkit.errors import InputError
from envkit.resolve import Channel, Plan

if TYPE_CHECKING:
    from pathlib import Path

    from envkit.system import System

__all__ = [
    "BACKENDS",
    "BUILD_TIMEOUT_S",
    "CONDA_BACKENDS",
    "CONDA_FAMILY",
    "INSTALLERS",
    "INSTALL_TIMEOUT_S",
    "VENV_TIMEOUT_S",
    "Backend",
    "Installer",
    "Job",
    "Laid",
    "Step",
    "backend_exe",
    "base_python",
    "choose_backend",
    "conda_installer",
    "default_prefix",
    "find_tool",
    "lay_steps",
    "parse_backend",
]

INSTALLERS: Final[dict[Backend, Installer]] = {
    Backend.CONDA: CondaFamily("conda"),
    Backend.MAMBA: CondaFamily("mamba"),
    Backend.MICROMAMBA: CondaFamily("micromamba"),
    Backend.RATTLER: RATTLER,
    Backend.UV: UV,
    Backend.VENV: VENV,
}
BACKENDS: Final = tuple(b.value for b in Backend)
CONDA_FAMILY: Final = (Backend.MICROMAMBA, Backend.MAMBA, Backend.CONDA)  # auto's order of preference
# What installs conda packages: the conda family, then rattler (auto's order for a conda plan).
CONDA_BACKENDS: Final = (*CONDA_FAMILY, Backend.RATTLER)


def parse_backend(text: str) -> Backend:
    """``--backend`` as given; InputError when unknown."""
    try:
        return Backend(text)
    except ValueError:
        raise InputError(f"--backend {text!r}: one of {', '.join(BACKENDS)}") from None


def find_tool(system: System, name: str) -> Optional[str]:
    """The executable of an installer (conda and mamba from CONDA_EXE / MAMBA_EXE first); "" for
    one that needs none (venv), None when it is not here."""
    try:
        return INSTALLERS[Backend(name)].locate(system)
    except (KeyError, ValueError):
        return system.which(name)


def backend_exe(system: System, text: str) -> str:
    """The executable of a ``--backend`` ("" for venv and auto); InputError when unknown or missing."""
    wanted = parse_backend(text)
    if wanted is Backend.AUTO:
        return ""
    exe = INSTALLERS[wanted].locate(system)
    if exe is None:
        what = (
            "py-rattler is not installed"
            if wanted is Backend.RATTLER
            else f"`{wanted}` is not installed (not on PATH)"
        )
        raise InputError(f"--backend {wanted}: {what}", hint=INSTALLERS[wanted].missing())
    return exe


def conda_installer(system: System) -> Optional[tuple[Backend, str]]:
    """The conda installer auto takes here: the conda family first (users' own tools), then
    rattler; None when there is none."""
    for name in CONDA_BACKENDS:
        found = INSTALLERS[name].locate(system)
        if found is not None:
            return name, found
    return None


def choose_backend(system: System, text: str, plan: Plan) -> tuple[Backend, str]:
    """(backend, its executable). ``auto``: a conda installer for a conda plan, else uv, else venv."""
    exe = backend_exe(system, text)
    wanted = Backend(text)
    if wanted is Backend.AUTO:
        if plan.channel is Channel.CONDA:
            found = conda_installer(system)
            if found is not None:
                return found
            raise InputError(
                "the plan is for conda, but no conda installer is here: no conda, mamba or micromamba "
                "on PATH, and no py-rattler in envkit's Python",
                hint="pip install 'torch-envkit[conda]' (the rattler backend), install micromamba, "
                "or --channel auto to fall back to pip",
            )
        uv = INSTALLERS[Backend.UV].locate(system)
        return (Backend.UV, uv) if uv else (Backend.VENV, "")
    if INSTALLERS[wanted].conda and plan.channel is not Channel.CONDA:
        raise InputError(f"--backend {wanted} installs conda packages: add --channel conda")
    if not INSTALLERS[wanted].conda and plan.channel is Channel.CONDA:
        raise InputError(f"--backend {wanted} installs pip packages: drop --channel conda")
    return wanted, exe


def default_prefix(system: System, name: str, backend: Backend) -> Path:
    """Where an environment made by name goes: conda's envs folder for the conda family (so
    ``conda activate NAME`` finds it), else envkit's own envs folder ($ENVKIT_ENVS_DIR, default
    ~/.local/share/envkit/envs). rattler, too, uses conda's envs folder where there is one."""
    if INSTALLERS[backend].conda:
        for folder in conda_env_dirs(system):
            if folder.is_dir() and os.access(folder, os.W_OK):
                return folder / name
    return envkit_envs_dir(system) / name


def lay_steps(system: System, backend: Backend, job: Job) -> Laid:
    """The exact command lines of ``backend`` for ``job`` (nothing is run)."""
    return INSTALLERS[backend].prepare(system, job)
