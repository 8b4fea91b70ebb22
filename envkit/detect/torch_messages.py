"""torch's own warnings and errors, read out of text: the strongest evidence a report holds.

People paste them above collect_env's report (importing torch printed them), and ``--deep``'s probe
catches them. They are torch's verdict on this machine, in torch's words, so each wording any
release printed is read here (the templates, by file and tag):

- c10/cuda/CUDAFunctions.cpp ``device_count_impl`` (v1.8.0 … v2.13.0; before 1.8 the same words
  were raised by ``_check_driver`` in torch/cuda/__init__.py, v1.0.0 … v1.7.1, with newlines):
  "Found no NVIDIA driver on your system", "The NVIDIA driver on your system is too old (found
  version 11040)", "CUDA driver initialization failed, you might not have a CUDA gpu", "CUDA unknown
  error - this may be due to an incorrectly set up environment", "Unexpected error from
  cudaGetDeviceCount(). … Error 804: forward compatibility was attempted on non supported HW";
  ``device_count()`` turns them into the warning "CUDA initialization: <message>";
  ``device_count_ensure_non_zero`` raises "No CUDA GPUs are available".
- torch/cuda/__init__.py ``_check_cubins`` (v1.7.0 … v2.13.0): "<GPU> with CUDA capability sm_86
  is not compatible with the current PyTorch installation. The current PyTorch install supports
  CUDA capabilities sm_37 sm_50 …" (the list is ``get_arch_list()``, the exact one).
- torch/cuda/__init__.py ``_check_capability``: "Found GPU0 <GPU> which is of cuda capability 6.1.
  PyTorch no longer supports this GPU because it is too old." followed by "The minimum cuda
  capability that we support is 3.5." (v1.0.0 … v1.5.1) or "… supported by this library is 7.5."
  (v1.6.0 … v2.7.1); "Found GPU0 <GPU> which is of cuda capability 12.1. Minimum and Maximum cuda
  capability supported by this version of PyTorch is (8.0) - (12.0)" (v2.8.0 … v2.11); "Found GPU0
  <GPU> which is of compute capability (CC) 6.1. The following list shows the CCs this version of
  PyTorch was built for …" with "Your installed torch==X does not include kernels for this GPU"
  (v2.12.0 …); and 1.x's "Found GPU0 <GPU> which requires CUDA_VERSION >= 10000 to work properly,
  but your PyTorch was compiled with CUDA_VERSION 9000".
- torch/cuda/__init__.py ``_lazy_init``: "Torch not compiled with CUDA enabled" (a CPU build).
- c10/cuda/CUDAException.cpp ``c10_cuda_check_implementation``: "CUDA error: <cudaGetErrorString>"
  from any CUDA call; the texts that mean CUDA cannot start here are read as the errors above
  ("CUDA driver version is insufficient for CUDA runtime version", "system not yet initialized",
  "forward compatibility was attempted on non supported HW", "unknown error", …).

Text is matched with its whitespace collapsed: a mail client's hard wrap or a quote marker must
not hide a message. Nothing here raises; text without torch's messages gives empty evidence.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Optional

from envkit.facts import IncompatibleGpu
from envkit.versions import ComputeCapability, Version, parse_compute_capability, parse_version

if TYPE_CHECKING:
    from collections.abc import Iterable

    from envkit.facts import TorchFacts

__all__ = ["CUDA_ERROR_CODES", "TorchMessages", "read_torch_messages", "with_messages"]

# The CUDA runtime's cudaGetErrorString texts of the errors that say CUDA cannot start here, and
# their cudaError_t numbers (CUDA Runtime API, "Data types": enum cudaError). torch raises them as
# "CUDA error: <text>" from any CUDA call (c10/cuda/CUDAException.cpp c10_cuda_check_implementation),
# not only from cudaGetDeviceCount.
CUDA_ERROR_CODES: Final = {
    "no CUDA-capable device is detected": "100",
    "system not yet initialized": "802",
    "system has unsupported display driver / cuda driver combination": "803",
    "forward compatibility was attempted on non supported HW": "804",
}
# Why CUDA is unusable, most specific first: when a paste holds two, the first kind listed wins.
_INIT_ERRORS: Final = (
    (
        "driver_too_old",
        (
            r"The NVIDIA driver on your system is too old \(found version (?P<found>\d+)\)"
            # cudaErrorInsufficientDriver (35), as "CUDA error: …" or cudaGetDeviceCount's "Error 35: …"
            r"|CUDA driver version is insufficient for CUDA runtime version"
        ),
    ),
    ("no_driver", r"Found no NVIDIA driver on your system"),
    (
        "cuda_error",
        (
            r"Unexpected error from cudaGetDeviceCount\(\)\..{0,160}? Error (?P<code>\d+): "
            r"(?P<what>[^.()\n]{1,120})"
            r"|CUDA error: (?P<said>" + "|".join(re.escape(t) for t in CUDA_ERROR_CODES) + ")"
            # torch 1.x (THCGeneral.cpp): "cuda runtime error (802) : system not yet initialized"
            # (only the numbers that mean CUDA cannot start here: 59 is a device-side assert)
            r"|cuda runtime error \((?P<code1>35|100|802|803|804|999)\) : "
            r"(?P<what1>[^.()\n]{1,120}?)(?= at |$)"
            # the runtime's own words wherever another program printed them (CUDA samples, a log)
            r"|(?P<bare>" + "|".join(re.escape(t) for t in CUDA_ERROR_CODES if t.count(" ") >= 2) + ")"
        ),
    ),
    ("init_failed", r"CUDA driver initialization failed, you might not have a CUDA gpu"),
    (
        "unknown_error",
        # cudaErrorUnknown (999) from cudaGetDeviceCount, or from any other call as "CUDA error: …"
        (
            r"CUDA unknown error - this may be due to an incorrectly set up environment"
            r"|CUDA error: unknown error"
        ),
    ),
    ("no_gpus", r"No CUDA GPUs are available"),
    ("not_compiled", r"Torch not compiled with CUDA enabled"),
)
_INIT_RES: Final = tuple((kind, re.compile(pattern, re.I)) for kind, pattern in _INIT_ERRORS)
# Words every message of a kind holds (lower case), so that a long log is searched only where needed.
_INIT_WORDS: Final = {
    "driver_too_old": ("too old (found version", "driver version is insufficient"),
    "no_driver": ("found no nvidia driver",),
    "cuda_error": (
        "cudagetdevicecount",
        "cuda error:",
        "cuda runtime error (",
        *(t.lower() for t in CUDA_ERROR_CODES),
    ),
    "init_failed": ("driver initialization failed",),
    "unknown_error": ("cuda unknown error", "cuda error: unknown error"),
    "no_gpus": ("no cuda gpus are available",),
    "not_compiled": ("not compiled with cuda",),
}
_ARCH: Final = r"(?:sm|compute)_\d+[a-z]?"
_CUBINS_RE: Final = re.compile(
    r"(?P<name>[^:\n]{1,100}?) with CUDA capability sm_(?P<sm>\d+) is not compatible with the "
    r"current PyTorch installation\.?\s*(?:The current PyTorch install supports CUDA capabilities "
    rf"(?P<arches>{_ARCH}(?: {_ARCH})*))?",
    re.I,
)
_CUBINS_WORDS: Final = " with cuda capability sm_"
_USE_THE_RE: Final = re.compile(r"If you want to use the (?P<name>.{1,100}?) GPU with PyTorch", re.I)
_FOUND_GPU: Final = r"Found GPU ?(?P<index>\d+) (?P<name>.{1,100}?) which is of "
_OLD_GPU_RE: Final = re.compile(
    _FOUND_GPU + r"cuda capability (?P<cc>\d+\.\d+)\.? PyTorch no longer supports this GPU because "
    r"it is too old\.?(?: The minimum cuda capability (?:supported by this library|that we support) "
    r"is (?P<min>\d+\.\d+))?",
    re.I,
)
_RANGE_RE: Final = re.compile(
    _FOUND_GPU + r"cuda capability (?P<cc>\d+\.\d+)\.? Minimum and Maximum cuda capability supported "
    r"by this version of PyTorch is \(?(?P<min>\d+\.\d+)\)? - \(?(?P<max>\d+\.\d+)\)?",
    re.I,
)
_CC_LIST_RE: Final = re.compile(
    _FOUND_GPU + r"compute capability \(CC\) (?P<cc>\d+\.\d+)\.? The following list shows the CCs",
    re.I,
)
_NEEDS_CUDA_RE: Final = re.compile(
    r"Found GPU ?(?P<index>\d+) (?P<name>.{1,100}?) which requires CUDA_VERSION >= (?P<need>\d+) to "
    r"work properly, but your PyTorch was compiled with CUDA_VERSION (?P<built>\d+)",
    re.I,
)
_INSTALLED_RE: Final = re.compile(r"Your installed torch==(?P<version>\S+?) does not include kernels", re.I)


@dataclass(frozen=True)
class TorchMessages:
    """What torch's messages in a text say (the TorchFacts fields of the same names, and two the
    paste's own lines may lack: the torch version and the CUDA it was built with)."""

    cuda_init_error: Optional[str] = None
    cuda_init_message: Optional[str] = None
    reported_driver_cuda: Optional[Version] = None
    supported_arches: tuple[str, ...] = ()
    supported_cc_min: Optional[ComputeCapability] = None
    supported_cc_max: Optional[ComputeCapability] = None
    incompatible_gpus: tuple[IncompatibleGpu, ...] = ()
    torch_version: Optional[Version] = None
    built_cuda: Optional[Version] = None


