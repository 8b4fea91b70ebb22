"""torch.cuda_available: a CUDA build of torch that cannot use CUDA, and why, per the evidence.

What people paste most when "torch.cuda.is_available() is False": a CUDA build on a node without a
usable driver (a GPU-less login node, a container started without the NVIDIA runtime, a driver
that did not load), where torch said so itself ("CUDA initialization: Found no NVIDIA driver on
your system", c10/cuda/CUDAFunctions.cpp; see envkit.detect.torch_messages for every wording).
There are two ways out and the check gives both: make the driver usable, or install the CPU build
of the same torch release. Evidence, strongest first: torch's own message, then
``torch.cuda.is_available()`` (the --deep probe, or collect_env's "Is CUDA available" line), then
what the driver detection and the GPU list show. Without any of those it skips.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final, Optional

from envkit.checks._common import deep_hint, fix_lines, join_lines, pip_command, torch_absent
from envkit.checks.xpu_available import xpu_verdict
from envkit.report import CheckResult, Status

if TYPE_CHECKING:
    from envkit.facts import Facts
    from envkit.versions import Version

__all__ = ["check_torch_cuda_available"]

ID: Final = "torch.cuda_available"
CPU_INDEX: Final = "https://download.pytorch.org/whl/cpu"
# cudaGetDeviceCount() errors torch passes on ("Unexpected error from cudaGetDeviceCount() …
# Error N: <cudaGetErrorString>"), the CUDA Runtime API's cudaError enum, and what repairs each.
_CUDA_ERRORS: Final = {
    "100": (
        "the driver sees no CUDA device (cudaErrorNoDevice)",
        "check `nvidia-smi -L` and CUDA_VISIBLE_DEVICES",
    ),
    "802": (
        (
            "the system is not yet initialized (cudaErrorSystemNotReady): on NVSwitch systems (HGX/DGX) "
            "the fabric manager is not running"
        ),
        "sudo systemctl start nvidia-fabricmanager  (its version must equal the driver's)",
    ),
    "803": (
        (
            "the CUDA driver library (libcuda) does not match the loaded kernel module "
            "(cudaErrorSystemDriverMismatch): a driver upgraded without a reboot, or another libcuda "
            "(a container's, a cuda-compat package) ahead of the driver's"
        ),
        "reboot (or reload the nvidia modules); remove cuda-compat folders from LD_LIBRARY_PATH",
    ),
    "804": (
        (
            "a forward-compatibility libcuda (the cuda-compat package) is loaded on a GPU that does not "
            "support forward compatibility (cudaErrorCompatNotSupportedOnDevice; GeForce and most "
            "workstation GPUs)"
        ),
        (
            "remove the cuda-compat folder (e.g. /usr/local/cuda/compat) from LD_LIBRARY_PATH, or "
            "upgrade the host driver"
        ),
    ),
    "999": (
        "the driver reported an unknown error (cudaErrorUnknown)",
        "reload the nvidia_uvm module (sudo rmmod nvidia_uvm && sudo modprobe nvidia_uvm) or reboot",
    ),
}


def _public(version: Optional[Version]) -> Optional[str]:
    """The release to pin: the public version; for a pre-release, nightly or NGC build
    (2.1.0a0+29c30b1, 2.1.0.dev20230512) the release it leads to, which the CPU index has."""
    if version is None:
        return None
    if version.is_prerelease or version.is_devrelease:
        return version.base_version
    return version.public


def _cpu_build_fix(facts: Facts) -> str:
    """The command that replaces this CUDA build with the CPU build of the same release."""
    torch = facts.torch
    version = _public(torch.version)
    if any(p.name == "pytorch" for p in torch.conda_packages):
        pinned = f"pytorch=={version}" if version else "pytorch"
        return f"conda install {pinned} cpuonly -c pytorch"
    names = {d.name: d.version for d in torch.distributions}
    packages = [f"torch=={version}" if version else "torch"]
    for companion in ("torchvision", "torchaudio"):
        if companion in names:
            companion_version = _public(names[companion])
            packages.append(f"{companion}=={companion_version}" if companion_version else companion)
    return f"{pip_command(facts)} install {' '.join(packages)} --index-url {CPU_INDEX}"


def _container_hint(facts: Facts) -> Optional[str]:
    """Why a container is likely, or None: what the facts show, never a guess."""
    warnings = " ".join(facts.torch.deep.warnings) if facts.torch.deep is not None else ""
    if "/opt/pytorch/pytorch/" in warnings:
        # NGC's PyTorch containers build torch in /opt/pytorch/pytorch; the path is in torch's
        # "(Triggered internally at …)" suffix.
        return "torch's message comes from an NGC container's build (/opt/pytorch)"
    hostname = facts.host.hostname or ""
    if re.fullmatch(r"[0-9a-f]{12}", hostname):
        return f"the hostname {hostname} is a Docker container id"
    return None


def _driver_ways(facts: Facts, container: Optional[str]) -> list[str]:
    run = "docker run --gpus all …  (NVIDIA Container Toolkit), or apptainer exec --nv …"
    ways = []
    if container is not None:
        ways.append(f"{container}: start it with the GPUs: {run}")
    ways.append(
        "on the GPU node: install or load the NVIDIA driver and confirm with `nvidia-smi` "
        "(sudo modprobe nvidia; `dmesg | grep -i nvrm` says why it does not load)"
    )
    if container is None:
        ways.append(f"in a container: start it with the GPUs: {run}")
    return ways


def check_torch_cuda_available(facts: Facts) -> CheckResult:
    torch = facts.torch
    if not torch.installed:
        return CheckResult(ID, Status.SKIP, torch_absent(facts))
    local = (torch.version.local or "") if torch.version is not None else ""
    if torch.hip or local.startswith("rocm"):
        return _rocm(facts)
    build = torch.cuda_build
    if build is False:
        deep = torch.deep
        # A source build has no +xpu tag (2.5.0a0+git136e28f, vllm-project/vllm#8655): True is torch's
        # own word that it is an XPU build (False is printed by CPU builds too).
        if local.startswith("xpu") or (deep is not None and deep.xpu_available is True):
            return xpu_verdict(facts)  # torch.xpu, not CUDA, is its GPU API
        return CheckResult(
            ID, Status.SKIP, f"torch {torch.version or ''} is a CPU-only build; CUDA is not expected"
        )
    if build is None:
        return CheckResult(
            ID,
            Status.SKIP,
            "nothing says whether torch is a CUDA build",
            detail="the text has no 'CUDA used to build PyTorch' line and torch printed no CUDA message",
        )
    deep = torch.deep
    available = deep.cuda_available if deep is not None and deep.ok else None
    kind = torch.cuda_init_error
    label = f"torch {torch.version} (CUDA {torch.cuda})" if torch.version else "this CUDA build of torch"
    if torch.version is None and torch.cuda is not None:
        label = f"torch (CUDA {torch.cuda})"
    if available is True and kind is None:
        count = f", {deep.device_count} device(s)" if deep is not None and deep.device_count else ""
        return CheckResult(ID, Status.PASS, f"{label} can use CUDA (torch.cuda.is_available(){count})")
    if available is None and kind is None:
        return CheckResult(
            ID,
            Status.SKIP,
            "nothing says whether torch can use CUDA",
            detail="no 'Is CUDA available' line, no deep probe and no message from torch",
            fix=deep_hint(facts, "whether torch can use CUDA"),
        )
    if not facts.visible_gpus and facts.driver.version is None and (facts.amd.gpus or facts.intel.gpus):
        # No NVIDIA GPU, but AMD's or Intel's: the build is the wrong one, not the driver missing.
        vendor = "AMD" if facts.amd.gpus else "Intel"
        return CheckResult(
            ID,
            Status.SKIP,
            f"{label} is a CUDA build on a machine with {vendor} GPUs; torch.gpu_vendor judges it",
        )
    reason, driver_fixes = _reason(facts, kind, available)
    said = f"torch said: {torch.cuda_init_message}" if torch.cuda_init_message else ""
    cpu = _cpu_build_fix(facts)
    return CheckResult(
        ID,
        Status.FAIL,
        f"{label} cannot use CUDA: {reason[0]}",
        detail=join_lines(
            said,
            *reason[1:],
            "torch.cuda.is_available() is False: every CUDA call fails and work falls back to the CPU "
            "or stops",
        ),
        fix=fix_lines([*driver_fixes, f"or, to run on the CPU here: {cpu}"]),
    )


def _rocm(facts: Facts) -> CheckResult:
    """A ROCm build answers through torch.cuda (HIP's API under CUDA's names): collect_env's "Is CUDA
    available" and --deep's torch.cuda.is_available() are its verdict as for a CUDA build."""
    torch = facts.torch
    name = f"torch {torch.version}" if torch.version else "this ROCm build of torch"
    label = f"{name} (ROCm {torch.hip})" if torch.hip else name
    deep = torch.deep
    available = deep.cuda_available if deep is not None and deep.ok else None
    if available is True:
        count = f", {deep.device_count} device(s)" if deep is not None and deep.device_count else ""
        return CheckResult(
            ID, Status.PASS, f"{label} can use the GPU (torch.cuda.is_available() through HIP{count})"
        )
    if available is None:
        return CheckResult(
            ID,
            Status.SKIP,
            "nothing says whether torch's ROCm build can use the GPU",
            detail="no 'Is CUDA available' line and no deep probe (a ROCm build answers through torch.cuda)",
            fix=deep_hint(facts, "whether torch can use the GPU"),
        )
    amd = facts.amd.gpus
    if not amd and (facts.visible_gpus or facts.driver.version):
        # A ROCm build on an NVIDIA machine: torch.gpu_vendor says so, with the CUDA plan.
        return CheckResult(
            ID, Status.SKIP, f"{label} is a build for AMD GPUs; torch.gpu_vendor judges it here"
        )
    seen = f"AMD GPUs seen: {', '.join(sorted({g.name or g.arch or 'AMD GPU' for g in amd}))}" if amd else ""
    return CheckResult(
        ID,
        Status.FAIL,
        f"{label} cannot use the {'AMD GPU' if amd else 'GPU'}: torch.cuda.is_available() is False",
        detail=join_lines(
            "a ROCm build reaches the GPU through torch.cuda (HIP): False means HIP found no GPU it may use, "
            "and work falls back to the CPU or stops",
            seen or "no AMD GPU is seen either",
        ),
        fix=fix_lines(
            [
                (
                    "check that `rocminfo` (or `amd-smi list`) lists the GPU; the user needs /dev/kfd and "
                    "/dev/dri: sudo usermod -aG render,video $USER (then log in again)"
                ),
                "in a container: docker run --device=/dev/kfd --device=/dev/dri --group-add video …",
                (
                    "HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES must not hide it; torch.gfx_arch says "
                    "whether the build has the GPU's gfx target"
                ),
                f"or, to run on the CPU here: {_cpu_build_fix(facts)}",
            ]
        ),
    )


