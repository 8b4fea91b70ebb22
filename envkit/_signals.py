"""Interruptions: SIGTERM ends envkit the way Ctrl-C does, and a few steps (putting an environment
back) cannot be interrupted at all.

Slurm, systemd and ``timeout`` stop a program with SIGTERM, not SIGINT. Python's default for SIGTERM
kills the process on the spot, with no ``finally`` and no cleanup; raising KeyboardInterrupt instead
makes both signals take the same, tested path (rollback, exit 130).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import FrameType

__all__ = ["INTERRUPTS", "Terminated", "deferred_signals", "ignore_interrupts", "sigterm_interrupts"]

INTERRUPTS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be (so every handler of one sees both)."""

    def __init__(self) -> None:
        super().__init__("SIGTERM")


def _raise_terminated(_signum: int, _frame: Optional[FrameType]) -> None:
    raise Terminated


_OWN_PROCESS: list[bool] = []  # set by sigterm_interrupts(): envkit owns this process's signals


def sigterm_interrupts() -> None:
    """From now on SIGTERM raises Terminated (a KeyboardInterrupt) in the main thread. Called by the
    console entry point only: a program that imports envkit keeps its own handlers."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_terminated)
        _OWN_PROCESS.append(True)


def ignore_interrupts() -> None:
    """SIGINT and SIGTERM do nothing from now on (envkit is already on its way out); only in the
    envkit command's own process (see sigterm_interrupts)."""
    if _OWN_PROCESS and threading.current_thread() is threading.main_thread():
        for sig in INTERRUPTS:
            signal.signal(sig, signal.SIG_IGN)


@contextlib.contextmanager
def deferred_signals(*, block: bool = True) -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block is done, then arrive (once each, as usual).

    Two layers, because either alone has a gap: the signals are blocked in this thread
    (``pthread_sigmask``, so a system call in the block is never cut short), and while the block
    runs their Python handlers only take note, because the kernel may hand a process-directed
    signal to another thread (rich's spinner, an output reader) whose mask is not ours. Outside
    the main thread (where handlers cannot be set) the block simply runs.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []

    def note(signum: int, _frame: Optional[FrameType]) -> None:
        arrived.append(signum)

    previous: dict[signal.Signals, Any] = {}
    # POSIX, as envkit's hosts are. ``block=False`` around starting a child: a blocked mask is
    # inherited through fork and exec, and a child started with SIGTERM blocked cannot be asked to
    # stop (nor print where it was stuck); the handler layer alone is what exec resets.
    masked = signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPTS if block else ())
    try:
        for sig in INTERRUPTS:
            previous[sig] = signal.signal(sig, note)
        yield
    finally:
        # Unblocking first lets what was pending reach ``note``; then the old handlers come back.
        signal.pthread_sigmask(signal.SIG_SETMASK, masked)
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        for signum in dict.fromkeys(arrived):  # a second Ctrl-C means nothing more than the first
            signal.raise_signal(signum)
