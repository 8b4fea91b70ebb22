"""``envkit preflight``: the cluster-provisioning gate. The doctor checks, drift against an
expectations file, and any verify checks asked for, all under one hard time budget.

Slurm kills a HealthCheckProgram after 60 s (slurm.conf(5), https://slurm.schedmd.com/slurm.conf.html)
and NHC's own watchdog defaults to 30 s (TIMEOUT=30 in mej/nhc:nhc@9c4a38c0c9f4), so the budget
defaults to 30 s. Detection already answers by its deadline (a
hung NVML or nvidia-smi is reported as unknown) and every probe has a timeout; the watchdog is the
last line: if the process itself is stuck past the budget, it calls what the caller gave it (the
command line prints "no answer in time" and exits 1, unhealthy), so the node is never left in limbo.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Final, Optional

from envkit.checks import CHECKS, run_checks
from envkit.checks.expect import Expectations, apply_require_ignore, check_expectations, load_expectations
from envkit.detect import begin_run, detect_all
from envkit.report import NO_PROGRESS, CheckResult, Report, Status, rank_causes
from envkit.verify import ALL_CHECKS, run_verify_checks

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.report import RunProgress
    from envkit.system import System

__all__ = ["DEFAULT_TIMEOUT_S", "KNOWN_CHECKS", "Watchdog", "drain_reason", "preflight"]

DEFAULT_TIMEOUT_S: Final = 30.0
# Slurm keeps a drain reason short; sinfo -R shows ~40 columns by default.
REASON_MAX: Final = 100
# A command as envkit.proc quotes it (`argv…`), and an absolute path inside a summary.
_COMMAND: Final = re.compile(r"`(\S+)[^`]*`")
_PATH: Final = re.compile(r"(?<![\w.])(?:/[^\s/`'\"():]+)+/([^\s/`'\"():]+)")
KNOWN_CHECKS: Final = (*CHECKS, *(f"verify.{c}" for c in ALL_CHECKS))


class Watchdog:
    """Calls ``fire`` once if not stopped within ``seconds`` (a daemon timer thread).

    ``fire`` runs in the timer's thread while the main thread may be stuck anywhere: it must not
    wait for the main thread (envkit/cli.py passes one that writes a line and ends the process)."""

    def __init__(self, seconds: float, fire: Callable[[], None]) -> None:
        self._timer = threading.Timer(seconds, fire)
        self._timer.daemon = True

    def __enter__(self) -> Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._timer.cancel()


def drain_reason(report: Report, *, strict: bool = False) -> Optional[str]:
    """One line for ``scontrol update … Reason=``: the failure most likely the cause (the ranking of
    ``envkit.report.CAUSE_RANK``, as doctor's "Most likely cause"), short, no quotes or newlines.
    ``strict`` (``--strict``): warnings drain too, so a warning is a reason like a failure."""
    counted = (Status.FAIL, Status.WARN) if strict else (Status.FAIL,)
    fails = rank_causes([c for c in report.checks if c.status in counted])
    if not fails:
        return None
    first = fails[0]
    more = f" (+{len(fails) - 1} more)" if len(fails) > 1 else ""
    # The room goes to the check and its cause: a command shrinks to its program's name and a path
    # to its last part ("`/opt/venv/bin/python …/verify_compile.py @@m@@` timed out" -> "python timed out").
    summary = _COMMAND.sub(lambda m: Path(m.group(1)).name, first.summary)
    summary = _PATH.sub(lambda m: m.group(1), summary)
    text = " ".join(f"envkit: {first.id}: {summary}".replace('"', "'").split())
    if len(text) + len(more) > REASON_MAX:
        text = text[: REASON_MAX - len(more) - 1].rstrip() + "…"
    return text + more


def preflight(
    system: System,
    *,
    expect_path: Optional[str] = None,
    verify_checks: Sequence[str] = (),
    python: Optional[str] = None,
    env_name: Optional[str] = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    progress: RunProgress = NO_PROGRESS,
    compile_on: Optional[Sequence[str]] = None,
) -> Report:
    """Run the gate within ``timeout`` seconds: doctor checks, expectations, verify checks
    (``compile_on``: verify.compile's devices, envkit.verify.compile_devices)."""
    expect: Optional[Expectations] = None
    if expect_path:  # read within the budget too (a FIFO, a slow pipe); detection gets what is left
        began = time.monotonic()
        expect = load_expectations(expect_path, KNOWN_CHECKS, deadline=began + timeout)
        timeout = max(timeout - (time.monotonic() - began), 0.1)
    wanted = list(verify_checks)  # checked names (verify.parse_checks, or the expectations' require)
    if expect is not None:  # required verify checks run without being asked twice
        wanted += [c.removeprefix("verify.") for c in expect.require if c.startswith("verify.")]
    wanted = list(dict.fromkeys(wanted))
    system, interp, start = begin_run(system, timeout=timeout, python=python, env_name=env_name)
    progress.stage("detecting")
    facts = detect_all(system, interp)
    checks: list[CheckResult] = list(run_checks(facts))
    if expect is not None:
        checks += check_expectations(expect, facts)
    for result in checks:
        progress.landed(result)
    if wanted:
        checks += run_verify_checks(
            system, interp.path, facts, wanted, progress=progress, compile_on=compile_on
        )
    if expect is not None:
        checks = apply_require_ignore(expect, checks)
    return Report.new(facts, checks, duration_s=round(time.monotonic() - start, 3))