def _reason(facts: Facts, kind: Optional[str], available: Optional[bool]) -> tuple[list[str], list[str]]:
    """(the summary's cause and detail lines, the driver-side fixes), per the evidence."""
    torch = facts.torch
    gpus = facts.visible_gpus
    container = _container_hint(facts)
    # No driver and no GPU is evidence only where the text reports them (not a paste cut short).
    reported = facts.reported("gpus") and facts.reported("driver.version")
    no_driver_seen = reported and facts.driver.version is None and not gpus
    if kind == "driver_too_old":
        provides = f" (it provides CUDA {torch.reported_driver_cuda})" if torch.reported_driver_cuda else ""
        need = f"CUDA {torch.cuda}" if torch.cuda else "this build's CUDA"
        return (
            [
                f"the NVIDIA driver is too old{provides} for {need}",
                "see torch.driver_compat for the driver it needs",
            ],
            [
                (
                    f"upgrade the driver to one for {need} (torch.driver_compat names the floor), "
                    "or install a build for the CUDA the driver provides (`envkit resolve`)"
                )
            ],
        )
    if kind == "cuda_error":
        code = re.match(r"Error (\d+)", torch.cuda_init_message or "")
        meaning, fix = _CUDA_ERRORS.get(
            code.group(1) if code else "", ("CUDA reported an error", "nvidia-smi")
        )
        return [meaning], [fix]
    if kind in ("no_driver", "init_failed") or (kind is None and available is False and no_driver_seen):
        if kind == "no_driver":
            cause = "torch found no NVIDIA driver (libcuda could not be loaded)"
        elif kind == "init_failed":
            cause = "the CUDA driver could not be initialized"
        else:
            cause = "no NVIDIA driver or GPU answered on this node"
        where = [
            (
                "this is a node without a GPU (a login node), a container started without the NVIDIA "
                "runtime, or a driver that is not installed or did not load"
            )
        ]
        if gpus:
            where = [
                (
                    f"{len(gpus)} GPU(s) are listed, so the driver is there but not usable from here "
                    "(a container without the NVIDIA runtime, or a driver that did not load)"
                )
            ]
        if container is not None:
            where.append(f"a container is likely: {container}")
        return [cause, *where], _driver_ways(facts, container)
    if kind == "unknown_error":
        return (
            [
                "CUDA reported an unknown error",
                (
                    "torch names CUDA_VISIBLE_DEVICES changed after the program started; on laptops "
                    "and desktops it also follows a suspend/resume that left nvidia_uvm unusable"
                ),
            ],
            [
                (
                    "set CUDA_VISIBLE_DEVICES before Python starts, or reload nvidia_uvm "
                    "(sudo rmmod nvidia_uvm && sudo modprobe nvidia_uvm) / reboot"
                )
            ],
        )
    if kind == "no_gpus":
        visible = facts.host.env.get("CUDA_VISIBLE_DEVICES")
        hint = f"CUDA_VISIBLE_DEVICES={visible!r} hides them" if visible is not None else ""
        return (
            ["the driver answers but no CUDA GPU is visible", hint],
            ["check `nvidia-smi -L` and unset or correct CUDA_VISIBLE_DEVICES"],
        )
    # is_available() is False with a driver and GPUs seen and no message from torch.
    if not reported:
        return (
            [
                "torch.cuda.is_available() is False",
                (
                    "the text stops before the GPU and driver lines and torch's own message is not in it: "
                    "whether a driver is there is not known"
                ),
            ],
            _driver_ways(facts, container),
        )
    seen = f"driver {facts.driver.version}" if facts.driver.version else "no driver version"
    return (
        [
            f"torch.cuda.is_available() is False ({seen}, {len(gpus)} GPU(s) listed)",
            "torch gave no reason; torch.driver_compat and driver.loaded say whether the driver fits",
        ],
        ["python -c 'import torch; torch.cuda.init()'  (torch's error names the cause); check `nvidia-smi`"],
    )
