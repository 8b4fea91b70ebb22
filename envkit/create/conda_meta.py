"""What a conda environment holds, read from its ``conda-meta/*.json`` records (one per installed
package; conda, mamba, micromamba and rattler all write them): ``create --json``'s ``packages``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from envkit.redact import redact

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["CondaRecord", "installed_packages"]


@dataclass(frozen=True)
class CondaRecord:
    name: str
    version: str
    build: str
    channel: str  # as the record says (a URL, or a channel name), redacted

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "build": self.build, "channel": self.channel}


def installed_packages(prefix: Path) -> tuple[CondaRecord, ...]:
    """The packages of the conda environment at ``prefix``, by name; () when it is none. A record
    that cannot be read is skipped (this describes, it does not judge)."""
    found = []
    meta = prefix / "conda-meta"
    try:
        files = sorted(meta.glob("*.json"))
    except OSError:
        return ()
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or not data.get("name"):
            continue
        channel = str(data.get("channel") or "").rstrip("/")
        found.append(
            CondaRecord(
                name=str(data["name"]),
                version=str(data.get("version") or ""),
                build=str(data.get("build") or data.get("build_string") or ""),
                channel=redact(channel),
            )
        )
    return tuple(sorted(found, key=lambda r: r.name))
