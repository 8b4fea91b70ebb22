"""A machine's comparable facts: one text value per key, with how much a difference in it matters.

``envkit diff`` compares two machines' fingerprints and ``envkit fleet`` compares the fleet keys of
many, so each key's meaning, rank and "why it matters" line is written once, here. Values are text
compared for equality only (never for order: that is what ``Version`` is for); ``None`` means not
found. Readings that change from minute to minute (temperatures, power, error counters, the PCIe
generation an idle GPU drops to) are left out: they would make every pair of machines differ.
"""

from __future__ import annotations

import functools
import weakref
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Final, Optional

from envkit.facts import AccelGpu, Distribution
from envkit.report import Status
from envkit.versions import Version

if TYPE_CHECKING:
    from collections.abc import Iterable

    from envkit.facts import Facts, GpuFacts

__all__ = [
    "ASPECTS",
    "DEEP_KEYS",
    "FLEET_ENV",
    "TIERS",
    "Aspect",
    "aspect",
    "fingerprint",
    "fleet_fingerprint",
    "order",
    "show",
]

# Rank 1 matters most: what the same code is most likely to trip over when it moves machines.
TIERS: Final = {
    1: "driver, GPUs and torch build",
    2: "libraries",
    3: "CUDA toolkits",
    4: "Python",
    5: "environment variables",
    6: "host",
    7: "paths",
}


@dataclass(frozen=True)
class Aspect:
    """What a key means: a short label, its rank (a TIERS key) and why a difference matters."""

    key: str
    label: str
    tier: int
    why: str
    # How envkit fleet treats a node that differs from the rest: None (not compared), WARN, or FAIL
    # where the node cannot run the same job shape as the others.
    fleet: Optional[Status] = None
    # What a missing value is called.
    absent: str = "not found"


Extract = Callable[["Facts"], Optional[str]]


# str(Version) rebuilds its text on every call (packaging.version.Version.__str__); the reports of a
# fleet share their Version objects (envkit._serial parses each text once), so each is written
# once. Keyed by identity, with the object kept so that its id cannot be reused; bounded.
_TEXTS: dict[int, tuple[object, str]] = {}


def _s(value: object) -> Optional[str]:
    if not isinstance(value, Version):
        return None if value is None else str(value)
    known = _TEXTS.get(id(value))
    if known is not None and known[0] is value:
        return known[1]
    text = str(value)
    if len(_TEXTS) < 20_000:
        _TEXTS[id(value)] = (value, text)
    return text


def _tally(values: Iterable[str]) -> Optional[str]:
    """ "8 × A" when every GPU agrees, "7 × A + 1 × B" when they do not; None when there are none."""
    counts = Counter(values)
    if not counts:
        return None
    return " + ".join(f"{n} × {v}" for v, n in sorted(counts.items()))


def _release3(version: Optional[Version]) -> Optional[str]:
    # A wheel says 2.21.5 or 9.1.0.70, torch.cuda.nccl.version() 2.21.5 and cuDNN's integer 9.1.0:
    # three parts make nodes that ran --deep and nodes that did not comparable.
    return None if version is None else ".".join(str(p) for p in version.release[:3])


def _conda(facts: Facts, name: str) -> Optional[Version]:
    return next((p.version for p in facts.torch.conda_packages if p.name == name), None)


def _nccl(facts: Facts) -> Optional[str]:
    return _release3(facts.torch.nccl_version())


def _cudnn(facts: Facts) -> Optional[str]:
    deep = facts.torch.deep
    if deep is not None and deep.cudnn:
        # cudnn.h: cuDNN 9 encodes MAJOR*10000 + MINOR*100 + PATCH, cuDNN 8 MAJOR*1000 + MINOR*100 + PATCH.
        v = deep.cudnn
        major, rest = divmod(v, 10000) if v >= 90000 else divmod(v, 1000)
        return f"{major}.{rest // 100}.{rest % 100}"
    return _release3(facts.torch.library_version("cudnn"))


def _triton(facts: Facts) -> Optional[str]:
    names = ("triton", "pytorch-triton", "pytorch-triton-rocm")
    found = sorted({str(d.version) for d in facts.torch.distributions if d.name in names and d.version})
    return ", ".join(found) or _s(_conda(facts, "triton"))


