"""envkit's parsers and checks on the recorded outputs of real machines (tests/data/README.md says
where each one came from)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.checks import CHECKS
from envkit.checks.gpu import check_gpu_health
from envkit.commands.doctor import diagnose_file
from envkit.detect.driver import parse_nvidia_smi_csv, parse_nvidia_smi_header, parse_proc_version
from envkit.detect.nvml import RecordedNvml, read_nvml
from envkit.detect.toolkit import parse_nvcc_version
from envkit.facts import Facts
from envkit.report import Status
from envkit.versions import NvVersion, Version
from tests.conftest import DATA


def read(rel: str) -> str:
    return (DATA / rel).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "version", "module"),
    [
        ("470-proprietary-centos7", "470.63.01", "NVIDIA UNIX x86_64 Kernel Module"),
        ("525-open-archlinux", "525.60.11", "NVIDIA UNIX Open Kernel Module for x86_64"),
        ("535-proprietary-ubuntu22.04", "535.183.01", "NVIDIA UNIX x86_64 Kernel Module"),
        ("565-open-ubuntu24.04", "565.57.01", "NVIDIA UNIX Open Kernel Module for x86_64"),
        ("580-proprietary-truenas", "580.173.02", "NVIDIA UNIX x86_64 Kernel Module"),
        (
            "jetson-orin-nx-l4t-35.3.1-aarch64",
            "35.3.1",
            "NVIDIA UNIX Open Kernel Module for aarch64",
        ),
    ],
)
def test_proc_driver_version_files(name: str, version: str, module: str) -> None:
    parsed, parsed_module = parse_proc_version(read(f"proc-driver-version/{name}.txt"))
    assert str(parsed) == version
    assert parsed_module == module


def test_every_proc_file_is_covered() -> None:
    assert len(list((DATA / "proc-driver-version").glob("*.txt"))) == 6


@pytest.mark.parametrize(
    ("name", "driver", "cuda"),
    [
        ("geforce-rtx5090-570-banner.txt", "570.124.06", "12.8"),
        ("h100-nvl-x2-550-banner.txt", "550.54.14", "12.4"),
        ("kmd-610-geforce-rtx3080-banner.txt", "610.43.03", "13.3"),  # "KMD Version" banner
        ("quadro-rtx8000-x10-470-banner.txt", "470.63.01", "11.4"),
        ("windows-551-wddm-banner.txt", "551.76", "12.4"),
        ("wsl2-555-geforce-rtx4070-banner.txt", "555.99", "12.5"),
        ("wsl2-555-segfault-banner.txt", "555.85", "12.5"),
        ("a100-sxm4-80gb-510-remap-pending-q.txt", "510.73.08", "11.6"),
        ("driver-610-deprecated-header-q.txt", "610.47", "13.3"),  # "[Deprecated; …]" words
        ("geforce-gtx680-470-q.txt", "470.256.02", "11.4"),
        ("geforce-rtx5090-570-q.txt", "570.124.06", "12.8"),
        ("gh200-aarch64-550-q.txt", "550.127.05", "12.4"),
        ("h100-nvl-x2-550-q.txt", "550.54.14", "12.4"),
    ],
)
def test_nvidia_smi_headers(name: str, driver: str, cuda: str) -> None:
    header = parse_nvidia_smi_header(read(f"nvidia-smi/{name}"))
    assert str(header.driver) == driver
    assert header.cuda == Version(cuda)


def test_header_without_versions() -> None:
    header = parse_nvidia_smi_header(read("nvidia-smi/v100-sxm2-32gb-power-brake-q.txt"))
    assert (header.driver, header.cuda) == (None, None)


@pytest.mark.parametrize("path", sorted((DATA / "nvidia-smi").glob("*")), ids=lambda p: p.name)
def test_csv_parser_never_crashes_on_any_recorded_output(path: Path) -> None:
    gpus, _driver, notes = parse_nvidia_smi_csv(path.read_text(encoding="utf-8"))
    assert all(g.source == "nvidia-smi" for g in gpus)
    assert isinstance(notes, list)


@pytest.mark.parametrize("path", sorted((DATA / "nvcc").glob("*.txt")), ids=lambda p: p.name)
def test_nvcc_outputs(path: Path) -> None:
    version, _build = parse_nvcc_version(path.read_text(encoding="utf-8"))
    major_minor = path.name.split("-")[0].removesuffix(".txt")
    assert version is not None
    assert f"{version.major}.{version.minor}" == major_minor


@pytest.mark.parametrize(
    ("name", "driver", "cuda", "gpus", "status", "summary"),
    [
        (
            "h100-nvl-x2-550",
            "550.54.14",
            "12.4",
            2,
            Status.PASS,
            "2 GPUs healthy (NVIDIA H100 NVL)",
        ),
        (
            "gh200-aarch64-550",
            "550.127.05",
            "12.4",
            1,
            Status.PASS,
            "1 GPU healthy (NVIDIA GH200 480GB)",
        ),
        (
            "geforce-gtx680-470",
            "470.256.02",
            "11.4",
            1,
            Status.PASS,
            "1 GPU healthy (NVIDIA GeForce GTX 680)",
        ),
        (
            "a100-sxm4-80gb-510-remap-pending",
            "510.73.08",
            "11.6",
            1,
            Status.WARN,
            "GPU 0 (NVIDIA A100-SXM4-80GB): a row remap is pending",
        ),
        (
            "geforce-rtx5090-570",
            "570.124.06",
            "12.8",
            1,
            Status.WARN,
            "GPU 0 (NVIDIA GeForce RTX 5090): PCIe link x8 of x16",
        ),
        (
            "v100-sxm2-32gb-power-brake",
            None,
            None,
            1,
            Status.WARN,
            "clocks held down by hw_slowdown and hw_power_brake",
        ),
    ],
)
def test_recorded_nvml_machines(
    name: str, driver: str | None, cuda: str | None, gpus: int, status: Status, summary: str
) -> None:
    reading = read_nvml(lambda: RecordedNvml.from_file(str(DATA / "nvml" / f"{name}.json")))
    assert reading.driver_version == (NvVersion(driver) if driver else None)
    assert reading.cuda_version == (Version(cuda) if cuda else None)
    assert len(reading.gpus) == gpus
    result = check_gpu_health(Facts(gpus=reading.gpus))
    assert result.status is status
    assert summary in result.summary


def test_h200_recorded_by_envkit_agrees_with_nvidia_smi() -> None:
    """The NVML recording and the doctor report from the H200 run of scripts/gpu_check.sh, against
    nvidia-smi's answer on the same machine (tests/data/README.md)."""
    index, name, driver, memory_mib, cc = read("reports/h200-580-nvidia-smi-query.csv").strip().split(", ")
    reading = read_nvml(lambda: RecordedNvml.from_file(str(DATA / "nvml" / "h200-580.json")))
    assert str(reading.driver_version) == driver
    assert reading.cuda_version == Version("13.0")
    (gpu,) = reading.gpus
    assert (gpu.index, gpu.name, gpu.memory_total_mib, str(gpu.compute_capability)) == (
        int(index),
        name,
        int(memory_mib),
        cc,
    )
    health = check_gpu_health(Facts(gpus=reading.gpus))
    assert health.status is Status.PASS
    assert health.summary == "1 GPU healthy (NVIDIA H200)"


