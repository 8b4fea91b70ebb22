"""nccl.version: the build's NCCL against the GPUs' generation and against the driver.

Which GPUs an NCCL release carries code for is its build's NVCC_GENCODE (NVIDIA/nccl
makefiles/common.mk at each release tag): Hopper's sm_90 from v2.15.1-1 on when NCCL is built with
CUDA ≥ 11.8; Blackwell's sm_100 and sm_120 from v2.25.1-1 on with CUDA ≥ 12.8 (the release notes
of NCCL 2.25.1 announce Blackwell support: docs.nvidia.com/deeplearning/nccl/release-notes/
rel_2-25-1.html); CUDA 13 builds (v2.27.3-1 on) leave out everything before sm_75. A GPU newer than
the build's newest code runs NCCL's kernels only through PTX JIT at first use (slow, and only
where the driver can compile that PTX); one older than its oldest runs nothing.

NCCL links the CUDA runtime statically, so the driver must run the CUDA it was built with
("NCCL version 2.18.1+cuda12.1"; a -cu12 wheel is at least CUDA 12's minor-version floor): the
same floor as torch's own (resolve/rules.py driver_floor, CUDA release notes Tables 2 and 3).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final, Optional

from envkit.checks._common import fix_lines, headline, join_lines, pip_command
from envkit.report import CheckResult, Status
from envkit.versions import ComputeCapability, Version

if TYPE_CHECKING:
    from envkit.facts import Facts

__all__ = ["check_nccl_version"]

ID: Final = "nccl.version"
# (GPU generation, its compute capabilities' majors, the first NCCL with its SASS, the lowest CUDA of
# the NCCL build that emits it): makefiles/common.mk at the tags named above.
_FIRST_SASS: Final = (
    ("Hopper", (9,), Version("2.15.1"), Version("11.8")),
    ("Blackwell", (10, 12), Version("2.25.1"), Version("12.8")),
)
_CUDA13_LOWEST: Final = ComputeCapability(7, 5)


def _nccl(facts: Facts) -> tuple[Optional[Version], Optional[Version], str]:
    """(NCCL's version, the CUDA it was built with — major only from a -cuNN wheel —, whence)."""
    said = facts.errors
    torch = facts.torch
    if said.nccl_version is not None:
        return said.nccl_version, said.nccl_cuda, "the error text"
    if torch.deep is not None and torch.deep.nccl is not None:
        wheel = torch.wheel_lib("nccl")
        major = wheel.cuda_major if wheel is not None else None
        return torch.deep.nccl, Version(f"{major}.0") if major else torch.cuda, "torch"
    wheel = torch.wheel_lib("nccl")
    if wheel is not None and wheel.version is not None:
        major = wheel.cuda_major
        return wheel.version, Version(f"{major}.0") if major else torch.cuda, wheel.name
    conda = next((p for p in torch.conda_packages if p.name == "nccl"), None)
    if conda is not None and conda.version is not None:
        cuda = re.search(r"cuda(\d+)\.(\d+)", conda.build)
        return (
            conda.version,
            Version(f"{cuda.group(1)}.{cuda.group(2)}") if cuda else torch.cuda,
            "conda nccl",
        )
    return None, None, ""


def _base(version: Version) -> Version:
    return Version(".".join(str(p) for p in version.release[:3]))


def check_nccl_version(facts: Facts) -> CheckResult:
    nccl, cuda, whence = _nccl(facts)
    if nccl is None:
        return CheckResult(
            ID, Status.SKIP, "the build's NCCL version is not known (torch's nvidia-nccl wheel or --deep)"
        )
    from envkit.knowledge import load_knowledge
    from envkit.resolve import rules

    k = load_knowledge()
    label = f"NCCL {nccl}" + (
        f" (CUDA {cuda})" if cuda and cuda.minor else f" (CUDA {cuda.major})" if cuda else ""
    )
    warns: list[str] = []
    fails: list[str] = []
    fixes: list[str] = []
    for gpu in facts.visible_gpus:
        cc = gpu.compute_capability
        if cc is None and gpu.name:
            known = k.gpu_named(gpu.name)
            cc = known.cc if known else None
        if cc is None:
            continue
        name = f"GPU {gpu.index} ({gpu.name or 'unknown'}, {cc.sm})"
        if cuda is not None and cuda.major >= 13 and cc < _CUDA13_LOWEST:
            fails.append(f"{name}: a CUDA {cuda.major} build of NCCL has no code below sm_75")
            continue
        for generation, majors, first, lowest_cuda in _FIRST_SASS:
            if cc.major not in majors:
                continue
            if _base(nccl) < first:
                warns.append(
                    f"{name}: {label} has no {generation} code (NCCL's first is {first}); its kernels "
                    "are JIT-compiled from older PTX at first use"
                )
            elif cuda is not None and cuda.minor and cuda < lowest_cuda:
                warns.append(
                    f"{name}: {label} was built with CUDA < {lowest_cuda}, without {generation} code"
                )
    if warns or fails:
        wheel = facts.torch.wheel_lib("nccl")
        if wheel is not None:
            fixes.append(
                f"{pip_command(facts)} install -U {wheel.name}  (or the torch build whose NCCL knows these "
                "GPUs: envkit resolve)"
            )
        else:
            fixes.append("install a torch build whose NCCL knows these GPUs: envkit resolve")
    driver = facts.driver.version
    if driver is not None and cuda is not None:
        floor = rules.driver_floor(k, Version(f"{cuda.major}.{cuda.minor}"), driver)
        if floor.status is rules.FloorStatus.TOO_OLD:
            fails.append(f"{label} needs driver ≥ {floor.floor}; this is {driver}")
            fixes.append(f"upgrade the driver to ≥ {floor.floor}")
    if fails or warns:
        return CheckResult(
            ID,
            Status.FAIL if fails else Status.WARN,
            headline(fails + warns),
            detail=join_lines(*fails, *warns, f"NCCL's version from {whence}"),
            fix=fix_lines(fixes),
        )
    if not facts.visible_gpus:
        return CheckResult(ID, Status.SKIP, f"{label}: no GPU to judge it against")
    return CheckResult(ID, Status.PASS, f"{label} has code for every GPU here", detail=f"from {whence}")
