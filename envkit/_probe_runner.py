"""Run a probe script (envkit/probes/*.py) in another interpreter and read its JSON answer.

Probes are stdlib (+ torch) scripts that import nothing from envkit; they print one JSON object
between a random marker given on their command line (python-discovery's pattern), so stray output
from the interpreter or torch never corrupts the answer. A crash, a hang or garbage becomes an
``error`` that says which, with the tail of stderr.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Optional

from envkit._proc import ProcResult

if TYPE_CHECKING:
    from envkit.system import System

__all__ = ["PROBES_DIR", "ProbeOutcome", "run_probe"]

PROBES_DIR: Final = Path(__file__).parent / "probes"


@dataclass(frozen=True)
class ProbeOutcome:
    data: Optional[dict[str, Any]]
    error: Optional[str]
    result: ProcResult


def run_probe(
    system: System,
    python: str,
    script: str,
    *args: str,
    timeout: float,
    env: Optional[dict[str, str]] = None,
) -> ProbeOutcome:
    """Run ``python probes/<script> <marker> *args`` and parse the JSON between the markers."""
    marker = f"@@envkit-{secrets.token_hex(8)}@@"
    result = system.run_within(
        [python, str(PROBES_DIR / script), marker, *args],
        timeout=timeout,
        env=env if env is not None else dict(system.env),
    )
    return ProbeOutcome(*parse_probe_output(result, marker), result)


def parse_probe_output(result: ProcResult, marker: str) -> tuple[Optional[dict[str, Any]], Optional[str]]:
    """The probe's JSON object, or why there is none."""
    parts = result.stdout.split(marker)
    if len(parts) >= 3:
        try:
            data = json.loads(parts[1])
        except ValueError:
            return None, f"{result.describe()} and printed invalid JSON"
        if isinstance(data, dict):
            return data, None
        return None, f"{result.describe()} and printed {type(data).__name__}, not an object"
    tail = result.tail(6)
    return None, result.describe() + (f":\n{tail}" if tail else " and printed no answer")
