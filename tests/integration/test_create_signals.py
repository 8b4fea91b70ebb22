"""Real SIGINT / SIGTERM / SIGKILL sent to a real ``envkit create`` process at several points (in the
installer, in verify, around the --force swap, during the rollback itself), then: nothing half-made
is left, the previous environment is back under its name, and no child survives (read from /proc).
Two creates of one place at once: the second fails at once and leaves the first one's work alone.

The installer is the stand-in ``uv`` of tests/unit/create/test_create_safety.py (a real venv without pip,
then whatever the test needs). Each test starts envkit a few times (~1 s each): marked slow.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.unit.create.test_create_safety import (
    CLI_FLAGS,
    cli_env,
    envkit_cli,
    no_survivors,
    old_venv,
    side_files,
    sleeping_install,
    standin_uv,
    survivors,
    tree_digest,
)

pytestmark = pytest.mark.slow

NAME = "pt"


def start(tmp_path: Path, *args: str, tmpdir: Path | None = None) -> subprocess.Popen[str]:
    env = cli_env(tmp_path, tmp_path / "bin")
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    return subprocess.Popen(
        [sys.executable, "-m", "envkit", "create", NAME, *CLI_FLAGS, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            _out, err = proc.communicate()
            pytest.fail(f"envkit ended ({proc.returncode}) before {path.name}: {err[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{path.name} did not appear within {timeout} s")
        time.sleep(0.01)


def finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    _out, err = proc.communicate(timeout=120)
    return proc.returncode, " ".join(err.split())


def assert_as_before(tmp_path: Path, before: dict[str, str] | None) -> None:
    """The previous environment is back byte for byte (or there is none), nothing beside it, and
    no process that ran from this test's folder is still alive."""
    envs = tmp_path / "envs"
    prefix = envs / NAME
    if before is None:
        assert not prefix.exists()
    else:
        assert tree_digest(prefix) == before
    assert side_files(envs, NAME) == []
    assert no_survivors(str(tmp_path)) == []


@pytest.fixture
def state(tmp_path: Path) -> Path:
    folder = tmp_path / "state"
    folder.mkdir()
    return folder


@pytest.mark.parametrize("force", [False, True], ids=["new", "force"])
@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["SIGINT", "SIGTERM", "SIGHUP"]
)
def test_a_signal_in_the_installer(tmp_path: Path, state: Path, sig: signal.Signals, force: bool) -> None:
    # The installer leaves a partial download in its TMPDIR, as pip does mid-wheel.
    partial = 'head -c 100000 /dev/zero > "$TMPDIR/pip-unpack-partial.whl"\n'
    standin_uv(tmp_path / "bin", partial + sleeping_install(state, str(tmp_path)))
    before = tree_digest(old_venv(tmp_path / "envs" / NAME)) if force else None
    tmpdir = tmp_path / "user-tmp"
    tmpdir.mkdir()
    proc = start(tmp_path, "--no-verify", *(["--force"] if force else []), tmpdir=tmpdir)
    wait_for(state / "installing", proc)
    assert survivors(str(tmp_path)), "the stand-in installer should be running now"
    proc.send_signal(sig)
    code, err = finish(proc)
    assert code == (129 if sig == signal.SIGHUP else 130), err  # SIGHUP killed envkit on the spot
    assert "envkit: interrupted" in err and "Traceback" not in err
    if sig != signal.SIGINT:
        assert f"({sig.name})" in err
    assert_as_before(tmp_path, before)
    assert list(tmpdir.iterdir()) == []  # the partial download went with the rollback (7 of 8 stayed)


def verify_hangs(marker: Path) -> str:
    """Installer text that "installs" a torch whose import says so (``marker``) and then hangs."""
    return (
        'SITE=$("$4" -c "import sysconfig; print(sysconfig.get_paths()[\'purelib\'])")\n'
        'mkdir -p "$SITE/torch"\n'
        "cat > \"$SITE/torch/__init__.py\" <<'EOF'\n"
        f"import pathlib, time\npathlib.Path({str(marker)!r}).touch()\ntime.sleep(120)\n"
        "EOF"
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_verify(tmp_path: Path, state: Path, sig: signal.Signals) -> None:
    # The "installed" torch hangs on import: verify's probe is running when the signal comes.
    marker = state / "verifying"
    standin_uv(tmp_path / "bin", verify_hangs(marker))
    before = tree_digest(old_venv(tmp_path / "envs" / NAME))
    proc = start(tmp_path, "--force")
    wait_for(marker, proc)
    proc.send_signal(sig)
    code, err = finish(proc)
    assert code == 130, err
    assert_as_before(tmp_path, before)


def test_sigterm_right_after_the_force_swap(tmp_path: Path, state: Path) -> None:
    standin_uv(tmp_path / "bin", sleeping_install(state, str(tmp_path)))
    envs = tmp_path / "envs"
    before = tree_digest(old_venv(envs / NAME))
    proc = start(tmp_path, "--no-verify", "--force")
    deadline = time.monotonic() + 90
    while not list(envs.glob(f".{NAME}.envkit-old-*")):  # the old env has just been moved aside
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.001)
    proc.send_signal(signal.SIGTERM)
    code, err = finish(proc)
    assert code == 130, err
    assert_as_before(tmp_path, before)


