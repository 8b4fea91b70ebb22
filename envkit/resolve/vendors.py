"""Resolution for AMD (ROCm wheels) and Intel (XPU wheels) GPUs: the rules the resolver adds for them.

- A ROCm wheel runs an AMD GPU when the GPU's gfx target is in the wheel's PYTORCH_ROCM_ARCH
  (envkit/knowledge/amd.toml, per release and variant); there is no PTX-like fallback (a gfx1103 on a
  wheel without gfx1103 fails with "HIP error: invalid device function"), so a target no list carries
  is a failure, and an unknown list is one too, never a pass.
- ROCm's user/kernel-space support matrix: the wheel bundles its ROCm user space, which AMD tests
  against the kernel driver (KMD) of nearby ROCm releases. Outside the tested set the wheel may still
  run: a risk (a warning, and the resolver prefers a tested variant), not a failure.
- An XPU wheel runs an Intel GPU of a family PyTorch or Intel names as supported from that release on
  (envkit/knowledge/intel.toml); an Intel GPU of no XPU family (UHD 630) runs none.

Pure functions over the knowledge base, as envkit.resolve.rules.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Optional

from envkit.knowledge import variant_cuda
from envkit.knowledge.vendors import rocm_version
from envkit.versions import Version

if TYPE_CHECKING:
    from envkit.knowledge import Knowledge, Release
    from envkit.resolve.target import Target

__all__ = [
    "accel_failures",
    "gpu_vendor",
    "kmd_risk",
    "nightly_gfx",
    "plan_warnings",
    "unusable_note",
    "variant_rank",
    "vendor_of",
]


@functools.lru_cache(maxsize=256)  # a few dozen names, asked for each candidate build of every plan
def vendor_of(variant: str) -> str:
    """ "cuda", "rocm", "xpu" or "cpu": which GPUs a wheel variant is for.

    >>> vendor_of("cu128"), vendor_of("rocm6.2.4"), vendor_of("xpu"), vendor_of("cpu")
    ('cuda', 'rocm', 'xpu', 'cpu')
    """
    if variant_cuda(variant) is not None:
        return "cuda"
    if rocm_version(variant) is not None:
        return "rocm"
    return variant if variant in ("xpu", "cpu") else "other"


def gpu_vendor(variant: str) -> Optional[str]:
    """The GPU vendor a plan's variant is for: "nvidia", "amd", "intel"; None for the CPU build."""
    return {"cuda": "nvidia", "rocm": "amd", "xpu": "intel"}.get(vendor_of(variant))


def variant_rank(variant: str) -> Version:
    """The order of a release's variants of one kind: the CUDA or ROCm version; 0 for the rest."""
    return variant_cuda(variant) or rocm_version(variant) or Version("0")


def _gfx_list(k: Knowledge, release: Release, variant: str) -> Optional[tuple[str, ...]]:
    row = k.vendors.rocm_row(release.torch, variant)
    return None if row is None else row.gfx


def accel_failures(k: Knowledge, target: Target, release: Release, variant: str) -> list[tuple[str, str]]:
    """The failures of a ROCm or XPU candidate on the target's AMD or Intel GPUs (rule "arch")."""
    kind = vendor_of(variant)
    if kind == "rocm":
        gpus = target.amd_gpus
        if not gpus:
            return []
        gfx = _gfx_list(k, release, variant)
        if gfx is None:
            return [("arch", f"envkit has no gfx list for torch {release.torch} {variant}")]
        built = " ".join(gfx)
        head = f"build of torch {release.torch} (built for {built})"
        return [("arch", f"{g.label} is not in the {variant} {head}") for g in gpus if g.arch not in gfx]
    if kind == "xpu":
        failures = []
        for g in (a for a in target.accel if a.vendor == "intel"):
            family = k.vendors.intel_family(g.arch or "")
            if family is None:
                failures.append(("arch", f"{g.label} is not a GPU torch's XPU build supports"))
            elif release.torch < family.first_torch:
                why = (
                    f"{g.label}: {family.model} is supported from torch {family.first_torch} on "
                    "(PyTorch's 'Getting Started on Intel GPU')"
                )
                failures.append(("arch", why))
        return failures
    return []


def kmd_risk(k: Knowledge, target: Target, variant: str) -> Optional[str]:
    """A warning when the wheel's ROCm user space is not among those AMD tested with the machine's
    amdgpu driver (User and kernel-space support matrix); None when it is, or when unknown."""
    wheel = rocm_version(variant)
    kmd = k.vendors.kmd_rocm(target.amd_driver)
    if wheel is None or kmd is None:
        return None
    tested = k.vendors.kmd_user_space(kmd)
    if tested is None or Version(f"{wheel.major}.{wheel.minor}") in tested:
        return None
    span = f"{tested[0]}–{tested[-1]}"
    return (
        f"amdgpu {target.amd_driver} is ROCm {kmd}'s kernel driver, tested with ROCm {span} user space; "
        f"{variant}'s wheels bundle ROCm {wheel.major}.{wheel.minor} (AMD's user and kernel-space support "
        "matrix): it may run, untested; a driver from a nearby ROCm release avoids the doubt"
    )


def nightly_gfx(k: Knowledge, target: Target) -> Optional[str]:
    """The ROCm variant of the nightly channel whose gfx list has every AMD GPU of the target, if any."""
    row = k.vendors.nightly_rocm_row()
    if row is None or not target.amd_gpus:
        return None
    if all(g.arch in row.gfx for g in target.amd_gpus):
        return row.variants[0]
    return None


def unusable_note(target: Target) -> Optional[str]:
    """A plan's warning when the target's only GPUs are ones no torch build uses (an Intel UHD 630):
    the CPU build is planned on purpose, and the plan says why, never silently."""
    unusable = [a for a in target.accel if a.vendor == "intel" and not a.arch]
    if target.has_gpu or not unusable:
        return None
    names = ", ".join(a.label for a in unusable)
    return f"{names}: not a GPU torch's XPU build supports; the CPU build is the one that runs here"


def plan_warnings(k: Knowledge, target: Target, variant: str, torch: Version) -> list[str]:
    """What a plan for AMD or Intel GPUs must say: the driver it needs and whether it was checked,
    a build for GPUs the target does not have, GPUs no build uses."""
    warnings: list[str] = []
    kind = vendor_of(variant)
    if kind == "rocm":
        if not target.has_amd:
            warnings.append(f"{variant} is a ROCm build, for AMD GPUs: the target has none")
        elif k.vendors.kmd_rocm(target.amd_driver) is None:
            # No version at all (no --driver; the kernel's own amdgpu has no /sys/module/amdgpu/version)
            # is not the same as a version envkit cannot place: each says which it is.
            why = (
                f"envkit does not know which ROCm release amdgpu {target.amd_driver} is"
                if target.amd_driver
                else "its version is not known (--driver with the amdgpu version, as "
                "/sys/module/amdgpu/version of AMD's DKMS module reports it)"
            )
            warnings.append(
                f"the amdgpu driver was not checked against the wheel's ROCm {rocm_version(variant)}: AMD "
                "supports a ROCm user space on the kernel driver of the releases around it (its user "
                f"and kernel-space support matrix); {why}"
            )
    elif kind == "xpu":
        if not target.has_intel:
            warnings.append("xpu is the build for Intel GPUs: the target has none torch's XPU build supports")
        needs = k.vendors.xpu_requirement(torch)
        if needs:
            warnings.append(f"torch {torch}+xpu needs {needs}")
    note = unusable_note(target)
    if note and kind == "cpu":
        warnings.append(note)
    return warnings
