"""The resolver: a pure function ``(Target, Request) -> Plan``, or NoBuildError listing every
rejected candidate with its reason and the nearest ways out.

A candidate is a torch release and a wheel variant (cu121, cpu, …). It fits when

- the platform has that wheel, the channel publishes the release, Python is in its range;
- the driver runs the variant: at least the minor-version-compatibility floor of its CUDA major
  (NVIDIA's Table 2; 525.60.13 for 12.x, 580.65.06 for 13.x);
- every GPU is covered by the build's architectures (SASS of the same major, or PTX);
- the driver branch still supports every GPU (R580 is the last for Maxwell/Pascal/Volta) and is new
  enough for it (Blackwell needs R570).

``auto`` takes the newest release that has a fitting variant. Among its fitting variants it takes
the newest whose own toolkit driver (Table 3) the driver meets, so PTX JIT and Triton work; when
none does, the oldest fitting one, whose gap is the smallest, with a warning. That keeps plans
monotonic: a newer driver never gets an older variant. Variants pytorch.org does not offer
(``unlisted``) come after the ones it does.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Optional, Union

from envkit.errors import NoBuildError, RejectedBuild, WayOut
from envkit.knowledge import CONDA_SUBDIRS, Knowledge, Release, variant_cuda
from envkit.resolve import jetson as jetson_route
from envkit.resolve import rules, vendors
from envkit.resolve.plan import (
    PLAN_SCHEMA,
    PYTORCH_INDEX,
    Channel,
    CondaSpec,
    CudaKind,
    CudaRequest,
    Plan,
    Rejection,
    Request,
    Route,
    parse_cuda_request,
    parse_torch_spec,
)
from envkit.resolve.target import is_jetson, jetson_gpus
from envkit.versions import ComputeCapability, NvVersion, Version

if TYPE_CHECKING:
    from envkit.resolve.target import Target

__all__ = [
    "PLAN_SCHEMA",
    "Channel",
    "CondaSpec",
    "CudaKind",
    "CudaRequest",
    "Plan",
    "Rejection",
    "Request",
    "Route",
    "parse_cuda_request",
    "parse_torch_spec",
    "resolve",
]

# Order in which a candidate's failures are reported: the request first, then the machine.
RULES: Final = (
    "torch",
    "cuda",
    "available",
    "channel",
    "platform",
    "jetson",
    "python",
    "gpu_driver",
    "driver",
    "arch",
    "extension",
)


class _NoRoute(enum.Enum):
    """Why a candidate has no route (it is still evaluated, for the ways out)."""

    NOT_ON_CONDA = enum.auto()  # --channel conda, and no conda route publishes the release
    NO_SUCH_BUILD = enum.auto()  # --cuda names a variant the release does not have


@dataclass(frozen=True)
class _Candidate:
    release: Release
    variant: str
    route: Union[Route, _NoRoute]
    failures: tuple[tuple[str, str], ...]  # (rule, reason)
    risk: Optional[str]  # a warning when it runs only through minor-version compatibility
    needed_driver: Optional[NvVersion] = None  # the floor it failed, when it failed on the driver
    # Why the driver runs its CUDA only through minor-version compatibility ("driver X is older than
    # Y, the driver CUDA Z shipped with"); None: it runs it in full.
    minor_version: Optional[str] = None

    @property
    def native(self) -> bool:
        return self.minor_version is None

    @property
    def name(self) -> str:
        return f"{self.release.torch}+{self.variant}"

    @property
    def fits(self) -> bool:
        return not self.failures

    @property
    def listed(self) -> bool:
        """In pytorch.org's install matrix; a conda route's builds are all its channel's own."""
        conda = self.route in (Route.PYTORCH_CHANNEL, Route.CONDA_FORGE)
        return conda or self.variant not in self.release.unlisted


def _conda_routes(k: Knowledge, release: Release, platform: str) -> list[tuple[Route, list[str]]]:
    """The conda route that publishes ``release`` and the variants it offers: the pytorch channel's
    pytorch-cuda versions where it has the release (up to 2.5.1, what the install guides of those
    releases teach), else conda-forge's builds for the platform's subdir (knowledge/conda.toml
    ``cuda``, from the feedstock's build matrix)."""
    routes = []
    if release.conda_pytorch_cuda and release.torch <= k.conda.pytorch_last_release:
        variants = [f"cu{v.major}{v.minor}" for v in release.conda_pytorch_cuda] + ["cpu"]
        routes.append((Route.PYTORCH_CHANNEL, variants))
    elif release.torch in k.conda.forge_releases:
        subdir = CONDA_SUBDIRS.get(platform, "linux-64")
        built = k.conda.forge_cuda(release.torch, subdir)
        routes.append((Route.CONDA_FORGE, [*(f"cu{v.major}{v.minor}" for v in built), "cpu"]))
    return routes


