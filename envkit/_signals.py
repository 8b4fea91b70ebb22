"""Interruptions: SIGTERM and SIGHUP end envkit the way Ctrl-C does, and a few steps (putting an
environment back) cannot be interrupted at all.

Slurm, systemd and ``timeout`` stop a program with SIGTERM, not SIGINT; a closed terminal or a
dropped ssh session sends SIGHUP. Python's default for both kills the process on the spot, with no
``finally`` and no cleanup; raising KeyboardInterrupt instead makes every one of them take the same,
tested path (rollback, the children stopped): exit 130, or 129 for SIGHUP (128 + its number, as a
shell reports a program it ended).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import FrameType

__all__ = [
    "INTERRUPTS",
    "Hangup",
    "Terminated",
    "deferred_signals",
    "ignore_interrupts",
    "sigterm_interrupts",
]

# SIGHUP is POSIX's; getattr keeps the module importable where it is not (Windows).
INTERRUPTS: tuple[signal.Signals, ...] = tuple(
    s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None
)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be (so every handler of one sees both)."""

    def __init__(self) -> None:
        super().__init__("SIGTERM")


class Hangup(KeyboardInterrupt):
    """SIGHUP (the terminal or the ssh session went away): undone as for Ctrl-C, exit 129."""

    exit_code = 129  # envkit.errors.EXIT_HANGUP (this module imports nothing of envkit's)

    def __init__(self) -> None:
        super().__init__("SIGHUP")


def _raise_interrupt(signum: int, _frame: Optional[FrameType]) -> None:
    # The first interrupt is the one that counts: from here envkit is on its way out (what it must
    # undo runs under deferred_signals). Were the next ones raised too, Ctrl-C held down could land
    # one inside each ``except KeyboardInterrupt`` before it settled, and the last one to escape
    # ends Python with SIGINT itself (exit -2 instead of 130, the message cut short).
    ignore_interrupts()
    if signum == getattr(signal, "SIGHUP", None):
        raise Hangup
    if signum == signal.SIGTERM:
        raise Terminated
    raise KeyboardInterrupt


_OWN_PROCESS: list[bool] = []  # set by sigterm_interrupts(): envkit owns this process's signals


def sigterm_interrupts() -> None:
    """From now on SIGTERM raises Terminated and SIGHUP Hangup (KeyboardInterrupts) in the main
    thread, SIGINT KeyboardInterrupt as usual, and the first of them makes envkit deaf to the
    rest. Called by the console entry point only: a program that imports envkit keeps its own
    handlers. A signal that a parent told its children to ignore (``nohup``, a shell's ``&`` for
    SIGINT) stays ignored."""
    if threading.current_thread() is threading.main_thread():
        _OWN_PROCESS.append(True)
        for sig in INTERRUPTS:
            if sig == signal.SIGTERM or signal.getsignal(sig) is not signal.SIG_IGN:
                signal.signal(sig, _raise_interrupt)


def ignore_interrupts() -> None:
    """SIGINT, SIGTERM and SIGHUP do nothing from now on (envkit is already on its way out); only in
    the envkit command's own process (see sigterm_interrupts)."""
    if _OWN_PROCESS and threading.current_thread() is threading.main_thread():
        for sig in INTERRUPTS:
            signal.signal(sig, signal.SIG_IGN)


@contextlib.contextmanager
def deferred_signals(*, block: bool = True) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP wait until the block is done, then arrive (once each, as usual).

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
