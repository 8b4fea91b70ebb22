"""envkit._proc.run with real child processes (nox's rule: test timeouts with real children)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from envkit._proc import (
    MAX_KEPT_BYTES,
    MAX_LINE_BYTES,
    ProcResult,
    Scope,
    live_pids,
    run,
    scope,
    terminate_all,
)

PY = sys.executable


def test_captures_output_and_code() -> None:
    result = run(
        [PY, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
        timeout=10,
    )
    assert result.returncode == 3
    assert result.stdout == "out\n"
    assert result.stderr == "err\n"
    assert not result.ok and not result.timed_out
    assert result.describe().endswith("exited with 3")


def test_missing_program_is_a_result_not_an_exception() -> None:
    result = run(["/nonexistent/envkit-test-program", "--version"], timeout=5)
    assert result.returncode is None
    assert result.error == "not found"
    assert "could not run: not found" in result.describe()


def test_permission_denied(tmp_path: Path) -> None:
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\necho hi\n")
    result = run([str(script)], timeout=5)
    assert result.error == "permission denied"


def test_timeout_kills_the_child_quickly() -> None:
    start = time.monotonic()
    result = run([PY, "-c", "import time; print('started', flush=True); time.sleep(30)"], timeout=0.5)
    elapsed = time.monotonic() - start
    assert result.timed_out
    assert result.returncode is None
    assert result.stdout == "started\n"  # what it printed before the timeout is kept
    assert elapsed < 5
    assert "timed out after" in result.describe()


def test_timeout_escalates_to_sigkill_when_sigterm_is_ignored() -> None:
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('x', flush=True); time.sleep(30)"
    start = time.monotonic()
    result = run([PY, "-c", code], timeout=0.5)
    assert result.timed_out
    assert time.monotonic() - start < 5


def test_grandchildren_die_with_the_child(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    code = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
        " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
    )
    result = run([PY, "-c", code], timeout=10)
    assert result.ok
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def test_hung_grandchild_holding_the_pipe_is_killed_on_timeout(tmp_path: Path) -> None:
    # The child exits at once but leaves a grandchild holding stdout: communicate() would wait.
    code = (
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print('parent done', flush=True)\n"
    )
    start = time.monotonic()
    result = run([PY, "-c", code], timeout=1)
    assert time.monotonic() - start < 6
    assert result.timed_out
    assert "parent done" in result.stdout


def test_signal_death_is_described() -> None:
    result = run([PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"], timeout=10)
    assert result.returncode == -11
    assert result.describe().endswith("was killed by SIGSEGV")


def test_env_replaces_the_environment() -> None:
    result = run(
        [PY, "-c", "import os; print(os.environ.get('ENVKIT_T', '-'))"],
        timeout=10,
        env={"ENVKIT_T": "yes"},
    )
    assert result.stdout.strip() == "yes"


def test_tail_prefers_stderr() -> None:
    result = run(
        [
            PY,
            "-c",
            "import sys; print('a'); print('\\n'.join(map(str, range(20))), file=sys.stderr)",
        ],
        timeout=10,
    )
    assert result.tail(3) == "17\n18\n19"


def test_streaming_passes_each_line_as_it_arrives() -> None:
    seen: list[tuple[float, str]] = []
    start = time.monotonic()
    code = "import sys, time\nprint('first', flush=True)\ntime.sleep(0.5)\nprint('second', file=sys.stderr, flush=True)\n"
    result = run(
        [PY, "-c", code], timeout=10, on_line=lambda line: seen.append((time.monotonic() - start, line))
    )
    assert result.ok
    assert [line for _t, line in seen] == ["first", "second"]
    assert seen[1][0] - seen[0][0] >= 0.4  # live: the first line came before the second was printed
    assert result.stdout == "first\nsecond\n"


def test_streaming_timeout_and_missing_program() -> None:
    lines: list[str] = []
    result = run(
        [PY, "-c", "import time; print('working', flush=True); time.sleep(30)"],
        timeout=0.5,
        on_line=lines.append,
    )
    assert result.timed_out
    assert lines == ["working"]
    assert run(["/nonexistent/installer"], timeout=1, on_line=lines.append).error == "not found"


def _yes_stand_in(folder: Path) -> Path:
    """A stand-in ``nvidia-smi`` that prints forever (the real ``yes`` behind it)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    script.write_text('#!/bin/sh\nexec yes "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5b9a)"\n')
    script.chmod(0o755)
    return script