class _Evaluator:
    def __init__(self, k: Knowledge, target: Target, request: Request) -> None:
        self.k = k
        self.target = target
        self.request = request
        self.windows = target.platform.startswith("windows")
        # The GPUs against the driver: the same for every CUDA candidate.
        self.branch_needed: Optional[str] = None
        self.branch_floor: Optional[int] = None  # the branch the GPUs need at least (R520), if newer
        self.gpu_driver_failures = self._gpu_driver_failures()
        self.jetson = jetson_gpus(k, target)
        # A Jetson whose GPU is not named (an L4T release or a JetPack driver says what it is).
        jetpack = jetson_route.jetpack_of(k, target) if target.platform == "linux-aarch64" else None
        self.jetpack_cuda = jetpack.cuda if jetpack is not None else None

    def candidates(self) -> list[_Candidate]:
        found = []
        for release in self.k.releases:
            offered: dict[str, Union[Route, _NoRoute]] = {}
            for variant in release.variants.get(self.target.platform, ()):
                offered[variant] = Route.PIP
            if self.request.channel is Channel.CONDA:
                conda_offered: dict[str, Union[Route, _NoRoute]] = {}
                for conda_route, variants in _conda_routes(self.k, release, self.target.platform):
                    for variant in variants:
                        conda_offered.setdefault(variant, conda_route)
                # A release conda does not publish is still evaluated (for the ways out).
                offered = conda_offered or dict.fromkeys(offered, _NoRoute.NOT_ON_CONDA)
            if self.request.cuda.kind is CudaKind.EXACT and self.request.cuda.variant not in offered:
                offered[str(self.request.cuda.variant)] = _NoRoute.NO_SUCH_BUILD
            for variant, route in offered.items():
                if self._other_vendor(variant):
                    continue
                found.append(self._evaluate(release, variant, route))
        return found

    def _other_vendor(self, variant: str) -> bool:
        """A ROCm or XPU build for a target without the vendor's GPUs, or a CUDA build for one with
        AMD or Intel GPUs and no NVIDIA one, not asked for by --cuda: left out of the candidates (and
        of --explain and of the ways out)."""
        kind, cuda = vendors.vendor_of(variant), self.request.cuda.kind
        if kind == "cuda":
            t = self.target
            return cuda in (CudaKind.AUTO, CudaKind.ROCM) and not t.has_nvidia and (t.has_amd or t.has_intel)
        if kind == "rocm":
            return not (self.target.has_amd or cuda in (CudaKind.EXACT, CudaKind.ROCM))
        if kind == "xpu":
            return not (self.target.has_intel or cuda is CudaKind.EXACT)
        return False

    def _evaluate(self, release: Release, variant: str, route: Union[Route, _NoRoute]) -> _Candidate:
        failures: list[tuple[str, str]] = []
        t, req = self.target, self.request
        if req.torch is not None and not req.torch.contains(release.torch):
            failures.append(("torch", f"torch {release.torch} is outside --torch {req.torch}"))
        if not req.cuda.admits(variant, t):
            failures.append(("cuda", f"{variant} is not {self._wanted()}"))
        if req.available is not None and not self._available(release, variant):
            failures.append(("available", f"torch {release.torch}+{variant} is not in {req.available.where}"))
        if route is _NoRoute.NOT_ON_CONDA:
            forge = ", ".join(str(v) for v in self.k.conda.forge_releases) or "none"
            failures.append(
                (
                    "channel",
                    (
                        f"torch {release.torch} is not published for conda (pytorch channel "
                        f"≤ {self.k.conda.pytorch_last_release}; conda-forge releases envkit "
                        f"knows: {forge})"
                    ),
                )
            )
        if route is _NoRoute.NO_SUCH_BUILD:
            have = ", ".join(release.variants.get(t.platform, ())) or "none"
            where = "conda" if req.channel is Channel.CONDA else t.platform
            failures.append(
                (
                    "platform",
                    f"torch {release.torch} has no {variant} build for {where} (it has {have})",
                )
            )
        pythons = release.python_on(t.platform)
        if t.python is not None and t.python not in pythons:
            span = f"{pythons[0]}–{pythons[-1]}"
            failures.append(
                (
                    "python",
                    f"no wheels for Python {t.python} (torch {release.torch} supports {span})",
                )
            )
        risk = needed = minor_version = None
        cuda = variant_cuda(variant)
        if cuda is not None:
            failures += self.gpu_driver_failures
            failures += self._jetson_failures(cuda)
            # A conda-forge build is taken to have the pip wheel's list of its CUDA (the feedstock
            # sets its own in recipe/build.sh): where pip has no such wheel, envkit has no list.
            build = rules.build_arches(
                self.k, torch=release.torch, variant=variant, platform=t.platform, or_linux=True
            )
            coverage = [rules.arch_coverage(build, gpu.cc) for gpu in t.gpus] if build.exact else []
            driver_fail, risk, needed, minor_version = self._driver(cuda, coverage, variant)
            failures += driver_fail
            failures += self._arch(release, variant, build, coverage)
        elif vendors.vendor_of(variant) in ("rocm", "xpu"):
            failures += vendors.accel_failures(self.k, t, release, variant)
            risk = vendors.kmd_risk(self.k, t, variant)
        if req.extensions:
            # The extensions' rules (packaging's requirement parser, the wheel tables: ~5 ms of
            # imports) are loaded where they are needed, not with the resolver.
            from envkit.resolve import extensions as ext_rule

            failures += ext_rule.candidate_failures(
                release, variant, t, req.extensions, allow_build=req.allow_build
            )
        ordered = tuple(sorted(failures, key=lambda f: RULES.index(f[0])))
        return _Candidate(release, variant, route, ordered, risk, needed, minor_version)

    def _wanted(self) -> str:
        """What --cuda asks for, in words: "a CUDA build (this machine has an NVIDIA GPU)"."""
        t, req = self.target, self.request
        if req.cuda.kind is not CudaKind.AUTO:
            return f"--cuda {req.cuda}"
        who = "this machine" if t.described_by == "this machine" else "the target"
        if t.has_nvidia:
            return f"a CUDA build ({who} has an NVIDIA GPU)"
        if t.has_amd:
            return f"a ROCm build ({who} has an AMD GPU)"
        if t.has_intel:
            return f"the XPU build ({who} has an Intel GPU torch's XPU build supports)"
        return "the CPU build (no NVIDIA GPU or driver on the target)"

    def _available(self, release: Release, variant: str) -> bool:
        """Whether the local source (Request.available) holds this build for the target."""
        available = self.request.available
        if available is None:
            return True
        t = self.target
        return any(
            b.torch == release.torch
            and b.variant_on(release, t.platform) == variant
            and b.runs_on(t.platform, t.python)
            for b in available.builds
        )

    def _gpu_driver_failures(self) -> list[tuple[str, str]]:
        driver = self.target.checked_driver
        if driver is None:
            return []
        failures = []
        for gpu in self.target.gpus:
            v = rules.gpu_driver_support(self.k, gpu.cc, driver, name=gpu.name, windows=self.windows)
            if v.status is rules.BranchStatus.DROPPED:
                self.branch_needed = f"R{v.last_branch}"
                failures.append(
                    (
                        "gpu_driver",
                        (
                            f"driver {driver} (R{v.branch}) no longer supports {gpu.label}: "
                            f"R{v.last_branch} is the last branch for {v.what}"
                        ),
                    )
                )
            elif v.status is rules.BranchStatus.TOO_OLD:
                self.branch_needed = f"R{v.first_branch}"
                self.branch_floor = max(self.branch_floor or 0, v.first_branch or 0) or None
                failures.append(
                    (
                        "gpu_driver",
                        f"{gpu.label} needs driver R{v.first_branch} or newer ({v.what}); this is {driver}",
                    )
                )
        return failures

    def _jetson_failures(self, cuda: Version) -> list[tuple[str, str]]:
        """download.pytorch.org's linux-aarch64 CUDA wheels are SBSA (server Arm) builds. A Jetson
        runs them only from CUDA 13 on, whose Arm toolkit is one for SBSA and Jetson Thor (sm_110);
        Orin, Xavier and older Jetsons take NVIDIA's JetPack wheels
        (docs.nvidia.com/deeplearning/frameworks/install-pytorch-jetson-platform/)."""
        if not self.jetson and self.jetpack_cuda is None:
            return []
        if self.jetson:
            thor = all(g.cc >= ComputeCapability(11, 0) for g in self.jetson)
        else:  # JetPack 7 (CUDA 13) is Thor's
            thor = self.jetpack_cuda is not None and self.jetpack_cuda.major >= 13
        if thor and cuda.major >= 13:
            return []
        names = ", ".join(g.label for g in self.jetson) or "this machine (by its L4T release)"
        reason = (
            f"{names} is a Jetson: download.pytorch.org's aarch64 CUDA wheels are SBSA builds; "
            "its torch comes from NVIDIA's JetPack wheels"
        )
        return [("jetson", reason)]

    def _driver(
        self, cuda: Version, coverage: list[rules.ArchVerdict], variant: str
    ) -> tuple[list[tuple[str, str]], Optional[str], Optional[NvVersion], Optional[str]]:
        """(failures, the warning a plan of it carries, the driver it needs when it failed, why it
        runs only through minor-version compatibility) for one CUDA build: rules.build_on_driver's
        verdict, the one torch.driver_compat and spec.driver give."""
        driver = self.target.checked_driver
        if driver is None:
            return [], None, None, None
        v = rules.build_on_driver(self.k, cuda, driver, coverage, windows=self.windows)
        floor = v.floor
        if v.status is rules.BuildStatus.UNKNOWN:
            return [("driver", f"envkit does not know the driver CUDA {cuda} needs")], None, None, None
        if v.status is rules.BuildStatus.TOO_OLD:
            failure = ("driver", f"driver {driver} < {floor.floor} needed by {floor.family}")
            # The way out names the driver that runs it without a warning (rules.clean_driver).
            clean = rules.clean_driver(self.k, cuda, coverage, windows=self.windows)
            return [failure], None, clean or floor.floor, None
        own = floor.toolkit_driver
        gap = f"driver {driver} is older than {own}, the driver CUDA {cuda} shipped with"
        if v.status is rules.BuildStatus.PTX_JIT:
            gpus = ", ".join(g.label for g in self.target.gpus if g.cc in v.ptx_only)
            reason = (
                f"{gpus} has only PTX in the {variant} build, and driver {driver} (below {own}, the "
                f"driver CUDA {cuda} shipped with) cannot JIT-compile CUDA {cuda}'s PTX"
            )
            return [("driver", reason)], None, own, gap
        if v.status is rules.BuildStatus.UNCHECKED:
            risk = (
                f"{gap}: it runs through minor-version compatibility, which runs the wheel's SASS "
                "but cannot JIT-compile its newer PTX ('the provided PTX was compiled with an "
                "unsupported toolchain'); with no GPU given, whether a GPU needs the PTX is not "
                f"known (give --gpu; a driver ≥ {own} avoids it)"
            )
            return [], risk, None, gap
        return [], None, None, None if v.status is rules.BuildStatus.RUNS else gap

    def _arch(
        self, release: Release, variant: str, build: rules.BuildArches, coverage: list[rules.ArchVerdict]
    ) -> list[tuple[str, str]]:
        if not self.target.gpus:
            return []
        if not build.exact:
            return [("arch", f"envkit has no architecture list for torch {release.torch} {variant}")]
        return [
            (
                "arch",
                (
                    f"{gpu.label} is not in the {variant} build of torch {release.torch} "
                    f"(built for {' '.join(build.names())})"
                ),
            )
            for gpu, verdict in zip(self.target.gpus, coverage)
            if verdict.runs is not True
        ]


