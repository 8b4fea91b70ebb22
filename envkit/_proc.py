"""The one way envkit runs a program: a mandatory timeout, no shell, bounded output, and the whole
process group stopped at the end.

Every child starts in a new session (its own process group). When it overruns, the group gets
SIGTERM, a short grace period, then SIGKILL; when it finishes, whatever it left behind in the group
is killed too. NCCL and torchrun workers outlive their parent otherwise, and a wedged
``nvidia-smi`` must never hang ``envkit doctor``. A missing program, an OSError or a timeout is a
result, not an exception.

No child outlives envkit: every live child is in a registry, and ``terminate_all()`` (called by the
CLI on its way out, and at interpreter exit as a backstop) stops each one's group. Where envkit
cannot clean up (SIGKILL, the OOM killer, a crash of the interpreter), its lifeline does: a tiny
``sh`` started with the first child, in a session of its own, that is told each child's group as it
starts and ends, and kills the groups still listed when its pipe from envkit reaches end-of-file —
which the kernel makes happen when envkit's process ends, whatever ended it. (Linux's
PR_SET_PDEATHSIG would reach only the direct child, not the installer's own children in its group;
macOS has the same pipe semantics; on Windows a Job object with KILL_ON_JOB_CLOSE is the
equivalent, and envkit's create needs POSIX there anyway.) A run whose
caller gave up on it (a detector past the deadline, see ``detect.run_bounded``) is a ``Scope``
that is cancelled: its children are stopped and it may start no new ones. This matters because
detectors run in daemon threads, and a daemon thread's ``finally`` never runs at interpreter exit.

What a child prints is kept up to ``MAX_KEPT_BYTES`` per stream (the last part: the end of an
installer's log says why it failed); the rest is dropped and the result says so. A child printing
forever (``yes``, a looping ``nvidia-smi``) must not grow envkit's memory without bound.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import os
import selectors
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Callable, Final, Optional, Protocol, Union

from envkit._signals import deferred_signals, ignore_interrupts

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

__all__ = [
    "MAX_KEPT_BYTES",
    "ProcResult",
    "Runner",
    "Scope",
    "cancel_scopes",
    "enter_scope",
    "lifeline_pid",
    "live_pids",
    "process_age",
    "run",
    "scope",
    "terminate_all",
]


def process_age() -> float:
    """Seconds since this process started (0.0 where that cannot be read): a command's --timeout is
    the whole run's, and the interpreter's start and envkit's imports are part of it (a node's
    health check is killed that many seconds after it was started, not after envkit got going).

    Linux: the start time in /proc/self/stat (field 22, clock ticks after boot) against the seconds
    since boot in /proc/uptime (proc(5)); both count from boot, to the tick (10 ms)."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
        with open("/proc/uptime", "rb") as fh:
            uptime = float(fh.read().split()[0])
        # The command name (field 2) is in parentheses and may hold spaces or ")": split after the last.
        started = int(stat[stat.rindex(")") + 2 :].split()[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(uptime - started, 0.0)


# How long a child gets between SIGTERM and SIGKILL (nox uses a similar staged shutdown).
TERM_GRACE_S: Final = 0.5
# What is kept of each output stream: its last 4 MiB.
MAX_KEPT_BYTES: Final = 4 * 1024 * 1024
# A streamed "line" longer than this (a child printing without newlines) is passed on in pieces.
MAX_LINE_BYTES: Final = 64 * 1024
_CHUNK: Final = 64 * 1024


@dataclass(frozen=True)
class ProcResult:
    """What a finished (or abandoned) child left: its code, its output, and why it stopped."""

    argv: tuple[str, ...]
    returncode: Optional[int]  # None when it never ran or was killed for overrunning
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    error: Optional[str] = None  # "not found", "permission denied", an OSError text
    # Bytes dropped from the start of each stream to keep it within MAX_KEPT_BYTES (0: all kept).
    stdout_cut: int = 0
    stderr_cut: int = 0

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        """One line saying how the command ended, e.g. "`nvcc --version` timed out after 5.0 s"."""
        cmd = "`" + short(" ".join(self.argv), 200) + "`"
        if self.error is not None:
            text = f"{cmd} could not run: {self.error}"
        elif self.timed_out:
            text = f"{cmd} timed out after {self.duration_s:.1f} s"
        elif self.returncode is not None and self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            text = f"{cmd} was killed by {name}"
        else:
            text = f"{cmd} exited with {self.returncode}"
        if self.stdout_cut or self.stderr_cut:
            text += f" (its output was cut to the last {MAX_KEPT_BYTES // (1024 * 1024)} MiB)"
        return text

    def tail(self, lines: int = 12) -> str:
        """The last lines of stderr (or stdout when stderr is empty), each at most 300 characters,
        for error messages."""
        text = self.stderr.strip() or self.stdout.strip()
        return "\n".join(short(line, 300) for line in text.splitlines()[-lines:])


def short(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when it was longer (notes, messages)."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


class Runner(Protocol):
    """The process seam: detectors take one of these, tests may pass another."""

    def __call__(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        on_line: Optional[Callable[[str], None]] = None,
    ) -> ProcResult: ...


# ---- the registry of live children ------------------------------------------------------------

_LOCK = threading.Lock()
_LIVE: dict[int, subprocess.Popen[bytes]] = {}  # pid (= process group id) -> child
_CLOSED = False  # set at interpreter exit: nothing new may start


class Scope:
    """The children started on behalf of one piece of work (a detector); ``cancel()`` stops them
    and refuses new ones, for work whose caller stopped waiting."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.cancelled = False
        self._pids: set[int] = set()

    def cancel(self) -> None:
        cancel_scopes([self])


def cancel_scopes(scopes: Sequence[Scope]) -> None:
    """Cancel several scopes at once: one SIGTERM round and one grace period for all of them."""
    with _LOCK:
        for sc in scopes:
            sc.cancelled = True
        pids = [pid for sc in scopes for pid in sc._pids if pid in _LIVE]
    _stop_groups(pids)


_SCOPE: contextvars.ContextVar[Optional[Scope]] = contextvars.ContextVar("envkit_proc_scope", default=None)


@contextlib.contextmanager
def scope(name: str) -> Iterator[Scope]:
    """Children started inside this block (in this thread, or in a thread started with a copy of
    its context) belong to the returned Scope."""
    current = Scope(name)
    token = _SCOPE.set(current)
    try:
        yield current
    finally:
        _SCOPE.reset(token)


def enter_scope(current: Scope) -> None:
    """Make ``current`` the scope of this context (for a thread's ``contextvars`` context)."""
    _SCOPE.set(current)


def live_pids() -> list[int]:
    """The process (group) ids of the children envkit is running now."""
    with _LOCK:
        return sorted(_LIVE)


def terminate_all(grace: float = TERM_GRACE_S) -> int:
    """Stop every live child's process group: SIGTERM, ``grace`` seconds, then SIGKILL.

    Returns how many children were running. Safe to call from any thread, more than once.
    """
    with _LOCK:
        pids = list(_LIVE)
    _stop_groups(pids, grace)
    return len(pids)


# ---- the lifeline: the groups die with envkit even when envkit is killed outright ----------------

# "+PGID" registers a group, "-PGID" forgets it; end-of-file (envkit is gone) kills what is left.
# It ignores the signals that end envkit, so a Ctrl-C or a closed terminal cannot take it first.
_LIFELINE_SCRIPT: Final = """
trap '' INT TERM HUP QUIT TSTP PIPE
live=' '
while IFS= read -r line; do
  case $line in
    +*) live="$live${line#+} " ;;
    -*) g=${line#-}; case $live in *" $g "*) live=${live%% $g *}' '${live#* $g } ;; esac ;;
  esac
done
for g in $live; do kill -s KILL -- "-$g" 2>/dev/null; done
"""
_LIFELINE: list[int] = []  # the write end of the pipe to it (empty: not started, or not possible)
_LIFELINE_PID: list[int] = []


def _tell_lifeline(message: str) -> None:
    """Tell the lifeline about a group, if it runs (_spawn starts it before the first child); called
    with _LOCK held. Never starts one: a child that ends after _close_lifeline at exit would have
    started a new lifeline then."""
    if _LIFELINE:
        with contextlib.suppress(OSError):  # it died: the registry above still stops every group
            os.write(_LIFELINE[0], message.encode("ascii"))


def _start_lifeline() -> None:
    """Start the lifeline, once; called with _LOCK held, before the first child (envkit killed while
    the lifeline itself starts, a fork and an exec of sh, would otherwise leave that child alone)."""
    if os.name != "posix":
        return
    if not _LIFELINE:
        try:
            watcher = subprocess.Popen(
                ["/bin/sh", "-c", _LIFELINE_SCRIPT],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # out of reach of signals sent to envkit's group
            )
        except OSError:
            return  # no /bin/sh: terminate_all() is still there for every ending but SIGKILL
        assert watcher.stdin is not None
        # The write end stays with envkit alone: children get none of envkit's descriptors
        # (close_fds), and it is not inherited across exec (O_CLOEXEC, Python's default).
        _LIFELINE.append(os.dup(watcher.stdin.fileno()))
        _LIFELINE_PID.append(watcher.pid)
        watcher.stdin.close()
        watcher.returncode = 0  # never waited for: it ends after envkit (subprocess must not warn)


def lifeline_pid() -> Optional[int]:
    """The process id of the lifeline (None before the first child): for tests."""
    return _LIFELINE_PID[0] if _LIFELINE_PID else None


def _close_lifeline(wait: float = 2.0) -> None:
    """Close envkit's end of the lifeline's pipe and wait for it to end (it reads end-of-file, kills
    what is still listed — nothing, after terminate_all — and exits): envkit reaps its own lifeline.
    Left to the kernel, it ran on after envkit had exited and then stayed a zombie under PID 1."""
    with _LOCK:
        if not _LIFELINE:
            return
        fd = _LIFELINE.pop()
    with contextlib.suppress(OSError):
        os.close(fd)
    end = time.monotonic() + wait  # a loaded machine may take a while to run it
    while _LIFELINE_PID:
        try:
            done, _status = os.waitpid(_LIFELINE_PID[0], os.WNOHANG)
        except ChildProcessError:  # reaped already (or not ours): nothing to wait for
            done = _LIFELINE_PID[0]
        if done or time.monotonic() >= end:
            _LIFELINE_PID.clear()
            return
        time.sleep(0.005)


def _at_exit() -> None:
    global _CLOSED
    # The command is over and its exit status decided: a SIGHUP or SIGTERM now (while the groups
    # are stopped or the lifeline is awaited, up to 2 s) was raised here as Hangup or Terminated,
    # and Python printed "Exception ignored in atexit callback" with a traceback (test_fuzz's
    # signals case, once in a land).
    ignore_interrupts()
    with _LOCK:
        _CLOSED = True
    terminate_all()
    _close_lifeline()


atexit.register(_at_exit)


def _stop_groups(pids: Sequence[int], grace: float = TERM_GRACE_S) -> None:
    if not pids:
        return
    for pid in pids:
        _kill_group(pid, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end:
        if not _alive_groups(pids):
            return
        time.sleep(0.02)
    for pid in pids:
        _kill_group(pid, signal.SIGKILL)
    # SIGKILL is delivered asynchronously: wait (briefly) until the groups are really gone.
    end = time.monotonic() + grace
    while time.monotonic() < end and _alive_groups(pids):
        time.sleep(0.01)


def _alive_groups(pgids: Sequence[int]) -> set[int]:
    """The groups of ``pgids`` in which a process still runs.

    A group whose processes have all ended may still answer killpg(0) for a while: a grandchild
    whose parent died first is a zombie until init reaps it, and this machine kind's init took ~1 s,
    so every cancelled detector waited out the grace period twice. A zombie holds no pipe, file or
    device: one that another process must reap counts as gone. Envkit's own zombies do not: a
    group's leader waits for its Popen to reap it (which keeps its exit status), and an orphan
    handed to envkit (a subreaper, or envkit as a container's PID 1, which nobody else reaps for)
    is reaped here. Linux: state, parent and group are fields 3-5 of /proc/PID/stat (proc(5));
    without /proc, or with no member listed there (another PID namespace), killpg's answer stands."""
    alive = set()
    for pgid in pgids:
        with _LOCK:
            proc = _LIVE.get(pgid)
        if proc is not None:
            # Reap the leader if it ended: an unreaped zombie still answers killpg(0).
            with contextlib.suppress(Exception):
                proc.poll()
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            continue
        alive.add(pgid)
    if alive:
        running = _running_members(alive)
        if running is not None:
            alive = {g for g in alive if running.get(g, True)}
    return alive


def _running_members(pgids: set[int]) -> Optional[dict[int, bool]]:
    """Each group of ``pgids`` that /proc lists, and whether a process of it still counts as
    running (see _alive_groups); None without /proc."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    me = os.getpid()
    groups: dict[int, bool] = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
            # The command name (field 2) is in parentheses and may hold spaces or ")".
            state, parent, group = stat[stat.rindex(b")") + 2 :].split()[:3]
            ppid, pgrp = int(parent), int(group)
        except (OSError, ValueError):
            continue  # it ended while we looked
        if pgrp not in pgids:
            continue
        pid = int(name)
        running = state not in (b"Z", b"X")
        if not running and ppid == me:
            if pid == pgrp:
                running = True  # the leader: its Popen reaps it
            else:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
        groups[pgrp] = groups.get(pgrp, False) or running
    return groups


# ---- running one child --------------------------------------------------------------------------


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    on_line: Optional[Callable[[str], None]] = None,
) -> ProcResult:
    """Run ``argv`` to completion or until ``timeout`` seconds pass, whichever comes first.

    Args:
        argv: the program and its arguments (never a shell string).
        timeout: seconds before the child's process group is terminated, then killed.
        env: the child's whole environment; ``None`` inherits envkit's.
        cwd: the child's working directory.
        on_line: when given, stderr is merged into stdout and each line is passed to it as it
            arrives (an installer's live progress); ``stdout`` holds the output (its last
            MAX_KEPT_BYTES).

    Returns:
        A ProcResult; it never raises for a missing program, an OSError or a timeout.
    """
    args = tuple(argv)
    start = time.monotonic()
    out = _Tail()
    err = _Tail()
    streams: list[tuple[IO[bytes], Callable[[bytes], None]]] = []
    proc: Union[subprocess.Popen[bytes], ProcResult, None] = None
    try:
        # A Ctrl-C or SIGTERM inside Popen (after the fork, before it returns) would leave a child
        # nobody stops, still writing (a venv into the place a rollback just restored): the signals
        # wait until the child is registered, then arrive here, inside the try that stops it.
        with deferred_signals(block=False):  # a blocked mask would be the child's too
            proc = _spawn(
                args, env, cwd, subprocess.STDOUT if on_line is not None else subprocess.PIPE, start
            )
        if isinstance(proc, ProcResult):
            return proc
        splitter: Optional[_Lines] = None
        assert proc.stdout is not None
        if on_line is not None:
            lines = splitter = _Lines(out, on_line)
            streams.append((proc.stdout, lines.add))
        else:
            assert proc.stderr is not None
            streams += [(proc.stdout, out.add), (proc.stderr, err.add)]
        timed_out = _pump(proc, streams, start + max(timeout, 0.0))
        if splitter is not None:
            splitter.flush()
    except BaseException:  # Ctrl-C or SIGTERM while waiting: the child must not outlive us
        if isinstance(proc, subprocess.Popen):
            _stop_groups([proc.pid])
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=TERM_GRACE_S)
        raise
    finally:
        if isinstance(proc, subprocess.Popen):
            # Whatever the child left running in its group (workers, daemons) goes with it.
            _kill_group(proc.pid, signal.SIGKILL)
            with _LOCK:
                _LIVE.pop(proc.pid, None)
                _tell_lifeline(f"-{proc.pid}\n")
        for stream, _ in streams:
            with contextlib.suppress(OSError):
                stream.close()
    return ProcResult(
        argv=args,
        returncode=None if timed_out else proc.returncode,
        stdout=out.text(),
        stderr=err.text(),
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
        stdout_cut=out.dropped,
        stderr_cut=err.dropped,
    )


def _spawn(
    args: tuple[str, ...], env: Optional[Mapping[str, str]], cwd: Optional[str], stderr: int, start: float
) -> Union[subprocess.Popen[bytes], ProcResult]:
    """Start the child in its own process group (so all of it can be stopped) and register it; a
    ProcResult saying why when it cannot or may not start."""
    current = _SCOPE.get()
    # Spawning under the lock: terminate_all() never misses a child that is just starting.
    with _LOCK:
        if _CLOSED or (current is not None and current.cancelled):
            why = "envkit is exiting" if _CLOSED else f"{current.name} was abandoned" if current else ""
            return ProcResult(args, None, "", "", time.monotonic() - start, error=f"not started: {why}")
        _start_lifeline()
        try:
            proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=None if env is None else dict(env),
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as exc:
            error = {FileNotFoundError: "not found", PermissionError: "permission denied"}.get(
                type(exc), str(exc)
            )
            return ProcResult(args, None, "", "", time.monotonic() - start, error=error)
        _LIVE[proc.pid] = proc
        # Between the fork and this line a SIGKILL of envkit would leave this one child to itself:
        # the window is the few instructions since Popen returned (the lifeline already runs).
        _tell_lifeline(f"+{proc.pid}\n")
        if current is not None:
            current._pids.add(proc.pid)
    return proc


def _pump(
    proc: subprocess.Popen[bytes], streams: list[tuple[IO[bytes], Callable[[bytes], None]]], end: float
) -> bool:
    """Read the child's pipes until they close and it exits, or until ``end``; then SIGTERM the
    group, give it TERM_GRACE_S, SIGKILL it, and give up on pipes a process outside the group still
    holds. Returns whether it timed out."""
    selector = selectors.DefaultSelector()
    for stream, sink in streams:
        selector.register(stream, selectors.EVENT_READ, sink)
    timed_out = False
    stage = 0  # 0 running, 1 SIGTERM sent, 2 SIGKILL sent
    try:
        while selector.get_map() or proc.poll() is None:
            remaining = end - time.monotonic()
            if remaining <= 0:
                if stage == 2:
                    break  # a grandchild that left the group holds the pipes; give up on them
                timed_out = True
                stage += 1
                _kill_group(proc.pid, signal.SIGTERM if stage == 1 else signal.SIGKILL)
                end = time.monotonic() + TERM_GRACE_S
                continue
            if not selector.get_map():
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=remaining)
                continue
            for key, _events in selector.select(remaining):
                data = os.read(key.fd, _CHUNK)
                if data:
                    key.data(data)
                else:
                    selector.unregister(key.fileobj)
    finally:
        selector.close()
    if proc.poll() is None:
        _kill_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=TERM_GRACE_S)
    return timed_out


class _Tail:
    """The last MAX_KEPT_BYTES of a stream, and how many bytes before them were dropped."""

    def __init__(self, limit: int = MAX_KEPT_BYTES) -> None:
        self.limit = limit
        self.dropped = 0
        self._buf = bytearray()

    def add(self, data: bytes) -> None:
        self._buf += data
        # Trim only past twice the limit, so a fast child costs a copy per ``limit`` bytes, not per read.
        if len(self._buf) > 2 * self.limit:
            over = len(self._buf) - self.limit
            del self._buf[:over]
            self.dropped += over

    def text(self) -> str:
        over = len(self._buf) - self.limit
        if over > 0:
            del self._buf[:over]
            self.dropped += over
        body = self._buf.decode("utf-8", errors="replace")
        if not self.dropped:
            return body
        kept = len(self._buf)
        return (
            f"[envkit: output cut: the first {self.dropped} bytes were dropped, the last {kept} kept]\n{body}"
        )


class _Lines:
    """Splits a byte stream into lines for ``on_line`` (a line over MAX_LINE_BYTES goes in pieces)
    and keeps the joined output in a _Tail."""

    def __init__(self, tail: _Tail, on_line: Callable[[str], None]) -> None:
        self.tail = tail
        self.on_line = on_line
        self._partial = bytearray()

    def add(self, data: bytes) -> None:
        self._partial += data
        while True:
            cut = self._partial.find(b"\n")
            if cut < 0:
                if len(self._partial) < MAX_LINE_BYTES:
                    return
                cut = MAX_LINE_BYTES - 1
            piece = bytes(self._partial[: cut + 1])
            del self._partial[: cut + 1]
            self._emit(piece)

    def flush(self) -> None:
        if self._partial:
            piece = bytes(self._partial)
            self._partial.clear()
            self._emit(piece)

    def _emit(self, piece: bytes) -> None:
        line = piece.decode("utf-8", errors="replace").rstrip("\r\n")
        self.tail.add(line.encode("utf-8", errors="replace") + b"\n")
        self.on_line(line)


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
