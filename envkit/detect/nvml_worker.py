"""NVML asked in a child process: ``python envkit/detect/nvml_worker.py MARKER``.

NVML is a C library loaded into whoever calls it. A ``libnvidia-ml.so.1`` that segfaults or
aborts kills its caller, and one that spins in C holds the GIL so no Python timer can fire. So
envkit never loads it into its own process: this script does, prints what NVML said in the format
``RecordedNvml`` replays (``record_nvml``) between MARKER twice, and exits; as it goes, it prints
the record so far the same way, so what NVML said before a hang or a crash is not lost. The parent
(``envkit.detect.nvml.ask_nvml``) runs it through ``envkit._proc.run`` with the detection deadline
as its timeout, so a crash or a hang is a fact with a note, and one decoder serves both the child's
answer and the recordings under ``tests/data/nvml/``.

The script is run by path, not with ``-m``: importing the package ``envkit.detect`` would load
every detector (about 0.1 s) for nothing. It imports only the standard library and ``pynvml``
(nvidia-ml-py), so it also stands alone: ``PynvmlApi`` and ``record_nvml`` live here and
``envkit.detect.nvml`` re-exports them.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
from typing import TYPE_CHECKING, Any, Callable, Final, Optional

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.system import NvmlApi

__all__ = ["GPU_FIELDS", "NvmlError", "PynvmlApi", "main", "record_nvml"]

# Fields read for every GPU; the recorded format (tests/data/nvml/*.json) uses the same names.
GPU_FIELDS: Final = (
    "name",
    "uuid",
    "pci_bus_id",
    "compute_capability",
    "memory_total",
    "mig_mode",
    "persistence_mode",
    "ecc_mode",
    "ecc_uncorrected_volatile",
    "retired_pages",
    "retired_pages_pending",
    "remapped_rows",
    "pcie_gen",
    "pcie_gen_max",
    "pcie_width",
    "pcie_width_max",
    "clock_event_reasons",
    "temperature",
    "temperature_slowdown",
    "power_usage",
    "power_limit",
)


class NvmlError(Exception):
    """An NVML call failed; ``name`` is the NVML error without its prefix ("GpuIsLost")."""

    def __init__(self, name: str, message: str = "") -> None:
        super().__init__(f"{name}: {message}" if message else name)
        self.name = name
        self.message = message or name


class PynvmlApi:
    """The real NVML through ``nvidia-ml-py``; pynvml's exceptions become NvmlError."""

    def __init__(self) -> None:
        try:
            import pynvml
        except ImportError as exc:  # nvidia-ml-py is a dependency; a broken install lands here
            raise NvmlError("LibraryNotFound", f"cannot import pynvml ({exc})") from exc
        self._nv: Any = pynvml
        self._handles: dict[int, Any] = {}

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return _plain(fn(*args))
        except self._nv.NVMLError as exc:
            name = type(exc).__name__.replace("NVMLError_", "") or "Unknown"
            raise NvmlError(name, str(exc)) from None

    def init(self) -> None:
        self._call(self._nv.nvmlInit)

    def shutdown(self) -> None:
        self._call(self._nv.nvmlShutdown)

    def driver_version(self) -> str:
        return str(self._call(self._nv.nvmlSystemGetDriverVersion))

    def cuda_driver_version(self) -> int:
        nv = self._nv
        fn = getattr(nv, "nvmlSystemGetCudaDriverVersion_v2", nv.nvmlSystemGetCudaDriverVersion)
        return int(self._call(fn))

    def device_count(self) -> int:
        return int(self._call(self._nv.nvmlDeviceGetCount))

    def _handle(self, index: int) -> Any:
        if index not in self._handles:
            self._handles[index] = self._nv.nvmlDeviceGetHandleByIndex(index)
        return self._handles[index]

    def gpu_field(self, index: int, field: str) -> Any:
        handle = self._call(self._handle, index)
        return self._call(_PYNVML_FIELDS[field], self._nv, handle)


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _retired_pages(nv: Any, h: Any) -> int:
    causes = (
        nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
        nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
    )
    return sum(len(nv.nvmlDeviceGetRetiredPages(h, cause)) for cause in causes)


def _temperature(nv: Any, h: Any) -> int:
    # nvmlDeviceGetTemperature is deprecated ("removed in CUDA 14"); the V form is newer than
    # some drivers in the field, so fall back to the old call when the symbol is missing.
    try:
        return int(nv.nvmlDeviceGetTemperatureV(h, nv.NVML_TEMPERATURE_GPU))
    except (nv.NVMLError_FunctionNotFound, nv.NVMLError_NotSupported, AttributeError):
        return int(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))


def _clock_events(nv: Any, h: Any) -> int:
    # The "throttle reasons" call was renamed "clocks event reasons" in driver 535.
    try:
        return int(nv.nvmlDeviceGetCurrentClocksEventReasons(h))
    except (nv.NVMLError_FunctionNotFound, AttributeError):
        return int(nv.nvmlDeviceGetCurrentClocksThrottleReasons(h))


def _pcie_gen_max(nv: Any, h: Any) -> int:
    # The GPU's own maximum; nvmlDeviceGetMaxPcieLinkGeneration is the system's (slot) maximum.
    try:
        return int(nv.nvmlDeviceGetGpuMaxPcieLinkGeneration(h))
    except (nv.NVMLError_FunctionNotFound, AttributeError):
        return int(nv.nvmlDeviceGetMaxPcieLinkGeneration(h))


