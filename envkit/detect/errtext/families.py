"""The error families of an error text beside torch's own CUDA messages (envkit.detect.torch_messages)
and the loader's (linker.py), each found where it is produced:

- CUDA out of memory: c10/cuda/CUDACachingAllocator.cpp (pytorch/pytorch@001074d2), ``malloc``'s
  "CUDA out of memory. Tried to allocate X. GPU 0 has a total capacity of T of which F is free.
  [Process P has M memory in use.] Including non-PyTorch memory, this process has U memory in use.
  Of the allocated memory A is allocated by PyTorch, and R is reserved by PyTorch but unallocated."
  (torch ≥ 2.1; 2.1 spells "capacty"); before: "(GPU 0; T total capacity; A already allocated; F
  free; R reserved in total by PyTorch)". cudaErrorMemoryAllocation as "CUDA error: out of memory"
  comes from a call outside the allocator (context creation: the GPU was full before torch began).
- NCCL: torch's "NCCL error in: <file:line>, <result>, NCCL version 2.18.1" (torch/csrc/distributed/
  c10d/NCCLUtils.hpp C10D_NCCL_CHECK) with NCCL's result strings (NVIDIA/nccl src/init.cc
  ``ncclGetErrorString`` @5067397c) and NCCL's own WARN lines: "Error while creating shared memory
  segment /dev/shm/nccl-… (size N)" (src/misc/shmutils.cc @v2.18.3-1, src/os/linux.cc now),
  "socketStartConnect: Connect to <addr> failed" (src/misc/socket.cc @v2.18.3-1), "Bootstrap : no
  socket interface found" (src/bootstrap.cc), "Cuda failure '<cudaGetErrorString>'" (src/include/
  checks.h), "NET/IB : …" (src/transport/net_ib*).
- NVML, as nvidia-smi and the kernel log print it: "Failed to initialize NVML: Driver/library version
  mismatch" (NVML_ERROR_LIB_RM_VERSION_MISMATCH, nvml.h), "NVRM: API mismatch: the client has the
  version X, but this kernel module has the version Y", "NVIDIA-SMI has failed because it couldn't
  communicate with the NVIDIA driver", "Failed to initialize NVML: Unknown Error".
- torch.compile's GPU path: triton-lang/triton python/triton/runtime/build.py @0419e8f0 ("Failed to
  find C compiler. Please specify via CC environment variable."; it compiles a C launcher against
  the interpreter's Python.h: "fatal error: Python.h: No such file or directory"; it links -lcuda,
  and GNU ld says "cannot find -lcuda"), third_party/nvidia/backend/driver.py @3992e08a
  ``libcuda_dirs`` ("libcuda.so cannot found!": /sbin/ldconfig -p lists no libcuda.so.1), and
  inductor's "InvalidCxxCompiler: No working C++ compiler found" (torch/_inductor/exc.py).
- An operator a companion library registers: "operator torchvision::nms does not exist" (torch/csrc/
  utils/python_dispatch.cpp, when torch.library meets an op whose C++ library did not load) and
  torchvision's own "Couldn't load custom C++ ops" (torchvision/extension.py).
- CUDA runtime errors by their cudaGetErrorString text: "no kernel image is available for execution
  on the device" (cudaErrorNoKernelImageForDevice, 209), "invalid device function" (98, CUDA's and
  HIP's alike: no code for the GPU's architecture), "the provided PTX was compiled with an
  unsupported toolchain" (cudaErrorUnsupportedPtxVersion, 222).
"""

from __future__ import annotations

import re
from typing import Final, Optional

from envkit.facts import CudaOom, ErrorEvent, NcclFailure
from envkit.redact import redact
from envkit.versions import Version, parse_version

__all__ = ["find_events", "find_nccl", "find_oom", "nvml_error"]

_SIZE: Final = r"(?P<{0}>\d+(?:\.\d+)?) ?(?P<{0}_unit>bytes|[KMGT]iB|[KMGT]B)"
_UNITS: Final = {"bytes": 1 / 2**20, "KiB": 1 / 1024, "KB": 1 / 1024, "MiB": 1.0, "MB": 1.0}
_UNITS_BIG: Final = {"GiB": 1024.0, "GB": 1024.0, "TiB": 1024.0**2, "TB": 1024.0**2}


