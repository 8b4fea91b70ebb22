"""The machine a plan is for: this one (detected) or one described by flags, so a login node without
GPUs can plan for its compute nodes (``--driver 535.104.05 --gpu sm_90``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Optional, Union

from envkit.errors import InputError
from envkit.knowledge import PLATFORMS, Knowledge
from envkit.knowledge.vendors import normalize_gfx
from envkit.versions import ComputeCapability, NvVersion, Version, parse_compute_capability, parse_version

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.facts import Facts, GpuFacts

__all__ = [
    "AccelTarget",
    "GpuTarget",
    "Target",
    "jetson_gpus",
    "parse_any_gpu",
    "parse_gpu",
    "parse_vendor_gpu",
    "target_from_facts",
    "target_from_flags",
    "this_platform",
    "visible_gpu_targets",
]


@dataclass(frozen=True)
class GpuTarget:
    cc: ComputeCapability
    name: Optional[str] = None

    @property
    def label(self) -> str:
        return f"{self.name} ({self.cc.sm})" if self.name else self.cc.sm


@dataclass(frozen=True)
class AccelTarget:
    """An AMD or Intel GPU of the target: its vendor ("amd", "intel") and what torch's wheels are
    built for: the gfx target (gfx942) or the XPU family (bmg); None where not known (an Intel GPU
    no XPU build supports, an AMD GPU whose target nothing stated)."""

    vendor: str
    arch: Optional[str]
    name: Optional[str] = None

    @property
    def label(self) -> str:
        if self.name and self.arch:
            return f"{self.name} ({self.arch})"
        return self.name or self.arch or f"an {self.vendor.upper() if self.vendor == 'amd' else 'Intel'} GPU"


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
    # What the facts did not say and the target takes for granted ("linux-x86_64: the report names
    # no platform"); a plan for it carries these as warnings.
    assumed: tuple[str, ...] = ()
    # AMD and Intel GPUs (envkit.resolve.vendors), and the amdgpu module's version (the ROCm kernel
    # driver the wheels' user space must be tested with).
    accel: tuple[AccelTarget, ...] = ()
    amd_driver: Optional[str] = None
    # A Jetson's Linux for Tegra release ("36.4.3"): its JetPack decides where torch comes from.
    l4t: Optional[Version] = None

    @property
    def has_nvidia(self) -> bool:
        return self.driver is not None or bool(self.gpus)

    @property
    def amd_gpus(self) -> tuple[AccelTarget, ...]:
        return tuple(a for a in self.accel if a.vendor == "amd")

    @property
    def intel_gpus(self) -> tuple[AccelTarget, ...]:
        """The Intel GPUs torch's XPU build may run on: those of a known XPU family."""
        return tuple(a for a in self.accel if a.vendor == "intel" and a.arch)

    @property
    def has_amd(self) -> bool:
        return bool(self.amd_gpus)

    @property
    def has_intel(self) -> bool:
        return bool(self.intel_gpus)

    @property
    def has_gpu(self) -> bool:
        """A GPU some torch build may use: NVIDIA, AMD, or an Intel GPU of an XPU family."""
        return self.has_nvidia or self.has_amd or self.has_intel

    @property
    def checked_driver(self) -> Optional[NvVersion]:
        """The driver the rules apply to: None without one, or for a Jetson (L4T) release."""
        return None if is_jetson(self.driver) else self.driver

    def describe(self) -> str:
        parts = [self.platform]
        no_driver = "driver not given" if self.gpus else "no NVIDIA driver"
        if self.driver or self.gpus or not self.accel:
            parts.append(f"driver {self.driver}" if self.driver else no_driver)
        if self.gpus:
            parts.append(", ".join(g.label for g in self.gpus))
        if self.accel:
            parts.append(", ".join(a.label for a in self.accel))
        if self.amd_driver:
            parts.append(f"amdgpu {self.amd_driver}")
        if self.python:
            parts.append(f"Python {self.python}")
        return ", ".join(parts)


def parse_gpu(text: str, knowledge: Knowledge) -> GpuTarget:
    """``sm_90``, ``8.6`` or a model name (``"RTX 5090"``, ``"H100"``) to a GPU target."""
    found = parse_any_gpu(text, knowledge)
    if not isinstance(found, GpuTarget):
        raise InputError(f"--gpu {text!r}: an {found.vendor.upper()} GPU, not an NVIDIA one")
    return found


