"""AMD GPUs: the kernel's view first (KFD topology in sysfs), then AMD's tools for names and versions.

Sources, in order of trust for what each says:

- ``/sys/class/kfd/kfd/topology/nodes/*/properties``: one node per GPU (per compute partition on an
  MI300X in CPX mode; they share a ``unique_id``), with ``gfx_target_version`` (the ISA as
  major*10000 + minor*100 + stepping: 90402 is gfx942, 90010 gfx90a, 110501 gfx1151; the stepping
  is a hex digit of the LLVM name), ``vendor_id`` 4098 (0x1002), ``device_id``, ``location_id`` and
  ``domain`` (the PCI address). CPU nodes have ``simd_count 0``. Kernels before 5.x have no
  ``gfx_target_version`` line: the target is then unknown (ROCm/rocm-cli#343 explains why nothing
  else in sysfs names it reliably).
- ``/sys/module/amdgpu/version``: present for AMD's DKMS driver (amdgpu-dkms: "6.8.5"), absent for
  the kernel's own amdgpu.
- ``/opt/rocm/.info/version`` (or ``$ROCM_PATH``): the host's ROCm user space ("6.4.1-83"). torch's
  ROCm wheels bundle their own; the host's is context for the KMD rule and for extensions.
- AMD's tools, each bounded (envkit.detect.amd_tools): the ``amdsmi`` Python bindings in a child
  process (as NVML is asked, envkit.detect.amd_worker), ``amd-smi``, ``rocm-smi``. They add the
  marketing names and the driver version; a tool that hangs or prints garbage is a note, never a
  traceback, and the sysfs answer stands.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Final, Optional

from envkit.detect.amd_tools import ToolGpu, ask_amd_tools, normalize_gfx
from envkit.facts import AccelGpu, VendorFacts
from envkit.versions import parse_version

if TYPE_CHECKING:
    from envkit.system import System

__all__ = [
    "KFD_NODES",
    "AmdVendor",
    "KfdNode",
    "detect_amd",
    "gfx_name",
    "normalize_gfx",
    "parse_kfd_properties",
    "read_kfd",
]

KFD_NODES: Final = "/sys/class/kfd/kfd/topology/nodes"
AMDGPU_VERSION: Final = "/sys/module/amdgpu/version"
AMD_PCI_VENDOR: Final = 0x1002  # the vendor_id KFD reports as 4098
ROCM_VERSION_FILES: Final = (".info/version", ".info/version-dev")
# More nodes than any machine has (8 GPUs x 8 CPX partitions + CPU nodes = 72 on an MI300X box).
MAX_NODES: Final = 1024


def gfx_name(version: int) -> Optional[str]:
    """The LLVM target of a KFD ``gfx_target_version``: major*10000 + minor*100 + stepping, the
    minor and stepping written as hex digits (the kernel's kfd_topology; ROCm/rocm-cli#343).

    >>> gfx_name(90402), gfx_name(90010), gfx_name(110501), gfx_name(0)
    ('gfx942', 'gfx90a', 'gfx1151', None)
    """
    major, minor, step = version // 10000, (version // 100) % 100, version % 100
    if not 6 <= major <= 99 or minor > 15 or step > 15:
        return None
    return f"gfx{major}{minor:x}{step:x}"


@dataclasses.dataclass(frozen=True)
class KfdNode:
    """One KFD GPU node: a GPU, or one compute partition of one."""

    node: int
    gfx: Optional[str]
    device_id: Optional[int]
    bus_id: Optional[str]
    unique_id: Optional[int]
    memory_bytes: Optional[int]


def parse_kfd_properties(text: str) -> dict[str, int]:
    """A KFD ``properties`` file: one ``name value`` pair per line, integer values.

    >>> parse_kfd_properties("simd_count 304\\ngfx_target_version 90402\\njunk\\n")
    {'simd_count': 304, 'gfx_target_version': 90402}
    """
    found: dict[str, int] = {}
    for line in text.splitlines()[:512]:
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit() and len(parts[1]) <= 24:
            found[parts[0]] = int(parts[1])
    return found


def _bus_id(domain: int, location: int) -> str:
    """The PCI address of a KFD ``location_id`` (bus << 8 | device << 3 | function)."""
    return f"{domain:04x}:{location >> 8:02x}:{(location >> 3) & 0x1F:02x}.{location & 0x7:x}"


def _read(system: System, path: str) -> Optional[str]:
    try:
        return system.read_text(path)
    except (OSError, ValueError):
        return None


def _memory(system: System, node: str) -> Optional[int]:
    """The node's own memory: its memory banks of heap type 1 or 2 (the frame buffer, public and
    private; 0 is system memory). None when none is listed."""
    total, seen = 0, False
    banks = system.path(f"{KFD_NODES}/{node}/mem_banks")
    try:
        names = sorted(os.listdir(banks))[:64]
    except OSError:
        return None
    for bank in names:
        props = parse_kfd_properties(_read(system, f"{KFD_NODES}/{node}/mem_banks/{bank}/properties") or "")
        if props.get("heap_type") in (1, 2) and "size_in_bytes" in props:
            total += props["size_in_bytes"]
            seen = True
    return total if seen else None


def read_kfd(system: System) -> tuple[list[KfdNode], list[str]]:
    """The GPU nodes of the KFD topology, in node order, and notes on what could not be read."""
    try:
        names = os.listdir(system.path(KFD_NODES))
    except OSError:
        return [], []
    notes: list[str] = []
    nodes: list[KfdNode] = []
    for name in sorted((n for n in names if n.isdigit()), key=int)[:MAX_NODES]:
        text = _read(system, f"{KFD_NODES}/{name}/properties")
        if text is None:
            notes.append(f"{KFD_NODES}/{name}/properties: not readable")
            continue
        props = parse_kfd_properties(text)
        if not props.get("simd_count"):  # a CPU node
            continue
        vendor = props.get("vendor_id")
        if vendor is not None and vendor != AMD_PCI_VENDOR:
            continue
        version = props.get("gfx_target_version")
        gfx = gfx_name(version) if version else None
        location = props.get("location_id")
        nodes.append(
            KfdNode(
                node=int(name),
                gfx=gfx,
                device_id=props.get("device_id"),
                bus_id=_bus_id(props.get("domain", 0), location) if location is not None else None,
                unique_id=props.get("unique_id") or None,
                memory_bytes=_memory(system, name),
            )
        )
        if version is None:
            notes.append(f"KFD node {name} states no gfx_target_version (a kernel older than 5.x)")
    return nodes, notes


def _physical(nodes: list[KfdNode]) -> list[list[KfdNode]]:
    """Nodes grouped into physical GPUs: compute partitions share a unique_id (one MI300X in CPX
    mode is 8 nodes, one MI308X in 4 partitions 4 nodes of a quarter of its memory each:
    ROCm/k8s-device-plugin's topo-mi300-cpx and topology-parsing-mi308 captures)."""
    groups: dict[object, list[KfdNode]] = {}
    for node in nodes:
        key: object = node.unique_id if node.unique_id is not None else ("node", node.node)
        groups.setdefault(key, []).append(node)
    return list(groups.values())


def _rocm_version(system: System) -> Optional[str]:
    roots = [system.env.get("ROCM_PATH") or "", "/opt/rocm"]
    for root in filter(None, roots):
        for name in ROCM_VERSION_FILES:
            text = _read(system, f"{root.rstrip('/')}/{name}")
            if text and text.strip():
                return text.strip().splitlines()[0][:64]
    return None


def _merge(nodes: list[KfdNode], tools: list[ToolGpu]) -> list[AccelGpu]:
    """The KFD GPUs with what the tools add (a name, and a target where KFD had none), matched by
    PCI address; the tools' list alone where KFD shows nothing (no /sys in a container)."""
    by_bus = {t.bus_id.lower(): t for t in tools if t.bus_id}
    gpus: list[AccelGpu] = []
    if not nodes:
        for i, only in enumerate(tools):
            gpus.append(
                AccelGpu(
                    index=i,
                    name=only.name,
                    pci_bus_id=only.bus_id,
                    device_id=only.device_id,
                    arch=only.gfx,
                    memory_total_mib=only.memory_mib,
                    source=only.source,
                )
            )
        return gpus
    physical = _physical(nodes)
    for i, members in enumerate(physical):
        node = members[0]
        memory = [m.memory_bytes for m in members if m.memory_bytes]
        tool: Optional[ToolGpu] = by_bus.get((node.bus_id or "").lower())
        if tool is None and len(tools) == len(physical):
            tool = tools[i]
        gpus.append(
            AccelGpu(
                index=i,
                name=tool.name if tool else None,
                pci_bus_id=node.bus_id,
                device_id=f"0x{node.device_id:04x}" if node.device_id is not None else None,
                arch=node.gfx or (tool.gfx if tool else None),
                memory_total_mib=sum(memory) // (1024 * 1024) if memory else None,
                partitions=len(members),
                source="sysfs" if tool is None else f"sysfs+{tool.source}",
            )
        )
    return gpus


def _by_device_id(gpus: list[AccelGpu], notes: list[str]) -> list[AccelGpu]:
    """What the knowledge base says of a GPU's PCI device id: its product name where no tool named
    it, and its target where nothing stated one (a kernel before gfx_target_version, an amd-smi
    before TARGET_GRAPHICS_VERSION), with a note."""
    if all(g.arch and g.name for g in gpus):
        return gpus
    from envkit.knowledge import load_knowledge

    vendors = load_knowledge().vendors
    named = []
    for gpu in gpus:
        known = vendors.amd_by_device(gpu.device_id)
        if known is not None:
            if gpu.arch is None:
                notes.append(
                    f"GPU {gpu.index}: {known.gfx} from its device id {gpu.device_id} ({known.model})"
                )
            gpu = dataclasses.replace(gpu, arch=gpu.arch or known.gfx, name=gpu.name or known.model)
        named.append(gpu)
    return named


def detect_amd(system: System) -> VendorFacts:
    """The AMD GPUs of ``system``, the amdgpu driver and the host's ROCm."""
    nodes, notes = read_kfd(system)
    module = _read(system, AMDGPU_VERSION)
    loaded = system.path("/sys/module/amdgpu").is_dir()
    tools = ask_amd_tools(system, wanted=bool(nodes) or loaded)
    notes += tools.notes
    gpus = _by_device_id(_merge(nodes, list(tools.gpus)), notes)
    rocm = tools.rocm or _rocm_version(system)
    sources = (["sysfs"] if nodes else []) + list(tools.sources)
    driver_version = (module or "").strip()[:64] or tools.driver_version
    if gpus and not module and loaded:
        # The kernel's own amdgpu: what AMD's tools call its version is the kernel's, which a plain
        # kernel spells like a DKMS module ("6.12.12" would read as ROCm 6.4's driver). Not a
        # driver version then.
        said = (
            f"; AMD's tools report the kernel's version, {tools.driver_version}"
            if tools.driver_version
            else ""
        )
        notes.append(f"amdgpu is the kernel's own driver (no /sys/module/amdgpu/version){said}")
        driver_version = None
    return VendorFacts(
        vendor="amd",
        gpus=tuple(gpus),
        driver="amdgpu" if (loaded or gpus) else None,
        driver_version=driver_version or None,
        runtime=parse_version(rocm.split("-")[0]) if rocm else None,
        sources=tuple(sources),
        notes=tuple(notes[:20]),
    )


class AmdVendor:
    """The AMD member of envkit.detect.vendors.VENDORS."""

    name: Final = "amd"

    def detect(self, system: System) -> VendorFacts:
        return detect_amd(system)
