"""Pipes and terminals, as Unix tools meet them: a reader that leaves after a few lines
(``| head -3``), a full stdout (``> /dev/full``), ``--json`` that fails, a terminal's width, and
``--from -`` typed on a terminal. Each runs the real command line in this process with stand-in
streams (tests/hostile/invoke.py); tests/integration/test_pipes.py does the same through real pipes.
"""

from __future__ import annotations

import errno
import json
import os
import re
from pathlib import Path

import pytest

from envkit import cli
from tests.hostile.invoke import Sink, invoke

REPORTS = Path(__file__).parents[1] / "data" / "reports"
HEALTHY = REPORTS / "h200-580-torch2.11-cu130.json"


def doctor_code(*args: str) -> int:
    return invoke(["doctor", "--from", str(HEALTHY), *args]).code


@pytest.mark.parametrize("args", [[], ["--json"], ["--verbose"]], ids=["text", "json", "verbose"])
def test_a_reader_that_leaves_ends_the_command_quietly_with_its_status(args: list[str]) -> None:
    # `envkit doctor | head -1`: was exit 1 (rich's broken-pipe exit), and 70 with a crash log for --json.
    expected = doctor_code(*args)
    result = invoke(["doctor", "--from", str(HEALTHY), *args], stdout=Sink(limit=20))
    assert result.code == expected, result.stderr
    assert result.stderr == ""  # no crash log, no message: the reader asked for no more
    assert len(result.stdout) == 20


def test_a_fleet_streamed_into_a_reader_that_leaves(tmp_path: Path) -> None:
    result = invoke(["fleet", str(HEALTHY), str(HEALTHY), "--json"], stdout=Sink(limit=100))
    assert result.code == invoke(["fleet", str(HEALTHY), str(HEALTHY), "--json"]).code
    assert result.stderr == ""


@pytest.mark.parametrize("args", [[], ["--json"]], ids=["text", "json"])
def test_a_full_stdout_is_one_line_and_exit_2(args: list[str]) -> None:
    result = invoke(["doctor", "--from", str(HEALTHY), *args], stdout=Sink(limit=0, error=errno.ENOSPC))
    assert result.code == 2, result.stderr  # was 70, "please attach it to a bug report"
    assert result.stderr == "envkit: cannot write to standard output (No space left on device)\n"


def test_a_full_stdout_keeps_a_failing_verdict(tmp_path: Path) -> None:
    data = json.loads(HEALTHY.read_text(encoding="utf-8"))
    data["facts"]["torch"]["deep"].update(cuda_available=False, error="RuntimeError: CUDA init failed")
    report = tmp_path / "old.json"
    report.write_text(json.dumps(data), encoding="utf-8")
    assert invoke(["doctor", "--from", str(report)]).code == 1
    result = invoke(["doctor", "--from", str(report)], stdout=Sink(limit=5, error=errno.EIO))
    assert result.code == 1  # the node is unhealthy, whatever happened to the output
    assert "cannot write to standard output (Input/output error)" in result.stderr


def error_document(stdout: str) -> dict[str, object]:
    data = json.loads(stdout)
    assert set(data) == {"schema", "command", "error", "hint", "exit_code"}, data
    assert data["schema"] == "envkit.error/1"
    return data  # type: ignore[no-any-return]


def test_json_that_fails_prints_an_error_document(tmp_path: Path) -> None:
    missing = tmp_path / "gone.json"
    result = invoke(["doctor", "--from", str(missing), "--json"])
    assert result.code == 2
    data = error_document(result.stdout)  # was: nothing on stdout
    assert data["command"] == "doctor" and data["exit_code"] == 2
    assert str(data["error"]).startswith(f"--from {missing}: cannot read it")
    assert result.stderr.startswith("envkit: --from")  # people still read stderr

    usage = invoke(["resolve", "--json", "--no-such-flag"])
    assert usage.code == 2
    assert error_document(usage.stdout)["error"] == "No such option: --no-such-flag"
    no_build = invoke(["resolve", "--json", "--torch", "==1.0.0", "--cuda", "12.4", "--no-gpu"])
    assert no_build.code in (2, 3)
    assert error_document(no_build.stdout)["exit_code"] == no_build.code


def test_json_that_succeeds_is_one_document() -> None:
    result = invoke(["doctor", "--from", str(HEALTHY), "--json"])
    assert json.loads(result.stdout)["schema"] == "envkit.report/1"


def test_text_wraps_at_words_to_the_terminals_width(monkeypatch: pytest.MonkeyPatch) -> None:
    words = set(invoke(["doctor", "--from", str(HEALTHY), "--verbose"]).stdout.split())
    monkeypatch.setenv("COLUMNS", "50")
    monkeypatch.setattr(cli, "stdout", cli._LazyConsole())  # made afresh: this stdout is a terminal
    terminal = Sink(tty=True)
    result = invoke(["doctor", "--from", str(HEALTHY), "--verbose"], stdout=terminal)
    shown = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout)  # the terminal's styles take no columns
    lines = shown.splitlines()
    assert max(len(line) for line in lines) <= 50, lines  # was one line per finding, up to 200 wide
    # Wrapped between words, never inside one (a path about as long as the line is folded).
    cut = [w for w in set(shown.split()) - words if not any(w in long for long in words if len(long) > 40)]
    assert cut == []


def test_into_a_pipe_lines_stay_whole() -> None:
    result = invoke(["doctor", "--from", str(HEALTHY), "--verbose"])
    assert max(len(line) for line in result.stdout.splitlines()) > 100  # one record per line, for grep


def test_from_dash_on_a_terminal_says_what_to_paste() -> None:
    main, secondary = os.openpty()
    terminal = os.fdopen(secondary, "r", encoding="utf-8")
    try:
        paste = (
            "PyTorch version: 2.5.1+cpu\nIs CUDA available: False\nGPU models and configuration: No CUDA\n"
        )
        os.write(main, paste.encode() + b"\x04")  # Ctrl-D on a line of its own: the end
        result = invoke(["doctor", "--from", "-", "--timeout", "5"], stdin=terminal)
    finally:
        terminal.close()
        os.close(main)
    first = result.stderr.splitlines()[0]
    assert "output of `python -m torch.utils.collect_env`" in first and "traceback" in first  # was: silence
    assert "Ctrl-D" in first and "5 s" in first
    assert result.code in (0, 1) and "torch 2.5.1" in result.stdout


def test_from_dash_with_stdin_closed_is_an_input_error() -> None:
    result = invoke(["doctor", "--from", "-"], stdin_closed=True)
    assert result.code == 2  # was 70: 'NoneType' object has no attribute 'read'
    assert result.stderr == "envkit: --from -: standard input is closed; nothing to read\n"


def test_spec_json_without_check_is_an_error_document() -> None:
    # `spec pt2 --json` wrote the spec files and no JSON at all.
    result = invoke(["spec", "pt2", "--json", "--stdout", "--cuda", "cpu", "--no-gpu", "--python", "3.11"])
    assert result.code == 2
    assert (
        error_document(result.stdout)["error"]
        == "--json applies to spec --check (the files spec writes are the output)"
    )