def _max_rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def test_output_is_capped_and_says_it_was_cut(tmp_path: Path) -> None:
    smi = _yes_stand_in(tmp_path)
    before = _max_rss_mib()
    result = run([str(smi)], timeout=0.5)  # `yes` prints far more than 4 MiB in that
    grown = _max_rss_mib() - before
    assert result.timed_out
    assert result.stdout_cut > 0  # it printed more than was kept
    assert result.stdout.startswith("[envkit: output cut: the first ")
    body = result.stdout.split("\n", 1)[1]
    assert len(body.encode()) == MAX_KEPT_BYTES  # exactly the last MAX_KEPT_BYTES
    assert body.rstrip("\n").endswith("GPU-5b9a)") or body.endswith("(UUID")  # the tail, not the head
    assert "output was cut to the last 4 MiB" in result.describe()
    assert grown < 96, f"envkit grew by {grown:.0f} MiB reading {result.stdout_cut} bytes"


def test_streaming_output_is_capped_too(tmp_path: Path) -> None:
    smi = _yes_stand_in(tmp_path)
    count = 0

    def on_line(line: str) -> None:
        nonlocal count
        count += 1

    result = run([str(smi)], timeout=1.0, on_line=on_line)
    assert result.timed_out
    assert count > 0
    assert result.stdout_cut > 0
    assert result.stdout.startswith("[envkit: output cut: the first ")
    assert len(result.stdout.split("\n", 1)[1].encode()) == MAX_KEPT_BYTES


def test_streaming_splits_an_endless_line() -> None:
    pieces: list[str] = []
    code = "import sys; sys.stdout.write('x' * 200000); sys.stdout.flush()"
    result = run([PY, "-c", code], timeout=10, on_line=pieces.append)
    assert result.ok
    assert "".join(pieces) == "x" * 200000
    assert max(len(p) for p in pieces) <= MAX_LINE_BYTES


STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"


def _start_in_thread(argv: list[str], timeout: float, box: dict[str, ProcResult]) -> threading.Thread:
    def body() -> None:
        box["result"] = run(argv, timeout=timeout)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


def _wait_for_live(count: int) -> list[int]:
    deadline = time.monotonic() + 10
    while len(live_pids()) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    return live_pids()


def test_terminate_all_stops_a_child_that_ignores_sigterm() -> None:
    box: dict[str, ProcResult] = {}
    thread = _start_in_thread([PY, "-c", STUBBORN], 60, box)
    (pid,) = _wait_for_live(1)
    time.sleep(0.3)  # let it install its SIGTERM handler
    start = time.monotonic()
    assert terminate_all() == 1
    assert time.monotonic() - start < 5
    assert not _alive(pid)
    thread.join(5)
    assert not thread.is_alive()
    assert box["result"].returncode == -9  # SIGKILL, after SIGTERM was ignored
    assert live_pids() == []


def test_a_cancelled_scope_stops_its_children_and_starts_no_more() -> None:
    box: dict[str, ProcResult] = {}
    holder: dict[str, Scope] = {}

    def body() -> None:
        with scope("test-detector") as sc:
            holder["scope"] = sc
            box["first"] = run([PY, "-c", STUBBORN], timeout=60)
            box["second"] = run([PY, "-c", "print('never')"], timeout=60)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    (pid,) = _wait_for_live(1)
    time.sleep(0.3)
    holder["scope"].cancel()
    thread.join(5)
    assert not _alive(pid)
    assert box["second"].error == "not started: test-detector was abandoned"
    assert box["second"].returncode is None


# A subreaper (prctl PR_SET_CHILD_SUBREAPER) that never reaps: the orphan of the group it started
# (sh's background sleep, sh killed first) stays its zombie. It prints the group and the orphan.
SUBREAPER = """
import ctypes, os, signal, subprocess, sys, time
assert ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0
group = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE, start_new_session=True)
orphan = int(group.stdout.readline())
group.kill()
group.wait()
os.kill(orphan, signal.SIGKILL)
while open(f"/proc/{orphan}/stat").read().rsplit(") ", 1)[1][0] != "Z":
    time.sleep(0.01)
os.killpg(group.pid, 0)  # the zombie still answers for its group
print(group.pid, orphan, flush=True)
"""
LINUX_ONLY = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="a subreaper and /proc are Linux's"
)


