"""The host around the GPUs: OS, PCI devices, kernel module, /dev/shm, network interfaces, the
variables that steer CUDA / NCCL / torch, and CUDA libraries the loader can see outside the wheel.
"""

from __future__ import annotations

import os
import platform
import re
import socket
from typing import TYPE_CHECKING, Any, Callable, Final, Optional

from envkit.detect.jetson import read_l4t
from envkit.facts import HostFacts, NetInterface, SharedLib
from envkit.redact import is_secret_name, redact
from envkit.versions import parse_version

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from envkit.system import System

__all__ = [
    "detect_host",
    "detect_ld_cache",
    "detect_path_libs",
    "host_from",
    "host_readers",
    "lib_family",
    "parse_ldconfig",
    "relevant_env",
]

NVIDIA_PCI_VENDOR: Final = "0x10de"
# PCI classes 0x0300 (VGA controller) and 0x0302 (3D controller): GPUs, not NVIDIA's audio or
# NVSwitch functions.
GPU_PCI_CLASSES: Final = ("0x0300", "0x0302")
LDCONFIG_TIMEOUT_S: Final = 5.0

_ENV_PREFIXES: Final = ("CUDA_", "NCCL_", "TORCH_", "GLOO_", "TP_", "PYTORCH_", "NVIDIA_", "CUDNN_")
_ENV_NAMES: Final = frozenset(
    {
        "LD_LIBRARY_PATH",
        "LD_PRELOAD",
        "PATH",
        "PYTHONPATH",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "CONDA_DEFAULT_ENV",
        "MASTER_ADDR",
        "MASTER_PORT",
        "WORLD_SIZE",
        "RANK",
        "LOCAL_RANK",
        "OMP_NUM_THREADS",
        "SLURM_JOB_ID",
        "SLURM_JOB_GPUS",
        "GPU_DEVICE_ORDINAL",
        # ROCm's: the gfx target the runtime reports instead of the GPU's own (torch.gfx_arch), and
        # the GPUs HIP / the ROCm runtime may use.
        "HSA_OVERRIDE_GFX_VERSION",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "CC",
        "CXX",
        "TRITON_CACHE_DIR",
        "TRITON_LIBCUDA_PATH",
    }
)

# CUDA user-space libraries that torch wheels bundle through nvidia-* wheels (cuDNN 8's split
# libraries, e.g. libcudnn_cnn_infer.so.8, count as cuDNN).
_LIB_RE = re.compile(
    r"^lib(cudnn|nccl|cublasLt|cublas|cudart|cufft|curand|cusparseLt|cusparse|cusolver|nvJitLink"
    r"|nvrtc|cupti|cuda)(?:_[A-Za-z0-9_]+)?\.so(?:\.(\d+(?:\.\d+)*))?$"
)


