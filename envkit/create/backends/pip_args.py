"""pip's and uv's index options, with the credentials moved out of the command line.

A child's environment is readable only by its user (/proc/PID/environ is mode 0400), its argv by
everybody (``ps``), so index URLs that carry credentials go into the installer's own variables.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Final, Optional

from envkit.redact import redact

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["hide_credentials", "index_args"]


def index_args(index: Sequence[str], *, wheelhouse: Optional[str], offline: bool) -> list[str]:
    """Where pip looks: ``index`` and the wheelhouse, or offline the wheelhouse alone (prepare()
    refuses --offline without one)."""
    local = ["--find-links", wheelhouse] if wheelhouse else []
    return ["--no-index", *local] if offline else [*index, *local]


# The installers' own environment variables for their index options, and how each joins several
# values.
# pip: every option is PIP_<UPPER_LONG_NAME>, several values space-separated, and the command line
# wins over the environment (https://pip.pypa.io/en/stable/topics/configuration/#environment-variables).
# uv: UV_INDEX_URL, UV_EXTRA_INDEX_URL (space-separated), UV_FIND_LINKS (comma-separated)
# (https://docs.astral.sh/uv/reference/environment/; `uv pip install --help` names them too).
_INDEX_ENV: Final = {
    "pip": {
        "--index-url": ("PIP_INDEX_URL", " "),
        "--extra-index-url": ("PIP_EXTRA_INDEX_URL", " "),
        "--find-links": ("PIP_FIND_LINKS", " "),
    },
    "uv": {
        "--index-url": ("UV_INDEX_URL", " "),
        "--extra-index-url": ("UV_EXTRA_INDEX_URL", " "),
        "--find-links": ("UV_FIND_LINKS", ","),
    },
}


def hide_credentials(
    argv: Sequence[str], installer: str
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """(argv, env): every index option of which one value carries a credential (what redact()
    would hide) moves, with all its values, from ``argv`` into the installer's variable. All of
    them: the command line would override the variable."""
    options = _INDEX_ENV[installer]
    values: dict[str, list[str]] = {}
    kept: list[tuple[str, str]] = []  # (option, value) pairs in their order
    rest: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in options and i + 1 < len(argv):
            values.setdefault(argv[i], []).append(argv[i + 1])
            kept.append((argv[i], argv[i + 1]))
            rest.append(argv[i])  # a slot, filled or dropped below
            i += 2
            continue
        rest.append(argv[i])
        i += 1
    secret = {opt for opt, vals in values.items() if any(redact(v) != v for v in vals)}
    out: list[str] = []
    pairs = iter(kept)
    for arg in rest:
        if arg in options:
            option, value = next(pairs)
            if option not in secret:
                out += [option, value]
        else:
            out.append(arg)
    env = []
    for option in sorted(secret):
        name, sep = options[option]
        # A local folder holding the separator goes as a file:// URL (percent-encoded), which both
        # installers take for --find-links.
        vals = [Path(v).as_uri() if sep in v and os.path.isabs(v) else v for v in values[option]]
        env.append((name, sep.join(vals)))
    return tuple(out), tuple(env)
