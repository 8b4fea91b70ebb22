"""Intel GPUs: the PCI devices in sysfs, then ``xpu-smi`` and ``sycl-ls`` where installed.

- ``/sys/bus/pci/devices/*``: ``vendor`` 0x8086 with a display ``class`` (0x03xxxx) is an Intel
  GPU; ``device`` names it (the kernel's include/drm/intel/pciids.h groups the ids by family, which
  the knowledge base carries: envkit/knowledge/intel_gpus.toml); the ``driver`` link is ``xe`` or
  ``i915``.
- ``xpu-smi discovery``: Intel's management tool; per device ``Device Name``, ``PCI Device ID``,
  ``Driver Version`` (table cells or plain ``Key: Value`` lines).
- ``sycl-ls``: the SYCL runtime's devices, ``[level_zero:gpu][level_zero:0] Intel(R) Level-Zero,
  Intel(R) Arc(TM) A770 Graphics 12.55.8 [1.3.26241]``. torch's XPU build reaches the GPU through
  Level Zero only; a GPU listed under ``opencl:gpu`` alone (intel/compute-runtime#764) is one torch
  cannot use.

A tool that hangs or prints garbage is a note; sysfs still answers.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Final, Optional

from envkit._proc import short
from envkit.facts import AccelGpu, VendorFacts
from envkit.versions import parse_version

if TYPE_CHECKING:
    from envkit.system import System

__all__ = ["IntelVendor", "detect_intel", "parse_sycl_ls", "parse_xpu_smi", "read_intel_pci"]

PCI_DEVICES: Final = "/sys/bus/pci/devices"
INTEL_PCI_VENDOR: Final = "0x8086"
TOOL_TIMEOUT_S: Final = 10.0
MAX_DEVICES: Final = 256


def _read(system: System, path: str) -> Optional[str]:
    try:
        return system.read_text(path).strip()
    except (OSError, ValueError):
        return None


def read_intel_pci(system: System) -> list[tuple[str, str, Optional[str]]]:
    """(PCI address, device id "0xe20b", driver "xe" | "i915" | None) of each Intel display device."""
    try:
        entries = sorted(os.listdir(system.path(PCI_DEVICES)))[:4096]
    except OSError:
        return []
    found = []
    for entry in entries:
        base = f"{PCI_DEVICES}/{entry}"
        if (_read(system, f"{base}/vendor") or "").lower() != INTEL_PCI_VENDOR:
            continue
        if not (_read(system, f"{base}/class") or "").lower().startswith("0x03"):
            continue
        device = (_read(system, f"{base}/device") or "").lower() or None
        try:
            driver: Optional[str] = os.path.basename(os.readlink(system.path(f"{base}/driver")))
        except OSError:
            driver = None
        found.append((entry, device or "", driver))
        if len(found) >= MAX_DEVICES:
            break
    return found


def parse_xpu_smi(text: str) -> list[dict[str, str]]:
    """Each device of ``xpu-smi discovery`` (the table or ``-d N``'s detail) as a dict of its
    ``Key: Value`` cells, keys in lower case.

    >>> parse_xpu_smi("  0  Device Name: Intel(R) Arc(TM) A770 Graphics\\n     PCI Device ID: 0x56a0\\n")
    [{'device name': 'Intel(R) Arc(TM) A770 Graphics', 'pci device id': '0x56a0'}]
    """
    devices: list[dict[str, str]] = []
    for raw in text.splitlines()[:20000]:
        line = raw.replace("|", " ").strip()
        if not line or set(line) <= set("-+= "):
            continue
        start = re.match(r"^(\d+)\s+(?=\S+.*:)", line)
        if start:
            line = line[start.end() :]
            devices.append({})
        key, sep, value = line.partition(":")
        if not sep or not key.strip() or len(key) > 64:
            continue
        if not devices:
            devices.append({})
        key = key.strip().lower()
        if key == "device name" and "device name" in devices[-1]:
            devices.append({})  # a table without index cells: each name starts a device
        devices[-1].setdefault(key, value.strip()[:128])
        if len(devices) > MAX_DEVICES:
            break
    return [d for d in devices if d]


_SYCL_LINE: Final = re.compile(
    r"^\[(?P<backend>[\w:]+?):(?P<kind>gpu|cpu|acc|fpga)\]\[[^\]]*\]\s*(?P<rest>.*)$"
)


def parse_sycl_ls(text: str) -> tuple[list[str], list[str], Optional[str]]:
    """(GPU names under level_zero, GPU names under other backends, Level Zero's runtime version).

    >>> parse_sycl_ls("[opencl:gpu][opencl:1] Intel(R) OpenCL Graphics, Intel(R) Arc(TM) A770 "
    ...     "Graphics OpenCL 3.0 NEO  [23.17.26241.33]")
    ([], ['Intel(R) Arc(TM) A770 Graphics'], None)
    """
    level_zero: list[str] = []
    others: list[str] = []
    runtime = None
    for line in text.splitlines()[:1000]:
        match = _SYCL_LINE.match(line.strip())
        if not match or match.group("kind") != "gpu":
            continue
        rest = match.group("rest")
        name = rest.split(",", 1)[1].strip() if "," in rest else rest
        name = re.split(r"\s+(?:OpenCL \d|\d+\.\d+\.\d+\s*\[|\[)", name, maxsplit=1)[0].strip()
        version = re.search(r"\[([\d.]+)\]\s*$", rest)
        if "level_zero" in match.group("backend"):
            level_zero.append(name[:128])
            runtime = runtime or (version.group(1) if version else None)
        else:
            others.append(name[:128])
    return level_zero, others, runtime


def _tool(system: System, argv: list[str]) -> tuple[Optional[str], list[str]]:
    result = system.run_within(argv, timeout=TOOL_TIMEOUT_S)
    if result.ok:
        return result.stdout, []
    tail = result.tail(1)
    return None, [short(f"{argv[0]}: {result.describe()}" + (f": {tail}" if tail else ""), 300)]


def _identify(name: Optional[str], device: Optional[str]) -> tuple[Optional[str], Optional[str]]:
    """(family, name) from the device id, else from the name (a tool's, without sysfs)."""
    from envkit.knowledge import load_knowledge

    vendors = load_knowledge().vendors
    by_id = vendors.intel_by_device(device) if device else None
    if by_id is not None:
        return by_id.family, name or by_id.name
    family = vendors.intel_named(name) if name else None
    return (family.family if family else None), name


def _from_tools(
    system: System, xpu_smi: Optional[str], sycl_ls: Optional[str]
) -> tuple[list[dict[str, str]], Optional[tuple[list[str], list[str], Optional[str]]], list[str]]:
    notes: list[str] = []
    devices: list[dict[str, str]] = []
    sycl = None
    if xpu_smi:
        out, more = _tool(system, [xpu_smi, "discovery"])
        notes += more
        if out is not None:
            devices = parse_xpu_smi(out)
            if not devices and out.strip():
                notes.append(f"xpu-smi: no device in its output ({short(out.strip(), 60)!r})")
    if sycl_ls:
        out, more = _tool(system, [sycl_ls])
        notes += more
        if out is not None:
            sycl = parse_sycl_ls(out)
    return devices, sycl, notes


def detect_intel(system: System) -> VendorFacts:
    """The Intel GPUs of ``system``, their kernel driver, and whether Level Zero sees them. The
    tools run where installed; without sysfs (a container without /sys) their lists stand."""
    pci = read_intel_pci(system)
    xpu_smi, sycl_ls = system.which("xpu-smi"), system.which("sycl-ls")
    devices, sycl, notes = _from_tools(system, xpu_smi, sycl_ls) if (xpu_smi or sycl_ls) else ([], None, [])
    sources = ["sysfs"] if pci else []
    sources += ["xpu-smi"] if devices else []
    sources += ["sycl-ls"] if sycl is not None else []
    names = {d.get("pci device id", "").lower(): d.get("device name") for d in devices}
    gpus: list[AccelGpu] = []
    for i, (address, device, _driver) in enumerate(pci):
        family, name = _identify(names.get(device), device or None)
        gpus.append(AccelGpu(index=i, name=name, pci_bus_id=address, device_id=device or None, arch=family))
    if not gpus:
        listed: list[tuple[Optional[str], Optional[str]]] = [
            (d.get("device name"), (d.get("pci device id") or "").lower() or None) for d in devices
        ]
        if not listed and sycl is not None:
            listed = [(tool_name, None) for tool_name in sycl[0] or sycl[1]]
        for i, (tool_name, tool_device) in enumerate(listed):
            family, name = _identify(tool_name, tool_device)
            gpus.append(AccelGpu(index=i, name=name, device_id=tool_device, arch=family, source=sources[0]))
    level_zero = runtime = None
    if sycl is not None:
        on_level_zero, on_others, version = sycl
        level_zero = bool(on_level_zero)
        runtime = parse_version(version) if version else None
        if on_others and not on_level_zero:
            notes.append(
                "sycl-ls lists the GPU under OpenCL only, not Level Zero: " + ", ".join(on_others[:4])
            )
    drivers = sorted({d for _, _, d in pci if d})
    return VendorFacts(
        vendor="intel",
        gpus=tuple(gpus),
        driver="+".join(drivers) or None,
        driver_version=next((d["driver version"] for d in devices if d.get("driver version")), None),
        runtime=runtime,
        level_zero=level_zero,
        sources=tuple(sources),
        notes=tuple(notes[:20]),
    )


class IntelVendor:
    """The Intel member of envkit.detect.vendors.VENDORS."""

    name: Final = "intel"

    def detect(self, system: System) -> VendorFacts:
        return detect_intel(system)
