"""Text from untrusted places (a report from another machine, a file a user named) made safe to show
on a terminal.

A GPU name in a saved report can hold ``ESC[2J`` (clear the screen) followed by a fake "healthy"
line; rich passes ESC and the C1 controls through to the terminal (its ``strip_control_codes``
removes only BEL, BS, VT, FF and CR). Every control character is shown instead of obeyed: C0 ones
as their Unicode "control pictures" (ESC as ``␛``), C1 ones, bidirectional overrides ("Trojan
Source", CVE-2021-42574) and lone surrogates as U+FFFD. Each character becomes exactly one
character, so the styled spans of a rich Text stay where they were. Newlines and tabs are kept.
JSON output is not touched: json.dumps escapes control characters itself.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["printable"]

# C0 (but \t and \n), DEL, C1, the bidi embedding/override/isolate marks, and lone surrogates.
_UNSAFE: Final = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # U+2400..U+241F: the control pictures of C0
    if code == 0x7F:
        return "\u2421"  # SYMBOL FOR DELETE
    return "\ufffd"


def printable(text: str) -> str:
    """``text`` with every control character shown, not obeyed; same length.

    >>> printable("H100\\x1b[2J ok\\n")
    'H100␛[2J ok\\n'
    """
    return _UNSAFE.sub(_picture, text)
