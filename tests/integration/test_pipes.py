"""Real pipes: envkit's output read by a program that stops after a few bytes (``| head -3``), and
written into a full device (``> /dev/full``). Each case starts envkit for real (~0.5 s): slow.
tests/unit/test_streams.py runs the same situations in-process with stand-in streams."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPORT = Path(__file__).parents[1] / "data" / "reports" / "h200-580-torch2.11-cu130.json"
TARGET = ["--driver", "550.54.15", "--gpu", "sm_90", "--python", "3.11", "--platform", "linux-x86_64"]


def fleet_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "reports"
    folder.mkdir()
    data = json.loads(REPORT.read_text(encoding="utf-8"))
    for i in range(300):  # ~8 MB of JSON: far more than a pipe holds
        data["host"] = f"node-{i}"
        (folder / f"node-{i}.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


def commands(tmp_path: Path) -> dict[str, list[str]]:
    folder = fleet_folder(tmp_path)
    return {
        "doctor --json": ["doctor", "--json", "--from", str(REPORT)],
        "doctor": ["doctor", "--verbose", "--from", str(REPORT)],
        "resolve --json": ["resolve", "--json", *TARGET],
        "mirrors --json": ["mirrors", "--json"],
        "fleet --json": ["fleet", "--json", str(folder)],
        "fleet": ["fleet", "--verbose", str(folder)],
        "spec --stdout": ["spec", "pt2", "--stdout", "--format", "pip", *TARGET],
        "diff --json": ["diff", "--json", str(REPORT), str(REPORT)],
    }


def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "NO_PROXY": "*"}


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[str]]]:
    tmp = tmp_path_factory.mktemp("pipes")
    return tmp, commands(tmp)


@pytest.mark.parametrize(
    "name",
    [
        "doctor --json",
        "doctor",
        "resolve --json",
        "mirrors --json",
        "fleet --json",
        "fleet",
        "spec --stdout",
        "diff --json",
    ],
)
def test_a_reader_that_leaves_after_three_lines(cases: tuple[Path, dict[str, list[str]]], name: str) -> None:
    tmp, table = cases
    argv = [sys.executable, "-m", "envkit", *table[name]]
    whole = subprocess.run(argv, capture_output=True, env=env(tmp), timeout=120)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(tmp))
    assert proc.stdout is not None and proc.stderr is not None
    head = [proc.stdout.readline() for _ in range(3)]  # what `head -3` reads, then it exits
    proc.stdout.close()
    with proc.stderr:
        err = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    assert code == whole.returncode, err  # was 70 ("please attach it to a bug report"), or 1
    assert err == whole.stderr.decode(), err  # quiet: nothing more than the whole run says
    assert "internal error" not in err and all(head)
    assert not (tmp / "cache" / "envkit" / "logs").exists()  # no crash log


def test_a_full_stdout_is_exit_2_with_one_line(tmp_path: Path) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "envkit", "doctor", "--from", str(REPORT)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=env(tmp_path),
            timeout=120,
        )
    assert result.returncode == 2, result.stderr
    assert result.stderr == "envkit: cannot write to standard output (No space left on device)\n"