def test_h200_report_diagnosed_from_file() -> None:
    report = diagnose_file(str(DATA / "reports" / "h200-580-torch2.11-cu130.json"))
    statuses = {c.id: c.status for c in report.checks}
    assert set(statuses) == set(CHECKS)  # every check judged the saved facts again
    # Recorded on the host itself (no container): those checks skip; every other one passes.
    container = {i for i in statuses if i.startswith("container.")}
    assert {statuses[i] for i in container} == {Status.SKIP}
    # Checks this report's envkit did not gather facts for: no error text, no compiler looked for.
    newer = {"torch.extension_load", "gpu.memory", "nccl.failure", "torch.compile_toolchain"}
    newer.add("torch.extensions")  # no flash-attn, xformers, vllm … on that node
    # AMD and Intel GPUs were not looked for by that envkit (facts.amd / intel are unknown).
    newer |= {"driver.amd", "driver.intel", "torch.gfx_arch"}
    assert {statuses[i] for i in newer} == {Status.SKIP}
    assert {s for i, s in statuses.items() if i not in container | newer} == {Status.PASS}
    assert report.cause is None
    facts = report.facts
    # Recorded before envkit read the local tag from torch/version.py: the metadata's version.
    assert facts.torch is not None and str(facts.torch.version) == "2.11.0"
    assert facts.torch.cuda == Version("13.0")
    assert [str(g.compute_capability) for g in facts.gpus] == ["9.0"]