def _rank(candidates: list[_Candidate]) -> _Candidate:
    """The newest CUDA (or ROCm) the driver runs in full; else the oldest CUDA that runs through
    minor-version compatibility (the smallest gap: a newer driver never gets an older variant), or
    the newest ROCm not tested with the amdgpu driver, those without a warning first; listed
    variants before unlisted ones."""
    native = [c for c in candidates if c.native and c.risk is None]
    if native:
        return max(native, key=lambda c: (c.listed, vendors.variant_rank(c.variant)))

    def gap(c: _Candidate) -> tuple[int, ...]:
        rank = vendors.variant_rank(c.variant).release
        return tuple(-x for x in rank) if vendors.vendor_of(c.variant) == "rocm" else rank

    return min(candidates, key=lambda c: (c.risk is not None, not c.listed, gap(c)))


# The answer depends on the knowledge, the target and the request alone, and the same questions
# come again and again: doctor's checks ask twice per report, and a fleet of reports from another
# envkit version has its checks run again on every node, nodes that share driver, GPUs and
# platform. Bounded, oldest first out; the knowledge object is held so that its id is not reused.
# The reprs are in the key because equal is not the same text: Version("550.54") == Version("550.54.0") and
# SpecifierSet("==1.0") == SpecifierSet("==1.0.0"), while the plan and the error quote their text.
_ANSWERS: dict[tuple[int, Target, Request, str, str], tuple[Knowledge, Union[Plan, NoBuildError]]] = {}
_ANSWERS_MAX: Final = 512


