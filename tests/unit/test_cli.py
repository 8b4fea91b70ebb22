"""The command line: exit codes, stdout/stderr discipline, and no tracebacks on bad input."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

import pytest
from typer.testing import CliRunner

from envkit import __version__, cli
from envkit.errors import (
    EXIT_CODES,
    EXIT_INTERNAL,
    EXIT_NO_BUILD,
    EXIT_STEP_FAILED,
    EXIT_USAGE,
    CreateFailed,
    EnvkitError,
    InputError,
    LockFailed,
    NoBuildError,
)

runner = CliRunner()


def envkit_cmd(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envkit", *args],
        capture_output=True,
        text=True,
        timeout=120,
        **kwargs,  # type: ignore[call-overload]
    )


def test_version() -> None:
    result = runner.invoke(cli.app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"envkit {__version__}\n"


def test_help_documents_every_exit_code() -> None:
    """--help lists EXIT_CODES (test_errors holds the README's table to the same)."""
    result = runner.invoke(cli.app, ["--help"])
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    for code, meaning in EXIT_CODES:
        assert f"{code} {meaning.replace('`', '')}" in text
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


# The CLI runs in-process (typer's runner) on a fake machine (cli_machine) in the default suite; the
# same commands run on this very machine, through `python -m envkit`, under -m slow.


def check_doctor_json(stdout: str, returncode: int) -> None:
    report = json.loads(stdout)  # stdout is only the JSON
    assert report["schema"] == "envkit.report/1"
    assert report["envkit_version"] == __version__
    assert {"driver", "gpus", "toolkits", "python", "torch", "host"} <= set(report["facts"])
    ids = [c["id"] for c in report["checks"]]
    assert ids[:3] == ["driver.loaded", "driver.support", "gpu.health"]
    assert all(set(c) >= {"id", "status", "summary", "detail", "fix"} for c in report["checks"])
    assert report["summary"]["exit_code"] == returncode


def test_doctor_json(cli_machine: object) -> None:
    result = runner.invoke(cli.app, ["doctor", "--json"])
    assert result.exit_code in (0, 1), result.stderr
    check_doctor_json(result.stdout, result.exit_code)
    assert "Traceback" not in result.stderr


@pytest.mark.slow
@pytest.mark.host_tools
def test_doctor_json_on_this_machine() -> None:
    proc = envkit_cmd("doctor", "--json")
    assert proc.returncode in (0, 1), proc.stderr
    check_doctor_json(proc.stdout, proc.returncode)
    assert "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    assert report["schema"] == "envkit.report/1"
    assert report["envkit_version"] == __version__
    assert {"driver", "gpus", "toolkits", "python", "torch", "host"} <= set(report["facts"])
    ids = [c["id"] for c in report["checks"]]
    assert ids[:3] == ["driver.loaded", "driver.support", "gpu.health"]
    assert all(set(c) >= {"id", "status", "summary", "detail", "fix"} for c in report["checks"])
    assert report["summary"]["exit_code"] == proc.returncode
    assert "Traceback" not in proc.stderr


def test_doctor_human_report(cli_machine: object) -> None:
    result = runner.invoke(cli.app, ["doctor"])
    assert "envkit doctor" in result.stdout
    assert "driver.loaded" in result.stdout
    assert "checks:" in result.stdout


@pytest.mark.slow
@pytest.mark.host_tools
def test_doctor_human_report_on_this_machine() -> None:
    proc = envkit_cmd("doctor")
    assert "envkit doctor" in proc.stdout
    assert "driver.loaded" in proc.stdout
    assert "checks:" in proc.stdout


def test_from_file_round_trip(tmp_path: Path, cli_machine: object) -> None:
    saved = runner.invoke(cli.app, ["doctor", "--json"]).stdout
    path = tmp_path / "report.json"
    path.write_text(saved)
    result = runner.invoke(cli.app, ["doctor", "--from", str(path), "--json"])
    again = json.loads(result.stdout)
    assert again["source"] == str(path)
    assert again["facts"] == json.loads(saved)["facts"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            "{broken",
            "envkit: --from {path}: found no error or report envkit knows (not valid JSON:",
        ),
        (
            '{"schema": "envkit.report/1", "facts": {"driver": {"version": 5}}}',
            "envkit: {path}: facts.driver.version: expected a version string, got int 5\n",
        ),
    ],
)
def test_malformed_from_file_is_one_line_and_exit_2(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    result = runner.invoke(cli.app, ["doctor", "--from", str(path)])
    assert result.exit_code == EXIT_USAGE
    assert result.stdout == ""
    assert result.stderr.startswith(expected.format(path=path))
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 2  # the error, and at most a hint


def test_the_entry_point_in_a_real_process(tmp_path: Path) -> None:
    # `python -m envkit` itself (main(), its error handler, the exit code a shell sees), on a file only.
    path = tmp_path / "bad.json"
    path.write_text("{broken")
    proc = envkit_cmd("doctor", "--from", str(path))
    assert proc.returncode == EXIT_USAGE
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"envkit: --from {path}: found no error or report envkit knows")
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2


