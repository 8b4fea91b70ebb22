"""``envkit lock``'s job for a resolved plan: conda-lock's inputs and command line, nothing run or
written (envkit.create.lock runs it with conda-lock; envkit.create.rattler_lock solves it with
rattler where conda-lock has no conda to solve with).

envkit renders the conda-lock inputs: environment.yml with ``platforms``, and virtual-packages.yml
with ``__cuda`` from the target driver (conda-lock otherwise assumes ``__cuda=11.4`` and locks the
wrong builds on a GPU-less login node).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envkit.errors import InputError, LockFailed
from envkit.specs.conda import SUBDIRS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.resolve.plan import Plan
    from envkit.specs.template import Template
    from envkit.system import System

__all__ = ["LockJob", "conda_lock_command", "lock_job"]


@dataclass(frozen=True)
class LockJob:
    """conda-lock's command line, the lock file it writes, the channels it needs, its input files
    (name -> text) and the conda subdirs locked."""

    argv: tuple[str, ...]
    lockfile: Path
    channels: tuple[str, ...]
    inputs: dict[str, str]
    platforms: tuple[str, ...] = ()  # the conda subdirs locked


def conda_lock_command(system: System) -> list[str]:
    """conda-lock as a program: on PATH, or the module in envkit's own interpreter."""
    exe = system.which("conda-lock")
    if exe:
        return [exe]
    import importlib.util

    if importlib.util.find_spec("conda_lock") is not None:
        return [sys.executable, "-m", "conda_lock"]
    raise LockFailed(
        "conda-lock is not installed",
        hint="pip install 'torch-envkit[lock]' (conda-lock needs Python ≥ 3.10), or put conda-lock on PATH",
    )


def _channels(environment_yml: str) -> tuple[str, ...]:
    import importlib

    yaml: Any = importlib.import_module("yaml")  # a runtime dependency without type stubs
    data = yaml.safe_load(environment_yml) or {}
    return tuple(str(c) for c in data.get("channels", []) if str(c) not in ("nodefaults", "defaults"))


def lock_job(
    system: System,
    plan: Plan,
    template: Template,
    *,
    platforms: Sequence[str] = (),
    out_dir: str = ".",
    mirrors: Sequence[str] = (),
) -> LockJob:
    """conda-lock's inputs and command line for a resolved plan (nothing is run or written)."""
    from envkit.specs.render import render_specs, spec_mirrors

    subdirs = list(platforms) or [SUBDIRS.get(plan.platform, "linux-64")]
    unknown = [p for p in subdirs if p not in SUBDIRS.values()]
    if unknown:
        raise InputError(f"--lock-platform {', '.join(unknown)}: one of {', '.join(SUBDIRS.values())}")
    chosen = spec_mirrors(list(mirrors), plan.variant) if mirrors else None
    inputs = render_specs(plan, template, "conda-lock", mirror=chosen)
    lockfile = Path(out_dir).absolute() / "conda-lock.yml"
    argv = [
        *conda_lock_command(system),
        "lock",
        "--file",
        "environment.yml",
        "--virtual-package-spec",
        "virtual-packages.yml",
        "--lockfile",
        str(lockfile),
    ]
    for subdir in subdirs:
        argv += ["--platform", subdir]
    return LockJob(tuple(argv), lockfile, _channels(inputs["environment.yml"]), inputs, tuple(subdirs))
