"""preflight: expectations (drift, bad files), the one-line reason, the time budget, JUnit."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from envkit.checks.expect import apply_require_ignore, check_expectations, load_expectations
from envkit.commands.preflight import KNOWN_CHECKS, Watchdog, drain_reason, preflight
from envkit.errors import InputError
from envkit.facts import CondaPackage, Distribution, DriverFacts, Facts, GpuFacts, PythonFacts, TorchFacts
from envkit.render.junit import junit_xml
from envkit.report import CheckResult, Report, Status
from envkit.versions import ComputeCapability, NvVersion, Version
from tests.conftest import MachineBuilder
from tests.unit.detect.test_nvml import GPU

ISSUE_EXAMPLE = """\
gpu_count = 8
gpu_model = "H100"            # substring of the NVML name
min_driver = "550.54.15"
torch = "2.5.1+cu121"         # or a PEP 440 spec: ">=2.5,<2.6"
min_nccl = "2.21"
max_temperature_c = 85
require = ["verify.dist"]     # checks that must run and pass
ignore = ["python.shm"]       # checks not counted
"""


def node(gpus: int = 8, **gpu_changes: Any) -> Facts:
    gpu = GpuFacts(
        index=0,
        name="NVIDIA H100 80GB HBM3",
        compute_capability=ComputeCapability(9, 0),
        memory_total_mib=81559,
        temperature_c=40,
    )
    return Facts(
        driver=DriverFacts(version=NvVersion("550.54.15"), source="nvml"),
        gpus=tuple(dataclasses.replace(gpu, index=i, **gpu_changes) for i in range(gpus)),
        python=PythonFacts(executable="/usr/bin/python3", selected_by="PATH", version=Version("3.11.9")),
        torch=TorchFacts(
            version=Version("2.5.1+cu121"),
            cuda=Version("12.1"),
            distributions=(Distribution("nvidia-nccl-cu12", Version("2.21.5"), "/s"),),
        ),
    )


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "node.toml"
    path.write_text(text)
    return str(path)


# The expectations file ------------------------------------------------------------------------------


def test_the_issue_example_loads(tmp_path: Path) -> None:
    expect = load_expectations(write(tmp_path, ISSUE_EXAMPLE), KNOWN_CHECKS)
    assert expect.values["gpu_count"] == 8
    assert expect.require == ("verify.dist",)
    assert expect.ignore == ("python.shm",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'gpu_count = "8"\n',
            (
                r"node.toml:1: gpu_count must be an integer \(number of GPUs the node must have: NVML's; "
                r"AMD's or Intel's on such a node\), not str '8'"
            ),
        ),
        ("\n\nmax_temperature_c = true\n", r"node.toml:3: max_temperature_c must be an integer"),
        ("gpu_cnt = 8\n", r"node.toml:1: unknown key 'gpu_cnt'; did you mean gpu_count and gpu_arch\?"),
        ('min_driver = "new"\n', r"node.toml:1: min_driver = 'new' is not a version"),
        ('torch = "two"\n', r"node.toml:1: torch = 'two' is neither a version nor a PEP 440 spec"),
        ('require = ["verify.dsit"]\n', r"node.toml:1: require names unknown checks: verify.dsit"),
        ("ignore = [1]\n", r"node.toml:1: ignore must be a list of check ids"),
        ("gpu_count = -1\n", r"gpu_count must not be negative"),
        ("gpu_count = \n", r"node.toml: not valid TOML"),
    ],
)
def test_bad_files_name_file_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        load_expectations(write(tmp_path, text), KNOWN_CHECKS)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read it"):
        load_expectations(str(tmp_path / "none.toml"))


def test_binary_file_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "node.toml"
    path.write_bytes(b"\xff\xfe\x00gpu_count")
    with pytest.raises(InputError, match=f"--expect {path}: not a text file"):
        load_expectations(str(path))


# Drift -----------------------------------------------------------------------------------------------


def by_id(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.id: r for r in results}


def test_a_node_as_expected_passes(tmp_path: Path) -> None:
    expect = load_expectations(write(tmp_path, ISSUE_EXAMPLE), KNOWN_CHECKS)
    results = by_id(check_expectations(expect, node()))
    assert {r.status for r in results.values()} == {Status.PASS}
    assert results["expect.min_nccl"].summary == "2.21.5 (expected ≥ 2.21)"


def test_drift_says_expected_and_actual(tmp_path: Path) -> None:
    expect = load_expectations(write(tmp_path, ISSUE_EXAMPLE), KNOWN_CHECKS)
    drifted = dataclasses.replace(
        node(gpus=7, temperature_c=91), driver=DriverFacts(version=NvVersion("535.104.05"))
    )
    results = by_id(check_expectations(expect, drifted))
    assert results["expect.gpu_count"].summary == "expected 8, found 7"
    assert results["expect.min_driver"].summary == "expected ≥ 550.54.15, found 535.104.05"
    assert results["expect.max_temperature_c"].summary == "expected ≤ 85 °C, found 91 °C"
    assert results["expect.gpu_model"].status is Status.PASS


@pytest.mark.parametrize(
    ("line", "facts_change", "summary"),
    [
        ('torch = ">=2.5,<2.6"', {}, "2.5.1+cu121 (expected >=2.5,<2.6)"),
        ('torch = "2.4.1+cu121"', {}, "expected 2.4.1+cu121, found 2.5.1+cu121"),
        ('cuda = "12.4"', {}, "expected 12.4, found 12.1"),
        ('python = "3.11"', {}, "3.11.9 (expected 3.11)"),
        ('python = ">=3.12"', {}, "expected >=3.12, found 3.11.9"),
        ('gpu_model = "A100"', {}, "expected 'A100' in every GPU name, found NVIDIA H100 80GB HBM3"),
        (
            'min_nccl = "2.21"',
            {"torch": TorchFacts(version=Version("2.5.1"))},
            "expected ≥ 2.21, found unknown",
        ),
        (  # a conda environment's NCCL comes as the conda package "nccl" (fleet and diff read it too)
            'min_nccl = "2.21"',
            {
                "torch": TorchFacts(
                    version=Version("2.5.1"),
                    conda_packages=(CondaPackage("nccl", Version("2.23.4"), "h2b5d15b_3", "conda-forge"),),
                )
            },
            "2.23.4 (expected ≥ 2.21)",
        ),
        ("min_gpu_memory_mib = 80000", {}, "all above (expected ≥ 80000 MiB per GPU)"),
        ("min_gpu_memory_mib = 81920", {}, "expected ≥ 81920 MiB per GPU, found 8 GPU(s) below"),
    ],
)
def test_each_expectation(tmp_path: Path, line: str, facts_change: dict[str, Any], summary: str) -> None:
    expect = load_expectations(write(tmp_path, line + "\n"))
    (result,) = check_expectations(expect, dataclasses.replace(node(), **facts_change))
    assert result.summary.startswith(summary), result.summary


def test_require_and_ignore(tmp_path: Path) -> None:
    expect = load_expectations(
        write(tmp_path, 'require = ["verify.dist", "nccl.env"]\nignore = ["python.shm"]\n')
    )
    checks = [
        CheckResult("python.shm", Status.FAIL, "/dev/shm is only 64 MiB"),
        CheckResult("nccl.env", Status.WARN, "NCCL_P2P_DISABLE=1 is a debugging switch"),
    ]
    results = by_id(apply_require_ignore(expect, checks))
    assert results["python.shm"].status is Status.SKIP
    assert results["python.shm"].summary.startswith("ignored by")
    assert results["nccl.env"].status is Status.FAIL  # required: a warning is not a pass
    assert results["verify.dist"].status is Status.FAIL
    assert results["verify.dist"].summary.endswith("but did not run")


# The reason and JUnit -----------------------------------------------------------------------------------


def test_drain_reason_is_one_short_line_worst_first() -> None:
    checks = [
        CheckResult("python.shm", Status.FAIL, "/dev/shm is only 64 MiB"),
        CheckResult(
            "gpu.health",
            Status.FAIL,
            'GPU 3 (NVIDIA H100 "SXM"): 4 uncorrected ECC error(s)\nsince boot ' + "x" * 200,
        ),
    ]
    reason = drain_reason(Report.new(Facts(), checks))
    assert reason is not None
    assert reason.startswith("envkit: gpu.health: GPU 3 (NVIDIA H100 'SXM'): 4 uncorrected")
    assert reason.endswith("… (+1 more)")
    assert len(reason) <= 100
    assert "\n" not in reason and '"' not in reason
    assert drain_reason(Report.new(Facts(), [CheckResult("x.y", Status.WARN, "w")])) is None


def test_junit_counts_and_cases() -> None:
    checks = [
        CheckResult("gpu.health", Status.FAIL, "ECC errors", detail="GPU 1", fix="drain"),
        CheckResult("python.shm", Status.WARN, "small"),
        CheckResult("driver.loaded", Status.PASS, "ok"),
        CheckResult("toolkit.nvcc", Status.SKIP, "no nvcc"),
    ]
    root = ET.fromstring(junit_xml(Report.new(Facts(), checks), name="envkit.preflight"))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("4", "1", "1")
    failure = suite.find("testcase[@name='gpu.health']/failure")
    assert failure is not None and failure.get("message") == "ECC errors"
    assert "fix: drain" in (failure.text or "")
    strict = ET.fromstring(junit_xml(Report.new(Facts(), checks), strict=True)).find("testsuite")
    assert strict is not None and strict.get("failures") == "2"


def test_watchdog_fires_only_when_not_stopped() -> None:
    fired = threading.Event()
    with Watchdog(0.2, fired.set):
        pass
    time.sleep(0.4)
    assert not fired.is_set()
    with Watchdog(0.1, fired.set):
        assert fired.wait(10)  # while the block still runs (it waited a fixed 0.4 s)
    assert fired.is_set()


# Whole runs ------------------------------------------------------------------------------------------


def test_nvml_failing_on_one_gpu_fails_that_gpu_only(machine: MachineBuilder, tmp_path: Path) -> None:
    lost = dict(GPU, uuid="GPU-lost", temperature={"error": "GpuIsLost", "message": "GPU is lost"})
    machine.nvml_data(
        {"driver_version": "550.54.15", "cuda_driver_version": 12040, "devices": [GPU, lost, GPU]}
    )
    report = preflight(machine.system(), python=sys.executable, timeout=20)
    health = next(c for c in report.checks if c.id == "gpu.health")
    assert health.status is Status.FAIL
    assert health.summary.startswith("GPU 1 (NVIDIA A100-SXM4-80GB) is unusable: GpuIsLost")
    assert [g.error is None for g in report.facts.gpus] == [True, False, True]
    assert report.exit_code() == 1
    assert drain_reason(report) is not None


def test_a_hanging_probe_still_gets_an_answer_in_budget(machine: MachineBuilder, tmp_path: Path) -> None:
    # An interpreter that never answers: the environment probe and the device probe both hang.
    frozen = tmp_path / "python"
    frozen.write_text("#!/bin/sh\nsleep 120\n")
    frozen.chmod(0o755)
    start = time.monotonic()
    report = preflight(machine.system(), python=str(frozen), verify_checks=["device"], timeout=1.5)
    elapsed = time.monotonic() - start
    assert elapsed < 8, elapsed
    assert report.exit_code() == 1
    device = next(c for c in report.checks if c.id == "verify.device")
    assert device.status is Status.FAIL
    assert "timed out" in device.summary or "did not run" in device.summary
    assert drain_reason(report) is not None


def envkit_cmd(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envkit", *args], capture_output=True, text=True, timeout=timeout
    )


class _Proc:
    """What the tests below read of a finished envkit, from typer's in-process runner."""

    def __init__(self, args: tuple[str, ...], stdin: str | None = None) -> None:
        from typer.testing import CliRunner

        from envkit import cli

        result = CliRunner().invoke(cli.app, list(args), input=stdin)
        self.returncode, self.stdout, self.stderr = result.exit_code, result.stdout, result.stderr