def relevant_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that steer CUDA, NCCL, torch and the loader. Reports travel between machines:
    a variable with a secret-like name is left out, and a value's credentials (a URL's
    ``user:token@``, ``?token=…``) are redacted (envkit.redact has the rules)."""
    return {
        k: redact(v)
        for k, v in sorted(env.items())
        if (k in _ENV_NAMES or k.startswith(_ENV_PREFIXES)) and not is_secret_name(k)
    }


def lib_family(filename: str) -> Optional[tuple[str, Optional[str]]]:
    """("cudnn", "8.9.2") for libcudnn.so.8.9.2; None for libraries envkit does not track.

    >>> lib_family("libcudnn_cnn_infer.so.8"), lib_family("libssl.so.3")
    (('cudnn', '8'), None)
    """
    match = _LIB_RE.match(filename)
    if match is None:
        return None
    family = match.group(1)
    return ("cublas" if family == "cublasLt" else family.lower()), match.group(2)


def parse_ldconfig(text: str) -> list[tuple[str, str]]:
    """(soname, path) pairs from ``ldconfig -p``.

    >>> parse_ldconfig("\\tlibcudnn.so.8 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcudnn.so.8")
    [('libcudnn.so.8', '/usr/lib/x86_64-linux-gnu/libcudnn.so.8')]
    """
    pairs = []
    for line in text.splitlines():
        match = re.match(r"^\s+(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$", line)
        if match:
            pairs.append((match.group(1), match.group(3)))
    return pairs


def _shared_lib(system: System, path: str, source: str) -> Optional[SharedLib]:
    name = os.path.basename(path)
    fam = lib_family(name)
    if fam is None:
        return None
    family, version = fam
    # libcudnn.so.8 is usually a symlink to libcudnn.so.8.9.2: the target names the full version.
    real = os.path.basename(os.path.realpath(system.path(path)))
    real_fam = lib_family(real)
    if real_fam and real_fam[0] == family and real_fam[1] and len(real_fam[1]) > len(version or ""):
        version = real_fam[1]
    return SharedLib(path, family, parse_version(version) if version else None, source)


def detect_cuda_libs(system: System) -> tuple[SharedLib, ...]:
    """CUDA libraries on LD_LIBRARY_PATH, in LD_PRELOAD and in the ld.so cache."""
    libs, _notes = detect_ld_cache(system)
    return detect_path_libs(system) + libs


def detect_path_libs(system: System) -> tuple[SharedLib, ...]:
    """CUDA libraries on LD_LIBRARY_PATH and in LD_PRELOAD (file reads only, no process)."""
    libs: list[SharedLib] = []
    for folder in filter(None, system.env.get("LD_LIBRARY_PATH", "").split(":")):
        try:
            names = sorted(os.listdir(system.path(folder)))
        except OSError:
            continue
        for name in names:
            lib = _shared_lib(system, os.path.join(folder, name), "LD_LIBRARY_PATH")
            if lib is not None:
                libs.append(lib)
    for item in re.split(r"[:\s]+", system.env.get("LD_PRELOAD", "")):
        lib = _shared_lib(system, item, "LD_PRELOAD") if item else None
        if lib is not None:
            libs.append(lib)
    return tuple(libs)


def detect_ld_cache(system: System) -> tuple[tuple[SharedLib, ...], tuple[str, ...]]:
    """CUDA libraries in the ld.so cache (``ldconfig -p``), and a note when ldconfig failed."""
    ldconfig = system.which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if system.path(p).is_file()), None
    )
    if ldconfig is None:
        return (), ()
    result = system.run_within([ldconfig, "-p"], timeout=LDCONFIG_TIMEOUT_S)
    if not result.ok:
        return (), (f"ld.so cache not read: {result.describe()}",)
    libs = []
    for _soname, path in parse_ldconfig(result.stdout):
        lib = _shared_lib(system, path, "ld.so.cache")
        if lib is not None:
            libs.append(lib)
    return tuple(libs), ()


def _read(system: System, path: str) -> Optional[str]:
    try:
        return system.read_text(path).strip()
    except OSError:
        return None


def _os_name(system: System) -> Optional[str]:
    text = _read(system, "/etc/os-release")
    if text:
        match = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.MULTILINE)
        if match:
            return match.group(1)
    return platform.system() or None


def _nvidia_pci(system: System) -> tuple[str, ...]:
    devices = system.path("/sys/bus/pci/devices")
    found = []
    try:
        entries = sorted(os.listdir(devices))
    except OSError:
        return ()
    for entry in entries:
        vendor = _read(system, f"/sys/bus/pci/devices/{entry}/vendor")
        pci_class = _read(system, f"/sys/bus/pci/devices/{entry}/class") or ""
        if vendor == NVIDIA_PCI_VENDOR and pci_class.startswith(GPU_PCI_CLASSES):
            found.append(entry)
    return tuple(found)


def _interfaces(system: System) -> tuple[NetInterface, ...]:
    try:
        names = sorted(os.listdir(system.path("/sys/class/net")))
    except OSError:
        return ()
    found = []
    for name in names:
        flags = _read(system, f"/sys/class/net/{name}/flags")
        try:
            up = bool(int(flags or "0", 16) & 0x1)  # IFF_UP
        except ValueError:
            up = False
        found.append(NetInterface(name, up))
    return tuple(found)


def _shm_bytes(system: System) -> Optional[int]:
    try:
        st = os.statvfs(system.path("/dev/shm"))
    except (OSError, AttributeError):  # no /dev/shm, or no statvfs (Windows)
        return None
    return st.f_blocks * st.f_frsize


def _module_loaded(system: System) -> Optional[bool]:
    module_dir = system.path("/sys/module")
    return (module_dir / "nvidia").is_dir() if module_dir.is_dir() else None


def _wsl(system: System) -> bool:
    proc_version = (_read(system, "/proc/version") or "").lower()
    return "microsoft" in proc_version or system.path("/usr/lib/wsl/lib").is_dir()


def c_compiler(system: System) -> str:
    """The C compiler triton and inductor would call: $CC (its first word), else gcc, else clang on
    PATH (triton-lang/triton python/triton/runtime/build.py ``_build``); "" when there is none."""
    cc = system.env.get("CC", "").split()
    if cc:
        return system.which(cc[0]) or ""
    return system.which("gcc") or system.which("clang") or ""


def host_readers(system: System) -> dict[str, Callable[[], Any]]:
    """One reader per HostFacts field (``ld_cache`` adds to ``cuda_libs``): detect.detect_all runs
    each on its own, so one that hangs (``ldconfig``, a stale mount under /sys) costs only its own
    field, named in ``HostFacts.unanswered``."""
    return {
        "hostname": lambda: socket.gethostname() or None,
        "os": lambda: _os_name(system),
        "kernel": lambda: platform.release() or None,
        "arch": lambda: platform.machine() or None,
        "wsl": lambda: _wsl(system),
        "nvidia_pci_devices": lambda: _nvidia_pci(system),
        "nvidia_module_loaded": lambda: _module_loaded(system),
        "shm_bytes": lambda: _shm_bytes(system),
        "interfaces": lambda: _interfaces(system),
        "env": lambda: relevant_env(system.env),
        "cuda_libs": lambda: detect_path_libs(system),
        "c_compiler": lambda: c_compiler(system),
        "ld_cache": lambda: detect_ld_cache(system),
        "l4t_release": lambda: read_l4t(system),
    }


def host_from(values: Mapping[str, Any], missing: Sequence[str] = ()) -> HostFacts:
    """HostFacts from what ``host_readers`` answered; ``missing`` names the readers that did not
    (their fields keep the "unknown" default and are listed in ``unanswered``)."""
    fields = {k: v for k, v in values.items() if k != "ld_cache"}
    notes: list[str] = []
    unanswered = [name for name in missing if name != "ld_cache"]
    ld_libs, ld_notes = values.get("ld_cache", ((), ()))
    notes += ld_notes
    if "ld_cache" in missing:
        notes.append("ld.so cache not read: `ldconfig -p` did not answer before the time limit")
    fields["cuda_libs"] = tuple(fields.get("cuda_libs", ())) + tuple(ld_libs)
    notes += [
        f"{name}: not gathered (its reader did not answer before the time limit)" for name in unanswered
    ]
    return HostFacts(**fields, unanswered=tuple(unanswered), notes=tuple(notes))


# What names a host in a fleet (its majority, its odd ones out): cheap reads, no subprocess.
IDENTITY: Final = ("hostname", "os", "kernel", "arch")


def host_identity(system: System) -> HostFacts:
    """The host's name, OS, kernel and CPU only (a verify report's host facts: envkit fleet groups
    reports by them)."""
    readers = host_readers(system)
    return HostFacts(**{name: readers[name]() for name in IDENTITY})


def detect_host(system: System) -> HostFacts:
    """Every host fact, one after the other (detect.detect_all runs the readers side by side)."""
    return host_from({name: read() for name, read in host_readers(system).items()})
