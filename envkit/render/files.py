"""The files a preflight run keeps up to date beside its verdict: JUnit XML (``--junit``), the
Prometheus textfile (``--metrics``) and the NFD feature file (``--nfd-labels``).

Each is written whole or not at all (envkit._files.write_output: a temporary name in the same
folder, then a rename), so node_exporter, nfd-worker and a CI reader see the previous file or the
new one, never half; both collectors skip the temporary name (node_exporter reads only ``*.prom``,
NFD skips dot files). A path that cannot be written is an InputError naming the option (exit 2),
and the previous file stays as it was.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional

from envkit._files import check_output, write_output
from envkit.errors import EnvkitError
from envkit.render.junit import junit_xml
from envkit.render.metrics import WatchState, prometheus_text
from envkit.render.nfd import feature_file

if TYPE_CHECKING:
    from envkit.report import Report

__all__ = ["ReportFiles", "WatchFiles"]

_ALL: tuple[str, ...] = ("--junit", "--metrics", "--nfd-labels")


@dataclass(frozen=True)
class ReportFiles:
    """Where a run's files go (None: not asked for)."""

    junit: Optional[str] = None
    metrics: Optional[str] = None
    nfd_labels: Optional[str] = None

    def _asked(self) -> list[tuple[str, str]]:
        options = (("--junit", self.junit), ("--metrics", self.metrics), ("--nfd-labels", self.nfd_labels))
        return [(option, path) for option, path in options if path]

    def check(self) -> None:
        """InputError for the first path that cannot be written (before a long watch starts)."""
        for option, path in self._asked():
            check_output(path, label=f"{option} {path}")

    def write(
        self,
        report: Report,
        *,
        name: str = "envkit.preflight",
        strict: bool = False,
        watch: Optional[WatchState] = None,
        labels_expire: Optional[datetime.datetime] = None,
        deadline: Optional[float] = None,
        only: tuple[str, ...] = _ALL,
    ) -> list[EnvkitError]:
        """Write every file asked for (of those ``only`` names); the errors of those that could not
        be written (the others are written all the same). ``deadline`` (time.monotonic()): the
        run's, for a FIFO's reader."""
        errors: list[EnvkitError] = []
        for option, path in self._asked():
            if option not in only:
                continue
            if option == "--junit":
                text = junit_xml(report, name=name, strict=strict)
            elif option == "--metrics":
                text = prometheus_text(report, strict=strict, watch=watch)
            else:
                text = feature_file(report, strict=strict, expires=labels_expire)
            try:
                write_output(path, text, label=f"{option} {path}", deadline=deadline)
            except EnvkitError as exc:
                errors.append(exc)
        return errors


class WatchFiles:
    """What ``preflight --every`` writes (envkit.commands.watch calls it): after each run every file,
    the NFD labels expiring a few intervals ahead; after each skipped run the metrics alone, of the
    last run that landed with the new skip count. Its verdict and envkit_run_timestamp_seconds stay
    that run's (so EnvkitStale fires as the run gets old) and the labels are left to expire: a node
    whose detector is stuck is vouched for by nothing new. A file that cannot be written is one
    ``log`` line when that first happens and one when it is written again."""

    def __init__(
        self,
        files: ReportFiles,
        *,
        interval: float,
        strict: bool,
        log: Callable[[str], None],
        timeout: Optional[float] = None,
    ) -> None:
        self._files, self._interval, self._strict, self._log = files, interval, strict, log
        # A FIFO's reader waits at most this long: before the next run (e0d023d).
        self._wait = interval if timeout is None else min(timeout, interval)
        self._last: Optional[Report] = None
        self._shown: dict[str, str] = {}

    def landed(self, report: Report, runs: int, skipped: int) -> None:
        self._last = report
        # nfd-worker re-reads the file every 60 s (its default core.sleepInterval): the labels
        # outlive three missed runs and one re-read, then NFD drops them instead of vouching for
        # a node whose watch has stopped.
        expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(
            seconds=3 * self._interval + 60
        )
        watch = WatchState(runs, skipped, self._interval)
        errors = self._files.write(
            report, strict=self._strict, watch=watch, labels_expire=expires, deadline=self._deadline()
        )
        self._said(errors)

    def skipped_run(self, runs: int, skipped: int) -> None:
        if self._last is None:
            return
        watch = WatchState(runs, skipped, self._interval)
        only = ("--metrics",)
        errors = self._files.write(
            self._last, strict=self._strict, watch=watch, deadline=self._deadline(), only=only
        )
        self._said(errors, only)

    def _deadline(self) -> float:
        return time.monotonic() + self._wait

    def _said(self, errors: list[EnvkitError], written: tuple[str, ...] = _ALL) -> None:
        # An error's message starts "--metrics PATH: ..." (ReportFiles.write's label).
        now = {e.message.split(":", 1)[0]: e.message for e in errors}
        for key, message in now.items():
            if self._shown.get(key) != message:
                self._log(message)
        for key in [k for k in self._shown if k not in now and k.split(" ", 1)[0] in written]:
            self._log(f"{key}: written again")
            del self._shown[key]
        self._shown.update(now)
