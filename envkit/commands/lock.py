"""``envkit lock``: resolve the plan for a template (conda, ``__cuda`` from the target driver), then
build conda-lock's job (envkit.create.lock_job) and run it through its one adapter (envkit.create.lock)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.create.lock_job import LockJob
    from envkit.create.pylock import PipLock
    from envkit.resolve import Plan
    from envkit.resolve.plan import PlanFlags
    from envkit.system import System

__all__ = ["lock", "pip_lock", "prepare_lock", "prepare_pip_lock"]


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
    from envkit.create.lock_job import lock_job
    from envkit.errors import InputError
    from envkit.planning import make_plan
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


def prepare_pip_lock(
    system: System,
    template_name: str,
    flags: PlanFlags,
    *,
    platforms: Sequence[str] = (),
    out_dir: str = ".",
    mirrors: Sequence[str] = (),
    formats: Sequence[str] = ("pylock", "requirements"),
    wheelhouse: Optional[str] = None,
    offline: bool = False,
) -> list[PipLock]:
    """The plan for each platform asked (one torch release for all of them), and uv's command lines
    for their hashed locks (nothing is run or written)."""
    import dataclasses

    from envkit.commands.add import plan_platforms
    from envkit.create.pylock import lock_platforms, pip_lock_jobs
    from envkit.resolve.available import read_wheelhouse
    from envkit.specs.render import spec_flags, spec_mirrors
    from envkit.specs.template import load_template

    template = load_template(template_name)
    chosen = lock_platforms(platforms) or ((flags.platform,) if flags.platform else ())
    planned = spec_flags(template, dataclasses.replace(flags, platform=None), "pip")
    if wheelhouse and offline:  # the plan is made among the builds the wheelhouse holds
        from envkit.knowledge import load_knowledge
        from envkit.planning import make_request, make_target
        from envkit.resolve import resolve

        available = read_wheelhouse(Path(wheelhouse).absolute())
        target = make_target(system, dataclasses.replace(planned, platform=chosen[0] if chosen else None))
        plans = [
            resolve(
                load_knowledge(),
                dataclasses.replace(target, platform=p),
                make_request(planned, available=available),
            )
            for p in chosen or (target.platform,)
        ]
    else:
        plans = plan_platforms(system, planned, chosen)
    picked = spec_mirrors(list(mirrors), plans[0].variant) if mirrors else ()
    regen = _regen(template_name, plans, mirrors, wheelhouse, offline)
    return pip_lock_jobs(
        system,
        plans,
        template,
        out_dir=out_dir,
        formats=formats,
        mirrors=picked,
        wheelhouse=wheelhouse,
        offline=offline,
        regen=regen,
    )


def _regen(
    template: str, plans: Sequence[Plan], mirrors: Sequence[str], wheelhouse: Optional[str], offline: bool
) -> str:
    """The ``envkit lock`` command that makes these locks again (the same release and builds)."""
    plan, t = plans[0], plans[0].target
    parts = ["envkit lock", template, "--channel pip", f"--torch {plan.torch}"]
    if len({p.variant for p in plans}) == 1:
        parts.append(f"--cuda {plan.variant}")
    if plan.python is not None:
        parts.append(f"--python {plan.python}")
    if t.driver is not None:
        parts.append(f"--driver {t.driver}")
    parts += [f"--gpu {g.cc.sm}" for g in t.gpus]
    if not t.has_nvidia:
        parts.append("--no-gpu")
    parts += [f"--lock-platform {p.platform}" for p in plans]
    parts += [f"--mirror {m}" for m in mirrors if "@" not in m]
    if wheelhouse:
        parts.append(f"--wheelhouse {wheelhouse}" + (" --offline" if offline else ""))
    return " ".join(parts)


def pip_lock(system: System, jobs: Sequence[PipLock], *, force: bool = False) -> list[str]:
    """Run uv for every job; the lock files written (a file envkit did not write: only ``force``)."""
    from envkit.create.pylock import pip_lock as run

    return [str(p) for p in run(system, jobs, force=force)]
