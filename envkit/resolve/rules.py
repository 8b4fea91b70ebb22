"""The compatibility rules, one home each; every one returns a verdict record, and each caller (the
resolver, the checks, ``spec --check``, verify) writes its own message from it.

- ``driver_floor``: what a CUDA version needs of the driver: the minor-version-compatibility floor of
  its major (NVIDIA's Table 2) and the toolkit's own driver (Table 3). CUDA 10.x and older have no
  minor-version compatibility: each minor needs its own toolkit's driver. No row: UNKNOWN, never a
  pass.
- ``gpu_driver_support``: whether a driver's branch still drives a GPU (R470 was the last for Kepler,
  R580 for Maxwell/Pascal/Volta) and is new enough for it (Ada/Hopper need R520, Blackwell R570).
- ``build_arches`` + ``arch_coverage``: whether a build has code for a GPU: the exact list (torch's
  own report, or the knowledge base's row for an official wheel), else the bound of the toolkit the
  build was made with (CUDA 10.2 cannot emit sm_80; CUDA 13 has nothing below sm_75).
- ``build_on_driver``: whether a driver runs a build's device code on the GPUs it must run on. The
  one verdict the resolver ranks by and ``torch.driver_compat`` / ``spec.driver`` judge by: below
  the toolkit's own driver (minor-version compatibility) a build runs where it has SASS for every
  GPU, and cannot run where a GPU has only its PTX (no JIT of newer PTX).
- ``conda_forge_dependencies``: the conda-forge lines that select a torch build.

Pure functions over the knowledge base; nothing here knows the machine it runs on.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Final, Optional

from envkit.knowledge import sass_runs, variant_cuda
from envkit.versions import ComputeCapability, NvVersion, Version, parse_compute_capability

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.knowledge import DriverArchRule, Knowledge

__all__ = [
    "ArchOrigin",
    "ArchStatus",
    "ArchVerdict",
    "BranchStatus",
    "BranchVerdict",
    "BuildArches",
    "BuildStatus",
    "BuildVerdict",
    "FloorReason",
    "FloorStatus",
    "FloorVerdict",
    "arch_coverage",
    "build_arches",
    "build_on_driver",
    "clean_driver",
    "conda_forge_dependencies",
    "driver_branch",
    "driver_floor",
    "gpu_driver_support",
    "oldest_driver_of",
]


# -- 1. the driver floor of a CUDA version ---------------------------------------------------------


class FloorStatus(Enum):
    RUNS = "runs"  # at or above the toolkit's own driver (or the floor, where Table 3 was not read)
    MINOR_VERSION = "minor_version"  # at or above the floor, below the toolkit's driver: no PTX JIT
    TOO_OLD = "too_old"  # below the floor: CUDA does not initialise
    NO_DRIVER = "no_driver"  # no driver given: only the requirement is known
    UNKNOWN = "unknown"  # the knowledge base has no floor for this CUDA


class FloorReason(Enum):
    """Where the floor comes from, or why there is none."""

    FAMILY_FLOOR = "family_floor"  # the major's minor-version-compatibility floor (Table 2)
    TOOLKIT_DRIVER = "toolkit_driver"  # no minor-version compatibility (or a lower GA driver): Table 3
    NO_FAMILY = "no_family"  # cuda.toml has no [[family]] row for the major
    NO_TOOLKIT = "no_toolkit"  # a family without minor-version compatibility and no [[toolkit]] row


@dataclass(frozen=True)
class FloorVerdict:
    """A driver against what CUDA ``cuda`` needs (``driver_floor``)."""

    cuda: Version
    driver: Optional[NvVersion]
    status: FloorStatus
    reason: FloorReason
    floor: Optional[NvVersion]  # the oldest driver that runs it at all
    toolkit_driver: Optional[NvVersion]  # the driver the toolkit shipped with (None: not read)
    minor_version_compatibility: Optional[bool]  # None: no family row
    source: str = ""

    @property
    def runs(self) -> bool:
        return self.status in (FloorStatus.RUNS, FloorStatus.MINOR_VERSION)

    @property
    def family(self) -> str:
        """ "CUDA 12.x" where minor-version compatibility holds, else "CUDA 10.2"."""
        if self.minor_version_compatibility:
            return f"CUDA {self.cuda.major}.x"
        return f"CUDA {self.cuda}"


@functools.lru_cache(maxsize=256)  # each candidate build of every plan asks: a handful of CUDAs
def _minor(cuda: Version) -> Version:
    return Version(f"{cuda.major}.{cuda.minor}")


def driver_floor(
    k: Knowledge, cuda: Version, driver: Optional[NvVersion] = None, *, windows: bool = False
) -> FloorVerdict:
    """What ``cuda`` needs of the driver and, given one, whether ``driver`` meets it."""
    cuda = _minor(cuda)
    family = k.family(cuda)
    need = k.driver_floor(cuda, windows=windows)
    if need is None:
        reason = FloorReason.NO_FAMILY if family is None else FloorReason.NO_TOOLKIT
        mvc = None if family is None else family.minor_version_compatibility
        return FloorVerdict(cuda, driver, FloorStatus.UNKNOWN, reason, None, None, mvc, "")
    by_family = need.minor_version_compatibility and (need.toolkit is None or need.minimum < need.toolkit)
    reason = FloorReason.FAMILY_FLOOR if by_family else FloorReason.TOOLKIT_DRIVER
    if driver is None:
        status = FloorStatus.NO_DRIVER
    elif driver < need.minimum:
        status = FloorStatus.TOO_OLD
    elif need.toolkit is not None and driver < need.toolkit:
        status = FloorStatus.MINOR_VERSION
    else:
        status = FloorStatus.RUNS
    return FloorVerdict(
        cuda,
        driver,
        status,
        reason,
        need.minimum,
        need.toolkit,
        need.minor_version_compatibility,
        need.source,
    )


# -- 2. the driver branch against a GPU --------------------------------------------------------------

# From R450 on NVIDIA numbers its driver branches in steps of five (R450, R455, … R570, R575, R580,
# R590), and a branch's Windows drivers carry numbers up to four above it: "Release 535 family …
# 535.183.06 (Linux) / 538.78 (Windows)", "Release 570 family … 570.133.20 (Linux) / 572.83 (Windows)"
# (docs.nvidia.com/datacenter/tesla/tesla-release-notes-535-183-06/ and …-570-133-20/); 581.57 is an
# R580 driver. Linux versions start with the branch itself.
_STEP_OF_FIVE_FROM: Final = 450


class BranchStatus(Enum):
    SUPPORTED = "supported"
    TOO_OLD = "too_old"  # below the first branch that drives the GPU
    DROPPED = "dropped"  # past the last branch that drives it
    UNKNOWN = "unknown"  # the knowledge base has no branch row that decides it


@dataclass(frozen=True)
class BranchVerdict:
    """A driver's branch against one GPU (``gpu_driver_support``)."""

    cc: ComputeCapability
    name: Optional[str]
    driver: NvVersion
    branch: int
    status: BranchStatus
    first_branch: Optional[int]  # the newest first branch among the rows that apply
    last_branch: Optional[int]  # the oldest last branch among them
    what: str  # the row that decides ("Kepler (sm_30-sm_37)"); "" when none does
    source: str = ""

    @property
    def supported(self) -> bool:
        return self.status is BranchStatus.SUPPORTED


