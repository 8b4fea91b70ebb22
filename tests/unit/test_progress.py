"""Live progress of long runs: on a real pseudo-terminal (util-linux ``script``) stderr shows which
probe runs, the elapsed time and each verdict as it lands; nothing of it when stderr is not a
terminal, with --quiet or with --json, and stdout stays the report (or the JSON) alone."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from rich.console import Console

from envkit.render.progress import live_progress
from envkit.report import NO_PROGRESS, CheckResult, Status

# A stand-in interpreter: the verify probes answer at once (device after 0.2 s, amp after 1 s) with
# a canned verdict; everything else (the environment probe) runs in the real interpreter.
STAND_IN = """#!{python}
import json, os, sys, time
name = os.path.basename(sys.argv[1]) if len(sys.argv) > 2 else ""
if name.startswith("verify_"):
    check = name[len("verify_"):-3]
    time.sleep({{"device": 0.2}}.get(check, 1.0))
    marker = sys.argv[2]
    print(marker + json.dumps({{"status": "pass", "summary": "stand-in " + check + " ok"}}) + marker)
    sys.exit(0)
os.execv({python!r}, [{python!r}] + sys.argv[1:])
"""

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
needs_script = pytest.mark.skipif(
    shutil.which("script") is None, reason="util-linux `script` is not installed"
)


@pytest.fixture
def stand_in(tmp_path: Path) -> Path:
    path = tmp_path / "bin" / "python"
    path.parent.mkdir()
    path.write_text(STAND_IN.format(python=sys.executable))
    path.chmod(0o755)
    return path


def envkit_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(TERM="xterm", COLUMNS="160", PYTHONPATH=str(Path(__file__).parents[2]))
    env.pop("NO_COLOR", None)
    return env


def under_terminal(args: list[str], stdout: Path) -> tuple[str, int]:
    """Run ``python -m envkit ARGS > stdout`` with stderr on a pseudo-terminal; the terminal's
    transcript (stderr: stdout goes to the file) and the exit code."""
    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "envkit", *args])
    done = subprocess.run(
        ["script", "-q", "-e", "-c", f"{command} > {shlex.quote(str(stdout))}", "/dev/null"],
        capture_output=True,
        text=True,
        timeout=120,
        env=envkit_env(),
        stdin=subprocess.DEVNULL,
    )
    return ANSI.sub("", done.stdout), done.returncode


@pytest.mark.slow  # ~2.5 s: real envkit runs under a pseudo-terminal (script)
@needs_script
def test_verify_shows_each_verdict_as_it_lands_on_a_terminal(stand_in: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    transcript, code = under_terminal(["verify", "--python", str(stand_in), "--checks", "device,amp"], out)
    assert code == 0, transcript
    assert "running verify.device, verify.amp" in transcript  # which probes run
    assert "0:00:0" in transcript  # the elapsed time
    # Each verdict as it lands, with how long it took: device (0.2 s) before amp (1 s).
    device = transcript.index("verify.device stand-in device ok (")
    amp = transcript.index("verify.amp stand-in amp ok (")
    assert device < amp
    assert "running verify.amp · 1 passed" in transcript[device:amp]
    report = out.read_text()
    assert "envkit verify" in report
    assert "running" not in report
    assert "\x1b[2K" not in report  # no live-line control codes in stdout


@pytest.mark.slow  # ~2.5 s: real envkit runs under a pseudo-terminal (script)
@needs_script
def test_json_and_quiet_show_no_progress_on_a_terminal(stand_in: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    transcript, code = under_terminal(
        ["verify", "--python", str(stand_in), "--checks", "device", "--json"], out
    )
    assert code == 0, transcript
    assert json.loads(out.read_text())["schema"] == "envkit.report/1"
    assert "running" not in transcript
    assert transcript.strip() == ""
    transcript, code = under_terminal(["verify", "--python", str(stand_in), "--checks", "device", "-q"], out)
    assert code == 0
    assert "running" not in transcript
    assert transcript.strip() == ""
    assert "verify.device" in out.read_text()


def test_no_progress_when_stderr_is_not_a_terminal(stand_in: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "envkit", "verify", "--python", str(stand_in), "--checks", "device"],
        capture_output=True,
        text=True,
        timeout=120,
        env=envkit_env(),
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "verify.device" in done.stdout
    assert "\x1b" not in done.stdout


def test_live_progress_takes_verdicts_from_threads() -> None:
    """Probes answer in their own threads: every verdict is printed once, whole, with its time."""
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=120, color_system=None)
    ids = [f"verify.c{i}" for i in range(8)]
    with live_progress(console) as shown:
        shown.stage("verifying")
        shown.running(ids)
        threads = [
            threading.Thread(target=shown.landed, args=(CheckResult(cid, Status.PASS, f"{cid} ok"),))
            for cid in ids
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        shown.landed(CheckResult("driver.loaded", Status.WARN, "quick check"))  # not announced: tally only
    text = buffer.getvalue()
    for cid in ids:
        assert text.count(f"{cid} {cid} ok (") == 1
    assert "quick check" not in text
    assert "8 passed, 1 warning" in text


def test_no_progress_is_silent() -> None:
    NO_PROGRESS.stage("x")
    NO_PROGRESS.running(["verify.device"])
    NO_PROGRESS.landed(CheckResult("verify.device", Status.PASS, "ok"))


def test_run_verify_checks_reports_each_probe(stand_in: Path) -> None:
    from envkit.facts import Facts
    from envkit.system import System
    from envkit.verify import run_verify_checks

    heard: list[str] = []

    class Recorder:
        def stage(self, text: str) -> None:
            heard.append(f"stage {text}")

        def running(self, check_ids: object) -> None:
            heard.append(f"running {','.join(check_ids)}")  # type: ignore[call-overload]

        def landed(self, result: CheckResult) -> None:
            heard.append(f"landed {result.id} {result.status.value}")

    results = run_verify_checks(
        System().with_deadline(60), str(stand_in), Facts(), ["device", "amp"], progress=Recorder()
    )
    assert [r.id for r in results] == ["verify.device", "verify.amp"]
    assert heard == [
        f"stage verifying {stand_in}",
        "running verify.device,verify.amp",
        "landed verify.device pass",
        "landed verify.amp pass",
    ]
