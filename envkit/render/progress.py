"""Live progress of a long run on a terminal (stderr): which step or probe is running, the elapsed
time, and each probe's verdict as it lands (envkit.report.RunProgress, rich underneath).

The face uses it only when stderr is a terminal and neither ``--quiet`` nor ``--json`` was given;
the live line is erased when the run ends, the verdict lines stay above it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING

from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from envkit.checks._common import plural
from envkit.render.console import STYLES, glyphs_for, safe_console
from envkit.render.terminal import printable
from envkit.report import Status

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from rich.console import Console

    from envkit.report import CheckResult

__all__ = ["LiveProgress", "live_progress"]

# The live line: enough to see what runs, never wider than the terminal.
LINE_WIDTH = 110


class LiveProgress:
    """A RunProgress on one rich progress line. A probe announced by ``running`` gets a line of its
    own when it lands (its verdict and how long it took); the quick checks only count in the tally."""

    def __init__(self, console: Console, progress: Progress) -> None:
        self._console = safe_console(console)
        self._glyphs = glyphs_for(console)
        self._progress = progress
        self._task = progress.add_task("starting…", total=None)
        self._lock = threading.Lock()
        self._stage = "starting"
        self._running: dict[str, float] = {}  # check id -> when it started
        self._counts: dict[Status, int] = {}
        self._closed = False

    def stage(self, text: str) -> None:
        with self._lock:
            self._stage = printable(text)
            self._show()

    def running(self, check_ids: Sequence[str]) -> None:
        with self._lock:
            now = time.monotonic()
            self._running.update((cid, now) for cid in check_ids)
            self._show()

    def landed(self, result: CheckResult) -> None:
        with self._lock:
            if self._closed:  # a probe that answered after the run gave up on it
                return
            self._counts[result.status] = self._counts.get(result.status, 0) + 1
            started = self._running.pop(result.id, None)
            if started is not None:
                line = Text("  ")
                line.append(f"{self._glyphs[result.status]} ", style=STYLES[result.status])
                line.append(result.id, style="bold")
                line.append(f" {result.summary}")
                line.append(f" ({time.monotonic() - started:.1f} s)", style="dim")
                self._console.print(line, no_wrap=True, overflow="ellipsis")
            self._show()

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def _show(self) -> None:
        # What runs first, the stage (an interpreter's path can be long) last: a cut loses the least.
        parts = []
        if self._running:
            parts.append("running " + ", ".join(self._running))
        if self._counts:
            parts.append(", ".join(_tally(s, self._counts[s]) for s in _DONE if s in self._counts))
        parts.append(self._stage)
        line = " · ".join(parts)
        # The spinner and the clock take ~12 columns: the description never pushes them off the line.
        width = max(20, min(LINE_WIDTH, (self._console.width or 80) - 12))
        if len(line) > width:
            line = line[: width - 1] + "…"
        self._progress.update(self._task, description=line)


def _tally(status: Status, n: int) -> str:
    return plural(n, "warning") if status is Status.WARN else f"{n} {_DONE[status]}"


_DONE = {Status.PASS: "passed", Status.WARN: "warned", Status.FAIL: "failed", Status.SKIP: "skipped"}


@contextlib.contextmanager
def live_progress(console: Console) -> Iterator[LiveProgress]:
    """A live progress line on ``console`` (stderr) for the length of the block."""
    columns = (SpinnerColumn(), TimeElapsedColumn(), TextColumn("{task.description}", markup=False))
    with Progress(*columns, console=console, transient=True) as progress:
        shown = LiveProgress(console, progress)
        try:
            yield shown
        finally:
            shown.close()