def _known_branches(k: Knowledge) -> list[int]:
    branches = {tk.linux_driver.major for tk in (*k.toolkits.values(), *k.toolkit_updates)}
    for rule in k.driver_rules:
        branches.update(b for b in (rule.first_branch, rule.last_branch) if b is not None)
    return sorted(branches)


def driver_branch(k: Knowledge, driver: NvVersion, *, windows: bool = False) -> int:
    """The branch a driver belongs to: its major on Linux; on Windows the newest branch at or below
    its major (581.57 -> 580, 538.78 -> 535, 419.67 -> 418)."""
    major = driver.major
    if not windows:
        return major
    below = [b for b in _known_branches(k) if b <= major]
    if major >= _STEP_OF_FIVE_FROM:
        below.append(major - major % 5)
    return max(below, default=major)


def oldest_driver_of(k: Knowledge, branch: int, *, windows: bool = False) -> Optional[NvVersion]:
    """The oldest driver envkit knows (a toolkit's, NVIDIA's Table 3) of ``branch`` or a newer one:
    the driver a fix names where the GPUs need a branch ("R570 or newer")."""
    drivers = [
        (tk.windows_driver if windows else None) or tk.linux_driver
        for tk in (*k.toolkits.values(), *k.toolkit_updates)
    ]
    return min(
        (d for d in drivers if d is not None and driver_branch(k, d, windows=windows) >= branch), default=None
    )


