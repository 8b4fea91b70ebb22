"""Check results and the report: the ``envkit.report/1`` JSON contract.

A report is the facts of one machine plus one result per check. Its JSON form is published
(README "JSON reports"): fields keep their meaning once published; new ones are added beside them.
"""

from __future__ import annotations

import datetime
import enum
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Optional

from envkit import __version__
from envkit._serial import from_jsonable, to_jsonable
from envkit.errors import EXIT_CHECK_FAILED, EXIT_OK, InputError
from envkit.facts import Facts, facts_from_json, facts_to_json

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["REPORT_SCHEMA", "CheckResult", "Report", "Status", "report_from_json"]

REPORT_SCHEMA: Final = "envkit.report/1"


class Status(str, enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


# How a status is shown: on a terminal (render.py), in HTML (fleet_html.py); ASCII where UTF-8 is not.
GLYPHS: Final = {Status.PASS: "✓", Status.WARN: "!", Status.FAIL: "✗", Status.SKIP: "–"}
ASCII_GLYPHS: Final = {Status.PASS: "ok", Status.WARN: "!!", Status.FAIL: "XX", Status.SKIP: "--"}


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict: a one-line summary, why (detail), and the exact fix."""

    id: str
    status: Status
    summary: str
    detail: str = ""
    fix: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def area(self) -> str:
        return self.id.split(".", 1)[0]


@dataclass(frozen=True)
class Report:
    facts: Facts
    checks: tuple[CheckResult, ...]
    host: Optional[str] = None
    created: str = ""
    duration_s: Optional[float] = None
    envkit_version: str = __version__
    # Where the facts came from when they were not detected here (doctor --from FILE).
    source: Optional[str] = None

    @classmethod
    def new(
        cls,
        facts: Facts,
        checks: Sequence[CheckResult],
        *,
        duration_s: Optional[float] = None,
        source: Optional[str] = None,
    ) -> Report:
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        return cls(
            facts=facts,
            checks=tuple(checks),
            host=facts.host.hostname or (None if source else socket.gethostname()),
            created=now.isoformat(),
            duration_s=duration_s,
            source=source,
        )

    def counts(self) -> dict[str, int]:
        return {s.value: sum(1 for c in self.checks if c.status is s) for s in Status}

    def exit_code(self, *, strict: bool = False) -> int:
        bad = {Status.FAIL, Status.WARN} if strict else {Status.FAIL}
        return EXIT_CHECK_FAILED if any(c.status in bad for c in self.checks) else EXIT_OK

    def to_json(self, *, strict: bool = False) -> dict[str, Any]:
        code = self.exit_code(strict=strict)
        return {
            "schema": REPORT_SCHEMA,
            "envkit_version": self.envkit_version,
            "host": self.host,
            "created": self.created,
            "duration_s": self.duration_s,
            "source": self.source,
            "facts": facts_to_json(self.facts),
            "checks": [to_jsonable(c) for c in self.checks],
            "summary": {
                **self.counts(),
                "status": "healthy" if code == EXIT_OK else "unhealthy",
                "strict": strict,
                "exit_code": code,
            },
        }


def report_from_json(data: object, where: str) -> Report:
    """Read a saved ``envkit.report/1`` document; InputError says what is wrong and where."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: not an envkit report (a JSON object was expected)")
    schema = data.get("schema")
    if schema != REPORT_SCHEMA:
        raise InputError(
            f"{where}: schema is {schema!r}, expected {REPORT_SCHEMA!r}",
            hint="save a report with `envkit doctor --json > report.json`",
        )
    if "facts" not in data:
        raise InputError(f"{where}: the report has no 'facts'")
    facts = facts_from_json(data["facts"], f"{where}: facts")
    checks = tuple(
        from_jsonable(CheckResult, c, f"{where}: checks[{i}]") for i, c in enumerate(data.get("checks") or [])
    )
    return Report(
        facts=facts,
        checks=checks,
        host=data.get("host") if isinstance(data.get("host"), str) else None,
        created=str(data.get("created") or ""),
        envkit_version=str(data.get("envkit_version") or "unknown"),
        source=where,
    )
