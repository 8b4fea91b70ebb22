"""``envkit doctor --json`` on recorded AMD and Intel machines (tests/data/amd, tests/data/intel: the
kernel's sysfs trees and the vendor tools' outputs of real machines, sources in tests/data/README.md),
copied under the fake machine's root: what a user of such a machine sees."""

from __future__ import annotations

import json
import shutil
import sys
from typing import Any

import pytest
from typer.testing import CliRunner

from envkit import cli
from tests.conftest import DATA, MachineBuilder

runner = CliRunner()


def doctor(machine: MachineBuilder, recorded: str = "", *args: str) -> dict[str, Any]:
    if recorded:
        shutil.copytree(DATA / recorded, machine.root, symlinks=True, dirs_exist_ok=True)
    result = runner.invoke(cli.app, ["doctor", "--json", *args])
    assert result.exit_code in (0, 1), result.stderr
    assert "Traceback" not in result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def checks(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in report["checks"]}


@pytest.mark.parametrize(
    ("recorded", "gpus", "arch", "partitions"),
    [
        ("amd/mi300x-x8-cpx", 8, "gfx942", 8),
        # The other recorded trees are read by tests/unit/detect/test_vendors.py in the fast suite;
        # the whole doctor run on each of them is in the slow one.
        pytest.param("amd/mi210-x8", 8, "gfx90a", 1, marks=pytest.mark.slow),
        pytest.param("amd/mi308x-x8-4part", 8, "gfx942", 4, marks=pytest.mark.slow),
        pytest.param("amd/vega10-2018", 2, "gfx900", 1, marks=pytest.mark.slow),
    ],
)
def test_amd_machines(
    cli_machine: MachineBuilder, recorded: str, gpus: int, arch: str, partitions: int
) -> None:
    report = doctor(cli_machine, recorded)
    amd = report["facts"]["amd"]
    assert len(amd["gpus"]) == gpus and {g["arch"] for g in amd["gpus"]} == {arch}
    assert amd["gpus"][0]["partitions"] == partitions and "sysfs" in amd["sources"]
    found = checks(report)
    assert found["driver.amd"]["status"] == "pass"
    # The fake machine's python has no torch: the fix installs the ROCm build for the GPUs, never a
    # silent CPU one (gfx900, Vega 10, is still in the ROCm 7.2 wheels' PYTORCH_ROCM_ARCH).
    assert "download.pytorch.org/whl/rocm" in found["torch.installed"]["fix"]


def test_a_cpu_torch_on_an_amd_machine_is_a_finding(cli_machine: MachineBuilder) -> None:
    # The test interpreter's torch is the CPU build: beside AMD GPUs that is torch.gpu_vendor's
    # failure, and its fix is the ROCm plan for the GPUs.
    report = doctor(cli_machine, "amd/mi300x-x8-cpx", "--python", sys.executable)
    vendor = checks(report)["torch.gpu_vendor"]
    assert vendor["status"] == "fail" and "CPU-only build" in vendor["summary"]
    assert "download.pytorch.org/whl/rocm" in vendor["fix"]


def test_amd_tools_without_kfd(cli_machine: MachineBuilder) -> None:
    # amd-smi answers, the kernel's KFD shows nothing (a container without /dev/kfd and /sys/class/kfd).
    cli_machine.program("amd-smi", (DATA / "amd" / "amd-smi-static-mi300a-x4.txt").read_text())
    report = doctor(cli_machine)
    assert [g["name"] for g in report["facts"]["amd"]["gpus"]] == ["MI300A"] * 4
    found = checks(report)["driver.amd"]
    assert found["status"] == "warn" and "--device=/dev/kfd" in found["fix"]


def test_intel_panther_lake(cli_machine: MachineBuilder) -> None:
    report = doctor(cli_machine, "intel/panther-lake-b080-xe")
    intel = report["facts"]["intel"]
    assert intel["driver"] == "xe" and [g["arch"] for g in intel["gpus"]] == ["ptl"]
    found = checks(report)
    assert found["driver.intel"]["status"] == "pass"
    assert "download.pytorch.org/whl/xpu" in found["torch.installed"]["fix"]


def test_intel_arc_with_opencl_only(cli_machine: MachineBuilder) -> None:
    cli_machine.program("xpu-smi", (DATA / "intel" / "xpu-smi-discovery-d0-arc-a770.txt").read_text())
    cli_machine.program("sycl-ls", (DATA / "intel" / "sycl-ls-arc-a770-opencl-only.txt").read_text())
    report = doctor(cli_machine)
    intel = report["facts"]["intel"]
    assert [g["arch"] for g in intel["gpus"]] == ["dg2"] and intel["level_zero"] is False
    assert checks(report)["driver.intel"]["status"] == "fail"