def _gpus(facts: Facts, describe: Callable[[GpuFacts], Optional[str]]) -> Optional[str]:
    return _tally(v for v in (describe(g) for g in facts.gpus) if v is not None)


def _accel(facts: Facts) -> list[AccelGpu]:
    """The node's AMD GPUs and the Intel GPUs a torch build uses (an XPU family; not a UHD iGPU)."""
    return [*facts.amd.gpus, *(g for g in facts.intel.gpus if g.arch)]


def _count(facts: Facts) -> str:
    return str(len(facts.gpus) + len(_accel(facts)))


def _vendor(facts: Facts) -> Optional[str]:
    vendors = [v for v, gpus in (("nvidia", facts.gpus), ("amd", facts.amd.gpus)) if gpus]
    if any(g.arch for g in facts.intel.gpus):
        vendors.append("intel")
    return " + ".join(vendors) or None


def _models(facts: Facts) -> Optional[str]:
    # Model(s) without counts: a node with 7 of 8 GPUs differs in gpu.count, not in gpu.model too.
    names = {g.name for g in facts.gpus if g.name} | {g.name for g in _accel(facts) if g.name}
    return " + ".join(sorted(names)) or None


def _arch(facts: Facts) -> Optional[str]:
    # sm_90 for NVIDIA, the gfx target for AMD (gfx942), the XPU family for Intel (bmg).
    archs = {g.compute_capability.sm for g in facts.gpus if g.compute_capability}
    archs |= {g.arch for g in _accel(facts) if g.arch}
    return ", ".join(sorted(archs)) or None


def _all_memory(facts: Facts) -> Optional[str]:
    sizes = [_memory(g) for g in facts.gpus]
    sizes += [None if g.memory_total_mib is None else f"{g.memory_total_mib} MiB" for g in _accel(facts)]
    return _tally(v for v in sizes if v is not None)


def _mig(facts: Facts) -> Optional[str]:
    known = [g.mig_enabled for g in facts.gpus if g.mig_enabled is not None]
    if not known:
        return None
    on = sum(known)
    if not on:
        return "off"
    return "on" if on == len(facts.gpus) else f"on for {on} of {len(facts.gpus)} GPUs"


def _pcie(g: GpuFacts) -> Optional[str]:
    # The current generation is left out: idle GPUs drop to gen 1 to save power (NVML docs).
    if g.pcie_width is None:
        return None
    return f"gen{g.pcie_gen_max or '?'} x{g.pcie_width}" + (
        f" (of x{g.pcie_width_max})" if g.pcie_width_max and g.pcie_width_max != g.pcie_width else ""
    )


def _nvcc(facts: Facts, *, on_path: bool) -> Optional[str]:
    kits = [t for t in facts.toolkits if t.on_path] if on_path else list(facts.toolkits)
    return ", ".join(sorted({str(t.version or "?") for t in kits})) or None


def _deep(field: str) -> Extract:
    def extract(facts: Facts) -> Optional[str]:
        value = None if facts.torch.deep is None else getattr(facts.torch.deep, field)
        return _plain(value)

    return extract


def _py(field: str) -> Extract:
    def extract(facts: Facts) -> Optional[str]:
        return None if facts.python is None else _plain(getattr(facts.python, field))

    return extract


def _plain(value: object) -> Optional[str]:
    if isinstance(value, bool):
        return _yes_no(value)
    if isinstance(value, tuple):
        return " ".join(str(v) for v in value) or None
    return _s(value)


def _memory(g: GpuFacts) -> Optional[str]:
    return None if g.memory_total_mib is None else f"{g.memory_total_mib} MiB"


def _shm(facts: Facts) -> Optional[str]:
    return None if facts.host.shm_bytes is None else f"{facts.host.shm_bytes / 2**30:.1f} GiB"


def _module_loaded(facts: Facts) -> Optional[str]:
    return _yes_no(facts.host.nvidia_module_loaded)


