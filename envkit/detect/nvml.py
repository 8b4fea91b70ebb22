"""NVML: the driver version and every GPU's identity and health, through envkit's own seam.

``NvmlApi`` is the seam: ``PynvmlApi`` calls NVIDIA's ``nvidia-ml-py`` (module ``pynvml``);
``RecordedNvml`` answers from a JSON recording of a real machine (``scripts/record_nvml.py`` writes
one). Per-field errors follow gpustat's ``safenvml`` rule: a field the GPU or driver does not
support is ``None`` and named in ``unsupported``, never a crash; a lost GPU is reported on that
GPU, and the others still report.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Final, Optional, Protocol

from envkit.facts import GpuFacts
from envkit.versions import ComputeCapability, NvVersion, Version, cuda_from_int

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "GPU_FIELDS",
    "NvmlApi",
    "NvmlError",
    "NvmlReading",
    "PynvmlApi",
    "RecordedNvml",
    "load_pynvml",
    "read_nvml",
]

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

# NVML errors that mean "this GPU or driver has no such field": the field is None, not a failure.
# (NVML API reference, nvmlReturn_t; gpustat core.py safenvml.)
UNSUPPORTED_ERRORS: Final = frozenset(
    {"NotSupported", "FunctionNotFound", "NotFound", "InvalidArgument", "NoData", "Deprecated"}
)
# NVML errors that mean the GPU itself is unusable until reset (DCGM level 1 treats them as fatal).
FATAL_GPU_ERRORS: Final = frozenset({"GpuIsLost", "ResetRequired", "CorruptedInforom"})

# nvmlClocksEventReason* bits (nvml.h; pynvml constants of the same names).
CLOCK_EVENT_BITS: Final = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clock_setting",
}


class NvmlError(Exception):
    """An NVML call failed; ``name`` is the NVML error without its prefix ("GpuIsLost")."""

    def __init__(self, name: str, message: str = "") -> None:
        super().__init__(f"{name}: {message}" if message else name)
        self.name = name
        self.message = message or name


class NvmlApi(Protocol):
    """What envkit asks of NVML. Every method may raise NvmlError."""

    def init(self) -> None: ...

    def shutdown(self) -> None: ...

    def driver_version(self) -> str: ...

    def cuda_driver_version(self) -> int: ...

    def device_count(self) -> int: ...

    def gpu_field(self, index: int, field: str) -> Any:
        """One of GPU_FIELDS for GPU ``index`` (NVML order), as JSON-ready data."""
        ...


@dataclass(frozen=True)
class NvmlReading:
    """What NVML said: the driver, the GPUs, or why it could not be asked."""

    driver_version: Optional[NvVersion] = None
    cuda_version: Optional[Version] = None
    gpus: tuple[GpuFacts, ...] = ()
    error: Optional[str] = None  # "LibraryNotFound: NVML Shared Library Not Found"
    error_name: Optional[str] = None


def read_nvml(api_factory: Callable[[], NvmlApi]) -> NvmlReading:
    """Initialise NVML and read the driver and every GPU; errors become data."""
    try:
        api = api_factory()
        api.init()
    except NvmlError as exc:
        return NvmlReading(error=str(exc), error_name=exc.name)
    try:
        try:
            driver = NvVersion(api.driver_version())
        except (NvmlError, ValueError):
            driver = None
        try:
            cuda: Optional[Version] = cuda_from_int(api.cuda_driver_version())
        except NvmlError:
            cuda = None
        try:
            count = api.device_count()
        except NvmlError as exc:
            return NvmlReading(driver, cuda, (), error=str(exc), error_name=exc.name)
        gpus = tuple(_read_gpu(api, index) for index in range(count))
        return NvmlReading(driver, cuda, gpus)
    finally:
        with contextlib.suppress(NvmlError):
            api.shutdown()


def _read_gpu(api: NvmlApi, index: int) -> GpuFacts:
    values: dict[str, Any] = {}
    unsupported: list[str] = []
    error: Optional[str] = None
    for field in GPU_FIELDS:
        try:
            values[field] = api.gpu_field(index, field)
        except NvmlError as exc:
            if exc.name in FATAL_GPU_ERRORS:
                # Every later call would fail the same way; the GPU is reported as lost.
                error = str(exc)
                break
            if exc.name in UNSUPPORTED_ERRORS:
                unsupported.append(field)
            # Other errors (NoPermission, Unknown, …) leave the field unknown as well.
    return _gpu_from_fields(index, values, tuple(unsupported), error)


def _gpu_from_fields(
    index: int, v: Mapping[str, Any], unsupported: tuple[str, ...], error: Optional[str]
) -> GpuFacts:
    cc = v.get("compute_capability")
    mig = v.get("mig_mode")
    ecc = v.get("ecc_mode")
    rows = v.get("remapped_rows")
    memory = v.get("memory_total")
    reasons = v.get("clock_event_reasons")
    power = v.get("power_usage")
    limit = v.get("power_limit")
    pending_pages = v.get("retired_pages_pending")
    persistence = v.get("persistence_mode")
    return GpuFacts(
        index=index,
        name=v.get("name"),
        uuid=v.get("uuid"),
        pci_bus_id=v.get("pci_bus_id"),
        compute_capability=ComputeCapability(int(cc[0]), int(cc[1])) if cc else None,
        memory_total_mib=int(memory) // (1024 * 1024) if memory is not None else None,
        mig_enabled=bool(mig[0]) if mig else None,
        mig_pending=bool(mig[1]) if mig else None,
        persistence_mode=bool(persistence) if persistence is not None else None,
        ecc_enabled=bool(ecc[0]) if ecc else None,
        ecc_pending=bool(ecc[1]) if ecc else None,
        ecc_uncorrected_volatile=v.get("ecc_uncorrected_volatile"),
        retired_pages=v.get("retired_pages"),
        retired_pages_pending=bool(pending_pages) if pending_pages is not None else None,
        remapped_rows_pending=bool(rows[2]) if rows else None,
        remapped_rows_failure=bool(rows[3]) if rows else None,
        pcie_gen=v.get("pcie_gen"),
        pcie_gen_max=v.get("pcie_gen_max"),
        pcie_width=v.get("pcie_width"),
        pcie_width_max=v.get("pcie_width_max"),
        clock_events=decode_clock_events(int(reasons)) if reasons is not None else None,
        temperature_c=v.get("temperature"),
        temperature_slowdown_c=v.get("temperature_slowdown"),
        power_w=round(power / 1000, 1) if power is not None else None,
        power_limit_w=round(limit / 1000, 1) if limit is not None else None,
        unsupported=unsupported,
        error=error,
        source="nvml",
    )


def decode_clock_events(mask: int) -> tuple[str, ...]:
    """Name the bits of an NVML clocks-event mask.

    >>> decode_clock_events(0x1 | 0x40)
    ('gpu_idle', 'hw_thermal')
    """
    names = [name for bit, name in CLOCK_EVENT_BITS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_BITS)
    if unknown:
        names.append(f"0x{unknown:x}")
    return tuple(names)


class RecordedNvml:
    """NVML answers from a recording: ``{"driver_version", "cuda_driver_version", "devices"}``.

    A value of ``{"error": "NotSupported"}`` (at any level, or ``init_error`` at the top) replays
    that NVML error. ``hang_s`` replays a wedged GPU by sleeping before answering.
    """

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data

    @classmethod
    def from_file(cls, path: str) -> RecordedNvml:
        with open(path, encoding="utf-8") as fh:
            return cls(json.load(fh))

    def _answer(self, value: Any) -> Any:
        if isinstance(value, dict) and "error" in value:
            if "hang_s" in value:
                import time

                time.sleep(float(value["hang_s"]))
            raise NvmlError(str(value["error"]), str(value.get("message", "")))
        return value

    def init(self) -> None:
        if self._data.get("init_error"):
            self._answer({"error": self._data["init_error"]})

    def shutdown(self) -> None:
        return None

    def driver_version(self) -> str:
        return str(self._answer(self._data["driver_version"]))

    def cuda_driver_version(self) -> int:
        return int(self._answer(self._data.get("cuda_driver_version", {"error": "NotSupported"})))

    def device_count(self) -> int:
        return len(self._answer(self._data.get("devices", [])))

    def gpu_field(self, index: int, field: str) -> Any:
        device = self._answer(self._data["devices"][index])
        return self._answer(device.get(field, {"error": "NotSupported"}))


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


def load_pynvml() -> NvmlApi:
    """The default NVML factory used on real machines."""
    return PynvmlApi()


def record_nvml(api: NvmlApi, *, fields: Sequence[str] = GPU_FIELDS) -> dict[str, Any]:
    """Ask a real NVML everything envkit reads, in RecordedNvml's format (errors recorded too)."""

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
        count = ask(api.device_count)
        devices: Any = count
        if isinstance(count, int):
            devices = [
                {f: ask(lambda f=f, i=i: api.gpu_field(i, f)) for f in fields}  # type: ignore[misc]
                for i in range(count)
            ]
        return {
            "driver_version": ask(api.driver_version),
            "cuda_driver_version": ask(api.cuda_driver_version),
            "devices": devices,
        }
    finally:
        ask(api.shutdown)