def envkit_in_process(*args: str) -> _Proc:
    """The CLI in this process, on the fake machine of the cli_machine fixture (a real process costs
    ~0.5 s: the one run of `python -m envkit preflight` on this machine is a slow test)."""
    return _Proc(args)


@pytest.mark.usefixtures("cli_machine")
def test_cli_wrong_type_is_exit_2(tmp_path: Path) -> None:
    proc = envkit_in_process("preflight", "--expect", write(tmp_path, 'gpu_count = "eight"\n'))
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith(
        "node.toml:1: gpu_count must be an integer (number of GPUs the node must have: NVML's; AMD's or "
        "Intel's on such a node), not str 'eight'"
    )
    assert "Traceback" not in proc.stderr


@pytest.mark.usefixtures("cli_machine")
def test_cli_unknown_verify_check_is_exit_2() -> None:
    proc = envkit_in_process("preflight", "--verify", "device,compiel")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == (
        "envkit: --verify 'device,compiel': unknown compiel; choose from device, compile, amp, dist, perf, extensions"
    )


@pytest.mark.usefixtures("cli_machine")
def test_cli_unhealthy_node_prints_one_reason_line_and_junit(tmp_path: Path) -> None:
    junit = tmp_path / "out" / "preflight.xml"
    proc = envkit_in_process(
        "preflight",
        "--expect",
        write(tmp_path, "gpu_count = 8\n"),
        "--junit",
        str(junit),
        "--json",
        "--python",
        sys.executable,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == ["envkit: expect.gpu_count: expected 8, found 0"]
    report = json.loads(proc.stdout)
    assert report["summary"]["status"] == "unhealthy"
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"


@pytest.mark.usefixtures("cli_machine")
def test_cli_healthy_node_exits_0() -> None:
    # A node without a GPU and with a working CPU torch (the test interpreter's): nothing fails.
    proc = envkit_in_process("preflight", "--python", sys.executable)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


@pytest.mark.slow
@pytest.mark.host_tools
def test_cli_on_this_machine_gives_a_verdict() -> None:
    # Whatever this machine is (which checks pass depends on it: a container without GPUs fails
    # container.gpus), preflight answers: 0 and nothing on stderr, or 1 and one reason line.
    proc = envkit_cmd("preflight", "--python", sys.executable)
    assert proc.returncode in (0, 1), proc.stderr
    if proc.returncode == 0:
        assert proc.stderr == ""
    else:
        (line,) = proc.stderr.splitlines()
        assert line.startswith("envkit: ") and "Traceback" not in proc.stderr
