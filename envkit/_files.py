"""Reading the files users name (one-line errors), and writing files whole or not at all: a
temporary name in the same folder, then a rename."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Optional

from envkit.errors import InputError

__all__ = ["read_text", "write_atomic"]


def read_text(path: str, *, label: Optional[str] = None, hint: str = "") -> str:
    """A text file a user named (``-``: standard input); InputError, prefixed ``label`` (the path by
    default), when it cannot be read or is not text."""
    if path == "-":
        return sys.stdin.read()
    label = label or path
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{label}: cannot read it ({exc.strerror or exc})", hint=hint) from None
    except UnicodeDecodeError:
        raise InputError(f"{label}: not a text file", hint=hint) from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str | Path, text: str, *, mode: int = 0o666) -> Path:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never half.

    The file gets ``mode`` minus the umask, as ``open()`` would create it (mkstemp alone gives 0600).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, mode & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