def _pci_bus_id(nv: Any, h: Any) -> str:
    info = nv.nvmlDeviceGetPciInfo_v3(h) if hasattr(nv, "nvmlDeviceGetPciInfo_v3") else None
    info = info or nv.nvmlDeviceGetPciInfo(h)
    bus = info.busId
    return bus.decode() if isinstance(bus, bytes) else str(bus)


_PYNVML_FIELDS: Final[dict[str, Callable[[Any, Any], Any]]] = {
    "name": lambda nv, h: nv.nvmlDeviceGetName(h),
    "uuid": lambda nv, h: nv.nvmlDeviceGetUUID(h),
    "pci_bus_id": _pci_bus_id,
    "compute_capability": lambda nv, h: list(nv.nvmlDeviceGetCudaComputeCapability(h)),
    "memory_total": lambda nv, h: int(nv.nvmlDeviceGetMemoryInfo(h).total),
    "mig_mode": lambda nv, h: list(nv.nvmlDeviceGetMigMode(h)),
    "persistence_mode": lambda nv, h: int(nv.nvmlDeviceGetPersistenceMode(h)),
    "ecc_mode": lambda nv, h: list(nv.nvmlDeviceGetEccMode(h)),
    "ecc_uncorrected_volatile": lambda nv, h: int(
        nv.nvmlDeviceGetTotalEccErrors(h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC)
    ),
    "retired_pages": _retired_pages,
    "retired_pages_pending": lambda nv, h: int(nv.nvmlDeviceGetRetiredPagesPendingStatus(h)),
    "remapped_rows": lambda nv, h: list(nv.nvmlDeviceGetRemappedRows(h)),
    "pcie_gen": lambda nv, h: int(nv.nvmlDeviceGetCurrPcieLinkGeneration(h)),
    "pcie_gen_max": _pcie_gen_max,
    "pcie_width": lambda nv, h: int(nv.nvmlDeviceGetCurrPcieLinkWidth(h)),
    "pcie_width_max": lambda nv, h: int(nv.nvmlDeviceGetMaxPcieLinkWidth(h)),
    "clock_event_reasons": _clock_events,
    "temperature": _temperature,
    "temperature_slowdown": lambda nv, h: int(
        nv.nvmlDeviceGetTemperatureThreshold(h, nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)
    ),
    "power_usage": lambda nv, h: int(nv.nvmlDeviceGetPowerUsage(h)),
    "power_limit": lambda nv, h: int(nv.nvmlDeviceGetEnforcedPowerLimit(h)),
}


def record_nvml(
    api: NvmlApi,
    *,
    fields: Sequence[str] = GPU_FIELDS,
    progress: Optional[Callable[[dict[str, Any]], None]] = None,
) -> dict[str, Any]:
    """Ask a real NVML everything envkit reads, in RecordedNvml's format (errors recorded too).

    ``progress`` gets the record so far after the driver and after each GPU, with
    ``devices_pending``: how many GPUs are still to be asked. A GPU that hangs NVML then costs
    only itself and the GPUs after it, not what NVML already said.
    """

    def ask(fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except NvmlError as exc:
            return {"error": exc.name, "message": exc.message}

    try:
        api.init()
    except NvmlError as exc:
        return {"init_error": exc.name, "message": exc.message}
    try:
        record: dict[str, Any] = {
            "driver_version": ask(api.driver_version),
            "cuda_driver_version": ask(api.cuda_driver_version),
        }
        count = ask(api.device_count)
        if not isinstance(count, int):
            record["devices"] = count
            return record
        devices: list[dict[str, Any]] = []
        record["devices"] = devices
        for i in range(count):
            if progress is not None:
                progress({**record, "devices_pending": count - i})
            devices.append({f: ask(lambda f=f, i=i: api.gpu_field(i, f)) for f in fields})  # type: ignore[misc]
        return record
    finally:
        ask(api.shutdown)


def main(argv: Sequence[str]) -> int:
    """Print NVML's record between the marker ``argv[1]`` twice; exit 0 once it is printed."""
    if len(argv) != 2:
        sys.stderr.write("usage: nvml_worker.py MARKER\n")
        return 2
    marker = argv[1]
    # Run by path, this folder is sys.path[0]: drop it so envkit/detect/*.py never shadows a
    # module that pynvml imports.
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or os.curdir) == here:
        del sys.path[0]
    # When NVML crashes (SIGSEGV, SIGABRT) or is stopped for overrunning (SIGTERM), stderr gets the
    # Python frame it was in, so the parent can say which NVML call it was. faulthandler writes from
    # its C signal handler, without the GIL, then lets the signal kill the process as before.
    faulthandler.enable()
    if hasattr(faulthandler, "register"):  # not on Windows
        faulthandler.register(signal.SIGTERM, chain=True)

    def emit(record: dict[str, Any]) -> None:
        sys.stdout.write(marker + json.dumps(record) + marker + "\n")
        sys.stdout.flush()

    try:
        record = record_nvml(PynvmlApi(), progress=emit)
    except NvmlError as exc:  # pynvml cannot be imported
        record = {"init_error": exc.name, "message": exc.message}
    emit(record)  # the whole record: the last between markers
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
