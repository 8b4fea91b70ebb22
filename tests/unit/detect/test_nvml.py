"""NVML through the recorded seam: unsupported fields are None, a lost GPU does not hide the others."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from envkit.detect.nvml import RecordedNvml, decode_clock_events, read_nvml, record_nvml
from envkit.versions import ComputeCapability, Version

GPU: dict[str, Any] = {
    "name": "NVIDIA A100-SXM4-80GB",
    "uuid": "GPU-11111111-2222-3333-4444-555555555555",
    "pci_bus_id": "00000000:07:00.0",
    "compute_capability": [8, 0],
    "memory_total": 85899345920,
    "mig_mode": [0, 0],
    "persistence_mode": 1,
    "ecc_mode": [1, 1],
    "ecc_uncorrected_volatile": 0,
    "retired_pages": {"error": "NotSupported"},
    "retired_pages_pending": {"error": "NotSupported"},
    "remapped_rows": [0, 0, 0, 0],
    "pcie_gen": 4,
    "pcie_gen_max": 4,
    "pcie_width": 16,
    "pcie_width_max": 16,
    "clock_event_reasons": 1,
    "temperature": 34,
    "temperature_slowdown": 87,
    "power_usage": 61000,
    "power_limit": 400000,
}


def machine(*gpus: dict[str, Any]) -> dict[str, Any]:
    return {"driver_version": "535.104.05", "cuda_driver_version": 12020, "devices": list(gpus)}


def test_reads_driver_and_every_field() -> None:
    reading = read_nvml(lambda: RecordedNvml(machine(GPU)))
    assert str(reading.driver_version) == "535.104.05"
    assert reading.cuda_version == Version("12.2")
    (gpu,) = reading.gpus
    assert gpu.name == "NVIDIA A100-SXM4-80GB"
    assert gpu.compute_capability == ComputeCapability(8, 0)
    assert gpu.memory_total_mib == 81920
    assert gpu.ecc_enabled is True and gpu.ecc_pending is True
    assert gpu.mig_enabled is False
    assert gpu.remapped_rows_pending is False
    assert gpu.clock_events == ("gpu_idle",)
    assert gpu.power_w == 61.0 and gpu.power_limit_w == 400.0
    assert gpu.error is None


def test_unsupported_fields_are_none_and_named() -> None:
    (gpu,) = read_nvml(lambda: RecordedNvml(machine(GPU))).gpus
    assert gpu.retired_pages is None
    assert gpu.retired_pages_pending is None
    assert set(gpu.unsupported) == {"retired_pages", "retired_pages_pending"}


def test_missing_fields_on_an_old_driver_do_not_crash() -> None:
    old = {
        "name": "Tesla K80",
        "uuid": "GPU-k80",
    }  # everything else: NotSupported / FunctionNotFound
    (gpu,) = read_nvml(lambda: RecordedNvml(machine(old))).gpus
    assert gpu.name == "Tesla K80"
    assert gpu.compute_capability is None
    assert "compute_capability" in gpu.unsupported


def test_a_gpu_lost_mid_query_fails_alone() -> None:
    lost = copy.deepcopy(GPU)
    lost["ecc_mode"] = {"error": "GpuIsLost", "message": "GPU is lost"}
    reading = read_nvml(lambda: RecordedNvml(machine(GPU, lost, GPU)))
    assert [g.error for g in reading.gpus] == [None, "GpuIsLost: GPU is lost", None]
    assert reading.gpus[1].name == GPU["name"]  # what it answered before it was lost is kept
    assert reading.gpus[1].temperature_c is None
    assert reading.gpus[2].temperature_c == 34


def test_init_errors_are_data() -> None:
    reading = read_nvml(lambda: RecordedNvml({"init_error": "DriverNotLoaded"}))
    assert reading.error_name == "DriverNotLoaded"
    assert reading.gpus == ()
    assert reading.driver_version is None


def test_device_count_failure_keeps_the_driver() -> None:
    data = machine()
    data["devices"] = {"error": "Unknown"}
    reading = read_nvml(lambda: RecordedNvml(data))
    assert str(reading.driver_version) == "535.104.05"
    assert reading.error_name == "Unknown"


def test_record_replays_the_same_answers() -> None:
    data = machine(GPU)
    again = record_nvml(RecordedNvml(data))
    assert read_nvml(lambda: RecordedNvml(again)) == read_nvml(lambda: RecordedNvml(data))


def test_clock_event_names() -> None:
    assert decode_clock_events(0) == ()
    assert decode_clock_events(0x8 | 0x40 | 0x80) == ("hw_slowdown", "hw_thermal", "hw_power_brake")
    assert decode_clock_events(0x1000) == ("0x1000",)


@pytest.mark.parametrize("value", [0, -1, -12080, 10**9, 999])
def test_a_cuda_version_integer_out_of_range_is_unknown(value: int) -> None:
    # NVML's CUDA version integer is range-checked: 0 is not "CUDA 0.0", a negative value does not
    # raise out of detection (issue 25); the GPUs are still read.
    record = {
        "driver_version": "550.54.15",
        "cuda_driver_version": value,
        "devices": [{"name": "NVIDIA H100"}],
    }
    reading = read_nvml(lambda: RecordedNvml(record))
    assert reading.cuda_version is None and reading.error is None
    assert [g.name for g in reading.gpus] == ["NVIDIA H100"]
    assert (
        str(read_nvml(lambda: RecordedNvml({**record, "cuda_driver_version": 12080})).cuda_version) == "12.8"
    )
