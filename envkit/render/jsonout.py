"""JSON on stdout: the requested data of every ``--json`` (kept apart from rich, which a JSON run
never needs to import)."""

from __future__ import annotations

import json
import sys
from typing import Any

__all__ = ["dumps", "print_json"]


def dumps(data: Any) -> str:
    """``data`` as indented JSON, redacted (envkit.redact): no --json output carries a credential."""
    from envkit.redact import redact_data

    return json.dumps(redact_data(data), indent=2, ensure_ascii=False)


def print_json(data: Any) -> None:
    sys.stdout.write(dumps(data) + "\n")
