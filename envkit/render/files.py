"""The files a preflight run keeps up to date beside its verdict: JUnit XML (``--junit``), the
Prometheus textfile (``--metrics``) and the NFD feature file (``--nfd-labels``).

Each is written whole or not at all (envkit._files.write_output: a temporary name in the same
folder, then a rename), so node_exporter, nfd-worker and a CI reader see the previous file or the
new one, never half; both collectors skip the temporary name (node_exporter reads only ``*.prom``,
NFD skips dot files). A path that cannot be written is an InputError naming the option (exit 2),
and the previous file stays as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from envkit._files import check_output, write_output
from envkit.errors import EnvkitError
from envkit.render.junit import junit_xml
from envkit.render.metrics import WatchState, prometheus_text
from envkit.render.nfd import feature_file

if TYPE_CHECKING:
    import datetime

    from envkit.report import Report

__all__ = ["ReportFiles"]


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
    ) -> list[EnvkitError]:
        """Write every file asked for; the errors of those that could not be written (the others
        are written all the same). ``deadline`` (time.monotonic()): the run's, for a FIFO's reader."""
        errors: list[EnvkitError] = []
        for option, path in self._asked():
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
