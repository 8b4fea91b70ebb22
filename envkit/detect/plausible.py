"""Plausible ranges for what a driver reports about a GPU: a value outside them is not a fact.

A wedged driver, a broken ``nvidia-smi`` or a stand-in printing garbage can report a GPU with
1e26 MiB of memory or compute capability 99.99; such a value becomes None plus a note that says
what was read, so no check judges the machine by it. The ranges are wide on purpose (room for
GPUs not yet made); they only exclude what no GPU can be.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Final, Optional, Union

from envkit._proc import short

if TYPE_CHECKING:
    from envkit.facts import GpuFacts
    from envkit.versions import ComputeCapability

__all__ = ["MAX_NOTES", "MAX_NOTE_CHARS", "cap_notes", "plausible_cc", "plausible_gpu"]

# The longest note kept, and how many notes one source may add to a report.
MAX_NOTE_CHARS: Final = 300
MAX_NOTES: Final = 20
# The longest name / UUID / PCI bus id kept (real ones: ~40, 40 and 16 characters).
MAX_TEXT_CHARS: Final = 128

# Compute capabilities run from 1.0 (Tesla, 2006) to 12.x (Blackwell, 2025) with minors 0-9:
# https://developer.nvidia.com/cuda-gpus. Majors up to 19 leave room for the next decade.
_CC_MAJOR: Final = range(1, 20)
_CC_MINOR: Final = range(10)

# Inclusive (low, high) per numeric GpuFacts field. Memory: the largest GPU today has 288 GB
# (B300); 4 TiB leaves room. Temperatures: NVML reports degrees C of the die, which neither
# freezes below -40 nor survives 150. Power: the biggest boards draw ~1.4 kW; 5 kW leaves room.
# PCIe: generations 1-7 exist (PCI-SIG), links are 1-32 lanes. Error counters are counts.
RANGES: Final[dict[str, tuple[float, float]]] = {
    "index": (0, 1023),
    "memory_total_mib": (1, 4 * 1024 * 1024),
    "temperature_c": (-40, 150),
    "temperature_slowdown_c": (0, 150),
    "power_w": (0, 5000),
    "power_limit_w": (1, 5000),
    "pcie_gen": (1, 8),
    "pcie_gen_max": (1, 8),
    "pcie_width": (1, 32),
    "pcie_width_max": (1, 32),
    "ecc_uncorrected_volatile": (0, 2**48),
    "retired_pages": (0, 2**20),
}

_TEXT_FIELDS: Final = ("name", "uuid", "pci_bus_id")


def plausible_cc(cc: Optional[ComputeCapability]) -> bool:
    return cc is None or (cc.major in _CC_MAJOR and cc.minor in _CC_MINOR)


def _in_range(value: Union[int, float], low: float, high: float) -> bool:
    # NaN compares false both ways; bool is an int but never a measurement.
    return not isinstance(value, bool) and low <= value <= high


def plausible_gpu(gpu: GpuFacts, source: str) -> tuple[GpuFacts, list[str]]:
    """``gpu`` with each implausible value replaced by None, and a note for each.

    >>> from envkit.facts import GpuFacts
    >>> from envkit.versions import ComputeCapability
    >>> gpu, notes = plausible_gpu(
    ...     GpuFacts(0, memory_total_mib=10**26, compute_capability=ComputeCapability(99, 99)),
    ...     "nvidia-smi",
    ... )
    >>> gpu.memory_total_mib, gpu.compute_capability, len(notes)
    (None, None, 2)
    """
    changes: dict[str, object] = {}
    notes: list[str] = []
    for name, (low, high) in RANGES.items():
        value = getattr(gpu, name)
        if name == "index" or value is None or _in_range(value, low, high):
            continue
        changes[name] = None
        notes.append(f"{source}: GPU {gpu.index}: {name} {short(repr(value), 40)} is implausible; ignored")
    if not plausible_cc(gpu.compute_capability):
        changes["compute_capability"] = None
        notes.append(
            f"{source}: GPU {gpu.index}: compute capability {gpu.compute_capability} is implausible; ignored"
        )
    for name in _TEXT_FIELDS:
        value = getattr(gpu, name)
        if isinstance(value, str):
            clean = "".join(c for c in value if c.isprintable())
            if len(clean) > MAX_TEXT_CHARS or clean != value:
                changes[name] = short(clean, MAX_TEXT_CHARS) or None
    if gpu.error is not None and len(gpu.error) > MAX_NOTE_CHARS:
        changes["error"] = short(gpu.error, MAX_NOTE_CHARS)
    return (dataclasses.replace(gpu, **changes) if changes else gpu), notes  # type: ignore[arg-type]


def cap_notes(notes: list[str], source: str) -> list[str]:
    """At most MAX_NOTES notes of at most MAX_NOTE_CHARS characters each."""
    kept = [short(n, MAX_NOTE_CHARS) for n in notes[:MAX_NOTES]]
    if len(notes) > MAX_NOTES:
        kept.append(f"{source}: {len(notes) - MAX_NOTES} more notes left out")
    return kept