def _size(name: str) -> str:
    return _SIZE.format(name)


def _mib(match: Optional[re.Match[str]], name: str) -> Optional[float]:
    if match is None or match.group(name) is None:
        return None
    unit = match.group(f"{name}_unit")
    return round(float(match.group(name)) * {**_UNITS, **_UNITS_BIG}[unit], 2)


# A paste often starts at "Tried to allocate": the sizes after it are the evidence.
_OOM_RE: Final = re.compile(r"(?:CUDA out of memory\. )?Tried to allocate " + _size("tried"))
_TOTAL_RE: Final = re.compile(
    r"GPU (?P<gpu>\d+) has a total capac?i?ty of "
    + _size("total")
    + r" of which "
    + _size("free")
    + " is free"
)
_PROCESS_RE: Final = re.compile(r"this process has " + _size("process") + " memory in use")
_OTHER_RE: Final = re.compile(r"Process (?P<pid>\d+) has " + _size("other") + " memory in use")
_ALLOC_RE: Final = re.compile(
    r"Of the allocated memory " + _size("alloc") + r" is allocated by PyTorch, and " + _size("unalloc")
)
_OLD_OOM_RE: Final = re.compile(
    r"\(GPU (?P<gpu>\d+); "
    + _size("total")
    + r" total capacity; "
    + _size("alloc")
    + r" already allocated; "
    + _size("free")
    + r" free;(?: "
    + _size("reserved")
    + r" reserved in total by PyTorch)?"
)


def find_oom(text: str) -> Optional[CudaOom]:
    """torch's out-of-memory figures (the first report in the text), or an empty record for
    "CUDA error: out of memory"; None when the text has neither."""
    start = _OOM_RE.search(text) if "Tried to allocate" in text else None
    if start is None:
        return CudaOom() if "CUDA error: out of memory" in text else None
    window = text[start.start() : start.start() + 1200]
    end = window.find("Traceback", 20)
    window = window if end < 0 else window[:end]
    oom = CudaOom(tried_mib=_mib(start, "tried"))
    total = _TOTAL_RE.search(window)
    if total is not None:
        alloc = _ALLOC_RE.search(window)
        others = tuple((int(m.group("pid")), _mib(m, "other") or 0.0) for m in _OTHER_RE.finditer(window))
        return CudaOom(
            gpu=int(total.group("gpu")),
            tried_mib=oom.tried_mib,
            total_mib=_mib(total, "total"),
            free_mib=_mib(total, "free"),
            process_mib=_mib(_PROCESS_RE.search(window), "process"),
            allocated_mib=_mib(alloc, "alloc"),
            unallocated_mib=_mib(alloc, "unalloc"),
            others=others,
        )
    old = _OLD_OOM_RE.search(window)
    if old is not None:
        allocated, reserved = _mib(old, "alloc"), _mib(old, "reserved")
        unallocated = (
            round(reserved - allocated, 2) if reserved is not None and allocated is not None else None
        )
        return CudaOom(
            gpu=int(old.group("gpu")),
            tried_mib=oom.tried_mib,
            total_mib=_mib(old, "total"),
            free_mib=_mib(old, "free"),
            # torch < 2.1 counts only its own memory: reserved is what this process holds through it.
            process_mib=reserved,
            allocated_mib=allocated,
            unallocated_mib=unallocated,
        )
    return oom


