"""envkit._signals in a process of its own, as the envkit command sets it up."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

# The envkit command's process: Ctrl-C lands, and a second one lands while the first is handled
# (Ctrl-C held down). Without the first one settling it, the second escapes the handler and
# Python ends with SIGINT itself (-2), not envkit's 130 (the slow Ctrl-C-during-rollback test
# failed so in CI, once).
SECOND_CTRL_C = textwrap.dedent(
    """
    import os, signal, sys, time
    from envkit._signals import sigterm_interrupts
    sigterm_interrupts()
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    except KeyboardInterrupt:
        os.kill(os.getpid(), signal.{second})
        for _ in range(100000):
            pass
        print("settled", flush=True)
        sys.exit(130)
    """
)


def run(second: str) -> subprocess.CompletedProcess[str]:
    code = SECOND_CTRL_C.format(second=second)
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_as_from_a_terminal,  # a suite started with `&` would pass SIGINT on ignored
    )


def _as_from_a_terminal() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def test_the_first_interrupt_is_the_one_that_counts() -> None:
    for second in ("SIGINT", "SIGTERM", "SIGHUP"):
        done = run(second)
        assert (done.returncode, done.stdout) == (130, "settled\n"), (second, done.stderr)


def test_an_ignored_ctrl_c_stays_ignored() -> None:
    """A shell's `&` starts a job with SIGINT ignored (and nohup SIGHUP): envkit keeps it so."""
    code = (
        "import signal\n"
        "from envkit._signals import sigterm_interrupts\n"
        "sigterm_interrupts()\n"
        "print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN, signal.getsignal(signal.SIGHUP) is signal.SIG_IGN)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: [signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGHUP)],
    )
    assert done.stdout == "True True\n", done.stderr
