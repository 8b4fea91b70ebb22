"""The whole doctor against fake machines built from real parts: a file tree, stand-in programs,
recorded NVML answers and real interpreters."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from envkit.detect.nvml import RecordedNvml
from envkit.doctor import diagnose, diagnose_file
from envkit.errors import InputError
from envkit.report import REPORT_SCHEMA, Status
from tests.conftest import MachineBuilder, add_dist, add_fake_torch, make_venv, raise_nvml
from tests.unit.detect.test_nvml import GPU


def h100_node(machine: MachineBuilder, tmp_path: Path, gpus: int = 2) -> str:
    machine.nvml_data(
        {
            "driver_version": "550.54.15",
            "cuda_driver_version": 12040,
            "devices": [
                dict(GPU, name="NVIDIA H100 80GB HBM3", compute_capability=[9, 0], uuid=f"GPU-{i}")
                for i in range(gpus)
            ],
        }
    )
    machine.file(
        "/proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n",
    )
    for i in range(gpus):
        machine.file(f"/sys/bus/pci/devices/0000:{i + 0x18:02x}:00.0/vendor", "0x10de\n")
        machine.file(f"/sys/bus/pci/devices/0000:{i + 0x18:02x}:00.0/class", "0x030200\n")
    machine.file("/sys/module/nvidia/version", "550.54.15\n")
    machine.file("/sys/class/net/eth0/flags", "0x1003\n")
    site = make_venv(tmp_path / "pt")
    add_fake_torch(site, "2.5.1+cu124", cuda="12.4")
    add_dist(site, "nvidia-cudnn-cu12", "9.1.0.70")
    return str(tmp_path / "pt/bin/python")


def test_healthy_h100_node(machine: MachineBuilder, tmp_path: Path) -> None:
    python = h100_node(machine, tmp_path)
    report = diagnose(machine.system(), python=python)
    statuses = {c.id: c.status for c in report.checks}
    assert statuses["driver.loaded"] is Status.PASS
    assert statuses["gpu.health"] is Status.PASS
    assert statuses["torch.installed"] is Status.PASS
    assert statuses["torch.duplicates"] is Status.PASS
    assert statuses["torch.cuda_libs"] is Status.PASS
    assert statuses["toolkit.nvcc"] is Status.SKIP
    assert statuses["python.shm"] is Status.WARN  # the fake root has no /dev/shm
    facts = report.to_json()["facts"]
    assert facts["driver"]["version"] == "550.54.15"
    assert facts["driver"]["cuda_version"] == "12.4"
    assert [g["compute_capability"] for g in facts["gpus"]] == ["9.0", "9.0"]
    assert facts["torch"]["version"] == "2.5.1+cu124"
    assert facts["torch"]["cuda"] == "12.4"
    assert facts["python"]["selected_by"] == "--python"


def test_ecc_errors_and_a_lost_gpu(machine: MachineBuilder, tmp_path: Path) -> None:
    python = h100_node(machine, tmp_path, gpus=3)
    data = machine.nvml()._data  # type: ignore[attr-defined]
    data["devices"][1]["ecc_uncorrected_volatile"] = 4
    data["devices"][2]["temperature"] = {"error": "GpuIsLost"}
    report = diagnose(machine.system(), python=python)
    health = next(c for c in report.checks if c.id == "gpu.health")
    assert health.status is Status.FAIL
    assert "GPU 1" in health.detail and "GPU 2" in health.detail and "GpuIsLost" in health.detail
    assert report.exit_code() == 1


def test_driver_missing_but_gpu_on_bus(machine: MachineBuilder, tmp_path: Path) -> None:
    machine.nvml = raise_nvml("LibraryNotFound")
    machine.file("/sys/bus/pci/devices/0000:01:00.0/vendor", "0x10de\n")
    machine.file("/sys/bus/pci/devices/0000:01:00.0/class", "0x030000\n")
    (machine.root / "sys/module").mkdir(parents=True, exist_ok=True)
    report = diagnose(
        machine.system(), python=str(make_venv(tmp_path / "e").parent.parent.parent / "bin/python")
    )
    driver = next(c for c in report.checks if c.id == "driver.loaded")
    assert driver.status is Status.FAIL
    assert driver.fix.startswith("sudo modprobe nvidia")


def test_hanging_nvml_and_nvidia_smi_still_answer_in_time(machine: MachineBuilder, tmp_path: Path) -> None:
    hang: dict[str, Any] = {"driver_version": {"hang_s": 20, "error": "Timeout"}, "devices": []}
    machine.nvml = lambda: RecordedNvml(hang)
    machine.program("nvidia-smi", "", sleep=20)
    python = str(make_venv(tmp_path / "e").parent.parent.parent / "bin/python")
    start = time.monotonic()
    report = diagnose(machine.system(), python=python, timeout=1.5)
    elapsed = time.monotonic() - start
    assert elapsed < 4, elapsed
    assert any(n.startswith("nvidia: no answer before the time limit") for n in report.facts.notes)
    assert {c.id for c in report.checks} >= {"driver.loaded", "torch.installed"}


def test_broken_torch_import_with_deep(machine: MachineBuilder, tmp_path: Path) -> None:
    site = make_venv(tmp_path / "broken")
    add_fake_torch(
        site,
        "2.5.1+cu124",
        cuda="12.4",
        init="raise OSError('libcudnn.so.9: cannot open shared object file')\n",
    )
    report = diagnose(machine.system(), python=str(tmp_path / "broken/bin/python"), deep=True)
    installed = next(c for c in report.checks if c.id == "torch.installed")
    assert installed.status is Status.FAIL
    assert "libcudnn.so.9: cannot open shared object file" in installed.detail


def test_segfaulting_torch_with_deep(machine: MachineBuilder, tmp_path: Path) -> None:
    site = make_venv(tmp_path / "crash")
    add_fake_torch(
        site,
        "2.5.1+cu124",
        cuda="12.4",
        init="import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
    )
    report = diagnose(machine.system(), python=str(tmp_path / "crash/bin/python"), deep=True)
    installed = next(c for c in report.checks if c.id == "torch.installed")
    assert installed.status is Status.FAIL
    assert "killed by SIGSEGV" in installed.detail


def test_deep_on_the_real_cpu_torch(machine: MachineBuilder) -> None:
    import sys

    report = diagnose(machine.system(), python=sys.executable, deep=True)
    deep = report.facts.torch.deep
    assert deep is not None and deep.ok
    assert deep.cuda_available is False
    assert report.facts.torch.version is not None
    assert deep.version == report.facts.torch.version


def test_from_file_reruns_the_checks(machine: MachineBuilder, tmp_path: Path) -> None:
    python = h100_node(machine, tmp_path)
    saved = diagnose(machine.system(), python=python).to_json()
    saved["facts"]["gpus"][0]["ecc_uncorrected_volatile"] = 9  # what another machine saw
    path = tmp_path / "node7.json"
    path.write_text(json.dumps(saved))
    report = diagnose_file(str(path))
    assert report.source == str(path)
    assert next(c for c in report.checks if c.id == "gpu.health").status is Status.FAIL
    assert report.to_json()["schema"] == REPORT_SCHEMA


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "{not json",
            "neither an envkit JSON report nor `python -m torch.utils.collect_env` output (invalid JSON",
        ),
        ('{"schema": "other/1"}', "schema is 'other/1'"),
        ('{"schema": "envkit.report/1"}', "the report has no 'facts'"),
        (
            '{"schema": "envkit.report/1", "facts": {"gpus": [{"index": "0"}]}}',
            "facts.gpus[0].index: expected int",
        ),
        ("[]", "not an envkit report"),
    ],
)
def test_malformed_from_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(InputError) as info:
        diagnose_file(str(path))
    assert message in info.value.message


def test_missing_from_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read it"):
        diagnose_file(str(tmp_path / "nope.json"))


def test_bad_timeout(machine: MachineBuilder) -> None:
    with pytest.raises(InputError, match="positive number"):
        diagnose(machine.system(), timeout=0)