def resolve(k: Knowledge, target: Target, request: Request) -> Plan:
    """Pick the torch build for ``target``; NoBuildError says why none fits and what would.

    With extensions and ``allow_build``, a build with wheels for every extension comes first: source
    builds are planned only where none has them."""
    if request.prerelease is not None:
        # --nightly / --test: the channel's builds, judged by the same rules as the releases.
        k = request.prerelease.knowledge(k)
    if request.extensions and request.allow_build:
        try:
            return resolve(k, target, dataclasses.replace(request, allow_build=False))
        except NoBuildError:
            pass
    return _remembered(k, target, request)


def _remembered(k: Knowledge, target: Target, request: Request) -> Plan:
    key = (id(k), target, request, repr(target), repr(request))
    try:
        found = _ANSWERS.get(key)
    except TypeError:  # a request whose local source cannot be hashed: not remembered
        return _resolve(k, target, request)
    if found is None or found[0] is not k:
        try:
            answer: Union[Plan, NoBuildError] = _resolve(k, target, request)
        except NoBuildError as error:
            answer = error.with_traceback(None)
        if len(_ANSWERS) >= _ANSWERS_MAX:
            # The oldest question goes (dicts keep insertion order): a long run (a fleet, the
            # property tests, driver.support's search for the driver that fixes it) keeps the
            # questions of its present, not only the first 512 it asked.
            del _ANSWERS[next(iter(_ANSWERS))]
        _ANSWERS[key] = (k, answer)
    else:
        answer = found[1]
    if isinstance(answer, NoBuildError):
        raise copy.copy(answer)  # a fresh raise each time: the stored one gathers no traceback
    return answer