def gpu_driver_support(
    k: Knowledge,
    cc: ComputeCapability,
    driver: NvVersion,
    *,
    name: Optional[str] = None,
    windows: bool = False,
) -> BranchVerdict:
    """Whether ``driver``'s branch drives the GPU ``cc`` (``name``: its model, for the rows about a
    product rather than an architecture)."""
    branch = driver_branch(k, driver, windows=windows)
    rules = [r for r in k.driver_rules if r.applies(cc, name)]
    firsts = [r for r in rules if r.first_branch is not None]
    lasts = [r for r in rules if r.last_branch is not None]
    first = max(firsts, key=lambda r: r.first_branch or 0, default=None)
    last = min(lasts, key=lambda r: r.last_branch or 0, default=None)
    first_branch = first.first_branch if first else None
    last_branch = last.last_branch if last else None

    def verdict(status: BranchStatus, rule: Optional[DriverArchRule] = None) -> BranchVerdict:
        what, source = (rule.what, rule.source) if rule is not None else ("", "")
        return BranchVerdict(cc, name, driver, branch, status, first_branch, last_branch, what, source)

    if last is not None and last_branch is not None and branch > last_branch:
        return verdict(BranchStatus.DROPPED, last)
    if first is not None and first_branch is not None and branch < first_branch:
        return verdict(BranchStatus.TOO_OLD, first)
    newest_row = max((r.max_cc for r in k.driver_rules), default=cc)
    oldest_first = min((r.first_branch for r in k.driver_rules if r.first_branch), default=0)
    if cc > newest_row or (first is None and branch < oldest_first):
        # A GPU newer than every row, or an older GPU on a driver older than any first branch
        # envkit knows: nothing here says whether that driver drives it.
        return verdict(BranchStatus.UNKNOWN)
    return verdict(BranchStatus.SUPPORTED, first or last)


# -- 3. the architectures of a build against a GPU ---------------------------------------------------


class ArchOrigin(Enum):
    REPORTED = "reported"  # torch's own list (torch.cuda.get_arch_list(), its warning)
    OFFICIAL = "official"  # the knowledge base's row for an official wheel
    TOOLKIT = "toolkit"  # unknown list, bounded by what the build's CUDA can emit
    NONE = "none"  # neither the list nor the build's CUDA toolkit is known


@dataclass(frozen=True)
class BuildArches:
    """What is known of a build's architectures (``build_arches``)."""

    origin: ArchOrigin
    sass: tuple[ComputeCapability, ...] = ()  # the exact list (REPORTED / OFFICIAL)
    ptx: tuple[ComputeCapability, ...] = ()
    cuda: Optional[Version] = None
    toolkit_sass: tuple[ComputeCapability, ...] = ()  # what nvcc of ``cuda`` can emit (the bound)
    source: str = ""

    @property
    def exact(self) -> bool:
        return self.origin in (ArchOrigin.REPORTED, ArchOrigin.OFFICIAL)

    def names(self) -> list[str]:
        """sm_XX / compute_XX of the exact list; the toolkit's range ("sm_50 … sm_90") otherwise."""
        if self.exact:
            return [c.sm for c in self.sass] + [f"compute_{p.major}{p.minor}" for p in self.ptx]
        if self.toolkit_sass:
            return [f"{min(self.toolkit_sass).sm} … {max(self.toolkit_sass).sm}"]
        return []


class ArchStatus(Enum):
    COVERED = "covered"  # SASS of the same major and a minor not above, or older PTX, in the list
    MISSING = "missing"  # the exact list has nothing for it
    BELOW_TOOLKIT = "below_toolkit"  # list unknown; older than anything the toolkit emits: never runs
    ABOVE_TOOLKIT = "above_toolkit"  # list unknown; no SASS of the toolkit runs on it: PTX JIT only
    WITHIN_TOOLKIT = "within_toolkit"  # list unknown; the toolkit can emit code for it: cannot tell
    UNKNOWN = "unknown"  # nothing known of the build


@dataclass(frozen=True)
class ArchVerdict:
    cc: ComputeCapability
    status: ArchStatus
    build: BuildArches
    via_ptx: bool = False  # COVERED only through PTX, JIT-compiled by the driver

    @property
    def runs(self) -> Optional[bool]:
        """True: it has code; False: it cannot have; None: not known."""
        if self.status is ArchStatus.COVERED:
            return True
        if self.status in (ArchStatus.MISSING, ArchStatus.BELOW_TOOLKIT, ArchStatus.ABOVE_TOOLKIT):
            return False
        return None


