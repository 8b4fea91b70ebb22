"""The machine a plan is for: this one (detected) or one described by flags, so a login node without
GPUs can plan for its compute nodes (``--driver 535.104.05 --gpu sm_90``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Optional

from envkit.errors import InputError
from envkit.knowledge import PLATFORMS, Knowledge
from envkit.versions import ComputeCapability, NvVersion, Version, parse_compute_capability

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.facts import Facts, GpuFacts

__all__ = [
    "GpuTarget",
    "Target",
    "parse_gpu",
    "target_from_facts",
    "target_from_flags",
    "visible_gpu_targets",
]


@dataclass(frozen=True)
class GpuTarget:
    cc: ComputeCapability
    name: Optional[str] = None

    @property
    def label(self) -> str:
        return f"{self.name} ({self.cc.sm})" if self.name else self.cc.sm


# Jetson drivers carry L4T release numbers (35.3.1): not desktop / data-center drivers, not checked.
JETSON_DRIVER_BELOW: Final = 200


def is_jetson(driver: Optional[NvVersion]) -> bool:
    return driver is not None and driver.major < JETSON_DRIVER_BELOW


@dataclass(frozen=True)
class Target:
    platform: str
    driver: Optional[NvVersion] = None
    gpus: tuple[GpuTarget, ...] = ()
    python: Optional[Version] = None  # major.minor
    described_by: str = "flags"  # "this machine" or "flags"

    @property
    def has_nvidia(self) -> bool:
        return self.driver is not None or bool(self.gpus)

    @property
    def checked_driver(self) -> Optional[NvVersion]:
        """The driver the rules apply to: None without one, or for a Jetson (L4T) release."""
        return None if is_jetson(self.driver) else self.driver

    def describe(self) -> str:
        parts = [self.platform]
        parts.append(f"driver {self.driver}" if self.driver else "no NVIDIA driver")
        if self.gpus:
            parts.append(", ".join(g.label for g in self.gpus))
        if self.python:
            parts.append(f"Python {self.python}")
        return ", ".join(parts)


def parse_gpu(text: str, knowledge: Knowledge) -> GpuTarget:
    """``sm_90``, ``8.6`` or a model name (``"RTX 5090"``, ``"H100"``) to a GPU target."""
    cc = parse_compute_capability(text)
    if cc is not None:
        return GpuTarget(cc)
    gpu = knowledge.gpu_named(text)
    if gpu is None:
        raise InputError(
            f"--gpu {text!r}: not a compute capability (sm_90, 8.6) or a GPU envkit knows",
            hint="give the compute capability, e.g. --gpu 8.9 (developer.nvidia.com/cuda-gpus)",
        )
    return GpuTarget(gpu.cc, text)


def _python_minor(text: str) -> Version:
    try:
        version = Version(text)
    except ValueError:
        raise InputError(f"--python {text!r}: not a Python version like 3.11") from None
    if len(version.release) < 2 or version.major != 3:
        raise InputError(f"--python {text!r}: give a Python 3 version like 3.11")
    return Version(f"{version.major}.{version.minor}")


def _driver(text: str) -> NvVersion:
    try:
        return NvVersion(text)
    except ValueError:
        raise InputError(f"--driver {text!r}: not a driver version like 535.104.05") from None


def target_from_flags(
    knowledge: Knowledge,
    *,
    base: Target,
    driver: Optional[str] = None,
    gpus: Sequence[str] = (),
    no_gpu: bool = False,
    platform: Optional[str] = None,
    python: Optional[str] = None,
) -> Target:
    """``base`` (usually the detected machine) with the parts the flags describe replaced.

    Any of --driver / --gpu / --no-gpu describes the whole GPU side: nothing of it is detected.
    """
    if no_gpu and (driver or gpus):
        raise InputError("--no-gpu contradicts --driver / --gpu; give one or the other")
    if platform is not None and platform not in PLATFORMS:
        raise InputError(f"--platform {platform!r}: one of {', '.join(PLATFORMS)}")
    gpu_side = no_gpu or driver is not None or bool(gpus)
    return Target(
        platform=platform or base.platform,
        driver=(_driver(driver) if driver else None) if gpu_side else base.driver,
        gpus=tuple(parse_gpu(g, knowledge) for g in gpus) if gpu_side else base.gpus,
        python=_python_minor(python) if python else base.python,
        described_by="flags" if gpu_side or platform or python else base.described_by,
    )


def visible_gpu_targets(facts: Facts, knowledge: Knowledge) -> list[tuple[GpuFacts, GpuTarget]]:
    """Each visible GPU with its compute capability: NVML's, else the knowledge base's for its name."""
    found = []
    for gpu in facts.visible_gpus:
        cc = gpu.compute_capability
        if cc is None and gpu.name:
            known = knowledge.gpu_named(gpu.name)
            cc = known.cc if known else None
        if cc is not None:
            found.append((gpu, GpuTarget(cc, gpu.name)))
    return found


def target_from_facts(facts: Facts, knowledge: Knowledge) -> Target:
    """The detected machine: its driver, its visible GPUs, its interpreter's Python and platform."""
    import platform as _platform

    gpus = [target for _gpu, target in visible_gpu_targets(facts, knowledge)]
    py = facts.python
    plat = py.platform if py and py.platform in PLATFORMS else None
    if plat is None:
        machine = _platform.machine().lower()
        system = _platform.system()
        arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
        mac = "macos-x86_64" if arch == "x86_64" else "macos-arm64"
        plat = {"Linux": f"linux-{arch}", "Windows": "windows-x86_64", "Darwin": mac}.get(
            system, "linux-x86_64"
        )
    version = py.version if py else None
    return Target(
        platform=plat,
        driver=facts.driver.version,
        gpus=tuple(gpus),
        python=Version(f"{version.major}.{version.minor}") if version else None,
        described_by="this machine",
    )