def test_unknown_env_is_exit_2(cli_machine: object) -> None:
    result = runner.invoke(cli.app, ["doctor", "--env", "no-such-env-envkit-test"])
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.startswith("envkit: --env no-such-env-envkit-test: no environment of that name")
    assert "Traceback" not in result.stderr


def test_usage_errors_are_exit_2() -> None:
    assert runner.invoke(cli.app, ["doctor", "--timeout", "-1"]).exit_code == EXIT_USAGE
    assert runner.invoke(cli.app, ["doctor", "--no-such-flag"]).exit_code == EXIT_USAGE
    assert runner.invoke(cli.app, ["doctor", "--from", "x.json", "--deep"]).exit_code == EXIT_USAGE


def test_internal_error_writes_a_log_and_exits_70(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import envkit.commands.doctor

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("envkit bug for the test")

    monkeypatch.setattr(envkit.commands.doctor, "diagnose", broken)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    result = runner.invoke(cli.app, ["doctor"])
    assert result.exit_code == EXIT_INTERNAL
    assert "internal error: RuntimeError: envkit bug for the test" in result.stderr
    assert "Traceback" not in result.stderr
    (log,) = (tmp_path / "envkit" / "logs").glob("crash-*.log")
    assert "Traceback" in log.read_text() and str(log) in " ".join(result.stderr.split())


def test_ctrl_c_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    import envkit.commands.doctor

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(envkit.commands.doctor, "diagnose", interrupted)
    result = runner.invoke(cli.app, ["doctor"])
    assert result.exit_code == 130
    assert result.stderr == "envkit: interrupted\n"


def test_sighup_is_handled_like_sigterm_and_exits_129(tmp_path: Path) -> None:
    # A closed terminal or a dropped ssh sends SIGHUP: Python's default killed envkit on the spot
    # (no rollback, no children stopped, status -1). Here envkit is waiting on a FIFO when it comes.
    import errno
    import signal

    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    proc = subprocess.Popen(
        [sys.executable, "-m", "envkit", "doctor", "--from", str(fifo), "--timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while True:  # a FIFO opens for writing only once its reader has it open: envkit is reading
        try:
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO or proc.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
    try:
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=30)
    finally:
        os.close(writer)
    assert proc.returncode == 129, err
    assert err == "envkit: interrupted (SIGHUP)\n" and out == ""


@pytest.fixture
def extra_command() -> Iterator[Callable[[Callable[[], int]], None]]:
    """Add a command to envkit's app for one test, written as a new command would be: no decorator
    but ``app.command()``."""
    before = list(cli.app.registered_commands)

    def add(fn: Callable[[], int]) -> None:
        cli.app.command("test-extra")(fn)

    yield add
    cli.app.registered_commands[:] = before


@pytest.mark.parametrize(
    ("error", "code", "said"),
    [
        (
            InputError("bad --thing", hint="try --other"),
            EXIT_USAGE,
            "envkit: bad --thing\n  hint: try --other",
        ),
        (NoBuildError("no build for sm_20"), EXIT_NO_BUILD, "envkit: no build for sm_20"),
        (
            CreateFailed("install torch failed: exit 1"),
            EXIT_STEP_FAILED,
            "envkit: install torch failed: exit 1",
        ),
        (LockFailed("conda-lock failed: exit 1"), EXIT_STEP_FAILED, "envkit: conda-lock failed: exit 1"),
    ],
)
def test_a_new_command_gets_the_one_handler(
    extra_command: Callable[[Callable[[], int]], None], error: EnvkitError, code: int, said: str
) -> None:
    def raises() -> int:
        raise error

    extra_command(raises)
    result = runner.invoke(cli.app, ["test-extra"])
    assert result.exit_code == code
    assert result.stderr == said + "\n"  # the message (and its hint), nothing else
    assert result.stdout == ""


def test_a_new_command_returns_its_code_and_a_bug_in_it_is_70(
    extra_command: Callable[[Callable[[], int]], None], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls: list[str] = []

    def command() -> int:
        calls.append("ran")
        if len(calls) > 1:
            raise ZeroDivisionError("a bug")
        return 3

    extra_command(command)
    assert runner.invoke(cli.app, ["test-extra"]).exit_code == 3
    result = runner.invoke(cli.app, ["test-extra"])
    assert result.exit_code == EXIT_INTERNAL
    assert "internal error: ZeroDivisionError: a bug" in result.stderr
    (log,) = (tmp_path / "envkit" / "logs").glob("crash-*.log")
    assert "ZeroDivisionError" in log.read_text()
    # The handler leaves typer's own endings alone: --help 0, an unknown option 2.
    assert runner.invoke(cli.app, ["test-extra", "--help"]).exit_code == 0
    assert runner.invoke(cli.app, ["test-extra", "--no-such-flag"]).exit_code == EXIT_USAGE
    assert calls == ["ran", "ran"]


def test_a_broken_knowledge_base_is_an_internal_error_with_the_crash_log(
    data_copy: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """envkit's own tables (never a file the user gives) are wrong: exit 70 and the log 70 promises."""
    (data_copy / "arch.toml").write_text("[[arch]\n", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    result = runner.invoke(cli.app, ["resolve", *PLAN_FLAGS])
    assert result.exit_code == EXIT_INTERNAL
    assert result.stderr.startswith("envkit: internal error: KnowledgeError: arch.toml: cannot be read")
    assert "Traceback" not in result.stderr
    (log,) = (tmp_path / "cache" / "envkit" / "logs").glob("crash-*.log")
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert "Traceback" in log.read_text() and "KnowledgeError" in log.read_text()
    assert str(log) in " ".join(result.stderr.split())


WATCHDOG_DEAF_MAIN_THREAD = """
import signal, time
from envkit.cli import _unanswered
from envkit.commands.preflight import Watchdog
for sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(sig, signal.SIG_IGN)
with Watchdog(0.3, _unanswered(0.3)):
    try:
        while True:  # busy, deaf to signals, and then a finally that never finishes
            pass
    finally:
        time.sleep(600)
"""


def test_the_preflight_watchdog_answers_whatever_the_main_thread_does() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", WATCHDOG_DEAF_MAIN_THREAD], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1  # unhealthy: a node that cannot answer must be drained
    assert proc.stderr == "envkit: preflight: no answer within 0.3 s (watchdog)\n"
    assert proc.stdout == ""


PREFLIGHT_STUCK = """
import sys, time
import envkit.commands.preflight

def stuck(*_args, **_kwargs):
    while True:
        time.sleep(0.05)

envkit.commands.preflight.preflight = stuck
sys.argv = ["envkit", "preflight", "--timeout", "1"]
from envkit.cli import main
main()
"""


@pytest.mark.slow  # the watchdog waits for the budget (1 s, the least) plus its 5 s of grace
def test_preflight_stuck_past_its_budget_is_answered_by_the_watchdog() -> None:
    proc = subprocess.run([sys.executable, "-c", PREFLIGHT_STUCK], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr == "envkit: preflight: no answer within 6 s (watchdog)\n"
    assert proc.stdout == ""


def test_strict_turns_warnings_into_exit_1(tmp_path: Path) -> None:
    from envkit.checks import run_checks
    from envkit.facts import Facts, HostFacts
    from envkit.report import Report

    facts = Facts(host=HostFacts(hostname="n1", shm_bytes=512 * 1024 * 1024))  # warnings, no failure
    path = tmp_path / "warn.json"
    path.write_text(json.dumps(Report.new(facts, run_checks(facts)).to_json()))
    plain = runner.invoke(cli.app, ["doctor", "--from", str(path)])
    strict = runner.invoke(cli.app, ["doctor", "--from", str(path), "--strict"])
    assert plain.exit_code == 0
    assert strict.exit_code == 1
    assert "/dev/shm is 512 MiB" in plain.stdout
    assert "fix: in Docker: run with --ipc=host" in plain.stdout
    assert "healthy" in plain.stdout and "unhealthy" in strict.stdout


# envkit resolve -----------------------------------------------------------------------------------

PLAN_FLAGS = ["--driver", "535.104.05", "--gpu", "sm_90", "--python", "3.11", "--platform", "linux-x86_64"]


def test_resolve_json_for_a_described_machine() -> None:
    result = runner.invoke(cli.app, ["resolve", "--json", *PLAN_FLAGS])
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["schema"] == "envkit.plan/1"
    assert plan["variant"].startswith("cu12")
    assert plan["target"] == {
        "described_by": "flags",
        "platform": "linux-x86_64",
        "driver": "535.104.05",
        "gpus": [{"name": None, "compute_capability": "9.0"}],
        "python": "3.11",
        "accelerators": [],
        "amd_driver": None,
    }
    assert plan["rejected"][0]["reason"] == "driver 535.104.05 < 580.65.06 needed by CUDA 13.x"


def test_resolve_explain_says_why_newer_builds_were_passed_over() -> None:
    result = runner.invoke(cli.app, ["resolve", "--explain", *PLAN_FLAGS])
    assert result.exit_code == 0
    assert "Passed over (newest first):" in result.stdout
    assert "2.15.0+cu130: driver 535.104.05 < 580.65.06 needed by CUDA 13.x" in result.stdout
    assert "pip install torch==" in result.stdout


def test_resolve_with_nothing_satisfiable_exits_3() -> None:
    args = ["--driver", "470.82.01", "--gpu", "8.0", "--torch", ">=2.8", "--python", "3.11"]
    result = runner.invoke(cli.app, ["resolve", *args, "--platform", "linux-x86_64"])
    assert result.exit_code == 3
    assert result.stdout == ""
    assert result.stderr.startswith("envkit: no torch build fits linux-x86_64, driver 470.82.01")
    assert "hint: upgrade the driver to ≥ 525.60.13" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cuda", "13.x"], "envkit: --cuda '13.x': expected auto, cpu"),
        (["--torch", "two"], "envkit: --torch 'two': not a version specifier"),
        (["--driver", "new"], "envkit: --driver 'new': not a driver version"),
        (["--gpu", "Voodoo 5"], "envkit: --gpu 'Voodoo 5': not a compute capability"),
        (["--platform", "solaris"], "envkit: --platform 'solaris': one of"),
        (["--channel", "npm"], "envkit: --channel 'npm': pip or conda"),
        (["--no-gpu", "--gpu", "8.0"], "envkit: --no-gpu contradicts --driver / --gpu"),
        (
            ["--python", "two"],
            "envkit: --python two: neither a Python version (3.11) nor a runnable interpreter",
        ),
    ],
)
def test_resolve_bad_flags_are_one_line_exit_2(args: list[str], message: str) -> None:
    result = runner.invoke(cli.app, ["resolve", *args])
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.startswith(message)
    assert "Traceback" not in result.stderr


def test_resolve_on_the_machine_detects_python(cli_machine: object) -> None:
    result = runner.invoke(cli.app, ["resolve", "--json"])
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["target"]["described_by"] == "this machine"
    assert plan["target"]["python"] == "{}.{}".format(*sys.version_info[:2])


@pytest.mark.slow
@pytest.mark.host_tools
def test_resolve_on_this_machine_detects_python() -> None:
    proc = envkit_cmd("resolve", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["target"]["described_by"] == "this machine"
    assert plan["target"]["python"] is not None


def test_doctor_from_a_pasted_collect_env_on_stdin() -> None:
    # The facts of pytorch/pytorch#150733 (RTX 5090 D with torch 2.6.0+cu126), as a reply quotes them.
    paste = "\n".join(
        "> " + line
        for line in (
            "Collecting environment information...",
            "PyTorch version: 2.6.0+cu126",
            "Is debug build: False",
            "CUDA used to build PyTorch: 12.6",
            "OS: Ubuntu 22.04.5 LTS (x86_64)",
            "Python version: 3.11.11 (main, Dec 11 2024, 16:28:39) [GCC 11.2.0] (64-bit runtime)",
            "Python platform: Linux-6.8.0-57-generic-x86_64-with-glibc2.35",
            "Is CUDA available: True",
            "GPU models and configuration: GPU 0: NVIDIA GeForce RTX 5090 D",
            "Nvidia driver version: 570.124.04",
        )
    )
    result = runner.invoke(cli.app, ["doctor", "--from", "-", "--json"], input=paste)
    assert result.exit_code == 1, result.stderr
    report = json.loads(result.stdout)
    checks = {c["id"]: c for c in report["checks"]}
    assert checks["torch.gpu_arch"]["status"] == "fail"
    assert "sm_120" in checks["torch.gpu_arch"]["summary"]
    assert "python.shm" not in checks  # a paste says nothing about /dev/shm
    assert report["source"] == "-"


# envkit mirrors -----------------------------------------------------------------------------------


def test_mirrors_json_lists_the_table() -> None:
    result = runner.invoke(cli.app, ["mirrors", "--json", "--kind", "torch-wheels"])
    assert result.exit_code == 0, result.stderr
    table = json.loads(result.stdout)
    assert table["schema"] == "envkit.mirrors/1"
    names = [m["name"] for m in table["mirrors"]]
    assert names[0] == "pytorch"
    assert {"sjtu", "nju", "aliyun"} <= set(names)
    assert all(m["kind"] == "torch-wheels" for m in table["mirrors"])


def test_mirrors_probe_offline_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every mirror unreachable, on any machine: the requests go through a proxy on a closed local port
    # (urllib's default opener honours HTTP(S)_PROXY, as pip does), so no test reaches the internet.
    # Every probe fails fast with its reason, never a hang.
    import time

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    start = time.monotonic()
    result = runner.invoke(cli.app, ["mirrors", "--probe", "--json", "--kind", "pypi", "--timeout", "0.5"])
    assert time.monotonic() - start < 5
    table = json.loads(result.stdout)
    assert table["variant"] == "cpu"
    assert all("probe" in m for m in table["mirrors"])
    assert table["mirrors"] and all(
        m["probe"]["ok"] is False and m["probe"]["error"] for m in table["mirrors"]
    )


def test_mirrors_bad_kind_is_exit_2() -> None:
    result = runner.invoke(cli.app, ["mirrors", "--kind", "npm"])
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.startswith("envkit: --kind 'npm': one of torch-wheels, pypi, conda")


# envkit fleet / diff -------------------------------------------------------------------------------


def _node_report(tmp_path: Path, host: str, **facts_changes: object) -> Path:
    from envkit.checks import run_checks
    from envkit.facts import DriverFacts, Facts, GpuFacts, HostFacts
    from envkit.report import Report
    from envkit.versions import ComputeCapability, NvVersion

    facts = Facts(
        host=HostFacts(hostname=host, shm_bytes=32 * 1024**3),
        driver=DriverFacts(version=NvVersion("550.54.15"), source="nvml"),
        gpus=tuple(
            GpuFacts(index=i, name="NVIDIA H100 80GB HBM3", compute_capability=ComputeCapability(9, 0))
            for i in range(8)
        ),
    )
    import dataclasses

    facts = dataclasses.replace(facts, **facts_changes)  # type: ignore[arg-type]
    path = tmp_path / f"{host}.json"
    path.write_text(json.dumps(Report.new(facts, run_checks(facts)).to_json()))
    return path


def test_fleet_flags_the_odd_node_and_writes_html(tmp_path: Path) -> None:
    from envkit.facts import DriverFacts
    from envkit.versions import NvVersion

    for i in range(4):
        _node_report(tmp_path, f"gpu-{i}")
    _node_report(tmp_path, "gpu-9", driver=DriverFacts(version=NvVersion("535.104.05"), source="nvml"))
    html = tmp_path / "out" / "fleet.html"
    result = runner.invoke(cli.app, ["fleet", str(tmp_path), "--json", "--html", str(html)])
    fleet = json.loads(result.stdout)
    assert fleet["schema"] == "envkit.fleet/1"
    assert [d["node"] for d in fleet["deviations"]] == ["gpu-9"]
    assert "gpu-9" in html.read_text() and html.stat().st_mode & 0o044  # readable by others, like any report
    strict = runner.invoke(cli.app, ["fleet", str(tmp_path), "--strict"])
    assert strict.exit_code == 1


def test_fleet_with_a_malformed_report_is_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    result = runner.invoke(cli.app, ["fleet", str(bad)])
    assert result.exit_code == EXIT_USAGE
    assert str(bad) in result.stderr


def test_diff_puts_the_driver_first(tmp_path: Path) -> None:
    from envkit.facts import DriverFacts
    from envkit.versions import NvVersion

    a = _node_report(tmp_path, "works")
    b = _node_report(tmp_path, "fails", driver=DriverFacts(version=NvVersion("535.104.05"), source="nvml"))
    result = runner.invoke(cli.app, ["diff", str(a), str(b), "--json"])
    assert result.exit_code == 0
    diff = json.loads(result.stdout)
    assert diff["schema"] == "envkit.diff/1"
    assert diff["differences"][0]["key"] == "driver.version"
