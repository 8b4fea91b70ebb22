"""Standard output and standard error as envkit writes them, whatever is at the other end.

- A reader that goes away (``envkit doctor --json | head -3``) is not an error: the rest of the
  output is dropped and the command ends with the status of its work, quietly — as ``cat`` and
  ``grep`` do, and without the "internal error" and crash log a BrokenPipeError used to make. (rich
  ends the program with exit 1 on a broken pipe, Console.on_broken_pipe; Python's advice for
  programs that ignore SIGPIPE is the same as here: send the rest to /dev/null,
  https://docs.python.org/3/library/signal.html#note-on-sigpipe.)
- A stdout that cannot take the data (``> /dev/full``, an I/O error) is the environment's error,
  not envkit's: the first one is kept, the rest of the output dropped, and the command line says so
  in one line (exit 2 unless the work itself failed: a failed check stays 1).
- Standard error that is gone (a closed terminal, ``2>&-``) drops what envkit would say there:
  nothing is left to tell, and a message must not turn into an error of its own.

Every stdout write of the command line goes through :data:`stdout` (the file rich's console
writes to) or :func:`write_stdout` (``--json``); ``begin()`` starts a command afresh and
``outcome()`` tells the one handler (envkit.cli) how stdout fared.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Optional, Union

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "Outcome",
    "begin",
    "flush_stdout",
    "guarded_stdout",
    "outcome",
    "stderr",
    "stdout",
    "write_stdout",
]


@dataclass
class Outcome:
    """How stdout fared in this command: ``closed`` (its reader went away), ``failed`` (the first
    error writing it: ENOSPC, EIO), ``written`` (whether any of the data reached it, so an
    error document is not appended to half of another one) and ``told`` (the user was told of
    ``failed`` already: one line, once)."""

    closed: bool = False
    failed: Optional[OSError] = None
    written: bool = False
    told: bool = False

    @property
    def ended(self) -> bool:
        return self.closed or self.failed is not None


_NOW = Outcome()
# Set by the console entry point (envkit.cli.main): this process is envkit's own, so a stdout whose
# reader left may be pointed at /dev/null (in a program that embeds envkit, fd 1 is not ours).
_OWN_PROCESS: list[bool] = []


def begin(*, own_process: Optional[bool] = None) -> None:
    """A new command starts: forget how the last one's stdout fared (tests run many in one process)."""
    global _NOW
    _NOW = Outcome()
    if own_process:
        _OWN_PROCESS.append(True)


def outcome() -> Outcome:
    return _NOW


def _stdout_error(exc: OSError) -> None:
    if exc.errno == errno.EPIPE or isinstance(exc, BrokenPipeError):
        _NOW.closed = True
    elif _NOW.failed is None:
        _NOW.failed = exc
    if _OWN_PROCESS:
        # What is still buffered would fail again at the interpreter's exit ("Exception ignored …
        # BrokenPipeError", exit 120): the descriptor now leads to /dev/null.
        with contextlib.suppress(OSError, ValueError, AttributeError):
            fd = sys.__stdout__.fileno() if sys.__stdout__ is not None else 1
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, fd)
            os.close(null)


@contextlib.contextmanager
def _guard_stdout() -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        _stdout_error(exc)


def write_stdout(data: Union[bytes, str]) -> None:
    """``data`` on stdout (bytes to its buffer where it has one: JSON is UTF-8 whatever the locale)."""
    if _NOW.ended:
        return
    with _guard_stdout():
        out = sys.stdout
        if out is None:  # started with stdout closed (`>&-`)
            raise BrokenPipeError(errno.EPIPE, "standard output is closed")
        buffer = getattr(out, "buffer", None)
        if buffer is not None:
            out.flush()  # what was written as text before comes first
            buffer.write(data.encode("utf-8") if isinstance(data, str) else data)
        else:
            out.write(data.decode("utf-8") if isinstance(data, bytes) else data)
        _NOW.written = True


def flush_stdout() -> None:
    """Flush stdout (at the end of a command: what is buffered must fail here, not at exit)."""
    if _NOW.ended or sys.stdout is None:
        return
    with _guard_stdout():
        sys.stdout.flush()
        buffer = getattr(sys.stdout, "buffer", None)
        if buffer is not None:
            buffer.flush()


class _GuardedStdout:
    """``sys.stdout`` while the command line runs (:func:`guarded_stdout`): what click writes there
    itself (--help, --version, shell completion) and any print() meet the errors above as envkit's
    own output does. ``envkit --help > /dev/full`` was a traceback, ``envkit doctor --help`` on it
    an internal error (70), and ``--version`` exit 0 with nothing written."""

    def __init__(self, target: IO[str]) -> None:
        self._target = target

    def write(self, text: str) -> int:
        if not _NOW.ended:
            with _guard_stdout():
                self._target.write(text)
                _NOW.written = _NOW.written or bool(text)
        return len(text)

    def flush(self) -> None:
        if not _NOW.ended:
            with _guard_stdout():
                self._target.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


@contextlib.contextmanager
def guarded_stdout() -> Iterator[None]:
    """``sys.stdout`` is a :class:`_GuardedStdout` of itself inside the block (not when closed:
    ``>&-`` leaves it None, which every writer here already answers)."""
    saved = sys.stdout
    if saved is not None and not isinstance(saved, _GuardedStdout):
        sys.stdout = _GuardedStdout(saved)
    try:
        yield
    finally:
        sys.stdout = saved


class _Stream:
    """The file a rich Console writes to: the current ``sys.stdout`` / ``sys.stderr`` (tests swap
    them), with the errors above handled. Everything else is the stream's own."""

    def __init__(self, name: str) -> None:
        self._name = name

    def _target(self) -> Optional[IO[str]]:
        stream: Optional[IO[str]] = getattr(sys, self._name)
        return stream

    def write(self, text: str) -> int:
        target = self._target()
        if self._name == "stdout":
            if not _NOW.ended:
                with _guard_stdout():
                    if target is None:
                        raise BrokenPipeError(errno.EPIPE, "standard output is closed")
                    target.write(text)
                    _NOW.written = _NOW.written or bool(text)
        elif target is not None:
            with contextlib.suppress(OSError, ValueError):  # stderr gone: nobody to tell
                target.write(text)
        return len(text)

    def flush(self) -> None:
        target = self._target()
        if target is None:
            return
        if self._name == "stdout":
            if not _NOW.ended:
                with _guard_stdout():
                    target.flush()
        else:
            with contextlib.suppress(OSError, ValueError):
                target.flush()

    def isatty(self) -> bool:
        target = self._target()
        try:
            return bool(target is not None and target.isatty())
        except (OSError, ValueError):
            return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(), name)


stdout: Any = _Stream("stdout")
stderr: Any = _Stream("stderr")
