"""Pasted terminal text made plain: what a browser, a terminal, rich and a mail client did to it.

A traceback reaches envkit through many hands: ANSI colour codes (a terminal's, or the log of a
job that forced colour), CRLF and bare CR (Windows, progress bars), ``> `` quoting (a reply),
HTML wrappers (``<details>``, ``<pre>``), code fences, and rich's boxed tracebacks (``╭─ Traceback
… ─╮``, ``│ … │``, ``╰─…─╯``, the ``❱`` marker of the failing line), whose box wraps a long message
in the middle of a word. Each line is cleaned on its own; a boxed line that fills the box is
glued to the next without a space (the box cut it, not the author). Messages are then searched in
one blob with the whitespace collapsed (``blob``): a hard wrap between two words must not hide one.
"""

from __future__ import annotations

import html
import re
from typing import Final

__all__ = ["MAX_LINE", "blob", "clean_lines"]

# A line longer than this is cut: a minified JSON log or a base64 blob on one line must not make
# every regex walk megabytes.
MAX_LINE: Final = 4096
# ECMA-48 control sequences (colours, cursor moves), OSC strings (hyperlinks, titles) and the
# two-byte escapes; what remains of a lone ESC is dropped.
_ANSI_RE: Final = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# The other control characters (a lone ESC, NUL, backspace …) are dropped; tab, LF and CR are kept.
_CONTROLS: Final = dict.fromkeys([*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F])
_TAG_RE: Final = re.compile(
    r"</?(?:details|summary|pre|code|br|p|b|i|em|strong|tt|kbd|div|span|sub|sup|blockquote)\b[^>]*>",
    re.IGNORECASE,
)
_QUOTE_RE: Final = re.compile(r"^(?:[ \t]*>)+[ \t]?")
_BULLET_RE: Final = re.compile(r"^\s*[-*+]\s+(?=\S)")
_FENCE_RE: Final = re.compile(r"^\s*(?:```|~~~)[\w+-]*\s*$")
# rich's box characters (rich.box.ROUNDED / HEAVY, as its tracebacks draw them).
_BOX_RULE_RE: Final = re.compile(r"^[\s╭╮╰╯┏┓┗┛─━═┌┐└┘├┤┬┴┼╔╗╚╝]*$")
_BOX_TOP_RE: Final = re.compile(r"^\s*[╭┏┌╔][─━═]*\s*(?P<title>[^─━═]*?)\s*[─━═]*[╮┓┐╗]\s*$")
_BOX_LINE_RE: Final = re.compile(r"^\s*[│┃║](?P<inner>.*?)[│┃║]\s*$")


def _plain(line: str) -> str:
    if "<" in line:
        line = _TAG_RE.sub("", line)
    if "&" in line:
        line = html.unescape(line)
    if line[:1] == ">" or line.lstrip()[:1] == ">":
        line = _QUOTE_RE.sub("", line)
    if "**" in line:  # markdown bold around a label: "- **PyTorch version**: 2.5.1"
        line = _BULLET_RE.sub("", line.replace("**", ""))
    return line.replace("\t", "    ")


def _box_width(lines: list[str]) -> int:
    """The console width rich drew its boxes at (0 when the text has none): rich also wraps the
    exception message below the box at that width, in the middle of a path if need be."""
    return max((len(line.rstrip()) for line in lines if _BOX_TOP_RE.match(line)), default=0)


def clean_lines(text: str) -> list[str]:
    """The text's lines without colour codes, quoting, tags, fences and rich's boxes; a line cut by
    rich at its console's width (a boxed line, or the message below the box) is joined to the next.
    Line ends of any kind (CRLF, CR, LF) split."""
    if "\x1b" in text:
        text = _ANSI_RE.sub("", text)
    text = text.replace("\r\n", "\n").translate(_CONTROLS)
    plain = [_plain(raw[:MAX_LINE]) for raw in text.splitlines()]
    boxed = any(c in text for c in "╭┏┌╔")
    width = _box_width(plain) if boxed else 0
    out: list[str] = []
    glue = False  # the previous line filled its box: the next continues the same word
    for line in plain:
        if ("```" in line or "~~~" in line) and _FENCE_RE.match(line):
            glue = False
            continue
        if not boxed:
            out.append(line.rstrip())
            continue
        top = _BOX_TOP_RE.match(line)
        if top is not None:
            out.append(top.group("title"))
            glue = False
            continue
        if line.strip() and _BOX_RULE_RE.match(line):
            glue = False
            continue
        inside = _BOX_LINE_RE.match(line)
        if inside is not None:
            inner = inside.group("inner")
            content = inner.replace("❱", " ").strip()
            if glue and out:
                out[-1] += content
            else:
                out.append(content)
            # rich pads a line to the box's width: content that reaches the right edge was cut.
            glue = bool(inner) and not inner.endswith(" ")
            continue
        line = line.rstrip()
        if glue and out:
            out[-1] += line.lstrip()
        else:
            out.append(line)
        # Below a box, rich wraps the message at the console's width without a hyphen or a space.
        glue = width >= 40 and len(line) == width
    return out


def blob(lines: list[str]) -> str:
    """The lines as one string with every run of whitespace one space: where messages are
    searched, so that hard wraps and indentation do not matter."""
    return " ".join(" ".join(lines).split())
