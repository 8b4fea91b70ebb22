"""The two text formats metrics are exposed in, for :mod:`envkit.render.metrics`: the Prometheus
text format 0.0.4 (what node_exporter's textfile collector parses, with ``expfmt.TextParser``) and
OpenMetrics 1.0. A metric family is built here from rows of labels and values, so that every label
value is made safe in one place.

The formats differ only where their specifications do: the text format knows no ``info`` type (an
info family is a gauge named ``*_info``), no ``UNIT`` line and no ``# EOF``; OpenMetrics writes
``# TYPE x info`` / ``counter`` under the family's base name and ends with ``# EOF``. Label values
are redacted (envkit.redact), shown rather than obeyed (control characters as symbols), cut at
LABEL_MAX and escaped as both formats escape (backslash, double quote, newline); HELP text escapes
backslash and newline. No sample carries a timestamp: node_exporter skips a whole file that has one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Optional

from envkit.redact import redact
from envkit.render.terminal import printable

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = ["LABEL_MAX", "Family", "exposition", "family"]

# A label value longer than this is cut: a GPU name or a summary, never an unbounded text.
LABEL_MAX: Final = 200


@dataclass(frozen=True)
class Family:
    """One metric family. ``name`` is the base name: an info family's samples are ``name_info``, a
    counter's ``name_total`` (OpenMetrics names the family without the suffix)."""

    name: str
    kind: str  # "gauge" | "info" | "counter"
    help: str
    samples: tuple[tuple[tuple[tuple[str, str], ...], float], ...]
    unit: str = ""

    @property
    def sample_name(self) -> str:
        return {"info": f"{self.name}_info", "counter": f"{self.name}_total"}.get(self.kind, self.name)


def _label(value: object) -> str:
    text = printable(redact(str(value)))
    return text if len(text) <= LABEL_MAX else text[: LABEL_MAX - 1] + "…"


def family(
    name: str, kind: str, help: str, rows: list[tuple[dict[str, object], float]], unit: str = ""
) -> Optional[Family]:
    """A family of these rows (labels, value); None when no row has a finite value."""
    # One sample per label set: Prometheus refuses a scrape with a duplicate series (two checks of
    # one id, two GPUs reported with one index); the first is kept.
    samples: dict[tuple[tuple[str, str], ...], float] = {}
    for labels, value in rows:
        key = tuple((k, _label(v)) for k, v in labels.items())
        if math.isfinite(value) and key not in samples:
            samples[key] = float(value)
    return Family(name, kind, help, tuple(samples.items()), unit) if samples else None


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _value(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def _sample(name: str, labels: tuple[tuple[str, str], ...], value: float) -> str:
    inner = ",".join(f'{k}="{_escape_value(v)}"' for k, v in labels)
    return f"{name}{{{inner}}} {_value(value)}" if inner else f"{name} {_value(value)}"


def _lines(fam: Family, *, openmetrics: bool) -> Iterator[str]:
    sample = fam.sample_name
    if openmetrics:
        yield f"# TYPE {fam.name} {fam.kind}"
        if fam.unit:
            yield f"# UNIT {fam.name} {fam.unit}"
        yield f"# HELP {fam.name} {_escape_help(fam.help)}"
    else:
        kind = "gauge" if fam.kind == "info" else fam.kind
        yield f"# HELP {sample} {_escape_help(fam.help)}"
        yield f"# TYPE {sample} {kind}"
    for labels, value in fam.samples:
        yield _sample(sample, labels, value)


def exposition(families: Iterable[Family], *, openmetrics: bool) -> str:
    """The families as text: OpenMetrics 1.0 (``application/openmetrics-text; version=1.0.0``,
    ending in ``# EOF``) or the Prometheus text format."""
    lines = [line for f in families for line in _lines(f, openmetrics=openmetrics)]
    return "\n".join([*lines, "# EOF"] if openmetrics else lines) + "\n"
