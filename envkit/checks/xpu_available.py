"""torch.cuda_available's verdict on an XPU build of torch: can it see the Intel GPU?

An XPU build answers through torch.xpu, not torch.cuda: ``torch.xpu.is_available()`` (the --deep
probe, or collect_env's "Is XPU available" line, which torch 2.5+ prints as
str(torch.xpu.is_available()), followed on True by the Intel GPU lines pytorch/pytorch#137846 added;
pytorch/pytorch:torch/utils/collect_env.py get_env_info, read in a copy of the file, not at a
release tag) is the evidence. False on an XPU build is what pytorch/pytorch#147226 reports (torch
2.6.0+xpu: "Failed to initialize XPU devices. The driver may not be installed, installed
incorrectly, or incompatible"): the GPU driver / Level Zero loader missing or too old, the oneAPI
runtime not sourced where the release needs it, or a user without access to /dev/dri (the render
group). False on a CPU build says nothing (#150260: an Arc A770 'failing' under a nightly that was
a CPU build), so only a +xpu build, or True, is judged here.
True is torch's own answer and always passes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from envkit.checks._common import deep_hint, fix_lines, join_lines, pip_command
from envkit.report import CheckResult, Status

if TYPE_CHECKING:
    from envkit.facts import Facts

__all__ = ["xpu_verdict"]

ID: Final = "torch.cuda_available"
CPU_INDEX: Final = "https://download.pytorch.org/whl/cpu"
# Intel's driver documentation (dgpu-docs.intel.com, "Configuring Render Group Membership") and
# the get_start_xpu pages (https://pytorch.org/docs/2.5/notes/get_start_xpu.html, 'Software
# Prerequisite'; https://docs.pytorch.org/docs/2.12/notes/get_start_xpu.html, 'install the Intel
# GPUs driver first'): the driver with its Level Zero loader first; `sycl-ls` (oneAPI's DPC++
# runtime) lists the devices SYCL, and so torch, can open.
_DRIVER_FIX: Final = (
    "install the Intel GPU driver with its Level Zero loader (Linux: intel-opencl-icd, libze1 / "
    "libze-intel-gpu1 per Intel's client or data-center GPU driver guide; Windows: the newest Arc "
    "driver) and confirm the GPU is seen: `sycl-ls` lists a '[level_zero:gpu]' device"
)
_RENDER_FIX: Final = (
    "on Linux the user needs /dev/dri/renderD*: sudo gpasswd -a $USER render (then log in again); "
    "in a container: docker run --device /dev/dri …"
)


def xpu_verdict(facts: Facts) -> CheckResult:
    torch = facts.torch
    label = f"torch {torch.version}" if torch.version else "this XPU build of torch"
    deep = torch.deep
    available = deep.xpu_available if deep is not None and deep.ok else None
    if available is True:
        return CheckResult(ID, Status.PASS, f"{label} can use the Intel GPU (torch.xpu.is_available())")
    if available is None:
        return CheckResult(
            ID,
            Status.SKIP,
            f"{label} is an XPU build: nothing says whether torch.xpu can use the GPU",
            detail="no 'Is XPU available' line and no deep probe (an XPU build answers through torch.xpu)",
            fix=deep_hint(facts, "whether torch.xpu can use the GPU"),
        )
    from envkit.knowledge import load_knowledge

    needs = load_knowledge().vendors.xpu_requirement(torch.version) if torch.version else None
    intel = facts.intel.gpus
    if intel:
        seen = f"Intel GPUs seen: {', '.join(sorted({g.name or g.arch or 'Intel GPU' for g in intel}))}"
    elif facts.python is not None and facts.python.selected_by == "collect_env":
        # collect_env lists the Intel GPUs only when torch.xpu.is_available() is True.
        seen = "the text lists no Intel GPU (collect_env names them only where torch sees one)"
    else:
        seen = "no Intel GPU is seen either"
    fixes = [_DRIVER_FIX, _RENDER_FIX]
    if needs:
        fixes.append(f"torch {torch.version.public if torch.version else ''} needs {needs}")
    version = torch.version.public if torch.version else None
    pinned = f"torch=={version}" if version else "torch"
    fixes.append(f"or, to run on the CPU here: {pip_command(facts)} install {pinned} --index-url {CPU_INDEX}")
    return CheckResult(
        ID,
        Status.FAIL,
        f"{label} cannot use the {'Intel GPU' if intel else 'GPU'}: torch.xpu.is_available() is False",
        detail=join_lines(
            "an XPU build reaches the GPU through SYCL and Level Zero: False means no Level Zero GPU "
            "could be opened (driver missing or too old, Level Zero loader missing, no access to "
            "/dev/dri), and work falls back to the CPU or stops",
            seen,
        ),
        fix=fix_lines(fixes),
    )
