"""Where ``envkit.mirrors.choose.choose`` remembers the mirror it chose, per kind, variant and package, for a
day: ``$XDG_CACHE_HOME/envkit/mirrors.json``. A missing or damaged cache only costs a probe."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Optional

from envkit._files import write_atomic
from envkit.redact import redact

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.knowledge.mirrors import Mirror
    from envkit.mirrors.choice import Choice

__all__ = ["CACHE_SCHEMA", "cache_key", "default_cache_path", "read_cache", "write_cache"]

CACHE_SCHEMA: Final = "envkit.mirror-cache/1"


def default_cache_path() -> Path:
    """Where ``choose`` remembers its choices: $XDG_CACHE_HOME/envkit/mirrors.json (~/.cache/…)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "envkit" / "mirrors.json"


def cache_key(mirrors: Sequence[Mirror], variant: str, package: str, version: Optional[str]) -> str:
    kind = mirrors[0].kind if mirrors else "torch-wheels"
    return f"{kind} {variant} {package}" + (f"=={version}" if version else "")


def read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # missing or damaged: probe again
        return {}
    if (
        not isinstance(data, dict)
        or data.get("schema") != CACHE_SCHEMA
        or not isinstance(data.get("choices"), dict)
    ):
        return {}
    choices: dict[str, Any] = data["choices"]
    return choices


def write_cache(path: Path, key: str, choice: Choice, when: float, max_age_s: float) -> None:
    """Add one choice, dropping expired entries; the file is replaced whole (DESIGN "Nothing is
    written half"). Every value is redacted already; redact() again anyway."""
    choices = {
        k: v
        for k, v in read_cache(path).items()
        if isinstance(v, dict)
        and isinstance(v.get("time"), (int, float))
        and 0 <= when - v["time"] <= max_age_s
    }
    choices[key] = {
        "mirror": choice.mirror.name,
        "url": redact(choice.mirror.url),
        "page": redact(choice.page),
        "elapsed_s": choice.elapsed_s,
        "time": when,
        "skipped": [
            {"mirror": s.mirror, "url": redact(s.url), "reason": redact(s.reason)} for s in choice.skipped
        ],
    }
    text = json.dumps({"schema": CACHE_SCHEMA, "choices": choices}, indent=2, sort_keys=True) + "\n"
    with contextlib.suppress(OSError):  # a read-only cache costs a probe next time, not this run
        write_atomic(path, text)
