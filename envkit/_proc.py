"""The one way envkit runs a program: a mandatory timeout, no shell, and the whole process group
killed at the end.

Every child starts in a new session (its own process group). When it overruns, the group gets
SIGTERM, a short grace period, then SIGKILL; when it finishes, whatever it left behind in the group
is killed too. NCCL and torchrun workers outlive their parent otherwise, and a wedged
``nvidia-smi`` must never hang ``envkit doctor``. A missing program, an OSError or a timeout is a
result, not an exception.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional, Protocol, Union

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["ProcResult", "Runner", "run"]

# How long a child gets between SIGTERM and SIGKILL (nox uses a similar staged shutdown).
TERM_GRACE_S = 0.5


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

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        """One line saying how the command ended, e.g. "`nvcc --version` timed out after 5.0 s"."""
        cmd = "`" + " ".join(self.argv) + "`"
        if self.error is not None:
            return f"{cmd} could not run: {self.error}"
        if self.timed_out:
            return f"{cmd} timed out after {self.duration_s:.1f} s"
        if self.returncode is not None and self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            return f"{cmd} was killed by {name}"
        return f"{cmd} exited with {self.returncode}"

    def tail(self, lines: int = 12) -> str:
        """The last lines of stderr (or stdout when stderr is empty), for error messages."""
        text = self.stderr.strip() or self.stdout.strip()
        return "\n".join(text.splitlines()[-lines:])


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
            arrives (an installer's live progress); ``stdout`` still holds the whole output.

    Returns:
        A ProcResult; it never raises for a missing program, an OSError or a timeout.
    """
    args = tuple(argv)
    start = time.monotonic()
    if on_line is not None:
        return _run_streaming(args, timeout, env, cwd, on_line, start)
    proc = _spawn(args, env, cwd, subprocess.PIPE, start)
    if isinstance(proc, ProcResult):
        return proc
    timed_out = False
    try:
        out, err = proc.communicate(timeout=max(timeout, 0.0))
    except subprocess.TimeoutExpired:
        timed_out = True
        out, err = _shutdown(proc)
    except BaseException:  # Ctrl-C while waiting: the child must not outlive us
        _kill_group(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    finally:
        # Whatever the child left running in its group (workers, daemons) goes with it.
        _kill_group(proc.pid, signal.SIGKILL)
    return ProcResult(
        argv=args,
        returncode=None if timed_out else proc.returncode,
        stdout=_decode(out),
        stderr=_decode(err),
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
    )


def _spawn(
    args: tuple[str, ...], env: Optional[Mapping[str, str]], cwd: Optional[str], stderr: int, start: float
) -> Union[subprocess.Popen[bytes], ProcResult]:
    """Start the child in its own process group (so all of it can be stopped); a ProcResult saying
    why when it cannot start."""
    try:
        return subprocess.Popen(
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


def _run_streaming(
    args: tuple[str, ...],
    timeout: float,
    env: Optional[Mapping[str, str]],
    cwd: Optional[str],
    on_line: Callable[[str], None],
    start: float,
) -> ProcResult:
    proc = _spawn(args, env, cwd, subprocess.STDOUT, start)
    if isinstance(proc, ProcResult):
        return proc
    lines: list[str] = []
    assert proc.stdout is not None
    stream = proc.stdout

    def read() -> None:
        for raw in iter(stream.readline, b""):
            line = _decode(raw).rstrip("\r\n")
            lines.append(line)
            on_line(line)

    reader = threading.Thread(target=read, name="envkit-stream", daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.wait(timeout=max(timeout, 0.0))
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid, signal.SIGKILL)
            proc.wait()
    except BaseException:  # Ctrl-C: the installer must not outlive us
        _kill_group(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    finally:
        _kill_group(proc.pid, signal.SIGKILL)
        reader.join(timeout=2.0)
        stream.close()
    return ProcResult(
        argv=args,
        returncode=None if timed_out else proc.returncode,
        stdout="\n".join(lines) + ("\n" if lines else ""),
        stderr="",
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
    )


def _shutdown(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    _kill_group(proc.pid, signal.SIGTERM)
    try:
        return proc.communicate(timeout=TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid, signal.SIGKILL)
    try:
        return proc.communicate(timeout=TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        # A grandchild outside the group still holds the pipes; give up on the output.
        proc.kill()
        proc.wait()
        return b"", b""


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _decode(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")