def _cuda_version(packed: int) -> Optional[Version]:
    """A CUDA API version as cudaDriverGetVersion / CUDA_VERSION pack it: 11040 -> 11.4 (1000 *
    major + 10 * minor, CUDA Runtime API reference, cudaDriverGetVersion)."""
    if not 1000 <= packed < 1_000_000:
        return None
    return Version(f"{packed // 1000}.{packed % 1000 // 10}")


def _cc(text: Optional[str]) -> Optional[ComputeCapability]:
    return parse_compute_capability(text) if text else None


def _name(raw: str) -> str:
    # The name runs from the end of what came before it: "…/__init__.py:444: UserWarning: <name>".
    return re.sub(r"^.*?\b\w*(?:Warning|Error)\b\s*", "", raw.strip()).strip(" :'\"") or raw.strip()


def read_torch_messages(texts: Iterable[str]) -> TorchMessages:
    """torch's messages in ``texts`` (a paste, or the warnings the deep probe caught)."""
    blob = " ".join(" \n ".join(texts).split())
    # doctor reads at most 10 MiB of text; this bounds the work for any other caller too.
    blob = blob[:12_000_000]
    lowered = blob.lower()
    kind = message = None
    driver_cuda = None
    for candidate, pattern in _INIT_RES:
        # A case-blind regex cannot skip ahead to a fixed word: look for the words first.
        if not any(word in lowered for word in _INIT_WORDS[candidate]):
            continue
        match = pattern.search(blob)
        if match is None:
            continue
        kind = candidate
        message = match.group(0)
        groups = match.groupdict()
        if candidate == "driver_too_old" and groups.get("found"):
            driver_cuda = _cuda_version(int(groups["found"]))
        elif candidate == "cuda_error" and (groups.get("said") or groups.get("bare")):
            said = groups.get("said") or groups["bare"]
            message = f"Error {CUDA_ERROR_CODES[said]}: {said}"
        elif candidate == "cuda_error" and groups.get("code1"):
            message = f"Error {groups['code1']}: {groups['what1'].strip()}"
        elif candidate == "cuda_error":
            message = f"Error {groups['code']}: {groups['what'].strip()}"
        break
    gpus: dict[tuple[Optional[int], str], IncompatibleGpu] = {}
    arches: tuple[str, ...] = ()
    cc_min = cc_max = None
    for match in _cubins(blob, lowered):
        tail = _USE_THE_RE.search(blob, match.end(), match.end() + 600)
        name = tail.group("name").strip() if tail else _name(match.group("name"))
        cc = parse_compute_capability(f"sm_{match.group('sm')}")
        gpus.setdefault((None, name), IncompatibleGpu(name, None, cc, "no_kernels"))
        if match.group("arches") and not arches:
            arches = tuple(match.group("arches").split())
    for match in _OLD_GPU_RE.finditer(blob) if "found gpu" in lowered else ():
        found = IncompatibleGpu(
            match.group("name").strip(), int(match.group("index")), _cc(match.group("cc")), "too_old"
        )
        gpus[(found.index, found.name)] = found
        cc_min = cc_min or _cc(match.group("min"))
    for match in _RANGE_RE.finditer(blob) if "found gpu" in lowered else ():
        cc, low, high = _cc(match.group("cc")), _cc(match.group("min")), _cc(match.group("max"))
        reason = "too_new" if cc is not None and high is not None and cc > high else "too_old"
        found = IncompatibleGpu(match.group("name").strip(), int(match.group("index")), cc, reason)
        gpus[(found.index, found.name)] = found
        cc_min, cc_max = cc_min or low, cc_max or high
    for match in _CC_LIST_RE.finditer(blob) if "found gpu" in lowered else ():
        found = IncompatibleGpu(
            match.group("name").strip(), int(match.group("index")), _cc(match.group("cc"))
        )
        gpus[(found.index, found.name)] = found
    built = None
    for match in _NEEDS_CUDA_RE.finditer(blob) if "found gpu" in lowered else ():
        found = IncompatibleGpu(
            match.group("name").strip(), int(match.group("index")), None, "needs_newer_cuda"
        )
        gpus[(found.index, found.name)] = found
        built = built or _cuda_version(int(match.group("built")))
    installed = _INSTALLED_RE.search(blob) if "your installed torch==" in lowered else None
    return TorchMessages(
        cuda_init_error=kind,
        cuda_init_message=message,
        reported_driver_cuda=driver_cuda,
        supported_arches=arches,
        supported_cc_min=cc_min,
        supported_cc_max=cc_max,
        incompatible_gpus=_merged(gpus),
        torch_version=parse_version(installed.group("version")) if installed else None,
        built_cuda=built,
    )


