"""``envkit lock``: resolve the plan for a template (conda, ``__cuda`` from the target driver), then
run conda-lock through its one adapter (envkit.create.lock)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.create.lock import LockJob
    from envkit.resolve.plan import PlanFlags
    from envkit.system import System

__all__ = ["lock", "prepare_lock"]


def prepare_lock(
    system: System,
    template_name: str,
    flags: PlanFlags,
    *,
    platforms: Sequence[str] = (),
    out_dir: str = ".",
    mirrors: Sequence[str] = (),
) -> LockJob:
    """Resolve the plan and build conda-lock's inputs and command line (nothing is run or written)."""
    from envkit.commands.resolve import make_plan
    from envkit.create.lock import lock_job
    from envkit.errors import InputError
    from envkit.specs.render import spec_flags
    from envkit.specs.template import load_template

    if flags.channel != "conda":  # --channel is the resolve flag; a conda lock has one answer
        raise InputError(f"--channel {flags.channel}: envkit lock makes conda locks (--channel conda)")
    template = load_template(template_name)
    plan = make_plan(system, spec_flags(template, flags, "conda-lock"))  # the format picks conda
    return lock_job(system, plan, template, platforms=platforms, out_dir=out_dir, mirrors=mirrors)


def lock(system: System, job: LockJob, *, on_line: Optional[Callable[[str], None]] = None) -> str:
    """Run conda-lock for ``job``; returns the lock file's path."""
    from envkit.create.lock import lock as run_lock

    return str(run_lock(system, job, on_line=on_line))