@pytest.mark.parametrize("delay", [0.3, 0.6, 0.9, 1.2, 1.6, 2.0])
def test_sigterm_at_any_moment_keeps_the_old_environment(tmp_path: Path, state: Path, delay: float) -> None:
    """Wherever the signal lands (start-up, planning, the lock, the swap, the venv, the installer),
    the old environment is there afterwards and nothing else is."""
    standin_uv(tmp_path / "bin", sleeping_install(state, str(tmp_path), seconds=5))
    before = tree_digest(old_venv(tmp_path / "envs" / NAME))
    proc = start(tmp_path, "--no-verify", "--force")
    time.sleep(delay)
    proc.send_signal(signal.SIGTERM)
    code, err = finish(proc)
    # Before envkit's handler is in place Python's default ends it at once (-15): nothing was done.
    assert code in (130, -signal.SIGTERM, 0), err
    if code == 0:  # it was already done: the new environment replaced the old one
        assert (tmp_path / "envs" / NAME / "envkit" / "created.json").is_file()
        assert side_files(tmp_path / "envs", NAME) == []
    else:
        assert_as_before(tmp_path, before)


def test_ctrl_c_again_and_again_during_the_rollback_changes_nothing(tmp_path: Path, state: Path) -> None:
    # A half-made environment big enough that removing it takes a while, then an installer that waits.
    fill = (
        '"$4" -c "import os, sys; p = os.path.dirname(os.path.dirname(sys.argv[1]))\n'
        "for d in range(20):\n"
        "    os.makedirs(os.path.join(p, 'junk', str(d)))\n"
        "    for i in range(300): open(os.path.join(p, 'junk', str(d), str(i)), 'w').close()\" \"$4\"\n"
    )
    standin_uv(tmp_path / "bin", fill + sleeping_install(state, str(tmp_path)))
    before = tree_digest(old_venv(tmp_path / "envs" / NAME))
    proc = start(tmp_path, "--no-verify", "--force")
    wait_for(state / "installing", proc)
    sent = 0
    while proc.poll() is None:  # Ctrl-C, then keep pressing it until envkit is gone
        proc.send_signal(signal.SIGINT)
        sent += 1
        time.sleep(0.002)
    code, err = finish(proc)
    assert code == 130, err
    assert sent > 1
    assert_as_before(tmp_path, before)


def test_after_sigkill_the_next_run_finds_the_old_environment(tmp_path: Path, state: Path) -> None:
    envs = tmp_path / "envs"
    standin_uv(tmp_path / "bin", sleeping_install(state, str(tmp_path)))
    before = tree_digest(old_venv(envs / NAME))
    proc = start(tmp_path, "--no-verify", "--force")
    wait_for(state / "installing", proc)
    proc.kill()  # SIGKILL: no cleanup is possible, the next run has to find what was left
    proc.communicate(timeout=30)
    # The stand-in installer (in a session of its own) went with envkit: its lifeline killed it.
    # Before, it ran on with parent 1, writing into the half-made environment.
    assert no_survivors(str(tmp_path)) == []
    (backup,) = envs.glob(f".{NAME}.envkit-old-*")
    standin_uv(tmp_path / "bin")  # from now on the installer succeeds at once
    env = cli_env(tmp_path, tmp_path / "bin")
    # The half-made env is still under the name: refused, with the commands that resolve it.
    again = envkit_cli("create", NAME, "--no-verify", "--force", *CLI_FLAGS, env=env)
    text = " ".join(again.stderr.split())
    assert again.returncode == 2, text
    assert f"an interrupted envkit create left the previous environment of {envs / NAME} at {backup}" in text
    assert f"mv {backup} {envs / NAME}" in text
    assert tree_digest(backup) == before
    # The user removes the half-made one; the next run puts the old one back and says so.
    subprocess.run(["rm", "-rf", str(envs / NAME)], check=True)
    restored = envkit_cli("create", NAME, "--no-verify", *CLI_FLAGS, env=env)
    text = " ".join(restored.stderr.split())
    assert restored.returncode == 2, text  # it exists again, and there is no --force
    assert f"restored {envs / NAME} from {backup}" in text
    assert_as_before(tmp_path, before)
    # And --force now replaces it as usual.
    done = envkit_cli("create", NAME, "--no-verify", "--force", *CLI_FLAGS, env=env)
    assert done.returncode == 0, done.stderr
    assert (envs / NAME / "envkit" / "created.json").is_file()
    assert side_files(envs, NAME) == []


def test_two_creates_of_one_place_at_once(tmp_path: Path, state: Path) -> None:
    release = state / "release"
    waits = f"touch {state}/installing\nwhile [ ! -e {release} ]; do sleep 0.05; done"
    standin_uv(tmp_path / "bin", waits)
    envs = tmp_path / "envs"
    first = start(tmp_path, "--no-verify")
    wait_for(state / "installing", first)
    started = time.monotonic()
    second = envkit_cli(
        "create", NAME, "--no-verify", "--force", *CLI_FLAGS, env=cli_env(tmp_path, tmp_path / "bin")
    )
    text = " ".join(second.stderr.split())
    assert second.returncode == 2, text
    assert f"another envkit create (pid {first.pid}) is creating {envs / NAME} right now" in text
    assert time.monotonic() - started < 60  # at once, not after the first one
    assert (envs / NAME / "bin" / "python").exists()  # the first one's half-made env is untouched
    release.touch()
    code, err = finish(first)
    assert code == 0, err
    assert (envs / NAME / "envkit" / "created.json").is_file()
    assert side_files(envs, NAME) == []
    assert no_survivors(str(tmp_path)) == []