def _cubins(blob: str, lowered: str) -> list[re.Match[str]]:
    """_check_cubins' warnings, looked for only around their fixed words: the GPU name before them
    is a lazy run of up to 100 characters, which tried at every position of a long log would cost
    a hundred steps a character."""
    if len(lowered) != len(blob):  # lower() changed a character's length: no shortcut then
        return list(_CUBINS_RE.finditer(blob))
    found: list[re.Match[str]] = []
    at = lowered.find(_CUBINS_WORDS)
    while at >= 0:
        start = max(0, at - 110, found[-1].end() if found else 0)
        match = _CUBINS_RE.search(blob, start, at + 2000)
        if match is not None and match.start() <= at:
            found.append(match)
        at = lowered.find(_CUBINS_WORDS, at + 1)
    return found


def _merged(gpus: dict[tuple[Optional[int], str], IncompatibleGpu]) -> tuple[IncompatibleGpu, ...]:
    """One entry per GPU: _check_cubins' warning names no index, _check_capability's does; the
    indexed one of the same name stands for both (the reasons agree: neither runs)."""
    named = {gpu.name for key, gpu in gpus.items() if key[0] is not None}
    kept = [g for key, g in gpus.items() if key[0] is not None or g.name not in named]
    return tuple(sorted(kept, key=lambda g: (g.index is None, g.index or 0, g.name)))


def with_messages(torch: TorchFacts, messages: TorchMessages) -> TorchFacts:
    """``torch`` with what torch's messages add; fields the facts already hold are kept, except the
    evidence fields, which the messages fill where still empty."""
    return dataclasses.replace(
        torch,
        version=torch.version or messages.torch_version,
        cuda=torch.cuda or messages.built_cuda,
        cuda_init_error=torch.cuda_init_error or messages.cuda_init_error,
        cuda_init_message=torch.cuda_init_message or messages.cuda_init_message,
        reported_driver_cuda=torch.reported_driver_cuda or messages.reported_driver_cuda,
        supported_arches=torch.supported_arches or messages.supported_arches,
        supported_cc_min=torch.supported_cc_min or messages.supported_cc_min,
        supported_cc_max=torch.supported_cc_max or messages.supported_cc_max,
        incompatible_gpus=torch.incompatible_gpus or messages.incompatible_gpus,
    )