def build_arches(
    k: Knowledge,
    *,
    torch: Optional[Version] = None,
    variant: Optional[str] = None,
    platform: str = "linux-x86_64",
    cuda: Optional[Version] = None,
    reported: Sequence[str] = (),
    or_linux: bool = False,
) -> BuildArches:
    """The architectures of a build: torch's ``reported`` list, else the knowledge base's row when
    ``torch`` + ``variant`` is an official wheel (``or_linux``: the linux-x86_64 row where the
    platform has none), else the bound of its CUDA toolkit (``cuda``, or the variant's)."""
    if cuda is None and variant is not None:
        cuda = variant_cuda(variant)
    if reported:
        sass: list[ComputeCapability] = []
        ptx: list[ComputeCapability] = []
        for arch in reported:
            cc = parse_compute_capability(arch)
            if cc is not None:
                (ptx if arch.strip().startswith("compute_") else sass).append(cc)
        if sass or ptx:
            return BuildArches(
                ArchOrigin.REPORTED, tuple(sass), tuple(ptx), cuda, source="torch.cuda.get_arch_list()"
            )
    # A nightly or a local build (2.7.0.dev20250310, 2.1.0a0+git…) is no release of the table.
    release = k.release(torch) if torch is not None else None
    if release is not None and variant is not None:
        row = k.arch_for(release, variant, platform, or_linux=or_linux)
        if row is not None:
            return BuildArches(ArchOrigin.OFFICIAL, row.sass, row.ptx, cuda, source=row.source)
    toolkit = k.toolkit(cuda) if cuda is not None else None
    if toolkit is not None and toolkit.sass:
        return BuildArches(ArchOrigin.TOOLKIT, cuda=cuda, toolkit_sass=toolkit.sass, source=toolkit.source)
    return BuildArches(ArchOrigin.NONE, cuda=cuda)


def _sass_runs(sass: ComputeCapability, cc: ComputeCapability) -> bool:
    """SASS runs on GPUs of its major with a minor not below its own (CUDA C Programming Guide,
    "Binary Compatibility": sm_86 code runs on 8.9, not on 9.0), and never across desktop and Tegra
    GPUs (envkit.knowledge.sass_runs, torch's DEVICE_REQUIREMENT)."""
    return sass_runs(sass, cc)


def arch_coverage(build: BuildArches, cc: ComputeCapability) -> ArchVerdict:
    """Whether ``build`` has (or can have) code for a GPU of compute capability ``cc``."""
    if build.exact:
        if any(_sass_runs(s, cc) for s in build.sass):
            return ArchVerdict(cc, ArchStatus.COVERED, build)
        # PTX is JIT-compiled for any GPU not older than it ("PTX Compatibility").
        if any(p <= cc for p in build.ptx):
            return ArchVerdict(cc, ArchStatus.COVERED, build, via_ptx=True)
        return ArchVerdict(cc, ArchStatus.MISSING, build)
    if build.origin is ArchOrigin.TOOLKIT:
        if cc < min(build.toolkit_sass):
            return ArchVerdict(cc, ArchStatus.BELOW_TOOLKIT, build)
        if not any(_sass_runs(s, cc) for s in build.toolkit_sass):
            return ArchVerdict(cc, ArchStatus.ABOVE_TOOLKIT, build)
        return ArchVerdict(cc, ArchStatus.WITHIN_TOOLKIT, build)
    return ArchVerdict(cc, ArchStatus.UNKNOWN, build)


# -- 4. a build on a driver, with the GPUs it runs on -------------------------------------------------
#
# NVIDIA's CUDA Compatibility guide, "Minor Version Compatibility"
# (docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html): from CUDA 11 on, code
# built with any toolkit of a major runs on a driver at the major's floor (Table 2), "with limited
# feature-set"; its application considerations name what is limited: code shipped as PTX does not
# run (the driver's JIT compiler is older than the PTX: cudaErrorUnsupportedPtxVersion, "the provided
# PTX was compiled with an unsupported toolchain"), and API calls that need a newer driver return
# cudaErrorCallRequiresNewerDriver. torch's wheels ship SASS for their architecture list and PTX for
# the newest only (arch.toml), so a GPU with SASS in the wheel needs no JIT; torch.compile's Triton
# kernels are assembled to SASS by Triton's own bundled ptxas (triton-lang/triton#5385), not by the
# driver. So the line is drawn per GPU: SASS for every GPU runs (MINOR_VERSION, no warning); a GPU
# that only the PTX covers cannot run below the toolkit's driver (PTX_JIT, a failure); GPUs not known,
# or a build whose list is not known, leave it open (UNCHECKED, a warning that says why).


class BuildStatus(Enum):
    RUNS = "runs"  # at or above the toolkit's own driver: nothing is limited
    MINOR_VERSION = "minor_version"  # below it, at or above the floor; SASS for every GPU: no JIT needed
    PTX_JIT = "ptx_jit"  # below it, and a GPU has only the build's PTX, which this driver cannot JIT
    UNCHECKED = "unchecked"  # below it; the GPUs or the build's list are not known: JIT may be needed
    TOO_OLD = "too_old"  # below the floor: CUDA does not initialise
    NO_DRIVER = "no_driver"  # no driver given
    UNKNOWN = "unknown"  # the knowledge base has no floor for this CUDA


