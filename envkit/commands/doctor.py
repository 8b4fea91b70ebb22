"""``envkit doctor``: detect this machine (or read a saved report) and run every check on it."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Optional

from envkit._files import parse_json, read_text
from envkit.checks import CHECKS, run_checks
from envkit.detect import begin_run, detect_all
from envkit.errors import InputError
from envkit.progress import NO_PROGRESS
from envkit.report import Report, decode_report, report_from_json

if TYPE_CHECKING:
    from envkit.progress import RunProgress
    from envkit.system import System

__all__ = ["DEFAULT_TIMEOUT_S", "diagnose", "diagnose_file"]

DEFAULT_TIMEOUT_S = 30.0


def diagnose(
    system: System,
    *,
    python: Optional[str] = None,
    env_name: Optional[str] = None,
    deep: bool = False,
    timeout: float = DEFAULT_TIMEOUT_S,
    progress: RunProgress = NO_PROGRESS,
) -> Report:
    """Detect the machine and the chosen interpreter within ``timeout`` seconds, then check it."""
    system, interp, start = begin_run(system, timeout=timeout, python=python, env_name=env_name)
    progress.stage(f"detecting; importing torch in {interp.path} (--deep)" if deep else "detecting")
    facts = detect_all(system, interp, deep=deep)
    results = run_checks(facts)
    for result in results:
        progress.landed(result)
    return Report.new(facts, results, duration_s=round(time.monotonic() - start, 3))


def diagnose_file(path: str, *, timeout: Optional[float] = None) -> Report:
    """Run today's checks on the facts of a saved report (from this or another machine), or on
    pasted ``python -m torch.utils.collect_env`` output (``-`` reads standard input). ``timeout``:
    seconds the reading may take (a FIFO with no writer, a slow pipe); None waits."""
    deadline = None if timeout is None else time.monotonic() + timeout
    text = read_text(path, label=f"--from {path}", deadline=deadline)
    # The reader fleet and diff use: one msgspec pass for a well-formed report, else the slow path.
    fast = decode_report(text.encode("utf-8", "surrogatepass"), path)
    if fast is not None:
        return Report.new(fast.facts, run_checks(fast.facts), source=path)
    try:
        data = parse_json(text, f"--from {path}")
    except ValueError as exc:
        from envkit.detect.collect_env import UNREPORTED_CHECKS, looks_like_collect_env, parse_collect_env

        if looks_like_collect_env(text):
            facts = parse_collect_env(text)
            # A paste says nothing of /dev/shm, GPU health or NCCL variables: those checks would
            # only guess, so they are left out.
            only = [cid for cid in CHECKS if cid not in UNREPORTED_CHECKS]
            return Report.new(facts, run_checks(facts, only), source=path)
        raise InputError(
            f"--from {path}: neither an envkit JSON report nor `python -m torch.utils.collect_env` "
            f"output (invalid JSON: {exc})",
            hint="save a report with `envkit doctor --json > report.json`",
        ) from None
    saved = report_from_json(data, path)
    return Report.new(saved.facts, run_checks(saved.facts), source=path)