def _pci_devices(facts: Facts) -> Optional[str]:
    # None when the list is empty: a pasted collect_env has no PCI listing, which is not "0 GPUs".
    return str(len(facts.host.nvidia_pci_devices)) if facts.host.nvidia_pci_devices else None


def _ecc(facts: Facts) -> Optional[str]:
    return _gpus(facts, lambda g: _yes_no(g.ecc_enabled))


def _persistence(facts: Facts) -> Optional[str]:
    return _gpus(facts, lambda g: _yes_no(g.persistence_mode))


def _roots(facts: Facts) -> Optional[str]:
    return ", ".join(sorted({t.root or t.nvcc for t in facts.toolkits})) or None


def _interfaces(facts: Facts) -> Optional[str]:
    return ", ".join(sorted(i.name + ("" if i.up else " (down)") for i in facts.host.interfaces)) or None


def _yes_no(value: Optional[bool]) -> Optional[str]:
    return None if value is None else ("yes" if value else "no")


def _row(
    key: str, label: str, tier: int, fleet: str, extract: Extract, why: str, absent: str = "not found"
) -> tuple[Aspect, Extract]:
    return Aspect(key, label, tier, why, Status(fleet) if fleet else None, absent), extract


# fmt: off
_STATIC: Final[tuple[tuple[Aspect, Extract], ...]] = (
    _row("driver.version", "NVIDIA driver", 1, "warn", lambda f: _s(f.driver.version),
         "the driver decides which CUDA builds run: each CUDA release needs a minimum driver"),
    _row("driver.cuda_version", "driver's CUDA", 1, "", lambda f: _s(f.driver.cuda_version),
         "the newest CUDA the driver runs; a torch built for a newer CUDA cannot initialise"),
    _row("driver.module_loaded", "nvidia module loaded", 1, "", _module_loaded,
         "without the nvidia kernel module no GPU is usable"),
    _row("gpu.vendor", "GPU vendor", 1, "fail", _vendor,
         "NVIDIA, AMD and Intel GPUs take different torch builds (CUDA, ROCm, XPU)", "no GPU"),
    _row("gpu.count", "GPU count", 1, "fail", _count,
         "jobs sized for N GPUs a node (torchrun --nproc-per-node) fail or hang with fewer; "
         "a missing GPU has usually fallen off the bus"),
    _row("gpu.model", "GPU model", 1, "fail", _models,
         "another GPU means another architecture, memory size and speed"),
    _row("gpu.arch", "GPU architecture", 1, "fail", _arch,
         "torch runs only on architectures its build has kernels for (else 'no kernel image is available')"),
    _row("gpu.memory", "GPU memory", 1, "", _all_memory,
         "a batch that fits one GPU runs out of memory on a smaller one"),
    _row("gpu.mig", "MIG mode", 1, "fail", _mig,
         "with MIG on, CUDA sees GPU slices instead of whole GPUs"),
    _row("torch.version", "torch build", 1, "warn", lambda f: _s(f.torch.version),
         "the torch build: its version and local label (+cu124) fix the CUDA runtime and kernels it ships"),
    _row("torch.cuda", "torch's CUDA", 1, "warn", lambda f: _s(f.torch.cuda),
         "the CUDA torch was built with; the driver must support it", "none (CPU build or no torch)"),
    _row("torch.hip", "torch's ROCm", 1, "", lambda f: f.torch.hip,
         "a ROCm build of torch cannot use NVIDIA GPUs", "none"),
    _row("torch.cuda_available", "torch.cuda.is_available()", 1, "", _deep("cuda_available"),
         "whether torch could use a GPU at all"),
    _row("torch.device_count", "GPUs torch sees", 1, "", _deep("device_count"),
         "what torch sees after CUDA_VISIBLE_DEVICES and MIG"),
    _row("torch.arch_list", "torch's compiled archs", 1, "", _deep("arch_list"),
         "the GPU architectures compiled into this torch build"),
    _row("cudnn.version", "cuDNN", 2, "warn", _cudnn,
         "convolutions and attention run cuDNN kernels; versions differ in speed, support and bugs"),
    _row("nccl.version", "NCCL", 2, "warn", _nccl,
         "multi-GPU collectives run on NCCL; every rank of a job should use one version"),
    _row("triton.version", "triton", 2, "warn", _triton,
         "torch.compile generates its GPU kernels with triton", "not installed"),
    _row("toolkit.nvcc", "nvcc on PATH", 3, "warn", lambda f: _nvcc(f, on_path=True),
         "extensions build with the nvcc on PATH; its CUDA must match torch's"),
    _row("toolkit.all", "CUDA toolkits", 3, "", lambda f: _nvcc(f, on_path=False),
         "another installed toolkit can be picked up through CUDA_HOME"),
    _row("python.version", "Python", 4, "warn", _py("version"),
         "wheels and C extensions are built for one Python version"),
    _row("python.implementation", "Python implementation", 4, "", _py("implementation"),
         "torch wheels exist for CPython only"),
    _row("python.platform", "platform", 4, "", _py("platform"),
         "wheels are built per OS and CPU architecture"),
    _row("python.glibc", "glibc", 4, "", _py("glibc"),
         "manylinux wheels need a minimum glibc"),
    _row("python.kind", "environment kind", 4, "", _py("kind"),
         "conda and pip environments bring CUDA libraries differently"),
    _row("python.has_python_h", "Python.h", 4, "", _py("has_python_h"),
         "torch.compile and extension builds compile C against Python.h"),
    _row("host.os", "OS", 6, "warn", lambda f: f.host.os,
         "system libraries and the driver's packaging differ between distributions"),
    _row("host.kernel", "Linux kernel", 6, "warn", lambda f: f.host.kernel,
         "the nvidia module is built for one kernel; a kernel update without a rebuilt module breaks "
         "the driver"),
    _row("host.arch", "CPU architecture", 6, "", lambda f: f.host.arch,
         "x86_64 and aarch64 need different wheels"),
    _row("host.wsl", "WSL", 6, "", lambda f: _yes_no(f.host.wsl),
         "under WSL2 the Windows driver serves CUDA through /usr/lib/wsl/lib"),
    _row("driver.kernel_module", "kernel module", 6, "", lambda f: f.driver.kernel_module,
         "open and proprietary kernel modules support different GPUs and features"),
    _row("host.nvidia_pci_devices", "NVIDIA PCI devices", 6, "", _pci_devices,
         "a GPU on the PCI bus that the driver does not list has fallen off the bus or is not bound"),
    _row("host.shm", "/dev/shm", 6, "", _shm,
         "DataLoader workers and NCCL pass tensors through /dev/shm; too small and they crash"),
    _row("host.interfaces", "network interfaces", 6, "", _interfaces,
         "NCCL and gloo choose interfaces by name; a missing or down one hangs init"),
    _row("gpu.pcie", "PCIe link", 6, "", lambda f: _gpus(f, _pcie),
         "a GPU on a narrower or slower link moves data more slowly"),
    _row("gpu.ecc", "ECC", 6, "", _ecc,
         "ECC on or off changes usable memory and how memory errors surface"),
    _row("gpu.persistence", "persistence mode", 6, "", _persistence,
         "without it every CUDA start re-initialises the GPUs"),
    _row("python.executable", "interpreter", 7, "", _py("executable"),
         "another interpreter is another environment"),
    _row("python.prefix", "environment prefix", 7, "", _py("prefix"),
         "where packages are installed"),
    _row("python.env_name", "environment name", 7, "", _py("env_name"),
         "which named environment was inspected"),
    _row("torch.location", "torch location", 7, "", lambda f: f.torch.location,
         "which copy of torch imports"),
    _row("toolkit.roots", "toolkit folders", 7, "", _roots,
         "where CUDA headers and libraries for builds come from"),
)
# fmt: on