@dataclass(frozen=True)
class BuildVerdict:
    """A build's CUDA on a driver, judged with the build's coverage of the GPUs (``build_on_driver``)."""

    floor: FloorVerdict
    status: BuildStatus
    ptx_only: tuple[ComputeCapability, ...] = ()  # PTX_JIT: the GPUs only the build's PTX covers

    @property
    def clean(self) -> bool:
        """Nothing to warn about: it runs in full, or its limits touch nothing these GPUs need."""
        return self.status in (BuildStatus.RUNS, BuildStatus.MINOR_VERSION, BuildStatus.NO_DRIVER)

    @property
    def runs(self) -> bool:
        """CUDA initialises and the GPUs have code (UNCHECKED: as far as is known)."""
        return self.status in (BuildStatus.RUNS, BuildStatus.MINOR_VERSION, BuildStatus.UNCHECKED)

    @property
    def needed_driver(self) -> Optional[NvVersion]:
        """The oldest driver with which it would be clean: the floor when below it, else the
        toolkit's own driver (PTX JIT of the build's PTX)."""
        if self.status is BuildStatus.TOO_OLD:
            return self.floor.floor
        if self.status in (BuildStatus.PTX_JIT, BuildStatus.UNCHECKED):
            return self.floor.toolkit_driver
        return None


def build_on_driver(
    k: Knowledge,
    cuda: Version,
    driver: Optional[NvVersion],
    coverage: Sequence[ArchVerdict],
    *,
    windows: bool = False,
) -> BuildVerdict:
    """Whether ``driver`` runs a build of CUDA ``cuda`` on the GPUs ``coverage`` judges (one
    ``arch_coverage`` verdict per GPU; empty: the GPUs are not known)."""
    floor = driver_floor(k, cuda, driver, windows=windows)
    plain = {
        FloorStatus.RUNS: BuildStatus.RUNS,
        FloorStatus.TOO_OLD: BuildStatus.TOO_OLD,
        FloorStatus.NO_DRIVER: BuildStatus.NO_DRIVER,
        FloorStatus.UNKNOWN: BuildStatus.UNKNOWN,
    }
    if floor.status in plain:
        return BuildVerdict(floor, plain[floor.status])
    # A GPU the build has no code for at all is arch_coverage's finding, not the driver's.
    ptx_only = tuple(v.cc for v in coverage if v.status is ArchStatus.COVERED and v.via_ptx)
    if ptx_only:
        return BuildVerdict(floor, BuildStatus.PTX_JIT, ptx_only)
    if not coverage or any(v.runs is None for v in coverage):
        return BuildVerdict(floor, BuildStatus.UNCHECKED)
    return BuildVerdict(floor, BuildStatus.MINOR_VERSION)


def clean_driver(
    k: Knowledge, cuda: Version, coverage: Sequence[ArchVerdict], *, windows: bool = False
) -> Optional[NvVersion]:
    """The oldest driver with which a build of CUDA ``cuda`` is clean on these GPUs: the floor where
    minor-version compatibility runs it in full, else the toolkit's own driver. What a fix that
    upgrades the driver names, so that it leads to no further warning."""
    need = driver_floor(k, cuda, windows=windows)
    if need.floor is None:
        return need.toolkit_driver
    if build_on_driver(k, cuda, need.floor, coverage, windows=windows).clean:
        return need.floor
    return need.toolkit_driver or need.floor


# -- 5. conda-forge's lines for a build ---------------------------------------------------------------


def conda_forge_dependencies(k: Knowledge, torch: Version, cuda: Optional[Version]) -> tuple[str, ...]:
    """The lines that select torch ``torch`` from conda-forge: the CPU build by its build string
    (``cpu*``), a CUDA build by its own (``cuda{XY}*``: the feedstock's recipe/meta.yaml names each
    CUDA build cuda{XY}_{blas}_py{PY}_h…) and ``cuda-version=X.Y``, the pin conda-forge's CUDA
    packages align on (its ``__cuda >=X`` constraint is the driver check). The resolver's plan and
    ``envkit spec`` write these same lines."""
    if cuda is None:
        return (f"pytorch={torch}=cpu*",)
    return (
        f"pytorch={torch}=cuda{cuda.major}{cuda.minor}*",
        f"{k.conda.forge_cuda_selector}={cuda.major}.{cuda.minor}",
    )
