"""doctor --from and --error on error texts: what they read, what they refuse (one line, exit 2, in
bounded time and memory), and that a secret in the text never reaches the output."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from envkit.commands.doctor import MAX_TEXT_BYTES, diagnose, diagnose_file
from envkit.errors import EXIT_USAGE, InputError
from envkit.render.console import render_report
from envkit.render.jsonout import print_json
from envkit.report import Status
from tests.conftest import MachineBuilder
from tests.unit.commands.test_doctor import h100_node

NOT_KNOWN = "found no error or report envkit knows"
ERROR = (
    "Traceback (most recent call last):\n"
    '  File "/opt/venv/lib/python3.10/site-packages/torch/__init__.py", line 290, in <module>\n'
    "ImportError: /opt/venv/lib/python3.10/site-packages/nvidia/cusparse/lib/libcusparse.so.12: undefined "
    "symbol: __nvJitLinkAddData_12_1, version libnvJitLink.so.12\n"
)


@pytest.mark.parametrize(
    ("content", "what"),
    [
        (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8, "binary data, not text"),
        (b"\xff\xfe\x00\x01" * 4000, "binary data, not text"),
        (b"Call me Ishmael. Some years ago, never mind how long precisely.\n" * 400, "recognises"),
        (b"services:\n  web:\n    image: nginx\n    ports: ['80:80']\n", "recognises"),
    ],
)
def test_what_is_not_an_error_is_one_line(tmp_path: Path, content: bytes, what: str) -> None:
    path = tmp_path / "input"
    path.write_bytes(content)
    with pytest.raises(InputError) as caught:
        diagnose_file(str(path))
    message = caught.value.message
    assert caught.value.exit_code == EXIT_USAGE and "\n" not in message
    assert NOT_KNOWN in message and what in message and "tracebacks and logs" in message


def test_a_file_past_10_mib_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "huge.log"
    with big.open("wb") as fh:  # sparse: the size is real, the disk is not used
        fh.truncate(MAX_TEXT_BYTES + 1)
    with pytest.raises(InputError) as caught:
        diagnose_file(str(big))
    assert NOT_KNOWN in caught.value.message and "at most 10 MiB" in caught.value.message
    assert caught.value.hint.startswith(f"give it the end of the log: tail -c 1000000 {big}")


def test_a_stream_past_10_mib_is_one_line_exit_2_in_a_real_process() -> None:
    # 11 MiB of log lines on standard input: cut off at the limit, never read whole.
    text = b"epoch 1 step 2 loss 0.25\n" * (11 * 2**20 // 25)
    proc = subprocess.run(
        [sys.executable, "-m", "envkit", "doctor", "--from", "-"],
        input=text,
        capture_output=True,
        timeout=60,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )
    err = proc.stderr.decode()
    assert proc.returncode == EXIT_USAGE and proc.stdout == b""
    assert err.splitlines()[0].startswith(
        f"envkit: --from -: {NOT_KNOWN} (the text is 11 MiB; envkit reads at most 10 MiB"
    )


@pytest.mark.parametrize(
    "lines", [40_000, pytest.param(390_000, marks=pytest.mark.slow, id="just-under-10-MiB")]
)
def test_an_error_at_the_end_of_a_long_log_is_found(tmp_path: Path, lines: int) -> None:
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 0.5 lr 0.001\n" * lines + ERROR, encoding="utf-8")
    report = diagnose_file(str(log))
    assert report.cause is not None and report.cause.id == "torch.cuda_libs"


def test_secrets_in_the_text_never_reach_the_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = "hf_" + "Zq8xY2wV" * 4
    text = (
        ERROR
        + "pip install --index-url https://alice:s3cr3tpw@pypi.corp.example/simple torch\n"
        + f"RuntimeError: NCCL error in: x.cpp:1, unhandled system error, NCCL version 2.19.3\n"
        f"Last error:\nsocketStartConnect: Connect to https://bob:hunter22@10.0.0.2/?token={token} failed\n"
    )
    path = tmp_path / "issue.txt"
    path.write_text(text, encoding="utf-8")
    report = diagnose_file(str(path))
    console = Console(file=io.StringIO(), width=200)
    render_report(report, console, verbose=True)
    print_json(report.to_json())
    shown = console.file.getvalue() + capsys.readouterr().out  # type: ignore[attr-defined]
    assert "nccl.failure" in shown
    for secret in ("s3cr3tpw", "hunter22", token):
        assert secret not in shown


def test_error_joins_the_text_with_this_machine(machine: MachineBuilder, tmp_path: Path) -> None:
    python = h100_node(machine, tmp_path)
    error = tmp_path / "err.txt"
    error.write_text(ERROR, encoding="utf-8")
    report = diagnose(machine.system(), python=python, error_file=str(error))
    facts = report.facts
    assert str(facts.driver.version) == "550.54.15" and len(facts.gpus) == 2  # the machine's own
    assert facts.errors.load_failures[0].provider == "nvjitlink"  # the text's
    assert report.cause is not None and report.cause.id == "torch.cuda_libs"
    assert report.cause.status is Status.FAIL
    # The error came from Python 3.10; the interpreter inspected here is another: a note says so.
    assert sys.version_info[:2] != (3, 10)
    assert any("pass --python with the interpreter that failed" in n for n in facts.notes)
    nothing = tmp_path / "nothing.txt"
    nothing.write_text("all good\n", encoding="utf-8")
    with pytest.raises(InputError, match=NOT_KNOWN):
        diagnose(machine.system(), python=python, error_file=str(nothing))
