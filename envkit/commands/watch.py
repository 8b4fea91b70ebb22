"""``envkit preflight --every INTERVAL``: the gate run again and again, for health agents (a
DaemonSet, a systemd service) that keep a node's metrics and labels fresh.

The cost is bounded by construction: one run at a time in one process (no interpreter start or
imports after the first), each run under the same hard budget as a single preflight (``--timeout``)
and only the fast checks unless ``--verify`` asks for more. Runs start on a fixed grid (start +
k x interval); a run that overruns its slot makes the next one wait for the next free slot, never
start beside it, and missed slots are not caught up. A detector a run gave up on at its deadline
(stuck in the kernel reading a wedged driver's file, which no signal ends) may still be running
when the next slot comes (envkit.detect.stragglers): that run waits for it until the slot after
(at least a second), then is skipped and counted, so hung detectors never pile up one per interval.

Nothing here prints: what changed goes to ``log`` (one line, only when a check's verdict or the
run's outcome changes), each report to ``landed`` and each skip to ``skipped_run``
(envkit.render.files.WatchFiles writes the files).
SIGINT and SIGTERM (envkit._signals) end the loop wherever it is, as KeyboardInterrupt.
"""

from __future__ import annotations

import math
import re
import time
from typing import TYPE_CHECKING, Callable, Final, Optional

from envkit.detect import stragglers
from envkit.errors import EnvkitError, InputError

if TYPE_CHECKING:
    import threading

    from envkit.report import Report

__all__ = ["MAX_INTERVAL_S", "MIN_INTERVAL_S", "STRAGGLER_GRACE_S", "Verdicts", "parse_every", "watch"]

# Sub-second intervals are for tests and trials; a health agent runs every few minutes.
MIN_INTERVAL_S: Final = 0.1
# And a year at the most: the labels' expiry (a few intervals ahead) and the sleeps must stay within
# what datetime and the clock take (--every 99999999999d was an OverflowError, exit 70).
MAX_INTERVAL_S: Final = 365 * 86400.0
STRAGGLER_GRACE_S: Final = 1.0
_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION: Final = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse_every(text: str) -> float:
    """``5m``, ``30s``, ``1h30m``, ``0.3s`` or a number of seconds, as seconds.

    >>> parse_every("5m"), parse_every("1h30m"), parse_every("0.3s"), parse_every("90")
    (300.0, 5400.0, 0.3, 90.0)
    """
    spec = text.strip().lower()
    seconds: Optional[float] = None
    if re.fullmatch(r"\d+(?:\.\d+)?", spec):
        seconds = float(spec)
    elif spec and _DURATION.sub("", spec) == "":
        seconds = sum(float(n) * _UNITS[unit] for n, unit in _DURATION.findall(spec))
    if seconds is None or not math.isfinite(seconds):
        raise InputError(f"--every {text}: not a duration", hint="give one such as 30s, 5m, 1h or 1h30m")
    if seconds < MIN_INTERVAL_S:
        raise InputError(f"--every {text}: the shortest interval is {MIN_INTERVAL_S:g}s")
    if seconds > MAX_INTERVAL_S:
        raise InputError(f"--every {text}: the longest interval is {MAX_INTERVAL_S / 86400:g}d")
    return seconds


class Verdicts:
    """The last run's verdict per check; :meth:`change` says, in one line, what a new run changed."""

    def __init__(self) -> None:
        self._checks: Optional[dict[str, str]] = None
        self._outcome: Optional[str] = None
        self._error: Optional[str] = None

    def change(self, report: Report, *, strict: bool = False) -> Optional[str]:
        """One line when a check's verdict or the run's outcome changed (or on the first run),
        else None."""
        checks = {c.id: c.status.value for c in report.checks}
        outcome = "healthy" if report.exit_code(strict=strict) == 0 else "unhealthy"
        before, was = self._checks, self._outcome
        self._checks, self._outcome, self._error = checks, outcome, None
        if before == checks and was == outcome:
            return None
        if before is None:
            counts = report.counts()
            changed = ", ".join(f"{counts[k]} {k}" for k in ("fail", "warn", "pass", "skip") if counts[k])
        else:
            moves = [
                f"{cid} {before.get(cid, 'absent')}->{checks.get(cid, 'absent')}"
                for cid in dict.fromkeys([*before, *checks])
                if before.get(cid) != checks.get(cid)
            ]
            changed = ", ".join(moves[:6]) + (f" (+{len(moves) - 6} more)" if len(moves) > 6 else "")
        head = outcome if was in (None, outcome) else f"{outcome} (was {was})"
        line = f"{head}: {changed}" if changed else head
        cause = report.cause
        if cause is not None:
            line += f"; cause {cause.id}: {cause.summary}"
        return line

    def failed(self, error: EnvkitError) -> Optional[str]:
        """One line when a run could not check (an --expect file edited into a bad one), once."""
        line = f"could not check: {error.message}"
        if self._error == line:
            return None
        self._checks, self._outcome, self._error = None, "could not check", line
        return line


def watch(
    run: Callable[[], Report],
    *,
    interval: float,
    landed: Callable[[Report, int, int], None],
    log: Callable[[str], None],
    skipped_run: Optional[Callable[[int, int], None]] = None,
    strict: bool = False,
    runs: Optional[int] = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    stuck: Callable[[], list[threading.Thread]] = stragglers,
) -> int:
    """Run ``run`` every ``interval`` seconds until interrupted (or ``runs`` times, for tests and
    benchmarks); ``landed(report, runs, skipped)`` after each run and ``skipped_run(runs, skipped)``
    after each skip (while a detector stays stuck no run lands, and the count must still reach the
    metrics: it is what EnvkitDetectorStuck alerts on). Returns how many ran."""
    verdicts = Verdicts()
    start = clock()
    done = skipped = slot = 0
    stuck_before = False
    while runs is None or done < runs:
        leftover = stuck()
        # Wait for the previous run's hung detector until the next slot (at least STRAGGLER_GRACE_S:
        # one whose children were just stopped ends a moment later, and is no reason to skip).
        until = max(start + (slot + 1) * interval, clock() + STRAGGLER_GRACE_S)
        for thread in leftover:
            thread.join(max(0.0, until - clock()))
        still = [t.name for t in leftover if t.is_alive()]
        if still:
            skipped += 1
            if not stuck_before:
                log(
                    f"run skipped: the previous run's {', '.join(still)} has not ended (stuck in the kernel?)"
                )
            if skipped_run is not None:
                skipped_run(done, skipped)
        else:
            try:
                report = run()
            except EnvkitError as exc:  # a bad --expect edit: say so once, keep watching
                line = verdicts.failed(exc)
                if line is not None:
                    log(line)
            else:
                done += 1
                line = verdicts.change(report, strict=strict)
                if line is not None:
                    log(line)
                landed(report, done, skipped)
        stuck_before = bool(still)
        if runs is not None and done >= runs:
            break
        # The next free slot of the grid: an overrun never starts a run beside another, and the
        # slots it missed are not caught up.
        slot = max(slot + 1, math.floor((clock() - start) / interval) + 1)
        sleep(max(0.0, start + slot * interval - clock()))
    return done
