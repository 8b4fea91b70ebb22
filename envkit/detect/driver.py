"""The NVIDIA driver: NVML first, then /proc, /sys and nvidia-smi; the source that answered is kept.

Parsers are pure and tolerate what real drivers print: several GPUs, the "[Deprecated; …]" words
that drivers from the 580 series add after "Driver Version"/"CUDA Version" in ``nvidia-smi -q``
(replaced by "KMD Version"/"CUDA UMD Version", NVIDIA nvidia-smi documentation), "[N/A]" and
"[Not Supported]" cells, and WSL2 (no /proc file; nvidia-smi under /usr/lib/wsl/lib).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Optional

from envkit._proc import short
from envkit.detect.plausible import MAX_NOTE_CHARS, RANGES, cap_notes, plausible_gpu
from envkit.facts import DriverFacts, GpuFacts
from envkit.versions import NvVersion, Version, parse_compute_capability, parse_version

if TYPE_CHECKING:
    from envkit.detect.nvml import NvmlReading
    from envkit.system import System

__all__ = [
    "SMI_QUERY_FIELDS",
    "SmiHeader",
    "detect_driver",
    "driver_from_files",
    "find_nvidia_smi",
    "parse_nvidia_smi_csv",
    "parse_nvidia_smi_header",
    "parse_proc_version",
    "smi_gpus",
]

PROC_VERSION: Final = "/proc/driver/nvidia/version"
SYS_MODULE_VERSION: Final = "/sys/module/nvidia/version"
WSL_NVIDIA_SMI: Final = "/usr/lib/wsl/lib/nvidia-smi"
SMI_TIMEOUT_S: Final = 10.0
# More GPU rows than any node has (NVL72 racks are 72 GPUs, in several nodes): the rest is garbage.
MAX_SMI_GPUS: Final = 256

# The --query-gpu fields envkit asks for; compute_cap exists since driver 510.
SMI_QUERY_FIELDS: Final = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "driver_version",
    "memory.total",
    "compute_cap",
)

_VERSION_TOKEN = re.compile(r"\b(\d{2,4}\.\d{1,3}(?:\.\d{1,3})?)\b")


def parse_proc_version(text: str) -> tuple[Optional[NvVersion], Optional[str]]:
    """Read /proc/driver/nvidia/version: the driver version and the kernel module line.

    >>> parse_proc_version(
    ...     "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  "
    ...     "Sat Aug 19 01:15:15 UTC 2023"
    ... )
    (<NvVersion('535.104.05')>, 'NVIDIA UNIX x86_64 Kernel Module')
    """
    for line in text.splitlines():
        if not line.startswith("NVRM version:"):
            continue
        rest = line[len("NVRM version:") :].strip()
        match = _VERSION_TOKEN.search(rest)
        if match is None:
            return None, rest or None
        module = rest[: match.start()].strip() or None
        return NvVersion(match.group(1)), module
    return None, None


def _version_in(text: str) -> Optional[NvVersion]:
    match = _VERSION_TOKEN.search(text)
    return NvVersion(match.group(1)) if match else None


def parse_sys_module_version(text: str) -> Optional[NvVersion]:
    """Read /sys/module/nvidia/version (just the version and a newline)."""
    return _version_in(text)


@dataclass(frozen=True)
class SmiHeader:
    driver: Optional[NvVersion]
    cuda: Optional[Version]


def parse_nvidia_smi_header(text: str) -> SmiHeader:
    """Read the driver and CUDA versions from ``nvidia-smi -q`` (or the plain banner).

    Newer drivers mark "Driver Version" and "CUDA Version" deprecated in place and add
    "KMD Version" / "CUDA UMD Version"; either spelling is accepted.

    >>> parse_nvidia_smi_header(
    ...     "Driver Version : 580.65.06 [Deprecated]\\n"
    ...     "CUDA Version : 13.0 [Deprecated; use CUDA UMD Version]"
    ... )
    SmiHeader(driver=<NvVersion('580.65.06')>, cuda=<Version('13.0')>)
    """
    driver: Optional[NvVersion] = None
    cuda: Optional[Version] = None
    # -q format: "Key   : value";
    # banner: "| NVIDIA-SMI 560.35.03   Driver Version: 560.35.03   CUDA Version: 12.6 |"
    for key, value in re.findall(
        r"(KMD Version|Driver Version|CUDA UMD Version|CUDA Version)\s*:\s*([0-9.]{1,16})\b", text
    ):
        if key in ("KMD Version", "Driver Version") and driver is None:
            driver = _version_in(value)
        elif key in ("CUDA UMD Version", "CUDA Version") and cuda is None:
            parsed = parse_version(value.strip("."))
            # CUDA 1.0 (2007) to 13.x (2025): a major past 99 is garbage, not a CUDA.
            cuda = parsed if parsed is not None and 1 <= parsed.major <= 99 else None
    return SmiHeader(driver, cuda)


def _cell(value: str) -> Optional[str]:
    value = value.strip()
    if not value or (value.startswith("[") and value.endswith("]")) or value == "N/A":
        return None
    return value


def parse_nvidia_smi_csv(text: str) -> tuple[list[GpuFacts], Optional[NvVersion], list[str]]:
    """Read ``nvidia-smi --query-gpu=<SMI_QUERY_FIELDS> --format=csv,noheader,nounits``.

    Returns the GPUs, the driver version (from the first row that has one) and notes about lines
    that could not be read. Lines that are not rows of the query (warnings, garbage) are skipped.

    >>> gpus, driver, notes = parse_nvidia_smi_csv(
    ...     "0, NVIDIA H100 80GB HBM3, GPU-5b9a, 00000000:18:00.0, 550.54.15, 81559, 9.0"
    ... )
    >>> gpus[0].name, str(gpus[0].compute_capability), gpus[0].memory_total_mib, str(driver)
    ('NVIDIA H100 80GB HBM3', '9.0', 81559, '550.54.15')
    """
    gpus: list[GpuFacts] = []
    notes: list[str] = []
    driver: Optional[NvVersion] = None
    seen: set[int] = set()
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        if not row or not "".join(row).strip():
            continue
        first = row[0].strip()
        if len(row) != len(SMI_QUERY_FIELDS) or not first.isdigit() or len(first) > 4:
            notes.append(f"nvidia-smi: unreadable line {short(', '.join(row), 80)!r}")
            continue
        index_text, name, uuid, bus_id, drv, memory, cc = (_cell(c) for c in row)
        index = int(index_text or 0)
        if index > RANGES["index"][1] or index in seen or len(gpus) >= MAX_SMI_GPUS:
            notes.append(f"nvidia-smi: GPU index {index} is a repeat or out of range; line ignored")
            continue
        seen.add(index)
        if driver is None and drv is not None:
            driver = _version_in(drv)
        memory_mib = _smi_number(memory)
        if memory is not None and memory_mib is None:
            notes.append(f"nvidia-smi: GPU {index}: memory {short(memory, 40)!r} is not a number; ignored")
        compute_capability = parse_compute_capability(cc) if cc else None
        if cc and compute_capability is None:
            notes.append(f"nvidia-smi: GPU {index}: compute capability {short(cc, 40)!r} is unreadable")
        gpu, gpu_notes = plausible_gpu(
            GpuFacts(
                index=index,
                name=name,
                uuid=uuid,
                pci_bus_id=bus_id,
                memory_total_mib=memory_mib,
                compute_capability=compute_capability,
                source="nvidia-smi",
            ),
            "nvidia-smi",
        )
        gpus.append(gpu)
        notes += gpu_notes
    return gpus, driver, cap_notes(notes, "nvidia-smi")


def _smi_number(cell: Optional[str]) -> Optional[int]:
    """81559 from "81559" or "81559 MiB"; None for garbage, or for thousands of digits (int() of
    those is slow, and no GPU has that much of anything: plausible_gpu checks the range)."""
    match = re.match(r"(\d{1,30})(?:\.\d*)?(?:\s*MiB)?$", cell or "")
    return int(match.group(1)) if match else None


def find_nvidia_smi(system: System) -> Optional[str]:
    """nvidia-smi on PATH, else WSL2's copy under /usr/lib/wsl/lib (not on PATH by default)."""
    found = system.which("nvidia-smi")
    if found:
        return found
    wsl = system.path(WSL_NVIDIA_SMI)
    return str(wsl) if wsl.is_file() else None