_NCCL_RESULTS: Final = (
    "unhandled system error",
    "unhandled cuda error",
    "internal error",
    "invalid argument",
    "invalid usage",
    "remote process exited or there was a network error",
    "timeout",
)
# torch 2.x: "NCCL error in: <file:line>, <result>"; torch 1.x: "NCCL Error 2: <result>";
# nccl-tests: "Test NCCL failure common.cu:777 '<result>'".
_NCCL_RE: Final = re.compile(
    r"NCCL (?:error|Error|failure)(?: in: \S+,| \d+:| \S+:\d+)? '?(?P<result>" + "|".join(_NCCL_RESULTS) + ")"
)
_NCCL_NAMES: Final = {
    "ncclSystemError": "unhandled system error",
    "ncclUnhandledCudaError": "unhandled cuda error",
    "ncclInternalError": "internal error",
    "ncclInvalidUsage": "invalid usage",
    "ncclRemoteError": "remote process exited or there was a network error",
}
_NCCL_VERSION_RE: Final = re.compile(r"NCCL version (?P<v>\d+\.\d+\.\d+)(?:\+cuda(?P<cuda>\d+\.\d+))?")
_NCCL_WARN_RE: Final = re.compile(r"(?:NCCL WARN|Last error:)\s+")
# Where NCCL's reason ends: the next log line's "host:pid:tid [rank] NCCL" prefix, or Python's text.
_NCCL_END_RE: Final = re.compile(r"\s(?:\S+:\d+:\d+ \[\d+\] NCCL |Exception raised|Traceback|\[rank\d+\])")
# NCCL's words and what they point at, most specific first.
_NCCL_CAUSES: Final = (
    ("shm", r"shared memory segment|/dev/shm|unable to allocate shared memory"),
    ("p2p", r"peer access is not supported|peer mapping resources exhausted|P2P/IPC|cudaIpc"),
    ("ib", r"NET/IB|ibv_\w+|IB : |mlx5"),
    (
        "socket",
        (
            r"socketStartConnect|SocketPollConnect|Connect to \S+ failed|Connection refused|No route to host"
            r"|no socket interface found|No usable listening interface|Connection timed out|socketProgress"
        ),
    ),
    ("cuda", r"Cuda failure"),
)


def find_nccl(text: str) -> Optional[NcclFailure]:
    """The NCCL failure the text shows: torch's "NCCL error" (or NCCL's result name), its version
    and NCCL's own reason; None when there is none."""
    if "NCCL" not in text and "nccl" not in text:
        return None
    match = _NCCL_RE.search(text)
    result = match.group("result") if match else None
    if result is None:
        result = next((r for name, r in _NCCL_NAMES.items() if name in text), None)
    warn = _NCCL_WARN_RE.search(text)
    last = None
    if warn is not None:
        tail = text[warn.end() : warn.end() + 300]
        end = _NCCL_END_RE.search(tail)
        last = redact(tail[: end.start()] if end else tail).strip() or None
    if result is None and warn is None:
        return None
    version = _NCCL_VERSION_RE.search(text)
    scope = " ".join(filter(None, (last, text[match.start() : match.start() + 800] if match else "")))
    cause = next((name for name, pattern in _NCCL_CAUSES if re.search(pattern, scope)), None)
    if cause is None and result and result.startswith("remote process"):
        cause = "remote"
    return NcclFailure(
        result=result or "NCCL warning",
        version=parse_version(version.group("v")) if version else None,
        cuda=parse_version(version.group("cuda")) if version and version.group("cuda") else None,
        last_error=last,
        cause=cause,
    )


