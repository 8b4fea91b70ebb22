"""Running envkit's command line in this process with the standard streams a hostile world hands
it: a closed stdin, a stdout whose reader leaves after a few bytes (``| head -3``) or that is full
(``> /dev/full``), a terminal. typer's CliRunner swaps in streams of its own and cannot do that.

The command tree is typer's own (tests/conftest.py builds it once); the run goes through
``main(standalone_mode=True)`` as ``envkit`` does, so usage errors, --help and the one handler
(cli._Guarded) all end the way they do for a user: with SystemExit and a code.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from dataclasses import dataclass
from typing import Any, Optional

import typer.main

from envkit import cli

__all__ = ["Result", "Sink", "invoke"]


class _Bytes:
    """A Sink's ``buffer``: where print_json writes its UTF-8 bytes."""

    def __init__(self, sink: Sink) -> None:
        self._sink = sink

    def write(self, data: bytes) -> int:
        return self._sink._take(data.decode("utf-8", "replace"))

    def flush(self) -> None:
        pass  # nothing is held back: a write that does not fit fails at once


class Sink(io.TextIOBase):
    """A stdout that takes ``limit`` characters, then fails every write and flush with ``error``
    (EPIPE: its reader left; ENOSPC: a full disk). No limit: it takes everything."""

    def __init__(self, limit: Optional[int] = None, error: int = errno.EPIPE, *, tty: bool = False) -> None:
        self.limit = limit
        self.error = error
        self.tty = tty
        self.taken: list[str] = []
        self.size = 0
        self.buffer = _Bytes(self)

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def isatty(self) -> bool:
        return self.tty

    def _fail(self) -> None:
        exc = BrokenPipeError if self.error == errno.EPIPE else OSError
        raise exc(self.error, os.strerror(self.error))

    def _check(self) -> None:
        if self.limit is not None and self.size >= self.limit:
            self._fail()

    def _take(self, text: str) -> int:
        self._check()
        if self.limit is not None and self.size + len(text) > self.limit:
            text = text[: self.limit - self.size]
            self.taken.append(text)
            self.size = self.limit
            self._fail()
        self.taken.append(text)
        self.size += len(text)
        return len(text)

    def write(self, text: str) -> int:  # type: ignore[override]
        return self._take(text)

    def flush(self) -> None:
        pass  # as above: an empty flush writes nothing, even to /dev/full

    def text(self) -> str:
        return "".join(self.taken)


_BUILT: dict[tuple[int, tuple[int, ...]], Any] = {}


def _command() -> Any:
    """typer's click command tree of the app, built once per shape of the app (building it is
    ~0.1 s, and the harness runs thousands of command lines; tests/conftest.py does the same for
    CliRunner)."""
    key = (id(cli.app), tuple(id(c.callback) for c in cli.app.registered_commands))
    if key not in _BUILT:
        _BUILT[key] = typer.main.get_command(cli.app)
    return _BUILT[key]


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str


def invoke(
    args: list[str], *, stdin: Any = "", stdout: Optional[Sink] = None, stdin_closed: bool = False
) -> Result:
    """Run ``envkit ARGS`` here. ``stdin``: text, or a file object (a terminal); ``stdin_closed``:
    as started with ``<&-`` (Python leaves sys.stdin None). ``stdout``: a Sink (default: takes all)."""
    out = stdout if stdout is not None else Sink()
    err = io.StringIO()
    if stdin_closed:
        new_in: Any = None
    elif isinstance(stdin, str):
        new_in = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8")
    else:
        new_in = stdin
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = new_in, out, err
    try:
        command = _command()
        try:
            command.main(args, prog_name="envkit", standalone_mode=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    return Result(code, out.text(), err.getvalue())