def _resolve(k: Knowledge, target: Target, request: Request) -> Plan:
    jetpack = jetson_route.jetpack_plan(k, target, request)
    if jetpack is not None:  # a Jetson before Thor: NVIDIA's JetPack wheels, not SBSA ones
        return jetpack
    evaluator = _Evaluator(k, target, request)
    candidates = evaluator.candidates()
    admitted = [c for c in candidates if not any(rule in ("torch", "cuda") for rule, _ in c.failures)]
    by_release: dict[Version, list[_Candidate]] = {}
    for cand in admitted:
        by_release.setdefault(cand.release.torch, []).append(cand)
    # Variants pytorch.org does not offer are used only when asked for, or when nothing else fits.
    passes = [True] if request.cuda.kind is CudaKind.EXACT else [False, True]
    for allow_unlisted in passes:
        for version in sorted(by_release, reverse=True):
            fitting = [c for c in by_release[version] if c.fits and (c.listed or allow_unlisted)]
            if not fitting:
                continue
            chosen = _rank(fitting)
            rejected = _passed_by(candidates, chosen, fitting, request)
            plan = _plan(k, target, request, chosen, rejected)
            if not request.extensions:
                return plan
            from envkit.resolve import extensions as ext_rule

            return ext_rule.with_extensions(plan, chosen.release, chosen.variant, request)
    summary, reasons = _no_build_reasons(target, request, admitted, candidates)
    if not candidates:
        reasons += _no_vendor_build(k, target, request)
    if request.extensions:
        from envkit.resolve import extensions as ext_rule

        machine = [(c.release, c.variant) for c in admitted if {r for r, _ in c.failures} == {"extension"}]
        summary = ext_rule.conflict(summary, machine, target, request)
    ways = _ways_out(k, candidates, target, request, evaluator.branch_needed, evaluator.branch_floor)
    ways = _nightly_way(k, target, request, candidates) + jetson_route.with_jetson_way(ways, k, target)
    raise NoBuildError(summary, rejected=reasons, ways_out=ways)


def _passed_by(
    candidates: list[_Candidate], chosen: _Candidate, fitting: list[_Candidate], request: Request
) -> list[Rejection]:
    """Every build newer than the chosen one, with why it was passed over (``--explain``): the newer
    releases' builds that fail a rule (the request's included) and the chosen release's that fail the
    machine, the newer releases' builds that fit but pytorch.org does not list (an RTX 5090 on R570 gets
    2.11.0+cu128 while 2.13.0+cu129 also runs: --cuda cu129 picks it), and the chosen release's
    newer variants that fit but were ranked below it."""
    version = chosen.release.torch
    rejected = []
    for c in candidates:
        if c is chosen or c.release.torch < version:
            continue
        first = c.failures[0][0] if c.failures else ""
        # The chosen release's builds the request rules out, and any release's builds for another
        # kind of GPU than auto wants (the CPU build beside CUDA ones), are no builds for this target.
        request_only = c.release.torch == version and first in ("torch", "cuda")
        other_kind = first == "cuda" and request.cuda.kind is CudaKind.AUTO
        if not c.fits:
            if not (request_only or other_kind):
                rejected.append(Rejection(c.name, c.failures[0][1]))
        elif c.release.torch > version and not c.listed:
            why = "pytorch.org's install matrix does not list it"
            if c.risk is not None or c.minor_version is not None:
                why = f"{why}, and {_passed_over(c).split('; the chosen', 1)[0]}"
            rejected.append(Rejection(c.name, f"{why} (--cuda {_cuda_flag(c.variant)} picks it)"))
        elif c in fitting and _newer_variant(c, chosen):
            rejected.append(Rejection(c.name, _passed_over(c)))
    return rejected


def _cuda_flag(variant: str) -> str:
    cuda = variant_cuda(variant)
    return f"{cuda}" if cuda is not None else variant


def _newer_variant(cand: _Candidate, chosen: _Candidate) -> bool:
    """A variant of the chosen release newer than the chosen one, of the same kind (CUDA, ROCm): it
    fits, but _rank passed it over (it runs only through minor-version compatibility, or untested
    with the amdgpu driver, or pytorch.org does not list it)."""
    same_kind = vendors.vendor_of(cand.variant) == vendors.vendor_of(chosen.variant)
    mine, theirs = vendors.variant_rank(chosen.variant), vendors.variant_rank(cand.variant)
    return cand is not chosen and same_kind and mine > Version("0") and theirs > mine


def _passed_over(cand: _Candidate) -> str:
    if cand.risk is not None and vendors.vendor_of(cand.variant) == "rocm":
        return cand.risk.split(": it may run", 1)[0] + ": untested with this driver"
    if cand.minor_version is not None:
        return (
            f"{cand.minor_version}: it would run only through minor-version compatibility; the chosen "
            "variant is the smallest gap"
        )
    return "fits, but pytorch.org's install matrix does not list it"


