"""The whole doctor against fake machines built from real parts: a file tree, stand-in programs,
recorded NVML answers and real interpreters."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from envkit.commands.doctor import diagnose, diagnose_file
from envkit.detect.nvml import RecordedNvml
from envkit.errors import InputError
from envkit.report import REPORT_SCHEMA, Status
from tests.conftest import MachineBuilder, add_dist, add_fake_torch, make_venv, raise_nvml
from tests.unit.detect.test_nvml import GPU

ROOT = Path(__file__).resolve().parents[3]


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
    assert report.cause is health  # a failure, ahead of the fake root's /dev/shm warning


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
    assert report.cause is driver  # before everything GPU-side (torch, /dev/shm, ...)
    assert report.to_json()["summary"]["cause"] == "driver.loaded"


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


@pytest.mark.slow  # imports the real CPU torch (~6 s); the stand-in torch tests above are the fast ones
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
            "found no error or report envkit knows (not valid JSON:",
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


# ---- children and resources: nothing outlives envkit, one hang costs only its own facts ---------


def _alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped is dead for this purpose)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _hanging_program(folder: Path, name: str, pids: Path, *, ignore_term: bool = False) -> None:
    """A stand-in that records its pid and then sleeps forever (optionally deaf to SIGTERM:
    an ignored signal stays ignored across exec, so ``sleep`` ignores it too)."""
    trap = "trap '' TERM\n" if ignore_term else ""
    script = folder / name
    script.write_text(f"#!/bin/sh\necho $$ >> {pids}\n{trap}exec sleep 1000\n")
    script.chmod(0o755)


def _pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def _envkit(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "envkit", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _cli_env(machine: MachineBuilder) -> dict[str, str]:
    import os

    return {**machine.env, "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"], "PYTHONPATH": str(ROOT)}


@pytest.mark.slow
@pytest.mark.parametrize("ignore_term", [False, True], ids=["hangs", "hangs-and-ignores-sigterm"])
def test_no_stand_in_outlives_doctor_timeout(
    machine: MachineBuilder, tmp_path: Path, ignore_term: bool
) -> None:
    pids = tmp_path / "pids"
    _hanging_program(machine.bin, "nvidia-smi", pids, ignore_term=ignore_term)
    _hanging_program(machine.bin, "ldconfig", pids, ignore_term=ignore_term)
    start = time.monotonic()
    proc = _envkit(["doctor", "--json", "--timeout", "2", "--python", sys.executable], _cli_env(machine))
    out, err = proc.communicate(timeout=60)
    elapsed = time.monotonic() - start
    started = _pids(pids)
    assert len(started) >= 2, err  # both stand-ins really ran
    assert [pid for pid in started if _alive(pid)] == [], "a stand-in outlived envkit"
    assert elapsed < 20, elapsed  # generous: 2 s of budget, the stop, the interpreter start
    report = json.loads(out)
    notes = " ".join(report["facts"]["host"]["notes"])
    assert "ld.so cache not read" in notes


@pytest.mark.slow
def test_ctrl_c_during_a_hung_deep_import_leaves_no_child(machine: MachineBuilder, tmp_path: Path) -> None:
    pids = tmp_path / "torch.pids"
    site = make_venv(tmp_path / "hang")
    add_fake_torch(
        site,
        "2.5.1+cu124",
        cuda="12.4",
        init=(
            "import os, signal, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"  # only SIGKILL stops it
            f"open({str(pids)!r}, 'a').write('%d\\n' % os.getpid())\n"
            "time.sleep(1000)\n"
        ),
    )
    proc = _envkit(
        ["doctor", "--deep", "--timeout", "120", "--python", str(tmp_path / "hang/bin/python")],
        _cli_env(machine),
    )
    deadline = time.monotonic() + 60
    while not _pids(pids) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    (torch_pid,) = _pids(pids)
    assert _alive(torch_pid)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert not _alive(torch_pid), "the hung torch import outlived envkit"


@pytest.mark.slow
def test_deep_with_a_hanging_import_fails_within_the_timeout(machine: MachineBuilder, tmp_path: Path) -> None:
    pids = tmp_path / "torch.pids"
    site = make_venv(tmp_path / "hang")
    add_fake_torch(
        site,
        "2.5.1+cu124",
        cuda="12.4",
        init=f"import os, time\nopen({str(pids)!r}, 'a').write('%d\\n' % os.getpid())\ntime.sleep(1000)\n",
    )
    start = time.monotonic()
    report = diagnose(machine.system(), python=str(tmp_path / "hang/bin/python"), deep=True, timeout=4)
    elapsed = time.monotonic() - start
    installed = next(c for c in report.checks if c.id == "torch.installed")
    assert installed.status is Status.FAIL
    assert "import torch did not finish in" in installed.summary
    assert "healthy" not in installed.summary
    assert report.facts.torch.deep is not None and report.facts.torch.deep.timed_out
    assert elapsed < 4 + 3, elapsed  # the deep budget fits inside --timeout (plus a small margin)
    assert [pid for pid in _pids(pids) if _alive(pid)] == []


def test_deep_unanswered_is_a_failure_not_a_pass(machine: MachineBuilder, tmp_path: Path) -> None:
    # A deep probe that did not even return (its thread abandoned) is the same failure.
    from envkit.checks import run_checks
    from envkit.detect.deep import deep_unanswered
    from envkit.facts import Facts, TorchFacts
    from envkit.versions import parse_version

    torch = TorchFacts(version=parse_version("2.5.1"), deep=deep_unanswered(7.5))
    checks = {c.id: c for c in run_checks(Facts(torch=torch), ["torch.installed"])}
    result = checks["torch.installed"]
    assert result.status is Status.FAIL
    assert result.summary.endswith("import torch did not finish in 7.5 s")


def test_a_hung_ldconfig_costs_only_the_ld_cache(machine: MachineBuilder, tmp_path: Path) -> None:
    python = h100_node(machine, tmp_path)
    pids = tmp_path / "pids"
    _hanging_program(machine.bin, "ldconfig", pids)
    (machine.root / "dev/shm").mkdir(parents=True)
    report = diagnose(machine.system(), python=python, timeout=1.2)
    host = report.facts.host
    assert _pids(pids), "the stand-in ldconfig did not run"
    assert host.shm_bytes is not None and host.shm_bytes > 0
    assert len(host.nvidia_pci_devices) == 2
    assert [i.name for i in host.interfaces] == ["eth0"]
    assert any(n.startswith("ld.so cache not read") for n in host.notes)
    shm = next(c for c in report.checks if c.id == "python.shm")
    assert "missing" not in shm.summary
    assert [pid for pid in _pids(pids) if _alive(pid)] == []


def test_a_wedged_gpu_keeps_the_known_driver(machine: MachineBuilder, tmp_path: Path) -> None:
    python = h100_node(machine, tmp_path)
    hang: dict[str, Any] = {"driver_version": {"hang_s": 20, "error": "Timeout"}, "devices": []}
    machine.nvml = lambda: RecordedNvml(hang)
    pids = tmp_path / "pids"
    _hanging_program(machine.bin, "nvidia-smi", pids)
    report = diagnose(machine.system(), python=python, timeout=1.2)
    assert str(report.facts.driver.version) == "550.54.15"
    driver = next(c for c in report.checks if c.id == "driver.loaded")
    assert driver.status is Status.FAIL
    assert "550.54.15" in driver.summary
    assert "install the NVIDIA driver" not in (driver.fix or "")
    assert "xid" in (driver.fix or "").lower()
    assert [pid for pid in _pids(pids) if _alive(pid)] == []


GARBAGE_SMI = (
    "0, NVIDIA H100 80GB HBM3, GPU-5b9a0c6e-3c7b-4a3f-9e61-1f3a2b4c5d6e, 00000000:18:00.0, "
    "550.54.15, 100000000000000000000000000, 99.99\n"
)


def test_garbage_from_nvidia_smi_is_not_a_fact(machine: MachineBuilder, tmp_path: Path) -> None:
    machine.program("nvidia-smi", GARBAGE_SMI)
    report = diagnose(machine.system(), python=sys.executable, timeout=20)
    (gpu,) = report.facts.gpus
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.memory_total_mib is None and gpu.compute_capability is None
    notes = " ".join(report.facts.driver.notes)
    assert "memory_total_mib 100000000000000000000000000 is implausible" in notes
    assert "compute capability 99.99 is implausible" in notes
