"""NVML: the driver version and every GPU's identity and health, through envkit's own seam.

``NvmlApi`` is the seam: ``PynvmlApi`` calls NVIDIA's ``nvidia-ml-py`` (module ``pynvml``);
``RecordedNvml`` answers from a JSON recording of a real machine (``scripts/record_nvml.py`` writes
one). On a real machine envkit never loads NVML into its own process: ``ask_nvml`` runs
``nvml_worker.py`` in a child, which prints the same record, so a driver library that crashes or
hangs costs the NVML facts (with a note saying how it failed), not the run. Per-field errors follow
gpustat's ``safenvml`` rule: a field the GPU or driver does not support is ``None`` and named in
``unsupported``, never a crash; a lost GPU is reported on that GPU, and the others still report.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import secrets
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Final, Optional

from envkit.detect.nvml_library import LIBRARY_NOT_FOUND, nvml_may_load
from envkit.detect.nvml_worker import GPU_FIELDS, NvmlError, PynvmlApi, record_nvml
from envkit.facts import GpuFacts
from envkit.versions import ComputeCapability, NvVersion, Version, cuda_from_int

if TYPE_CHECKING:
    from collections.abc import Mapping

    from envkit._proc import ProcResult
    from envkit.system import NvmlApi, System

__all__ = [
    "CRASHED",
    "GPU_FIELDS",
    "NO_ANSWER",
    "NvmlError",
    "NvmlReading",
    "PynvmlApi",
    "RecordedNvml",
    "ask_nvml",
    "load_pynvml",
    "read_nvml",
    "record_nvml",
]

WORKER: Final = Path(__file__).with_name("nvml_worker.py")
# The child's share of what is left of the deadline: after a hung NVML, /proc/driver/nvidia/version
# and nvidia-smi still get the rest, so a wedged GPU does not also cost the driver version.
NVML_SHARE: Final = 0.5
# The child's limit when the run has no deadline (nvmlInit on many GPUs without persistence mode
# takes seconds; NVIDIA's nvidia-smi documentation, "Persistence Mode").
NVML_TIMEOUT_S: Final = 20.0
# nvmlSystemGetCudaDriverVersion's range: CUDA 1.0 is 1000, the newest CUDA a 99.x would be 99990.
CUDA_INT_MIN: Final = 1000
CUDA_INT_MAX: Final = 99990
# The error names of an NVML child without an answer: NO_ANSWER when it overran its time (also
# DriverFacts.nvml_error's name when NVML / nvidia-smi did not answer before the deadline), CRASHED
# when a signal killed it or it could not run, "Unknown" for garbage.
NO_ANSWER: Final = "NoAnswer"
CRASHED: Final = "Crashed"

# NVML errors that mean "this GPU or driver has no such field": the field is None, not a failure.
# (NVML API reference, nvmlReturn_t; gpustat core.py safenvml.)
UNSUPPORTED_ERRORS: Final = frozenset(
    {"NotSupported", "FunctionNotFound", "NotFound", "InvalidArgument", "NoData", "Deprecated"}
)
# NVML errors that mean the GPU itself is unusable until reset (DCGM level 1 treats them as fatal),
# and a GPU that NVML hung or crashed on (ask_nvml).
FATAL_GPU_ERRORS: Final = frozenset({"GpuIsLost", "ResetRequired", "CorruptedInforom", NO_ANSWER, CRASHED})

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
        cuda: Optional[Version] = None
        try:
            value = api.cuda_driver_version()
            # CUDA 1.0 (1000) to 99.9: 0 (a driver that does not say) or a negative or huge value
            # is unknown, never "CUDA 0.0" and never an exception out of detection.
            if isinstance(value, int) and CUDA_INT_MIN <= value <= CUDA_INT_MAX:
                cuda = cuda_from_int(value)
        except (NvmlError, ValueError, TypeError):
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
            self._answer({"error": self._data["init_error"], "message": self._data.get("message", "")})

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


def load_pynvml() -> NvmlApi:
    """The real NVML in this process (scripts/record_nvml.py); detection uses ``ask_nvml``."""
    return PynvmlApi()


def ask_nvml(system: System) -> NvmlReading:
    """What NVML says on ``system``: its own NVML seam when it has one (a recording), else the
    real NVML asked by ``nvml_worker.py`` in a child process, within the deadline's share; where
    no driver is loaded and the loader could find no NVML library, the record the worker would
    print ("LibraryNotFound"), without starting it (envkit.detect.nvml_library)."""
    if system.nvml is not None:
        return read_nvml(system.nvml)
    if not nvml_may_load(system.env):
        error, message = LIBRARY_NOT_FOUND
        return read_nvml(lambda: RecordedNvml({"init_error": error, "message": message}))
    left = system.remaining()
    wanted = NVML_TIMEOUT_S if left is None else min(NVML_TIMEOUT_S, left * NVML_SHARE)
    marker = f"@@envkit-nvml-{secrets.token_hex(8)}@@"
    # The interpreter envkit runs in has pynvml (nvidia-ml-py is a dependency of envkit).
    result = system.run_within([sys.executable, str(WORKER), marker], timeout=wanted, env=dict(system.env))
    blocks = result.stdout.split(marker)[1:-1:2]  # every record printed whole between two markers
    if not blocks:
        return _no_answer(NO_ANSWER if result.timed_out else CRASHED, _how_it_ended(result))
    name = None if result.ok else NO_ANSWER if result.timed_out else CRASHED
    how = _how_it_ended(result)
    try:
        record = _unanswered_gpus(json.loads(blocks[-1]), name or CRASHED, how)
        reading = read_nvml(lambda: RecordedNvml(record))
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        return _no_answer("Unknown", f"an answer envkit cannot read: {type(exc).__name__}: {exc}"[:300])
    if name is None:
        return reading
    # What NVML said before it hung or crashed is kept; the error says how it ended.
    return dataclasses.replace(reading, error=f"{name}: NVML did not answer ({how})", error_name=name)


def _unanswered_gpus(record: dict[str, Any], name: str, how: str) -> dict[str, Any]:
    """A record the child printed as it went: the GPUs it had not finished are NVML errors."""
    pending = int(record.pop("devices_pending", 0))
    if pending <= 0:
        return record
    stuck = len(record["devices"])
    missing = [{"error": name, "message": f"NVML did not answer for this GPU ({how})"}]
    missing += [{"error": name, "message": f"not asked: NVML stopped at GPU {stuck}"}] * (pending - 1)
    return {**record, "devices": [*record["devices"], *missing]}


def _no_answer(name: str, how: str) -> NvmlReading:
    return NvmlReading(error=f"{name}: NVML did not answer ({how})", error_name=name)


# The innermost Python frame in faulthandler's dump: '  File "…/pynvml.py", line 3151 in nvmlInit'.
_FRAME = re.compile(r'^\s*File ".*", line \d+ in (\w+)', re.MULTILINE)


def _how_it_ended(result: ProcResult) -> str:
    """How the child ended without an answer: "killed by SIGSEGV in nvmlInitWithFlags"."""
    if result.error is not None:
        return f"the NVML worker could not run: {result.error}"
    frame = _FRAME.search(result.stderr)
    where = f" in {frame.group(1)}" if frame else ""
    if result.timed_out:
        return f"timed out after {result.duration_s:.1f} s{where}"
    code = result.returncode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}{where}"
    tail = result.tail(1)
    return f"the NVML worker exited with {code}" + (f": {tail[:200]}" if tail else "")