def parse_any_gpu(text: str, knowledge: Knowledge) -> Union[GpuTarget, AccelTarget]:
    """``--gpu``: an NVIDIA compute capability (``sm_90``, ``8.6``) or model (``"RTX 5090"``), an AMD
    gfx target (``gfx942``) or model (``MI300X``), an Intel model or XPU family (``"Arc B580"``,
    ``bmg``). An unknown name is an input error naming the nearest known ones."""
    if text.strip().lower().startswith("gfx"):
        accel = parse_vendor_gpu(text, knowledge)
        if accel is not None:
            return accel
    cc = parse_compute_capability(text)
    if cc is not None and (not text.strip().isdigit() or _cc_exists(cc, knowledge)):
        _check_cc_exists(text, cc, knowledge)
        return GpuTarget(cc)
    if text.strip().isdigit():
        # A bare model number ("4090", "1080"): the GeForce that people mean, when no compute
        # capability reads so ("86" is sm_86, "100" sm_100, but "4090" is no compute capability 409.0).
        for family in ("RTX", "GTX", "GT"):
            named = knowledge.gpu_named(f"{family} {text.strip()}")
            if named is not None:
                return GpuTarget(named.cc, f"{family} {text.strip()}")
        if cc is not None:
            _check_cc_exists(text, cc, knowledge)
    gpu = knowledge.gpu_named(text)
    if gpu is not None:
        return GpuTarget(gpu.cc, text)
    accel = parse_vendor_gpu(text, knowledge)
    if accel is not None:
        return accel
    nearest = knowledge.vendors.nearest_names(text, extra=tuple(g.model for g in knowledge.gpus))
    near = f"; nearest known: {', '.join(nearest)}" if nearest else ""
    raise InputError(
        f"--gpu {text!r}: not a compute capability (sm_90, 8.6), a gfx target (gfx942) or a GPU "
        f"envkit knows{near}",
        hint="give the compute capability, e.g. --gpu 8.9 (developer.nvidia.com/cuda-gpus), or the "
        "AMD gfx target, e.g. --gpu gfx1100 (rocminfo | grep gfx)",
    )


def parse_vendor_gpu(text: str, k: Knowledge) -> Optional[AccelTarget]:
    """``--gpu gfx942`` / ``MI300X`` / ``"Arc B580"`` / ``bmg`` as an AMD or Intel GPU; None when it
    names none (the caller tries NVIDIA's and says what is nearest)."""
    value = text.strip()
    gfx = normalize_gfx(value) if value.lower().startswith("gfx") else None
    vendors = k.vendors
    if gfx is not None:
        # Any well-formed target, known or not: one no wheel carries is "no build" (exit 3, with
        # what would run), not a bad flag.
        return AccelTarget("amd", gfx)
    amd = vendors.amd_named(value)
    if amd is not None:
        return AccelTarget("amd", amd.gfx, value)
    family = vendors.intel_family(value.lower()) or vendors.intel_named(value)
    if family is not None:
        return AccelTarget("intel", family.family, value)
    return None


def _known_ccs(knowledge: Knowledge) -> set[ComputeCapability]:
    return {g.cc for g in knowledge.gpus} | {c for tk in knowledge.toolkits.values() for c in tk.sass}


def _cc_exists(cc: ComputeCapability, knowledge: Knowledge) -> bool:
    return cc in _known_ccs(knowledge)


