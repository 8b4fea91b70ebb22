"""The knowledge tables as parsed, kept between runs: ``$XDG_CACHE_HOME/envkit/knowledge/*.json``.

Parsing the TOML files is half of what loading the knowledge base costs (~22 ms of CPU on every
``envkit doctor``, pure-Python tomllib; scripts/bench_doctor.py); reading the same tables back from
JSON takes under a millisecond. Each cache file holds one table as the TOML reader returned it, with
the SHA-256 of the TOML bytes it came from: a table whose file changed in any way is parsed again,
however its size or time stamp looks. The rows are validated as before on every run (the cache
saves the parse, not the checks).

JSON, not pickle: reading it runs no code. Still, a table decides which commands and index URLs
envkit prints, so the cache is used only in a folder of this user's that nobody else may write in,
and a file only when it is this user's own regular file that nobody else may write (owner and mode,
read through the open file, without following a link). A missing, foreign, damaged or stale file is
parsed anew and replaced whole (envkit._files.write_atomic), never through a link; where it cannot
be written (a read-only home, a shared folder) the tables are parsed on every run, as before. A
table JSON cannot hold (TOML dates) is never cached.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any, Callable, Final, Optional

from envkit._files import write_atomic

__all__ = ["SCHEMA", "cache_folder", "cached_table"]

SCHEMA: Final = "envkit.knowledge-cache/1"
# The largest cache file read (the largest table, releases.toml, is ~60 KB of TOML).
_MAX_BYTES: Final = 16 * 1024 * 1024


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "envkit" / "knowledge"


def cached_table(name: str, raw: bytes, parse: Callable[[bytes], dict[str, Any]]) -> dict[str, Any]:
    """The table ``name`` parsed from ``raw`` (its TOML bytes): from the cache when it holds these
    bytes' table, else ``parse(raw)``, then kept for the next run."""
    if not hasattr(os, "geteuid"):  # no owners to check (Windows): parse every time
        return parse(raw)
    digest = hashlib.sha256(raw).hexdigest()
    folder = cache_folder()
    path = folder / f"{name.replace('/', '.')}.json"
    mine = _mine_alone(folder)
    table = _read(path, digest) if mine else None
    if table is not None:
        return table
    table = parse(raw)
    with contextlib.suppress(OSError, TypeError, ValueError):  # unwritable, or a table JSON cannot hold
        text = json.dumps({"schema": SCHEMA, "sha256": digest, "table": table}, separators=(",", ":"))
        if not mine:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if _mine_alone(folder) and _replaceable(path):
            write_atomic(path, text, mode=0o600)
    return table


def _mine_alone(folder: Path) -> bool:
    """Whether ``folder`` is a folder of this user's that nobody else may write in: then nobody else
    can have put a file or a link in it."""
    try:
        info = os.lstat(folder)
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.geteuid()
        and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def _replaceable(path: Path) -> bool:
    """Nothing there, or a regular file: never a link (write_atomic would replace where it points), a
    FIFO or a device (it would write into them)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return True


def _read(path: Path, digest: str) -> Optional[dict[str, Any]]:
    """The cached table for ``digest``, or None: missing, not this user's alone, damaged or stale."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)  # O_NONBLOCK: a FIFO put there must not wait for a writer
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        try:
            info = os.fstat(fd)
            if (
                not stat.S_ISREG(info.st_mode)
                or info.st_uid != os.geteuid()
                or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
                or info.st_size > _MAX_BYTES
            ):
                return None
            data = json.loads(fh.read(_MAX_BYTES + 1))
        except (OSError, ValueError, RecursionError):  # unreadable or damaged (not JSON, not UTF-8)
            return None
    if (
        not isinstance(data, dict)
        or data.get("schema") != SCHEMA
        or data.get("sha256") != digest
        or not isinstance(data.get("table"), dict)
    ):
        return None
    table: dict[str, Any] = data["table"]
    return table
