"""The checks for AMD and Intel GPUs, in the shape of NVIDIA's (driver, GPU, torch build vs device):

- driver.amd: the amdgpu driver and its KFD see the AMD GPUs; the torch ROCm build's user space
  against the driver's ROCm release (AMD's user and kernel-space support matrix).
- driver.intel: the Intel GPU's kernel driver (xe / i915), and Level Zero, which torch's XPU build
  reaches the GPU through (sycl-ls listing it under OpenCL only: intel/compute-runtime#764).
- torch.gpu_vendor: the build is for the GPUs the machine has: a ROCm torch on an NVIDIA box, a CUDA
  torch on an AMD box, a CPU torch beside AMD or Intel GPUs a build would use.
- torch.gfx_arch: a ROCm build's gfx targets (torch's own list with --deep, else the knowledge base's
  for an official wheel) against each AMD GPU; an XPU build's release against the Intel family's.

Every fix is the resolver's plan for this machine (envkit.checks.compat.plan_fix).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Optional

from envkit.checks._common import deep_hint, headline, join_lines, plural
from envkit.checks.compat import plan_fix
from envkit.knowledge import load_knowledge
from envkit.knowledge.vendors import normalize_gfx, rocm_version
from envkit.report import CheckResult, Status
from envkit.resolve.target import target_from_facts
from envkit.versions import Version

if TYPE_CHECKING:
    from envkit.facts import Facts, TorchFacts

__all__ = ["check_amd_driver", "check_gfx_arch", "check_gpu_vendor", "check_intel_driver", "torch_kind"]

LEVEL_ZERO_DOCS: Final = "dgpu-docs.intel.com/driver/installation.html"


def torch_kind(torch: TorchFacts) -> Optional[str]:
    """ "rocm", "xpu", "cuda" or "cpu": what the installed torch is built for; None when unknown."""
    local = (torch.version.local or "") if torch.version is not None else ""
    if torch.hip or local.startswith("rocm"):
        return "rocm"
    if local.startswith("xpu"):
        return "xpu"
    build = torch.cuda_build
    if build:
        return "cuda"
    return "cpu" if build is False else None


def _summary(facts: Facts, vendor: str) -> str:
    gpus = getattr(facts, vendor).gpus
    archs = sorted({g.arch for g in gpus if g.arch})
    return plural(len(gpus), "GPU") + (f" ({', '.join(archs)})" if archs else "")


def check_amd_driver(facts: Facts) -> CheckResult:
    cid = "driver.amd"
    amd = facts.amd
    if not facts.reported("amd"):
        return CheckResult(
            cid,
            Status.SKIP,
            "AMD GPUs were not looked for (no answer in time)",
            detail=join_lines(*amd.notes),
        )
    if not amd.gpus:
        return CheckResult(cid, Status.SKIP, "no AMD GPU on the machine")
    notes = join_lines(*amd.notes)
    if not set(amd.sources) & {"sysfs", "amdsmi", "amd-smi", "rocm-smi"}:
        # A pasted report names the GPU torch saw, never the kernel driver.
        return CheckResult(cid, Status.SKIP, f"{_summary(facts, 'amd')}; the amdgpu driver is not reported")
    if "sysfs" not in amd.sources:
        return CheckResult(
            cid,
            Status.WARN,
            f"AMD's tools list {_summary(facts, 'amd')}, but the kernel's KFD shows none",
            detail=join_lines(
                "/sys/class/kfd/kfd/topology lists no GPU node: ROCm (and torch's ROCm build) reach the "
                "GPU through /dev/kfd; in a container, pass --device=/dev/kfd --device=/dev/dri",
                notes,
            ),
            fix="sudo modprobe amdgpu; in a container: docker run --device=/dev/kfd --device=/dev/dri "
            "--group-add video …",
        )
    k = load_knowledge()
    driver = " ".join(filter(None, (amd.driver, amd.driver_version))) or "amdgpu"
    kmd = k.vendors.kmd_rocm(amd.driver_version)
    summary = f"{driver}" + (f" (ROCm {kmd}'s kernel driver)" if kmd else "") + f", {_summary(facts, 'amd')}"
    wheel = rocm_version(facts.torch.variant or "") if torch_kind(facts.torch) == "rocm" else None
    if wheel is not None and kmd is not None:
        tested = k.vendors.kmd_user_space(kmd) or ()
        if Version(f"{wheel.major}.{wheel.minor}") not in tested:
            span = f"{tested[0]}–{tested[-1]}" if tested else "none listed"
            return CheckResult(
                cid,
                Status.WARN,
                f"torch {facts.torch.version} bundles ROCm {wheel.major}.{wheel.minor}; amdgpu "
                f"{amd.driver_version} is ROCm {kmd}'s driver, tested with ROCm {span}",
                detail=join_lines(
                    "AMD tests a ROCm user space with the kernel driver of the releases around it "
                    "(User and kernel-space support matrix); outside them it is untested",
                    notes,
                ),
                fix=join_lines(plan_fix(facts, k), f"or a driver of ROCm {wheel.major}.{wheel.minor}"),
            )
    return CheckResult(cid, Status.PASS, summary, detail=notes)


def check_intel_driver(facts: Facts) -> CheckResult:
    cid = "driver.intel"
    intel = facts.intel
    usable = [g for g in intel.gpus if g.arch]
    if not intel.gpus:
        return CheckResult(cid, Status.SKIP, "no Intel GPU on the machine")
    if not usable:
        names = ", ".join(sorted({g.name or g.device_id or "an Intel GPU" for g in intel.gpus}))
        return CheckResult(
            cid,
            Status.SKIP,
            f"{names}: not a GPU torch's XPU build supports",
            detail=join_lines(*intel.notes),
        )
    if intel.level_zero is False:
        return CheckResult(
            cid,
            Status.FAIL,
            "sycl-ls lists the Intel GPU under OpenCL only: torch's XPU build needs it under Level Zero",
            detail=join_lines(
                "torch.xpu reaches the GPU through the Level Zero runtime; without it "
                "torch.xpu.is_available() is False (intel/compute-runtime#764)",
                *intel.notes,
            ),
            fix=f"install Intel's compute runtime with Level Zero (intel-level-zero-gpu or libze1, and "
            f"libze-intel-gpu1): {LEVEL_ZERO_DOCS}",
        )
    if intel.driver is None and "sysfs" in intel.sources:
        return CheckResult(
            cid,
            Status.FAIL,
            f"no kernel driver drives the Intel GPU ({_summary(facts, 'intel')})",
            detail=join_lines("neither xe nor i915 is bound to it", *intel.notes),
            fix=f"load the xe (or i915) module: sudo modprobe xe; {LEVEL_ZERO_DOCS}",
        )
    summary = " ".join(filter(None, (intel.driver, intel.driver_version))) or "Intel GPU"
    return CheckResult(
        cid, Status.PASS, f"{summary}, {_summary(facts, 'intel')}", detail=join_lines(*intel.notes)
    )


_FOR: Final = {"rocm": "AMD GPUs", "xpu": "Intel GPUs", "cuda": "NVIDIA GPUs", "cpu": "no GPU"}


def check_gpu_vendor(facts: Facts) -> CheckResult:
    cid = "torch.gpu_vendor"
    torch = facts.torch
    kind = torch_kind(torch)
    if not torch.installed or kind is None:
        return CheckResult(cid, Status.SKIP, "no torch build to check")
    k = load_knowledge()
    target = target_from_facts(facts, k)
    has = {"cuda": target.has_nvidia, "rocm": target.has_amd, "xpu": target.has_intel}
    if not any(has.values()):
        return CheckResult(cid, Status.SKIP, "no GPU a torch build uses on the machine")
    name = f"torch {torch.version}" if torch.version else "torch"
    if kind != "cpu" and has[kind]:
        return CheckResult(cid, Status.PASS, f"{name} is a build for this machine's {_FOR[kind]}")
    machine = [_FOR[v] for v, present in has.items() if present]
    what = "a CPU-only build" if kind == "cpu" else f"a build for {_FOR[kind]}"
    if kind == "cuda" and not target.has_nvidia and not facts.driver.version:
        detail = (
            "torch.cuda.is_available() is False: no NVIDIA driver; the AMD / Intel GPUs need their own build"
        )
    else:
        detail = "its kernels cannot run on this machine's GPUs; torch.cuda / torch.xpu sees none"
    return CheckResult(
        cid,
        Status.FAIL,
        f"{name} is {what}, on a machine with {' and '.join(machine)}",
        detail=detail,
        fix=plan_fix(facts, k),
    )


def _rocm_list(facts: Facts) -> tuple[Optional[tuple[str, ...]], str]:
    """The ROCm build's gfx targets: torch's own (--deep's get_arch_list()), else the official wheel's."""
    deep = facts.torch.arch_list
    reported = tuple(t for t in (normalize_gfx(a) for a in deep) if t)
    if reported:
        return reported, "reported by torch"
    torch = facts.torch
    if torch.version is None or torch.variant is None:
        return None, ""
    row = load_knowledge().vendors.rocm_row(torch.version, torch.variant)
    return (row.gfx, "of the official wheel") if row is not None else (None, "")


def _hip_no_code(facts: Facts, kind: Optional[str]) -> Optional[CheckResult]:
    """HIP's own "invalid device function" in an error text that names no AMD GPU: the ROCm build has
    no code object for the GPU's gfx target; which target, rocminfo says."""
    said = facts.errors.event("hip_no_code")
    if said is None or kind in ("cuda", "xpu") or any(g.arch for g in facts.amd.gpus):
        return None
    return CheckResult(
        "torch.gfx_arch",
        Status.FAIL,
        "HIP says the build has no code for this GPU ('invalid device function'): its gfx target is not "
        "among the ROCm build's",
        detail=join_lines(said.message, "the text names no GPU, so which gfx target is missing is not known"),
        fix="rocminfo | grep -m1 -o 'gfx[0-9a-f]*'  (then envkit resolve --gpu gfxNNNN names a build that "
        "has it; HSA_OVERRIDE_GFX_VERSION to a close supported target is AMD's unofficial stopgap)",
    )


def check_gfx_arch(facts: Facts) -> CheckResult:
    cid = "torch.gfx_arch"
    torch = facts.torch
    kind = torch_kind(torch)
    said = _hip_no_code(facts, kind)
    if said is not None:
        return said
    if not torch.installed or kind not in ("rocm", "xpu"):
        return CheckResult(cid, Status.SKIP, "no ROCm or XPU build of torch to check")
    k = load_knowledge()
    name = f"torch {torch.version}" if torch.version else "this torch"
    if kind == "xpu":
        return _xpu_arch(facts, name)
    gpus = [g for g in facts.amd.gpus if g.arch]
    if not gpus:
        return CheckResult(cid, Status.SKIP, "no AMD GPU with a known gfx target")
    built, origin = _rocm_list(facts)
    if built is None:
        return CheckResult(
            cid,
            Status.SKIP,
            f"{name} is not an official ROCm wheel envkit knows",
            detail=deep_hint(facts, "the build's gfx list"),
        )
    missing = [g for g in gpus if g.arch not in built]
    listing = f"gfx targets ({origin}): {' '.join(built)}"
    override = _override(facts)
    if missing and override is not None and override[1] in built:
        setting, target = override
        return CheckResult(
            cid,
            Status.WARN,
            f"{', '.join(sorted({g.arch or '' for g in missing}))} is not in {name}'s gfx targets; it runs "
            f"as {target} through HSA_OVERRIDE_GFX_VERSION={setting}",
            detail=join_lines(
                listing,
                "the override makes the ROCm runtime load another target's code: AMD's unofficial "
                "stopgap, untested, and kernels the two targets differ in may fail or be wrong",
            ),
            fix=plan_fix(facts, k),
        )
    if missing:
        labels = [f"GPU {g.index} ({g.name or 'AMD GPU'}, {g.arch})" for g in missing]
        return CheckResult(
            cid,
            Status.FAIL,
            headline([f"{labels[0]} has no code in {name}", *labels[1:]]),
            detail=join_lines(listing, "HIP fails with 'invalid device function' / 'no kernel image'"),
            fix=plan_fix(facts, k),
        )
    return CheckResult(cid, Status.PASS, f"every AMD GPU is in {name}'s gfx targets", detail=listing)


def _override(facts: Facts) -> Optional[tuple[str, str]]:
    """HSA_OVERRIDE_GFX_VERSION ("11.0.0") and the gfx target it makes the runtime report (gfx1100;
    the stepping is one hex digit: 9.0.10 is gfx90a), or None."""
    setting = facts.host.env.get("HSA_OVERRIDE_GFX_VERSION", "").strip()
    parts = setting.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts) or int(parts[2]) > 15 or int(parts[1]) > 9:
        return None
    return setting, f"gfx{int(parts[0])}{int(parts[1])}{int(parts[2]):x}"


def _xpu_arch(facts: Facts, name: str) -> CheckResult:
    cid = "torch.gfx_arch"
    k = load_knowledge()
    torch = facts.torch
    findings = []
    for g in facts.intel.gpus:
        family = k.vendors.intel_family(g.arch or "")
        label = f"GPU {g.index} ({g.name or g.device_id or 'Intel GPU'})"
        if family is None:
            findings.append(f"{label}: not a GPU torch's XPU build supports")
        elif torch.version is not None and Version(torch.version.public) < family.first_torch:
            findings.append(f"{label}: {family.model} is supported from torch {family.first_torch} on")
    if not facts.intel.gpus:
        return CheckResult(cid, Status.SKIP, "no Intel GPU on the machine")
    if findings:
        return CheckResult(
            cid, Status.WARN, headline(findings), detail=join_lines(*findings), fix=plan_fix(facts, k)
        )
    return CheckResult(cid, Status.PASS, f"every Intel GPU is one {name}'s XPU build is validated on")
