"""GPU vendors besides NVIDIA, one module each behind one small Protocol (DESIGN.md: "a table that
names them"). NVIDIA keeps its own route (NVML in a child, envkit.detect.nvml) because its facts
are richer and older; AMD and Intel answer ``VendorFacts`` (envkit.facts).

Each ``detect`` reads sysfs first and runs the vendor's tools only where sysfs shows its GPUs or
the tools are installed, each with a timeout cut to the run's deadline (``System.run_within``):
on a machine without the vendor's GPUs it costs a few file reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

from envkit.detect.amd import AmdVendor
from envkit.detect.intel import IntelVendor
from envkit.facts import VendorFacts

if TYPE_CHECKING:
    from envkit.system import System

__all__ = ["VENDORS", "GpuVendor", "unanswered"]


class GpuVendor(Protocol):
    """One GPU vendor's detector: its name is the Facts field it fills ("amd", "intel")."""

    @property
    def name(self) -> str: ...

    def detect(self, system: System) -> VendorFacts: ...


VENDORS: Final[tuple[GpuVendor, ...]] = (AmdVendor(), IntelVendor())


def unanswered(name: str) -> VendorFacts:
    """A vendor whose detector did not answer before the deadline: nothing known, and a note."""
    return VendorFacts(name, notes=(f"{name}: no answer before the time limit; reported as unknown",))
