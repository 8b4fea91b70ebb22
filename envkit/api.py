"""envkit's Python API: the commands' flows as functions that return records (no printing, no
exit codes). ``import envkit`` re-exports these lazily (envkit/__init__.py); the names in
``envkit.__all__`` are the stable API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.report import Report, RunProgress
    from envkit.resolve import Plan

# Not ``resolve`` and ``verify``: those names are envkit's subpackages (envkit.resolve, envkit.verify),
# and importing a subpackage rebinds its name on the package, which would hide a function.
__all__ = ["doctor", "make_plan", "preflight", "run_verify"]


def doctor(
    *,
    python: Optional[str] = None,
    env: Optional[str] = None,
    deep: bool = False,
    timeout: float = 30.0,
    from_file: Optional[str] = None,
    progress: Optional[RunProgress] = None,
) -> Report:
    """``envkit doctor``: detect this machine (or read ``from_file``: a saved report or pasted
    ``collect_env`` text) and run every check. ``report.exit_code()`` is the CLI's exit code."""
    from envkit.commands.doctor import diagnose, diagnose_file
    from envkit.errors import InputError
    from envkit.report import NO_PROGRESS
    from envkit.system import System

    if from_file is not None:
        if python or env or deep:
            raise InputError("from_file reads a saved report; python, env and deep do not apply")
        return diagnose_file(from_file, timeout=timeout)
    return diagnose(
        System(), python=python, env_name=env, deep=deep, timeout=timeout, progress=progress or NO_PROGRESS
    )


def make_plan(
    *,
    torch: Optional[str] = None,
    cuda: str = "auto",
    channel: str = "pip",
    driver: Optional[str] = None,
    gpus: Sequence[str] = (),
    no_gpu: bool = False,
    platform: Optional[str] = None,
    python: Optional[str] = None,
    env: Optional[str] = None,
) -> Plan:
    """``envkit resolve``: the torch build for this machine, or for the one the arguments describe
    (what they leave open is detected). Raises envkit.NoBuildError (with every rejected candidate)
    when nothing fits, envkit.InputError on a bad value."""
    from envkit.planning import make_plan as plan_for
    from envkit.resolve.plan import PlanFlags
    from envkit.system import System

    flags = PlanFlags(
        driver=driver,
        gpus=tuple(gpus),
        no_gpu=no_gpu,
        platform=platform,
        python=python,
        env_name=env,
        torch=torch,
        cuda=cuda,
        channel=channel,
    )
    return plan_for(System(), flags)


def run_verify(
    *,
    python: Optional[str] = None,
    env: Optional[str] = None,
    checks: Optional[Sequence[str]] = None,
    timeout: float = 600.0,
    progress: Optional[RunProgress] = None,
) -> Report:
    """``envkit verify``: run the verify probes (device, compile, amp, dist by default; ``perf`` on
    request) in the target interpreter."""
    from envkit.report import NO_PROGRESS
    from envkit.system import System
    from envkit.verify import parse_checks, verify

    wanted = parse_checks(",".join(checks) if checks is not None else None, option="checks")
    return verify(
        System(),
        python=python,
        env_name=env,
        checks=wanted,
        timeout=timeout,
        progress=progress or NO_PROGRESS,
    )


def preflight(
    *,
    expect: Optional[str] = None,
    verify_checks: Sequence[str] = (),
    python: Optional[str] = None,
    env: Optional[str] = None,
    timeout: float = 30.0,
) -> Report:
    """``envkit preflight``: the doctor checks, drift against the ``expect`` TOML file, and the
    verify checks named, under one time budget (the watchdog is the CLI's)."""
    from envkit.commands.preflight import preflight as run_preflight
    from envkit.system import System
    from envkit.verify import parse_checks

    wanted = parse_checks(",".join(verify_checks), option="verify_checks") if verify_checks else ()
    return run_preflight(
        System(), expect_path=expect, verify_checks=wanted, python=python, env_name=env, timeout=timeout
    )