def _plan(
    k: Knowledge, target: Target, request: Request, chosen: _Candidate, rejected: list[Rejection]
) -> Plan:
    release = chosen.release
    warnings = [chosen.risk] if chosen.risk else []
    if not chosen.listed:
        warnings.append(
            f"{chosen.variant} wheels of torch {release.torch} are on the index but not in "
            "pytorch.org's install matrix"
        )
    if chosen.variant.startswith("cu") and target.driver is None:
        # --gpu without --driver: the GPUs are checked, the driver is not, and auto takes the newest CUDA.
        warnings.append(
            "planning a CUDA build without a driver to check: the machines that run it need a "
            f"driver for CUDA {variant_cuda(chosen.variant)}"
            + (" (give --driver to check it)" if target.gpus else "")
        )
    if is_jetson(target.driver):
        warnings.append(
            f"driver {target.driver} looks like a Jetson (L4T) release: the driver and its branch "
            "were not checked"
        )
    warnings += vendors.plan_warnings(k, target, chosen.variant, release.torch)
    missing = (
        k.vendors.xpu_missing_companions(release.torch, target.platform) if chosen.variant == "xpu" else ()
    )
    if missing:
        warnings.append(
            f"{' and '.join(missing)} have no {target.platform} XPU wheels for torch {release.torch} "
            "(PyTorch's get_start_xpu for that release): the plan installs torch alone; build them from "
            "source (pytorch/vision and pytorch/audio CONTRIBUTING.md)"
        )
    warnings += target.assumed
    notes: tuple[str, ...] = (request.available.describe(),) if request.available is not None else ()
    python = target.python
    # PyPI's macOS wheels are the only macOS builds (no local tag, no index folder).
    index_url = None if target.platform.startswith("macos") else f"{PYTORCH_INDEX}/{chosen.variant}"
    pre = request.prerelease
    if pre is not None:
        index_url = pre.index_url(chosen.variant)
        warnings[:0] = pre.warnings(release, chosen.variant)
        notes += tuple(n for n in pre.notes if f"+{chosen.variant} " in n or "+" not in n)
    conda = None
    if request.channel is Channel.CONDA:
        conda = _conda_spec(k, chosen, python, target.platform)
        if chosen.route is Route.CONDA_FORGE and variant_cuda(chosen.variant) is not None:
            # A CPU build (pytorch=V=cpu*) has no architecture list to take.
            warnings.append(
                f"conda-forge's {chosen.variant} build is taken to have the GPU architectures of the pip "
                f"{chosen.variant} wheel (the feedstock sets its own list in recipe/build.sh)"
            )
    return Plan(
        torch=release.torch,
        torchvision=release.torchvision,
        torchaudio=release.torchaudio,
        triton=release.triton,
        variant=chosen.variant,
        cuda=variant_cuda(chosen.variant),
        python=python,
        channel=request.channel,
        platform=target.platform,
        index_url=index_url,
        conda=conda,
        warnings=tuple(warnings),
        rejected=tuple(rejected),
        target=target,
        notes=notes,
        prerelease=pre.channel.value if pre is not None else None,
        companions=tuple(c for c in ("torchvision", "torchaudio") if c not in missing),
    )


def _conda_spec(k: Knowledge, chosen: _Candidate, python: Optional[Version], platform: str) -> CondaSpec:
    release = chosen.release
    deps = [f"python={python}"] if python else []
    cuda = variant_cuda(chosen.variant)
    if chosen.route is Route.PYTORCH_CHANNEL:
        deps += [
            f"pytorch={release.torch}",
            f"torchvision={release.torchvision}",
            f"torchaudio={release.torchaudio}",
        ]
        deps.append(f"pytorch-cuda={cuda}" if cuda else k.conda.cpu_package)
        channels = (*k.conda.pytorch_channels, "defaults")
        return CondaSpec(channels, tuple(deps), Route.PYTORCH_CHANNEL, _conda_why(k, chosen, platform))
    deps += rules.conda_forge_dependencies(k, release.torch, cuda)
    deps += ["torchvision", "torchaudio"]
    return CondaSpec(
        (k.conda.forge_channel,), tuple(deps), Route.CONDA_FORGE, _conda_why(k, chosen, platform)
    )


def _conda_why(k: Knowledge, chosen: _Candidate, platform: str) -> str:
    """Which conda channel the build comes from, and why that one (``resolve --channel conda``)."""
    torch, cuda = chosen.release.torch, variant_cuda(chosen.variant)
    last = k.conda.pytorch_last_release
    ended = f"the pytorch channel ends at torch {last} (pytorch/pytorch#138506)"
    if chosen.route is Route.PYTORCH_CHANNEL:
        forge = k.conda.forge_cuda(torch, CONDA_SUBDIRS.get(platform, "linux-64"))
        other = (
            "conda-forge has no CUDA " + str(cuda) + f" build of it ({', '.join(map(str, forge)) or 'none'})"
            if cuda is not None and cuda not in forge
            else "conda-forge's build of it would do too"
        )
        what = (
            f"pytorch-cuda={cuda} selects the CUDA build"
            if cuda
            else f"{k.conda.cpu_package} selects the CPU build"
        )
        return f"the pytorch channel (with nvidia and defaults): {what}; {ended}, and {other}"
    if cuda is None:
        return f"conda-forge: pytorch={torch}=cpu* is its CPU build" + (f"; {ended}" if torch > last else "")
    first = ended if torch > last else f"the pytorch channel has no {chosen.variant} build of it"
    xy = f"{cuda.major}.{cuda.minor}"
    return (
        f"conda-forge: {first}; the feedstock builds torch {torch} for CUDA {xy} (build string "
        f"cuda{cuda.major}{cuda.minor}_*, conda-forge/pytorch-cpu-feedstock:recipe/meta.yaml), chosen "
        f"with cuda-version={xy}, whose __cuda >={cuda.major} the driver must meet"
    )


