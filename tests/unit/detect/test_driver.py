"""Driver detection: the parsers on real formats, and the NVML -> /proc -> /sys -> nvidia-smi chain."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from envkit.detect.driver import (
    detect_driver,
    parse_nvidia_smi_csv,
    parse_nvidia_smi_header,
    parse_proc_version,
    parse_sys_module_version,
    smi_gpus,
)
from envkit.detect.nvml import NvmlReading
from envkit.versions import ComputeCapability, NvVersion, Version

NO_NVML = NvmlReading(error="LibraryNotFound: NVML Shared Library Not Found", error_name="LibraryNotFound")

PROC_OPEN = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build  "
    "(dvs-builder@U16-I2-C03-12-4)  Thu Jan 23 05:41:36 UTC 2025\n"
    "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
)
# Banner format of driver 560 (NordicHPC/sonar#183).
BANNER_560 = (
    "+-----------------------------------------------------------------------------------------+\n"
    "| NVIDIA-SMI 560.35.03              Driver Version: 560.35.03      CUDA Version: 12.6     |\n"
)
Q_580 = (
    "==============NVSMI LOG==============\n\n"
    "Timestamp                                 : Mon Nov 10 10:00:00 2025\n"
    "Driver Version                            : 580.95.05 [Deprecated; will be removed. Use KMD Version instead]\n"
    "KMD Version                               : 580.95.05\n"
    "CUDA Version                              : 13.0 [Deprecated; will be removed in CUDA 14.0. Use CUDA UMD Version instead]\n"
    "CUDA UMD Version                          : 13.0\n"
)


def test_proc_version_proprietary_and_open() -> None:
    version, module = parse_proc_version(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
    )
    assert str(version) == "535.104.05"
    assert module == "NVIDIA UNIX x86_64 Kernel Module"
    version, module = parse_proc_version(PROC_OPEN)
    assert version == NvVersion("570.86.15")
    assert module == "NVIDIA UNIX Open Kernel Module for x86_64"


def test_proc_version_without_the_line() -> None:
    assert parse_proc_version("") == (None, None)
    assert parse_proc_version("GCC version: 12\n") == (None, None)


def test_sys_module_version() -> None:
    assert str(parse_sys_module_version("550.54.15\n")) == "550.54.15"
    assert parse_sys_module_version("garbage") is None


def test_smi_header_old_banner_and_new_deprecated_words() -> None:
    banner = parse_nvidia_smi_header(BANNER_560)
    assert (str(banner.driver), banner.cuda) == ("560.35.03", Version("12.6"))
    q = parse_nvidia_smi_header(Q_580)
    assert (str(q.driver), q.cuda) == ("580.95.05", Version("13.0"))


def test_smi_csv_several_gpus_and_na_cells() -> None:
    text = (
        "0, NVIDIA H100 80GB HBM3, GPU-aaa, 00000000:18:00.0, 550.54.15, 81559, 9.0\n"
        "1, NVIDIA H100 80GB HBM3, GPU-bbb, 00000000:2A:00.0, 550.54.15, 81559, 9.0\n"
        "2, Tesla K80, GPU-ccc, 00000000:3B:00.0, 550.54.15, [N/A], [Not Supported]\n"
    )
    gpus, driver, notes = parse_nvidia_smi_csv(text)
    assert [g.index for g in gpus] == [0, 1, 2]
    assert gpus[1].pci_bus_id == "00000000:2A:00.0"
    assert gpus[0].compute_capability == ComputeCapability(9, 0)
    assert gpus[2].memory_total_mib is None and gpus[2].compute_capability is None
    assert str(driver) == "550.54.15"
    assert notes == []
    assert all(g.source == "nvidia-smi" for g in gpus)


def test_smi_csv_garbage_lines_become_notes() -> None:
    gpus, driver, notes = parse_nvidia_smi_csv(
        "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 535.86\n"
    )
    assert gpus == [] and driver is None
    assert len(notes) == 2


@given(st.text())
def test_parsers_never_raise_on_any_text(text: str) -> None:
    parse_proc_version(text)
    parse_sys_module_version(text)
    parse_nvidia_smi_header(text)
    parse_nvidia_smi_csv(text)


def test_nvml_answer_wins(machine) -> None:  # type: ignore[no-untyped-def]
    machine.file("/proc/driver/nvidia/version", PROC_OPEN)
    reading = NvmlReading(driver_version=NvVersion("570.86.15"), cuda_version=Version("12.8"))
    facts = detect_driver(machine.system(), reading)
    assert facts.source == "nvml"
    assert facts.cuda_version == Version("12.8")
    assert facts.kernel_module == "NVIDIA UNIX Open Kernel Module for x86_64"


def test_proc_file_when_nvml_fails(machine) -> None:  # type: ignore[no-untyped-def]
    machine.file("/proc/driver/nvidia/version", PROC_OPEN)
    facts = detect_driver(machine.system(), NO_NVML)
    assert (str(facts.version), facts.source) == ("570.86.15", "/proc/driver/nvidia/version")
    assert facts.nvml_error.startswith("LibraryNotFound")


def test_sys_module_then_nvidia_smi(machine) -> None:  # type: ignore[no-untyped-def]
    machine.file("/sys/module/nvidia/version", "535.183.01\n")
    machine.program("nvidia-smi", Q_580)
    facts = detect_driver(machine.system(), NO_NVML)
    assert (str(facts.version), facts.source) == ("535.183.01", "/sys/module/nvidia/version")
    assert facts.cuda_version == Version("13.0")  # from nvidia-smi's header


def test_wsl_nvidia_smi_outside_path(machine) -> None:  # type: ignore[no-untyped-def]
    # WSL2: no /proc/driver/nvidia, nvidia-smi lives in /usr/lib/wsl/lib and is not on PATH.
    from tests.conftest import write_program

    write_program(machine.root / "usr/lib/wsl/lib", "nvidia-smi", BANNER_560)
    facts = detect_driver(machine.system(), NO_NVML)
    assert (str(facts.version), facts.source) == ("560.35.03", "nvidia-smi")


def test_hanging_nvidia_smi_is_bounded(machine) -> None:  # type: ignore[no-untyped-def]
    machine.program("nvidia-smi", "", sleep=30)
    start = time.monotonic()
    facts = detect_driver(machine.system(deadline=time.monotonic() + 0.3), NO_NVML)  # it hangs 30 s
    assert time.monotonic() - start < 5
    assert facts.version is None
    assert any("timed out" in n for n in facts.notes)


def test_failing_nvidia_smi_is_noted(machine) -> None:  # type: ignore[no-untyped-def]
    machine.program(
        "nvidia-smi",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        rc=9,
    )
    facts = detect_driver(machine.system(), NO_NVML)
    assert facts.version is None
    assert "exited with 9" in facts.notes[0]
    assert "couldn't communicate" in facts.notes[0]


def test_unreadable_proc_file_is_noted(machine) -> None:  # type: ignore[no-untyped-def]
    # A path that exists but cannot be read as a file (these tests may run as root, who reads
    # any file whatever its mode): the failure is noted and the chain goes on.
    (machine.root / "proc/driver/nvidia/version").mkdir(parents=True)
    machine.file("/sys/module/nvidia/version", "550.54.15\n")
    facts = detect_driver(machine.system(), NO_NVML)
    assert str(facts.version) == "550.54.15"
    assert any(n.startswith("/proc/driver/nvidia/version: ") for n in facts.notes)


def test_smi_gpus_from_csv(machine) -> None:  # type: ignore[no-untyped-def]
    machine.program(
        "nvidia-smi", "0, NVIDIA GeForce RTX 4090, GPU-x, 00000000:01:00.0, 550.120, 24564, 8.9\n"
    )
    gpus, driver, _notes = smi_gpus(machine.system())
    assert gpus[0].name == "NVIDIA GeForce RTX 4090"
    assert gpus[0].compute_capability == ComputeCapability(8, 9)
    assert str(driver) == "550.120"


# ---- garbage from nvidia-smi is not a fact ------------------------------------------------------

# Recorded-style --query-gpu rows (the H100 row of the docstring) with garbage where values go.
GARBAGE_ROWS = (
    "0, NVIDIA H100 80GB HBM3, GPU-5b9a, 00000000:18:00.0, 550.54.15, 100000000000000000000000000, 99.99\n"
    "1, NVIDIA H100 80GB HBM3, GPU-5b9b, 00000000:2A:00.0, 550.54.15, 1e+26, 9.0\n"
    "2, NVIDIA H100 80GB HBM3, GPU-5b9c, 00000000:3A:00.0, 550.54.15, 81559, 9.0\n"
    "2, NVIDIA H100 80GB HBM3, GPU-5b9c, 00000000:3A:00.0, 550.54.15, 81559, 9.0\n"
    "99999999, x, y, z, 550.54.15, 1, 1.0\n"
)


def test_implausible_smi_values_become_none_with_a_note() -> None:
    gpus, driver, notes = parse_nvidia_smi_csv(GARBAGE_ROWS)
    assert [g.index for g in gpus] == [0, 1, 2]  # the repeat and the absurd index are dropped
    assert gpus[0].memory_total_mib is None and gpus[0].compute_capability is None
    assert gpus[1].memory_total_mib is None and gpus[1].compute_capability == ComputeCapability(9, 0)
    assert gpus[2].memory_total_mib == 81559  # a real value stays
    assert str(driver) == "550.54.15"
    text = "\n".join(notes)
    assert "GPU 0: memory_total_mib 100000000000000000000000000 is implausible" in text
    assert "GPU 0: compute capability 99.99 is implausible" in text
    assert "GPU 1: memory '1e+26' is not a number" in text
    assert "GPU index 2 is a repeat" in text
    assert "unreadable line '99999999" in text


def test_notes_and_names_are_capped() -> None:
    from envkit.detect.plausible import MAX_NOTE_CHARS, MAX_NOTES, MAX_TEXT_CHARS

    rows = "".join(
        f"{i}, {'N' * 5000}\x1b[2J, GPU-{i}, 0:{i}, 550.54.15, 99999999999, 42.42\n" for i in range(40)
    )
    rows += "garbage " * 10000 + "\n"
    gpus, _driver, notes = parse_nvidia_smi_csv(rows)
    assert len(gpus) == 40
    assert all(g.name is not None and len(g.name) <= MAX_TEXT_CHARS and "\x1b" not in g.name for g in gpus)
    assert len(notes) == MAX_NOTES + 1 and notes[-1].endswith("more notes left out")
    assert all(len(n) <= MAX_NOTE_CHARS for n in notes)


def test_header_with_a_thousand_digit_cuda_is_no_cuda() -> None:
    header = parse_nvidia_smi_header("Driver Version : 550.54.15\nCUDA Version : " + "9" * 1000 + "\n")
    assert header.driver == NvVersion("550.54.15")
    assert header.cuda is None


def test_plausible_gpu_checks_temperatures_power_and_counts() -> None:
    from envkit.detect.plausible import plausible_gpu
    from envkit.facts import GpuFacts

    gpu, notes = plausible_gpu(
        GpuFacts(
            0,
            temperature_c=9999,
            temperature_slowdown_c=87,
            power_w=float("nan"),
            power_limit_w=400.0,
            pcie_width=999,
            ecc_uncorrected_volatile=-1,
            retired_pages=3,
        ),
        "nvml",
    )
    assert gpu.temperature_c is None and gpu.power_w is None and gpu.pcie_width is None
    assert gpu.ecc_uncorrected_volatile is None
    assert (gpu.temperature_slowdown_c, gpu.power_limit_w, gpu.retired_pages) == (87, 400.0, 3)
    assert len(notes) == 4 and all(n.startswith("nvml: GPU 0: ") for n in notes)


def test_a_hung_nvidia_smi_is_started_once_per_run(machine, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """NVML failed and nvidia-smi -q hung until the run's deadline: its GPU list is not asked of a
    second nvidia-smi with a token timeout (watch mode's test found three where two runs were)."""
    from envkit.detect import _nvidia

    pids = tmp_path / "pids"
    script = machine.bin / "nvidia-smi"
    script.write_text(f"#!/bin/sh\necho $$ >> '{pids}'\nexec sleep 30\n", encoding="utf-8")
    script.chmod(0o755)
    driver, gpus = _nvidia(machine.system(deadline=time.monotonic() + 0.3))
    assert (driver.version, gpus) == (None, ())
    assert len(pids.read_text().split()) == 1
