"""What choosing a mirror returns: the Choice, and a Skip for each candidate not chosen. Its own
module so that the chooser (envkit.mirrors.choose) and the cache (envkit.mirrors.cache) both import
it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from envkit._serial import StrEnum
from envkit.knowledge.mirrors import Mirror
from envkit.mirrors.http import ProbeResult

__all__ = ["Choice", "HowChosen", "Skip"]


class HowChosen(StrEnum):
    NAMED = "named"  # --mirror NAME
    URL = "url"  # --mirror URL
    PROBED = "probed"  # auto: the fastest that serves the page
    CACHED = "cached"  # auto: an earlier probe, still fresh


@dataclass(frozen=True)
class Skip:
    """A candidate that was not chosen, and why."""

    mirror: str
    url: str
    reason: str


@dataclass(frozen=True)
class Choice:
    """The mirror to install from, and how it was chosen."""

    mirror: Mirror
    variant: str
    how: HowChosen
    page: str  # the page that proves it (redacted)
    elapsed_s: Optional[float] = None  # how long that page took, when probed
    checked_at: Optional[float] = None  # time.time() of the probe
    skipped: tuple[Skip, ...] = ()
    results: tuple[ProbeResult, ...] = ()  # this call's probes (none when named or cached)