_NVML_ERRORS: Final = (
    # nvidia-smi's words, and the NVIDIA Container Toolkit's ("nvidia-container-cli: initialization
    # error: nvml error: driver/library version mismatch")
    (
        r"(?i:(?:Failed to initialize NVML|nvml error): Driver/library version mismatch)",
        "LibRmVersionMismatch",
    ),
    (
        r"NVRM: API mismatch: the client has the version \S+, but this kernel module has the version",
        "LibRmVersionMismatch",
    ),
    (r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver", "DriverNotLoaded"),
    (r"Failed to initialize NVML: Unknown Error", "Unknown"),
    (r"Failed to initialize NVML: Insufficient Permissions", "NoPermission"),
)
_API_MISMATCH_RE: Final = re.compile(
    r"the client has the version (?P<client>[\d.]+), "
    r"but this kernel module has the version (?P<kernel>[\d.]+)"
)


def nvml_error(text: str) -> Optional[str]:
    """NVML's error as envkit.detect.driver names it ("LibRmVersionMismatch: …"), from nvidia-smi's
    or the kernel log's words; None when the text has none."""
    if "NVML" not in text and "nvml" not in text and "NVRM" not in text and "NVIDIA-SMI" not in text:
        return None
    for pattern, name in _NVML_ERRORS:
        match = re.search(pattern, text)
        if match is None:
            continue
        said = match.group(0)
        versions = _API_MISMATCH_RE.search(text)
        if versions is not None:
            said += f" (libraries {versions.group('client')}, kernel module {versions.group('kernel')})"
        return f"{name}: {said}"
    return None


# (family, pattern, code group or fixed code): the toolchain, companion-op and CUDA-runtime messages.
_EVENTS: Final = (
    ("no_c_compiler", r"Failed to find C compiler\. Please specify via CC environment variable", "cc"),
    ("no_c_compiler", r"InvalidCxxCompiler: No working C\+\+ compiler found", "c++"),
    (
        "no_python_h",
        r"Python\.h: No such file or directory",
        None,
    ),
    ("triton_libcuda", r"libcuda\.so cannot found!", "ldconfig"),
    ("triton_lcuda", r"cannot find -lcuda\b", "libcuda.so"),
    ("torchvision_ops", r"operator (?P<code>\w+::\w+) does not exist", None),
    # torch 1.x (torch/_ops.py, torch._C._jit_get_operation): "No such operator torchvision::nms"
    ("torchvision_ops", r"No such operator (?P<code>\w+::\w+)", None),
    (
        "torchvision_ops",
        r"Couldn't load custom C\+\+ ops\. This can happen if your PyTorch and torchvision",
        "torchvision",
    ),
    ("no_kernel_image", r"no kernel image is available for execution on the device", "209"),
    # cudaErrorInvalidDeviceFunction (98), "invalid device function": a kernel with no code for this
    # GPU's architecture, as CUDA said it before 209 existed (torch's "CUDA error: …").
    ("no_kernel_image", r"CUDA error: invalid device function", "98"),
    # ROCm's hipErrorInvalidDeviceFunction (98, hipGetErrorString "invalid device function";
    # ROCm/clr hipamd/src/hip_error.cpp), as torch's hipified C10_CUDA_CHECK prints it ("HIP error: …",
    # c10/hip from c10/cuda/CUDAException.cpp) and as AMD_LOG_LEVEL logs name it: the build has no
    # code object for the GPU's gfx target (pytorch/pytorch#132570: no gfx1010 in libtorch_hip.so).
    ("hip_no_code", r"HIP error: invalid device function|hipErrorInvalidDeviceFunction", "98"),
    ("ptx_toolchain", r"the provided PTX was compiled with an unsupported toolchain", "222"),
)
_EVENT_RES: Final = tuple((family, re.compile(pattern), code) for family, pattern, code in _EVENTS)
_KEYWORDS: Final = (
    "compiler",
    "Python.h",
    "libcuda",
    "-lcuda",
    "does not exist",
    "No such operator",
    "device function",
    "InvalidDeviceFunction",
    "custom C++ ops",
    "kernel image",
    "PTX",
)


def find_events(text: str) -> tuple[ErrorEvent, ...]:
    """The messages of the families above, each family once (its first message)."""
    if not any(word in text for word in _KEYWORDS):
        return ()
    events: dict[str, ErrorEvent] = {}
    for family, pattern, code in _EVENT_RES:
        if family in events:
            continue
        match = pattern.search(text)
        if match is None:
            continue
        said = match.groupdict().get("code") or code
        if family == "no_python_h":
            # gcc's command line names the include folder it searched: -I/usr/include/python3.10
            include = re.search(r"-I\S*?(python3\.\d+)", text)
            said = include.group(1) if include else None
        events[family] = ErrorEvent(family, redact(_excerpt(text, match))[:300], said)
    return tuple(events.values())


def _excerpt(text: str, match: re.Match[str]) -> str:
    """The message, with the exception's class when it stands just before it."""
    head = re.search(
        r"\b\w+(?:Error|Exception): [^:]{0,80}$", text[max(0, match.start() - 120) : match.start()]
    )
    return ((head.group(0) if head else "") + match.group(0)).strip()


def nccl_version_in(text: str) -> Optional[tuple[Version, Optional[Version]]]:
    """NCCL's version (and the CUDA it was built with) as torch or NCCL print it."""
    match = _NCCL_VERSION_RE.search(text)
    if match is None:
        return None
    version = parse_version(match.group("v"))
    if version is None:
        return None
    return version, parse_version(match.group("cuda")) if match.group("cuda") else None