@LINUX_ONLY
def test_a_group_left_with_another_process_s_zombie_counts_as_gone() -> None:
    # A grandchild whose parent died first is a zombie until init reaps it: this machine kind's init
    # took ~1 s, and killpg(0) still answered for it, so each cancelled detector waited out
    # SIGTERM's grace and SIGKILL's (1 s) for nothing. Here a subreaper plays that slow init.
    from envkit._proc import _alive_groups

    init = subprocess.Popen(
        [PY, "-c", SUBREAPER + "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert init.stdout is not None
        pgid, _orphan = map(int, init.stdout.readline().split())
        os.killpg(pgid, 0)  # still listed
        assert _alive_groups([pgid]) == set()
    finally:
        init.communicate(timeout=30)


@LINUX_ONLY
def test_envkit_reaps_an_orphan_handed_to_it_and_waits_for_its_own_leader() -> None:
    # envkit as a container's PID 1 (or a subreaper) inherits the orphans: nobody else reaps them.
    # Its own group leader is left to its Popen, which keeps the exit status: a cancel returned
    # while the leader was still an unreaped zombie (test_watch saw the stand-in "alive").
    code = SUBREAPER + (
        "from envkit._proc import _alive_groups\n"
        "print(_alive_groups([group.pid]) == set())\n"
        "print(not os.path.exists(f'/proc/{orphan}'))  # reaped\n"
        "leader = subprocess.Popen(['true'], start_new_session=True)\n"
        "while open(f'/proc/{leader.pid}/stat').read().rsplit(') ', 1)[1][0] != 'Z':\n"
        "    time.sleep(0.01)\n"
        "print(_alive_groups([leader.pid]) == {leader.pid})\n"
        "leader.wait()\n"
        "print(_alive_groups([leader.pid]) == set())\n"
    )
    result = run([PY, "-c", code], timeout=60)
    assert result.ok, result.stderr
    assert result.stdout.split()[2:] == ["True"] * 4


def test_a_signal_while_envkit_cleans_up_at_exit_is_ignored() -> None:
    # The lifeline is awaited at exit (up to 2 s); a SIGHUP then was raised as Hangup inside the
    # atexit callback: a traceback on stderr after the command had finished.
    code = (
        "import os, signal, time\n"
        "from envkit import _proc, _signals\n"
        "_signals.sigterm_interrupts()\n"
        "assert _proc.run(['true'], timeout=10).ok  # the lifeline runs\n"
        "close = _proc._close_lifeline\n"
        "def slow_close():\n"
        "    os.kill(os.getpid(), signal.SIGHUP)\n"
        "    time.sleep(0.1)\n"
        "    close()\n"
        "_proc._close_lifeline = slow_close\n"
    )
    result = run([PY, "-c", code], timeout=60)
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_a_child_starts_with_sigint_and_sigterm_unblocked() -> None:
    # The start is guarded against Ctrl-C/SIGTERM (deferred until the child is registered), but a
    # blocked signal mask would be inherited through fork and exec: such a child could not be asked
    # to stop. /proc/self/status's SigBlk is the mask as a hexadecimal bit set (bit N-1: signal N).
    script = "print(next(l for l in open('/proc/self/status') if l.startswith('SigBlk:')))"
    result = run([sys.executable, "-c", script], timeout=10)
    assert result.ok, result.describe()
    mask = int(result.stdout.split()[1], 16)
    assert not mask & (1 << (signal.SIGTERM - 1)) and not mask & (1 << (signal.SIGINT - 1))


def test_a_commands_budget_counts_from_the_process_start() -> None:
    # --timeout is "seconds the whole run may take": a second spent before the command ran (a slow
    # interpreter start, imports over NFS) is taken off it.
    code = (
        "import time; time.sleep(0.5)\n"
        "from envkit._proc import process_age\n"
        "from envkit.cli import _count_from_process_start, _left\n"
        "_count_from_process_start()  # what main() does first\n"
        "print(process_age(), _left(5.0), _left(0.5))\n"
    )
    result = run([PY, "-c", code], timeout=60)
    assert result.ok, result.stderr
    age, left, floor = map(float, result.stdout.split())
    assert 0.5 <= age < 5.0  # generous: a loaded machine starts slowly
    assert left == pytest.approx(5.0 - age, abs=0.5)
    assert floor == 0.1  # a start that took the whole budget still answers


def test_a_command_run_inside_another_program_gets_its_whole_budget() -> None:
    # typer's CliRunner (these tests), or a program that embeds envkit's app: the host process's
    # age is no part of the command's --timeout (it got 0.1 s in a test run older than 30 s, and
    # every detector answered "no answer before the time limit").
    from envkit import cli
    from envkit._proc import process_age

    while process_age() < 1.0:  # this test process is older than the budget asked for below
        time.sleep(0.1)
    assert cli._PROCESS_START is None  # main() was not run here
    assert cli._left(0.5) == 0.5


def test_process_age_of_this_process_is_counted_from_its_start() -> None:
    from envkit._proc import process_age

    first = process_age()
    time.sleep(0.05)
    assert first > 0 and process_age() >= first


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (ended, its parent gone or not waiting yet) is no process that runs.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


def test_children_die_with_envkit_even_on_sigkill(tmp_path: Path) -> None:
    # Children run in sessions of their own (so a timeout can stop a whole group); after SIGKILL of
    # envkit (the OOM killer, `kill -9`), nothing could stop them, and a venv, ensurepip, pip or a hung
    # GPU probe went on with parent 1. The lifeline kills the groups when envkit's end closes its pipe.
    pids, told = tmp_path / "pids", tmp_path / "told"
    # The child can run before envkit has told the lifeline its group (the few instructions after
    # Popen returns): the kill waits until it has (_spawn tells it before letting go of _LOCK), not
    # a guessed 0.2 s, which a loaded machine let pass first (the test failed once in a full suite).
    code = (
        "import threading, time\n"
        "from envkit import _proc\n"
        "def told():\n"
        "    while not _proc._LIVE: time.sleep(0.001)\n"
        "    with _proc._LOCK: pass\n"
        f"    open({str(told)!r}, 'w').close()\n"
        "threading.Thread(target=told, daemon=True).start()\n"
        f"_proc.run(['sh', '-c', 'sleep 60 & echo $$ $! > {pids}.tmp; mv {pids}.tmp {pids}; wait'], timeout=60)\n"
    )
    envkit_like = subprocess_popen([PY, "-c", code])
    deadline = time.monotonic() + 30
    while not (pids.exists() and told.exists()):
        assert envkit_like.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    child, grandchild = (int(p) for p in pids.read_text().split())
    envkit_like.kill()  # SIGKILL: no finally, no atexit
    envkit_like.wait(timeout=10)
    deadline = time.monotonic() + 10
    while (_alive(child) or _alive(grandchild)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(child) and not _alive(grandchild)


def subprocess_popen(argv: list[str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_the_lifeline_runs_before_the_first_child_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    # It was started after the first child's Popen returned: SIGKILL while the lifeline's own sh
    # was forked and exec'd left that child to itself (8 of 20 survived a kill as soon as the child
    # ran; this is what test_children_die_with_envkit_even_on_sigkill's 0.2 s wait had covered).
    import envkit._proc as proc_module

    fresh: list[int] = []
    monkeypatch.setattr(proc_module, "_LIFELINE", fresh)  # this process's lifeline, not yet started
    monkeypatch.setattr(proc_module, "_LIFELINE_PID", [])
    when_started: list[bool] = []

    class Popen(subprocess.Popen[bytes]):
        def __init__(self, args: list[str], *rest: Any, **kwargs: Any) -> None:
            if args[:2] != ["/bin/sh", "-c"]:  # a child, not the lifeline
                when_started.append(bool(fresh))
            super().__init__(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", Popen)
    try:
        assert run(["true"], timeout=10).ok
    finally:
        for fd in fresh:
            os.close(fd)  # this lifeline ends: its one group is gone already
    assert when_started == [True]


def test_the_lifeline_is_one_sh_whose_pipe_is_envkits_alone() -> None:
    from envkit._proc import _LIFELINE, lifeline_pid

    assert run(["true"], timeout=10).ok
    watcher = lifeline_pid()
    assert watcher is not None and _alive(watcher)  # started with the first child, still there
    cmdline = Path(f"/proc/{watcher}/cmdline").read_bytes().split(b"\0")
    assert cmdline[0] == b"/bin/sh" and b"kill -s KILL" in cmdline[2]
    assert _LIFELINE  # the write end is envkit's alone
    assert os.get_inheritable(_LIFELINE[0]) is False


def test_the_lifeline_ends_before_envkit_does() -> None:
    # It read end-of-file only once envkit's process had gone, so it ran on after envkit exited and
    # then stayed a zombie under PID 1 (4 of 5 runs: state Z, the fifth still R); a test that looks
    # for envkit's processes right after it exits found it (test_nvml_isolation, once in a while).
    code = "from envkit._proc import lifeline_pid, run\nrun(['true'], timeout=10)\nprint(lifeline_pid())\n"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    done = subprocess.run([PY, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    pid = int(done.stdout)
    assert not Path(f"/proc/{pid}").exists(), Path(f"/proc/{pid}/stat").read_text()


def test_a_child_ending_after_the_lifeline_closed_starts_no_new_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """At exit envkit closes its lifeline; a detector's child that ends afterwards tells the
    lifeline it is gone, and that message used to start a new lifeline (a child at exit)."""
    from envkit import _proc

    monkeypatch.setattr(_proc, "_LIFELINE", [])
    monkeypatch.setattr(_proc, "_LIFELINE_PID", [])
    with _proc._LOCK:
        _proc._tell_lifeline("-12345\n")
    started = list(_proc._LIFELINE_PID)
    for fd in _proc._LIFELINE:  # before the fix: close the new lifeline's pipe, and it ends
        os.close(fd)
    assert started == []
