"""What every installer module shares: the backend names, a command line (Step), what a backend is
given to lay out its steps (Job), and the small Protocol each installer module satisfies."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Final, Optional, Protocol

from envkit._proc import ProcResult
from envkit._serial import StrEnum
from envkit.errors import EnvkitError
from envkit.redact import MASK, redact
from envkit.resolve import Plan
from envkit.resolve.ext_pick import ExtensionPick

if TYPE_CHECKING:
    from envkit.system import System

__all__ = [
    "BUILD_TIMEOUT_S",
    "INSTALL_TIMEOUT_S",
    "VENV_TIMEOUT_S",
    "Backend",
    "Installer",
    "Job",
    "Laid",
    "Step",
]


class Backend(StrEnum):
    """An installer ``envkit create`` drives (``--backend``); ``auto`` chooses one of the others."""

    AUTO = "auto"
    CONDA = "conda"
    MAMBA = "mamba"
    MICROMAMBA = "micromamba"
    RATTLER = "rattler"
    UV = "uv"
    VENV = "venv"


# Installers download gigabytes (a CUDA torch is ~3 GB with its nvidia-* wheels).
INSTALL_TIMEOUT_S: Final = 3600.0
VENV_TIMEOUT_S: Final = 300.0
# A source build of flash-attn takes about 2 h without ninja (its README); apex and xformers alike.
BUILD_TIMEOUT_S: Final = 4 * 3600.0


@dataclass(frozen=True)
class Step:
    """One command line. ``env``: variables the child gets on top of envkit's environment; an
    installer's index credentials travel there, never in ``argv`` (see pip_args.hide_credentials).
    ``explain``: turns a failed run into the error to show (the rattler worker's structured
    answer: an unsolvable request is exit 3 with the conflict); None, or its None, for the generic
    "step failed" with the installer's last lines."""

    title: str
    argv: tuple[str, ...]
    timeout: float
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # repr: it holds secrets
    # Plain settings of a source build (MAX_JOBS, TORCH_CUDA_ARCH_LIST): shown as they are.
    settings: tuple[tuple[str, str], ...] = ()
    explain: Optional[Callable[[ProcResult], Optional[EnvkitError]]] = field(
        default=None, repr=False, compare=False
    )

    def shown(self) -> str:
        """The command as a shell would run it, ``NAME=value`` first, redacted: ``env`` holds only
        credentials, so a value redact() leaves alone (a user name) is ``***`` too."""
        assigned = [f"{name}={shlex.quote(v)}" for name, v in self.settings]
        assigned += [f"{name}={shlex.quote(v) if redact(v) != v else MASK}" for name, v in self.env]
        return redact(" ".join([*assigned, *(shlex.quote(a) for a in self.argv)]))

    def child_env(self, base: Mapping[str, str]) -> Optional[dict[str, str]]:
        """The child's whole environment: ``base`` plus ``settings`` and ``env``; None (inherit) when
        both are empty."""
        extra = (*self.settings, *self.env)
        return {**base, **dict(extra)} if extra else None


@dataclass(frozen=True)
class Job:
    """What a backend lays its steps out from (decided by envkit.create.prepare)."""

    exe: str  # the installer's executable ("" for venv)
    prefix: Path
    python: Path  # the new environment's interpreter
    plan: Plan
    staging: Path  # where the spec files are while the installer reads them
    spec_files: Mapping[str, str]
    torch_requirements: Sequence[str] = ()
    extra_pip: Sequence[str] = ()
    torch_index: Sequence[str] = ()
    extra_index: Sequence[str] = ()
    wheelhouse: Optional[str] = None
    offline: bool = False
    # The values of the spec files' ${ENVKIT_*} credentials (envkit.specs.pip.placeholder_values).
    placeholders: Sequence[tuple[str, str]] = ()
    # The extensions' index options (installed with the template's other packages), and the
    # extensions built from source (a step each; envkit.resolve.extensions).
    extra_options: Sequence[str] = ()
    builds: Sequence[ExtensionPick] = ()


@dataclass(frozen=True)
class Laid:
    """A backend's answer for a Job: its steps, the files they read besides the spec files (written
    to the staging folder, then kept in ``<prefix>/envkit/``), and what it tells --dry-run / --json
    about a conda solve (``conda``: channels, specs, virtual packages)."""

    steps: tuple[Step, ...]
    files: Mapping[str, str] = field(default_factory=dict)
    conda: Optional[Mapping[str, Any]] = None


class Installer(Protocol):
    """One installer module (pip.py, uv.py, conda.py, rattler.py).

    ``conda``: whether it installs conda packages (from the plan's environment.yml) rather than
    wheels. ``locate``: its executable, "" when it needs none, None when it is not here.
    ``missing``: what to do when it is not here. ``prepare``: the exact command lines of a Job."""

    @property
    def conda(self) -> bool: ...

    def locate(self, system: System) -> Optional[str]: ...

    def missing(self) -> str: ...

    def prepare(self, system: System, job: Job) -> Laid: ...
