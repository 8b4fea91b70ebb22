"""Signals at a random moment: a real ``envkit create`` (a stand-in uv that installs slowly, over an
old environment with --force), ``envkit verify`` (a probe interpreter that hangs, as a wedged GPU
does) or ``envkit preflight`` gets SIGINT, SIGTERM or SIGHUP after a random delay — during the
interpreter's start, the imports, detection, the lock, the swap, the installer, the rollback.

The property: the exit code is the signal's (130; 129 for SIGHUP; the signal itself where it came
before envkit was listening, when nothing was done yet), or the work's when it was done first; no
process envkit started is still running (each run carries a tag in its environment, which its
children inherit, so /proc finds them); and for create, the old environment is back byte for byte
(or the new one complete) with nothing beside it.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

__all__ = ["run", "tagged"]

SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
COMMANDS = ["preflight", "verify", "create"]  # the fast sample's first case is the cheapest


def tagged(tag: str) -> list[str]:
    """Processes (other than this one) whose environment carries ``tag``."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if tag.encode() in environ and int(proc.name) != os.getpid():
            try:
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state != "Z":  # a zombie runs nothing
                found.append(proc.name)
    return found


def _no_survivors(tag: str, within: float = 5.0) -> list[str]:
    deadline = time.monotonic() + within
    while (left := tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def _command(which: str, base: Path) -> tuple[list[str], dict[str, str]]:
    from tests.unit.create.test_create_safety import (
        CLI_FLAGS,
        cli_env,
        old_venv,
        sleeping_install,
        standin_uv,
    )

    env = cli_env(base, base / "bin")
    if which == "create":
        state = base / "state"
        state.mkdir()
        standin_uv(base / "bin", sleeping_install(state, "hostile-install", seconds=3))
        old_venv(base / "envs" / "pt")
        return [sys.executable, "-m", "envkit", "create", "pt", *CLI_FLAGS, "--no-verify", "--force"], env
    if which == "verify":
        hung = base / "bin" / "hungpython"
        hung.parent.mkdir(parents=True, exist_ok=True)
        hung.write_text("#!/bin/sh\nsleep 30\n", encoding="utf-8")
        hung.chmod(0o755)
        return [sys.executable, "-m", "envkit", "verify", "--python", str(hung), "--timeout", "20"], env
    expect = base / "ignore-all.toml"
    from envkit.checks import CHECKS

    expect.write_text("ignore = [" + ", ".join(f'"{c}"' for c in sorted(CHECKS)) + "]\n", encoding="utf-8")
    return [sys.executable, "-m", "envkit", "preflight", "--expect", str(expect), "--timeout", "20"], env


def _one(which: str, sig: signal.Signals, delay: float) -> None:
    from tests.unit.create.test_create_safety import side_files, tree_digest

    with tempfile.TemporaryDirectory(prefix="envkit-hostile-signal-") as folder:
        base = Path(folder)
        argv, env = _command(which, base)
        before = tree_digest(base / "envs" / "pt") if which == "create" else None
        tag = f"ENVKIT_HOSTILE_TAG={uuid.uuid4().hex}"
        env[tag.split("=")[0]] = tag.split("=")[1]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        time.sleep(delay)
        proc.send_signal(sig)
        try:
            _out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise AssertionError(f"envkit {which} did not end within 60 s of {sig.name}") from None
        code = proc.returncode
        mine = {signal.SIGHUP: 129}.get(sig, 130)
        assert code in (mine, -sig, 0, 1), (code, err[-800:])
        if code >= 0:  # envkit answered: no traceback (before its handler, Python's own may show one)
            assert "Traceback" not in err, err[-800:]
        left = _no_survivors(tag.split("=")[1])
        for pid in left:  # started by this case, not to be left running: stop them, then fail
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        assert left == [], f"still running after envkit {which} ended ({code}): {left}"
        if which == "create":
            envs = base / "envs"
            if code == 0:
                assert (envs / "pt" / "envkit" / "created.json").is_file()
            else:
                assert tree_digest(envs / "pt") == before, "the old environment is not back as it was"
            assert side_files(envs, "pt") == [], side_files(envs, "pt")


def run(counts: Any, n: int, rng: random.Random) -> None:
    for i in range(n):
        which = COMMANDS[i % len(COMMANDS)]
        sig = rng.choice(SIGNALS)
        delay = 0.3 if i == 0 else rng.uniform(0.0, 1.6)  # the first (the default suite's) is short
        counts.case(
            f"{sig.name} after {delay:.2f} s of envkit {which}", lambda w=which, s=sig, d=delay: _one(w, s, d)
        )