ASPECTS: Final = {a.key: a for a, _ in _STATIC}
_POSITION: Final = {key: i for i, key in enumerate(ASPECTS)}
# Only measured when torch was imported (--deep): absent on one side is "not measured", not "differs".
DEEP_KEYS: Final = frozenset({"torch.cuda_available", "torch.device_count", "torch.arch_list"})
# Wheels with a key of their own above.
_COVERED: Final = ("torch", "triton", "pytorch-triton", "pytorch-triton-rocm")
# Set afresh for every job or rank: they always differ and explain nothing.
_PER_RUN: Final = frozenset({"SLURM_JOB_ID", "RANK", "LOCAL_RANK", "MASTER_PORT"})
# Variables that only name places: ranked with the paths.
_PATH_VARS: Final = frozenset(
    {"PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "TRITON_CACHE_DIR"}
)
_ENV_ORDER: Final = ("LD_PRELOAD", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_", "NCCL_", "TORCH_NCCL_")


def _dynamic(facts: Facts) -> dict[str, Optional[str]]:
    values: dict[str, Optional[str]] = {}
    versions: dict[str, set[str]] = {}
    for dist in facts.torch.distributions:
        name = dist.name
        if name in _COVERED or dist.cuda_library in ("cudnn", "nccl"):  # keys of their own
            continue
        versions.setdefault(name, set()).add(str(dist.version or "?"))
    for name, found in versions.items():
        values[f"wheel.{name}"] = ", ".join(sorted(found))
    for pkg in facts.torch.conda_packages:
        values[f"conda.{pkg.name}"] = f"{pkg.version or '?'} {pkg.build}".strip()
    libs: dict[str, set[str]] = {}
    for lib in facts.host.cuda_libs:
        libs.setdefault(lib.family, set()).add(f"{lib.version or '?'} ({lib.source})")
    for family, found in libs.items():
        values[f"syslib.{family}"] = ", ".join(sorted(found))
    for name, value in facts.host.env.items():
        if name not in _PER_RUN:
            values[f"env.{name}"] = value
    return values


def fingerprint(facts: Facts) -> dict[str, Optional[str]]:
    """Every comparable fact of one machine; the host name is left out (it always differs).

    Deep keys are present only when torch was imported (``--deep``); installed wheels, conda
    packages, CUDA libraries outside the wheels and environment variables only when present.
    """
    values = {a.key: get(facts) for a, get in _STATIC if a.key not in DEEP_KEYS or facts.torch.deep}
    values.update(_dynamic(facts))
    return values


# Variables that must agree across the ranks of one job; other variables differ for good reasons.
FLEET_ENV: Final = ("NCCL_", "TORCH_NCCL_")
_FLEET: Final = tuple((a.key, get) for a, get in _STATIC if a.fleet is not None)


# The one section of Facts that each of these fleet keys reads. The nodes of a fleet share their
# decoded sections where the texts are equal (envkit.report: one object for the same torch, Python,
# toolkits or driver), so these keys are worked out once per distinct section, not per node.
_READS: Final = {
    "driver.version": "driver",
    "torch.version": "torch",
    "torch.cuda": "torch",
    "cudnn.version": "torch",
    "nccl.version": "torch",
    "triton.version": "torch",
    "toolkit.nvcc": "toolkits",
    "python.version": "python",
}
_BY_SECTION: Final = {
    section: tuple((key, get) for key, get in _FLEET if _READS.get(key) == section)
    for section in dict.fromkeys(_READS.values())
}
_PLAN: Final = tuple((key, get, _READS.get(key)) for key, get in _FLEET)
# (section, id of the section's object) -> (a weak reference to the object, which tells a reused
# id; its keys' values). Weak: the memo must not keep every node's own sections alive (a torch that
# differs per node, 30 KB of text, is ~150 KB of records: 4,096 of them were 600 MiB), only the
# shared ones that envkit._serial's bounded cache holds anyway. A tuple (toolkits) or None, which
# cannot be referenced weakly, is held: they are small. Bounded: past it, worked out per node.
_SEEN: dict[tuple[str, int], tuple[Callable[[], object], dict[str, Optional[str]]]] = {}
_SEEN_MAX: Final = 4096


def _section_values(facts: Facts, section: str) -> dict[str, Optional[str]]:
    part = getattr(facts, section)
    slot = (section, id(part))
    seen = _SEEN.get(slot)
    if seen is not None and seen[0]() is part:
        return seen[1]
    values = {key: get(facts) for key, get in _BY_SECTION[section]}
    if seen is not None or len(_SEEN) < _SEEN_MAX:  # a dead entry under this id is replaced
        try:
            ref: Callable[[], object] = weakref.ref(part)
        except TypeError:
            ref = functools.partial(_held, part)
        _SEEN[slot] = (ref, values)
    return values


def _held(part: object) -> object:
    return part


def fleet_fingerprint(facts: Facts) -> dict[str, Optional[str]]:
    """Only the keys envkit fleet compares (``Aspect.fleet``, and the FLEET_ENV variables): the
    same values as ``fingerprint``, for a fraction of its time on a 10,000-node fleet."""
    parts = {section: _section_values(facts, section) for section in _BY_SECTION}
    # In _FLEET's order, which is the order of the fleet's own keys (aggregate._named keeps it).
    values = {key: parts[section][key] if section else get(facts) for key, get, section in _PLAN}
    values.update({f"env.{n}": v for n, v in facts.host.env.items() if n.startswith(FLEET_ENV)})
    return values


def _cuda_wheel(name: str) -> bool:
    """nvidia-nccl-cu12 is a CUDA library torch loads; nvidia-ml-py (NVML bindings) is not."""
    return Distribution(name, None).cuda_library is not None


def aspect(key: str) -> Aspect:
    """What ``key`` means, for the fixed keys and the families (wheel.*, conda.*, syslib.*, env.*)."""
    if key in ASPECTS:
        return ASPECTS[key]
    family, _, name = key.partition(".")
    if family == "wheel":
        why = "a package built against, or pinned to, one torch release"
        if _cuda_wheel(name):
            why = "a CUDA library wheel torch loads at run time"
        elif name.startswith("nvidia-"):
            why = "an NVIDIA package (not a CUDA library torch loads)"
        return Aspect(key, name, 2, why, absent="not installed")
    if family == "conda":
        return Aspect(
            key, f"conda {name}", 2, "a conda package of the torch / CUDA stack", absent="not installed"
        )
    if family == "syslib":
        why = "a CUDA library outside the torch wheel; the loader can pick it before the wheel's own copy"
        return Aspect(key, f"system lib{name}", 2, why, absent="none")
    return Aspect(key, name, 7 if name in _PATH_VARS else 5, _env_why(name), absent="unset")


def _env_why(name: str) -> str:
    if name in _PATH_VARS:
        return "which programs and environment the process finds first"
    if name == "PYTHONPATH":
        return "searched before site-packages: another copy of torch or a library can import"
    if name == "LD_PRELOAD":
        return "forces a library to load first, ahead of torch's own CUDA libraries"
    if name == "LD_LIBRARY_PATH":
        return "searched before the wheel's own CUDA libraries: another cuDNN or NCCL can load"
    if name == "CUDA_VISIBLE_DEVICES":
        return "which GPUs CUDA sees, and in what order"
    if name in ("CUDA_HOME", "CUDA_PATH"):
        return "which CUDA toolkit extension builds and triton use"
    if name.startswith("CUDA_"):
        return "read by the CUDA runtime or driver at start"
    if name.startswith("NCCL_"):
        return "read by NCCL at init: network interfaces, transports, timeouts"
    if name.startswith(("TORCH_NCCL_", "TORCH_", "PYTORCH_")):
        return "a torch run-time switch"
    return "set for the inspected process"


def order(key: str) -> tuple[int, int, str]:
    """Sort key: rank first, then the order of the table above (dynamic keys after fixed ones)."""
    a = aspect(key)
    if key in _POSITION:
        return (a.tier, _POSITION[key], key)
    family, _, name = key.partition(".")
    if family == "env":
        sub = next((i for i, p in enumerate(_ENV_ORDER) if name.startswith(p)), len(_ENV_ORDER))
    else:
        sub = {"wheel": 0 if _cuda_wheel(name) else 1, "syslib": 2, "conda": 3}.get(family, 4)
    return (a.tier, len(_POSITION) + sub, key)


def show(key: str, value: Optional[str]) -> str:
    """The value as people read it: ``None`` becomes "unset", "not installed", "not found", …"""
    return aspect(key).absent if value is None else value
