"""``preflight --npd``: the verdict as a node-problem-detector custom plugin gives it.

NPD's contract (kubernetes/node-problem-detector@6632ca67, pkg/custompluginmonitor/types/types.go
and plugin/plugin.go; docs/custom_plugin_monitor.md): the plugin's exit status is the condition,
0 OK (the condition is False), 1 NonOK (True: the problem is there), anything else Unknown; its
standard output, trimmed and cut at ``max_output_length`` bytes (default 80, types/config.go), is
the condition's message; NPD reads at most 4 KiB of it and kills the plugin's process group when
``timeout`` passes. So the message is one line of printable ASCII (a byte cut must not split a
character) of at most 80 characters, and envkit's exit codes map as they are: 0 healthy, 1
unhealthy, 2 could not check (and 70, 130) read as Unknown.
"""

from __future__ import annotations

import re
from typing import Final, Optional

from envkit.redact import redact

__all__ = ["NPD_MAX_OUTPUT", "npd_message"]

NPD_MAX_OUTPUT: Final = 80  # NPD's default max_output_length
# The symbols envkit's summaries use, spelled in ASCII (as scripts/slurm/envkit-healthcheck.sh does).
_ASCII: Final = {
    "…": "...",
    "≥": ">=",
    "≤": "<=",
    "≠": "!=",
    "→": "->",
    "×": "x",
    "—": "-",
    "–": "-",
    "°": "",
}
_BLANKS: Final = re.compile(r"\s+")


def _ascii_line(text: str, limit: int) -> str:
    for symbol, spelled in _ASCII.items():
        text = text.replace(symbol, spelled)
    text = "".join(c if " " <= c <= "~" else ("?" if not c.isspace() else " ") for c in text)
    text = _BLANKS.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def npd_message(reason: Optional[str], counts: dict[str, int], *, limit: int = NPD_MAX_OUTPUT) -> str:
    """The condition's message: the drain reason when unhealthy (``reason``), else a tally."""
    if reason is None:
        tally = ", ".join(
            f"{counts[k]} {word}" for k, word in (("pass", "passed"), ("warn", "warned")) if counts.get(k)
        )
        text = f"envkit: healthy ({tally or 'nothing checked'})"
    else:
        text = reason
    return _ascii_line(redact(text), limit)