def _no_build_reasons(
    target: Target, request: Request, admitted: list[_Candidate], everything: list[_Candidate]
) -> tuple[str, tuple[RejectedBuild, ...]]:
    """One line for the request, then the reasons: what the machine rules out first (one record per
    distinct reason), then the releases that lack the requested build, folded into one record each."""
    pool = admitted or everything
    summary = (
        f"no torch build fits {target.describe()} for --cuda {request.cuda}"
        + (f" --torch {request.torch}" if request.torch else "")
        + f" ({request.channel})"
        + (f"; {request.available.describe()}" if request.available is not None else "")
    )
    missing = [c for c in pool if c.failures[0][0] in ("platform", "channel", "available")]
    # Releases without wheels for the target's Python are one line, ranked by the newest of them:
    # an error that listed torch 1.13 … 1.10 first, each on its own line, hid what mattered.
    python = [c for c in pool if c not in missing and c.failures[0][0] == "python"]
    ranked: list[tuple[Version, RejectedBuild]] = []
    seen: set[str] = set()
    for cand in pool:
        if cand in missing or cand in python:
            continue
        rule, reason = cand.failures[0]
        key = reason if rule in ("driver", "gpu_driver", "jetson", "extension") else cand.name
        if key not in seen:
            seen.add(key)
            ranked.append((cand.release.torch, RejectedBuild(cand.name, rule, reason)))
    if python:
        releases = {c.release.torch: c.release for c in python}
        versions = sorted(releases)
        top = max(releases[v].python_on(target.platform)[-1] for v in versions)
        span = str(versions[0]) if len(versions) == 1 else f"{versions[0]} … {versions[-1]}"
        what = f"no wheels for Python {target.python} (the newest Python they have: {top})"
        record = RejectedBuild(
            f"torch {span} ({len(versions)} releases)", "python", what, count=len(versions)
        )
        if len(versions) == 1:
            record = RejectedBuild(python[0].name, "python", python[0].failures[0][1])
        ranked.append((versions[-1], record))
    # The newest release's reasons first (stable: the machine's reasons stay in their order).
    reasons = [r for _, r in sorted(ranked, key=lambda item: item[0], reverse=True)]
    for rule in ("platform", "channel", "available"):
        versions = sorted({c.release.torch for c in missing if c.failures[0][0] == rule})
        if versions:
            what = {
                "platform": f"no {request.cuda} build for {target.platform}",
                "channel": "not on conda",
                "available": f"not in {request.available.where}" if request.available else "",
            }[rule]
            span = str(versions[0]) if len(versions) == 1 else f"{versions[0]} … {versions[-1]}"
            reasons.append(
                RejectedBuild(f"torch {span} ({len(versions)} releases)", rule, what, count=len(versions))
            )
    return summary, tuple(reasons)


def _no_vendor_build(k: Knowledge, target: Target, request: Request) -> tuple[RejectedBuild, ...]:
    """Why nothing was even considered for AMD or Intel GPUs: the channel (or the releases) has no
    build of their kind on the platform, and other vendors' builds are left out for them."""
    kind = "rocm" if target.has_amd else "xpu" if target.has_intel else None
    if kind is None:
        return ()
    builds = sorted({v for r in k.releases for v in r.variants.get(target.platform, ())})
    where = (
        f"the {request.prerelease.channel} channel has"
        if request.prerelease is not None
        else "the releases have"
    )
    what = {"rocm": "ROCm", "xpu": "XPU"}[kind]
    reason = f"{where} no {what} build for {target.platform} (its builds: {', '.join(builds) or 'none'})"
    return (RejectedBuild(f"torch+{kind}", "platform", reason),)


def _nightly_way(
    k: Knowledge, target: Target, request: Request, candidates: list[_Candidate]
) -> tuple[WayOut, ...]:
    """Where no release has code for the target's AMD GPUs but the nightly channel's list does
    (main's PYTORCH_ROCM_ARCH), the way out is a nightly, said as one."""
    variant = vendors.nightly_gfx(k, target)
    if variant is None or not any(rule == "arch" for c in candidates for rule, _ in c.failures):
        return ()
    gfx = " ".join(sorted({g.arch or "" for g in target.amd_gpus}))
    flags = " ".join(f"--gpu {g.arch}" for g in target.amd_gpus[:1])
    text = (
        f"no release's ROCm wheels carry {gfx}, the nightly channel's do ({variant}, main's "
        f"PYTORCH_ROCM_ARCH): envkit resolve --nightly {flags} (a nightly is not a release)"
    )
    return (WayOut("nightly", text, value=variant),)