def smi_gpus(system: System) -> tuple[list[GpuFacts], Optional[NvVersion], list[str]]:
    """GPUs from nvidia-smi when NVML's Python route failed (e.g. a wrong libnvidia-ml path)."""
    smi = find_nvidia_smi(system)
    if smi is None:
        return [], None, []
    query = "--query-gpu=" + ",".join(SMI_QUERY_FIELDS)
    result = system.run_within([smi, query, "--format=csv,noheader,nounits"], timeout=SMI_TIMEOUT_S)
    if not result.ok:
        return [], None, [short(result.describe() + _first_line(result.tail(2)), MAX_NOTE_CHARS)]
    return parse_nvidia_smi_csv(result.stdout)


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return f": {short(line, 200)}" if line else ""


def driver_from_files(system: System) -> DriverFacts:
    """The driver version from /proc/driver/nvidia/version, else /sys/module/nvidia/version: file
    reads only, no NVML and no process, so a wedged GPU cannot hide a loaded driver."""
    notes: list[str] = []
    version: Optional[NvVersion] = None
    module: Optional[str] = None
    source: Optional[str] = None
    try:
        version, module = parse_proc_version(system.read_text(PROC_VERSION))
        source = PROC_VERSION if version else None
    except OSError as exc:
        if system.path(PROC_VERSION).exists():  # there but unreadable: say so
            notes.append(f"{PROC_VERSION}: {exc.strerror or exc}")
    if version is None:
        try:
            version = parse_sys_module_version(system.read_text(SYS_MODULE_VERSION))
            source = SYS_MODULE_VERSION if version else None
        except OSError:
            pass
    return DriverFacts(version=version, source=source, kernel_module=module, notes=tuple(notes))


def detect_driver(system: System, nvml: NvmlReading) -> DriverFacts:
    """The driver version and CUDA version, from NVML, /proc, /sys, then nvidia-smi."""
    if nvml.driver_version is not None:
        return DriverFacts(
            version=nvml.driver_version,
            cuda_version=nvml.cuda_version,
            source="nvml",
            kernel_module=_proc_module_line(system),
        )
    files = driver_from_files(system)
    notes = list(files.notes)
    version, module, source = files.version, files.kernel_module, files.source
    cuda: Optional[Version] = None
    smi = find_nvidia_smi(system)
    if smi is not None:
        result = system.run_within([smi, "-q", "-d", "COMPUTE"], timeout=SMI_TIMEOUT_S)
        if result.ok:
            header = parse_nvidia_smi_header(result.stdout)
            cuda = header.cuda
            if version is None and header.driver is not None:
                version, source = header.driver, "nvidia-smi"
        else:
            notes.append(short(result.describe() + _first_line(result.tail(2)), MAX_NOTE_CHARS))
    return DriverFacts(
        version=version,
        cuda_version=cuda,
        source=source,
        kernel_module=module,
        nvml_error=nvml.error,
        notes=tuple(notes),
    )


def _proc_module_line(system: System) -> Optional[str]:
    try:
        return parse_proc_version(system.read_text(PROC_VERSION))[1]
    except OSError:
        return None