def _check_cc_exists(text: str, cc: ComputeCapability, knowledge: Knowledge) -> None:
    """``--gpu sm_999`` / ``99.9`` describes no GPU: an input error, not a plan. A real compute
    capability is one a GPU row has or one some nvcc can emit SASS for (NVIDIA's own list of
    architectures, developer.nvidia.com/cuda-gpus and each toolkit's -gpu-architecture values)."""
    known = _known_ccs(knowledge)
    if cc in known:
        return
    oldest, newest = min(known), max(known)
    what = (
        f"compute capability {cc} is older than any GPU a CUDA toolkit envkit knows compiles for"
        if cc < oldest
        else f"no NVIDIA GPU has compute capability {cc}"
    )
    raise InputError(
        f"--gpu {text!r}: {what} (envkit knows {oldest} … {newest})",
        hint="give the GPU's compute capability, e.g. --gpu 8.9 (developer.nvidia.com/cuda-gpus)"
        + (f"; a GPU newer than {newest.sm} needs a newer envkit" if cc > newest else ""),
    )


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
    parsed = [parse_any_gpu(g, knowledge) for g in gpus]
    nvidia = tuple(g for g in parsed if isinstance(g, GpuTarget))
    accel = tuple(g for g in parsed if isinstance(g, AccelTarget))
    amd_driver = None if gpu_side else base.amd_driver
    if driver and accel and not nvidia:
        # --driver beside AMD GPUs only is the amdgpu driver's version (modinfo amdgpu / cat
        # /sys/module/amdgpu/version), checked against AMD's support matrix; Intel's is not checked.
        if any(g.vendor != "amd" for g in accel):
            raise InputError(
                f"--driver {driver!r}: envkit checks NVIDIA's and AMD's (amdgpu) driver versions, "
                "not Intel's; leave --driver out"
            )
        if not re.fullmatch(r"\d+(\.\d+){1,3}", driver.strip()):
            raise InputError(f"--driver {driver!r}: not an amdgpu driver version like 6.12.12")
        amd_driver, driver = driver.strip(), None
    return Target(
        platform=platform or base.platform,
        driver=(_driver(driver) if driver else None) if gpu_side else base.driver,
        gpus=nvidia if gpu_side else base.gpus,
        python=_python_minor(python) if python else base.python,
        described_by="flags" if gpu_side or platform or python else base.described_by,
        accel=accel if gpu_side else base.accel,
        amd_driver=amd_driver,
        l4t=None if gpu_side else base.l4t,
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


# GPUs whose name says the host is an Arm server or board (Grace, DGX Spark, Jetson): a report that
# names no platform but one of these GPUs comes from linux-aarch64.
_ARM_HOST_GPU: Final = re.compile(
    r"\b(GH200|GB200|GB300|GB10|Jetson|Orin|Xavier|Thor|Tegra)\b", re.IGNORECASE
)


def _platform_of(facts: Facts, gpus: Sequence[GpuTarget]) -> tuple[str, Optional[str]]:
    """(the platform the facts describe, what was assumed to get it: None when they say it)."""
    host = facts.host
    os_name, arch = (host.os or "").lower(), (host.arch or "").lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64", "x64": "x86_64"}.get(arch, arch)
    if "windows" in os_name:
        return "windows-x86_64", None
    if "mac" in os_name or "darwin" in os_name:
        return ("macos-arm64" if arch == "aarch64" else "macos-x86_64"), None
    if arch in ("x86_64", "aarch64"):
        return f"linux-{arch}", None if os_name else "Linux (the facts name the CPU, not the OS)"
    location = facts.torch.location or (facts.python.executable if facts.python else "") or ""
    if re.match(r"^[A-Za-z]:\\", location):
        return "windows-x86_64", None
    arm = [g.label for g in gpus if _ARM_HOST_GPU.search(g.name or "")]
    if arm or is_jetson(facts.driver.version):
        why = arm[0] if arm else f"driver {facts.driver.version} is a Jetson (L4T) release"
        return "linux-aarch64", f"linux-aarch64: the facts name no platform, and {why} has an Arm host"
    if os_name:
        return "linux-x86_64", f"linux-x86_64: '{host.os}' names no CPU architecture"
    return "linux-x86_64", "linux-x86_64: the facts name no platform"


def target_from_facts(facts: Facts, knowledge: Knowledge, *, local_platform: Optional[str] = None) -> Target:
    """The machine the facts describe: its driver, its visible GPUs, its interpreter's Python and
    platform. Where the facts name no platform, ``local_platform`` (the caller's own machine, for
    facts it detected itself) or what the facts imply (the host's OS and CPU, a Windows path, an Arm
    host's GPU), else linux-x86_64; ``Target.assumed`` says what was taken for granted. Facts from
    another machine (a saved report, a paste) never get the platform of the one reading them."""
    gpus = [target for _gpu, target in visible_gpu_targets(facts, knowledge)]
    py = facts.python
    assumed: list[str] = []
    plat = py.platform if py and py.platform in PLATFORMS else None
    if plat is None and local_platform in PLATFORMS:
        plat = local_platform
    if plat is None:
        plat, why = _platform_of(facts, gpus)
        if why is not None:
            assumed.append(f"assumed {why}")
    version = py.version if py else None
    if version is None:
        assumed.append("the facts name no Python version: the plan is not checked against one")
    accel = [AccelTarget("amd", g.arch, g.name) for g in facts.amd.gpus]
    accel += [AccelTarget("intel", g.arch, g.name) for g in facts.intel.gpus]
    l4t = parse_version(facts.host.l4t_release) if facts.host.l4t_release else None
    return Target(
        platform=plat,
        driver=facts.driver.version,
        gpus=tuple(gpus),
        python=Version(f"{version.major}.{version.minor}") if version else None,
        described_by="this machine",
        assumed=tuple(assumed),
        accel=tuple(accel),
        amd_driver=facts.amd.driver_version,
        l4t=l4t,
    )


def jetson_gpus(knowledge: Knowledge, target: Target) -> tuple[GpuTarget, ...]:
    """The target's Jetson (Tegra) GPUs on linux-aarch64: every GPU under an L4T driver; else those
    with a Jetson's name, or a compute capability only Jetsons have (the knowledge base's Jetson rows:
    sm_53, sm_62, sm_72, sm_87, sm_110)."""
    if target.platform != "linux-aarch64":
        return ()
    if is_jetson(target.driver):
        return target.gpus
    jetson = {g.cc for g in knowledge.gpus if g.model.startswith("Jetson")}
    others = {g.cc for g in knowledge.gpus if not g.model.startswith("Jetson")}
    return tuple(
        g for g in target.gpus if g.cc in jetson - others or re.search(r"\bJetson\b", g.name or "", re.I)
    )


def this_platform() -> Optional[str]:
    """The platform of the machine envkit runs on (what the detected facts describe when the
    interpreter probe could not say); None for one envkit has no wheels for."""
    import platform

    machine = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    system = platform.system()
    if system == "Darwin":
        return "macos-arm64" if arch == "aarch64" else "macos-x86_64"
    if system == "Windows":
        return "windows-x86_64" if arch == "x86_64" else None
    if system == "Linux" and arch in ("x86_64", "aarch64"):
        return f"linux-{arch}"
    return None