def _ways_out(
    k: Knowledge,
    candidates: list[_Candidate],
    target: Target,
    request: Request,
    branch_needed: Optional[str],
    branch_floor: Optional[int] = None,
) -> tuple[WayOut, ...]:
    """The nearest ways out: for each single rule, the newest candidate that fails only on it
    (``branch_needed``: the driver branch the GPUs need, "R520", when one does not drive them)."""
    from envkit.resolve import extensions as ext_rule

    ways: list[WayOut] = []
    only: dict[str, _Candidate] = {}
    # Newest first, listed before unlisted, and for "--cuda" a CUDA build before the CPU one.
    order = sorted(
        candidates,
        key=lambda c: (variant_cuda(c.variant) is not None, c.listed, c.release.torch),
        reverse=True,
    )
    for cand in order:
        failed = {r for r, _ in cand.failures}
        if len(failed) == 1:
            only.setdefault(failed.pop(), cand)
    driver_only = [c for c in candidates if {r for r, _ in c.failures} == {"driver"} and c.needed_driver]
    if driver_only:
        # The smallest upgrade that gives a build; among equal floors, the newest listed torch.
        best = min(c.needed_driver for c in driver_only if c.needed_driver)
        cand = max(
            (c for c in driver_only if c.needed_driver == best), key=lambda c: (c.listed, c.release.torch)
        )
        text = f"upgrade the driver to ≥ {best} (for torch {cand.name})"
        ways.append(WayOut("driver", text, candidate=cand.name, driver=str(best)))
    if not driver_only and branch_floor is not None:
        # The GPUs need a newer branch (an RTX 5090 R570, an A100 on 418 R450): one upgrade answers
        # the GPUs and the build's CUDA alike; the smallest, then the newest listed torch.
        windows = target.platform.startswith("windows")
        branch = rules.oldest_driver_of(k, branch_floor, windows=windows) or NvVersion(f"{branch_floor}.0")
        needs = [
            (max(c.needed_driver or branch, branch), c)
            for c in candidates
            if "gpu_driver" in {r for r, _ in c.failures}
            and {r for r, _ in c.failures} <= {"driver", "gpu_driver"}
        ]
        if needs:
            best = min(n for n, _ in needs)
            cand = max((c for n, c in needs if n == best), key=lambda c: (c.listed, c.release.torch))
            text = f"upgrade the driver to ≥ {best} (for torch {cand.name})"
            if best == branch:
                text = (
                    f"upgrade the driver to ≥ {best}, the R{branch_floor} branch or newer "
                    f"(for torch {cand.name})"
                )
            ways.append(WayOut("driver", text, candidate=cand.name, driver=str(best)))
    if "jetson" in only or any(rule == "jetson" for c in candidates for rule, _ in c.failures):
        # A Jetson's SBSA candidates also fail on their architectures (Tegra SASS is its own):
        # the JetPack wheels are the way out whether or not "jetson" is a candidate's only failure.
        text = (
            "NVIDIA's PyTorch wheels for Jetson (JetPack): "
            "docs.nvidia.com/deeplearning/frameworks/install-pytorch-jetson-platform/"
        )
        ways.append(WayOut("jetson", text))
    if "gpu_driver" in only and not any(w.rule == "driver" for w in ways):
        cand = only["gpu_driver"]
        ways.append(WayOut("gpu_driver", cand.failures[0][1], candidate=cand.name, driver=branch_needed))
    if "cuda" in only:
        cand = only["cuda"]
        value = str(variant_cuda(cand.variant) or cand.variant)
        ways.append(
            WayOut("cuda", f"--cuda {value} (torch {cand.name} fits)", candidate=cand.name, value=value)
        )
    if "torch" in only:
        cand = only["torch"]
        ways.append(WayOut("torch", f"widen --torch: torch {cand.name} fits", candidate=cand.name))
    if "python" in only:
        cand = only["python"]
        value = str(cand.release.python_on(target.platform)[-1])
        text = f"use Python {value} (torch {cand.name} fits)"
        ways.append(WayOut("python", text, candidate=cand.name, value=value))
    if "channel" in only:
        cand = only["channel"]
        ways.append(
            WayOut("channel", f"--channel pip (torch {cand.name} fits)", candidate=cand.name, value="pip")
        )
    if "available" in only and request.available is not None:
        cand = only["available"]
        text = f"put torch {cand.name}'s wheel in {request.available.where} (it fits the target)"
        ways.append(WayOut("available", text, candidate=cand.name))
    if "extension" in only:
        ways.append(ext_rule.way_out(only["extension"].name, target, request))
    if "arch" in only and not ways:
        ways.append(WayOut("arch", "no wheel of the requested releases has code for these GPUs"))
    if (
        request.cuda.kind is not CudaKind.CPU
        and target.has_gpu
        and "cuda" not in only
        and ext_rule.run_on_cpu(request)
    ):
        ways.append(WayOut("cpu", "--cuda cpu for a CPU-only build", value="cpu"))
    return tuple(ways)
