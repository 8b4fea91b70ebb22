"""Extensions in a plan (``--with flash-attn --with 'vllm>=0.6'``, a template's ``extensions``): the
resolver's ``extension`` rule, and the wheel of each one the plan installs.

A torch candidate (a release and a variant) fits the rule when every extension asked for has a
release in the asked range with a prebuilt wheel for it on the target (its Python, platform, torch's
C++ ABI) whose kernels cover the target's GPUs (envkit.resolve.ext_wheels). Source builds count only
with ``--allow-build``, and only where no candidate has wheels for all (envkit.resolve.resolve tries
wheels first); a planned build says what it needs (nvcc, TORCH_CUDA_ARCH_LIST, a compiler, the time
it takes, as the project states them).
"""

from __future__ import annotations

import difflib
import functools
from typing import TYPE_CHECKING, Any, Final, Optional

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from envkit.errors import InputError
from envkit.knowledge import variant_cuda
from envkit.knowledge.extensions import Extension, ExtRelease, load_extensions, torch_cxx11_abi
from envkit.resolve.ext_pick import BuildPlan, ExtensionPick, ExtensionRequest
from envkit.resolve.ext_wheels import TorchBuild, match_release, why_not
from envkit.versions import Version

if TYPE_CHECKING:
    from collections.abc import Sequence

    from packaging.specifiers import SpecifierSet

    from envkit.errors import WayOut
    from envkit.knowledge import Release
    from envkit.resolve.plan import Plan, Request
    from envkit.resolve.target import GpuTarget, Target

__all__ = [
    "candidate_failures",
    "parse_extensions",
    "pick_all",
]

RULE: Final = "extension"


def parse_extensions(texts: Sequence[str], *, option: str = "--with") -> tuple[ExtensionRequest, ...]:
    """``--with`` values as requests: a known name (nearest names otherwise) and a range that holds
    a release (the releases that exist otherwise); InputError (exit 2) for either."""
    known = load_extensions()
    found: dict[str, ExtensionRequest] = {}
    for text in texts:
        try:
            req = Requirement(text.strip())
        except InvalidRequirement:
            raise InputError(
                f"{option} {text!r}: not a package name with an optional version range"
            ) from None
        name = canonicalize_name(req.name)
        if name in ("torch", "torchvision", "torchaudio"):
            raise InputError(
                f"{option} {text!r}: {name} is the build envkit resolves, not an extension",
                hint="give its range with --torch (torchvision and torchaudio follow torch)",
            )
        # A URL, a marker or extras would be dropped without a word: the plan names its own wheel.
        dropped = next(
            (
                w
                for w, given in (
                    ("a URL is", req.url),
                    ("an environment marker is", req.marker),
                    ("extras are", req.extras),
                )
                if given
            ),
            "",
        )
        if dropped:
            raise InputError(
                f"{option} {text!r}: {dropped} not taken here; give a name and a version range",
                hint=f"--with '{req.name}{req.specifier}' (envkit picks the wheel that fits the torch build)",
            )
        ext = known.get(name)
        if ext is None:
            near = difflib.get_close_matches(name, list(known), n=3, cutoff=0.5)
            hint = f"did you mean {' or '.join(near)}?" if near else ""
            raise InputError(
                f"{option} {text!r}: envkit knows no extension {req.name!r} "
                f"(it knows {', '.join(sorted(known))})",
                hint=hint,
            )
        if not any(req.specifier.contains(r.version, prereleases=True) for r in ext.releases):
            versions = [str(r.version) for r in ext.releases]
            shown = ", ".join(versions[:12]) + (f", … {versions[-1]}" if len(versions) > 12 else "")
            raise InputError(
                f"{option} {text!r}: no {ext.name} release is {req.specifier}; the releases envkit "
                f"knows: {shown}"
            )
        if name in found:
            raise InputError(f"{option} {name} is given twice; give it once, with one range")
        found[name] = ExtensionRequest(name, req.specifier, text.strip())
    return tuple(found.values())


def _gpu_failure(ext: Extension, gpus: tuple[GpuTarget, ...]) -> Optional[str]:
    old = [g for g in gpus if ext.min_cc is not None and g.cc < ext.min_cc]
    if not old:
        return None
    names = ", ".join(g.label for g in old)
    return f"{ext.name} supports compute capability {ext.min_cc} and newer; {names} is older"


def _in_range(ext: Extension, spec: SpecifierSet) -> tuple[ExtRelease, ...]:
    return tuple(r for r in ext.releases if spec.contains(r.version, prereleases=True))


def _arch_list(gpus: tuple[GpuTarget, ...], *, packed: bool = False) -> str:
    ccs = sorted({g.cc for g in gpus})
    return ";".join(f"{c.major}{c.minor}" if packed else str(c) for c in ccs)


def pick_one(
    request: ExtensionRequest, build: TorchBuild, gpus: tuple[GpuTarget, ...], allow_build: bool = False
) -> tuple[Optional[ExtensionPick], str]:
    """(the pick, "") or (None, why none) for one torch build: what ``resolve --with`` takes for it
    (doctor's fix for an installed torch uses it too)."""
    return _pick(request, build, gpus, allow_build)


@functools.lru_cache(maxsize=4096)
def _pick(
    request: ExtensionRequest, build: TorchBuild, gpus: tuple[GpuTarget, ...], allow_build: bool
) -> tuple[Optional[ExtensionPick], str]:
    """(the pick, "") or (None, why none): the newest release in range with a wheel for ``build``
    whose kernels cover ``gpus``; with ``allow_build``, else a source build of the newest release
    whose Requires-Dist admits the torch."""
    ext = load_extensions()[request.name]
    cuda = variant_cuda(build.variant) is not None
    if cuda:
        gpu_fail = _gpu_failure(ext, gpus)
        if gpu_fail is not None:
            return None, gpu_fail
    releases = _in_range(ext, request.spec)
    arch_reason = ""
    for release in releases:
        found = match_release(release, build)
        if found is None:
            continue
        code = found.wheels.gpu
        missing = [g for g in gpus if cuda and code.known and not code.covers(g.cc)]
        if missing:
            arch_reason = arch_reason or (
                f"{ext.name} {release.version}'s kernels are built for {' '.join(code.names())}: "
                f"none runs on {', '.join(g.label for g in missing)}"
            )
            continue
        return _wheel_pick(ext, found), ""
    buildable = ext.build is not None and ext.build.builds_for(build.variant)
    if allow_build and buildable:
        for release in releases:
            if release.requires_torch is None or release.requires_torch.contains(
                build.torch, prereleases=True
            ):
                return _build_pick(ext, release, build, gpus), ""
    if arch_reason:
        return None, arch_reason
    # The release that takes this torch, where one does, says the most (another CUDA, no Python).
    telling = next((r for r in releases if _admits(r, build.torch)), releases[0])
    reason = why_not(ext, telling, build)
    if len(releases) > 1:
        reason += f", nor has an older {request}"
    if buildable and not allow_build:
        reason += "; --allow-build compiles it"
    elif ext.build is not None and not buildable:
        names = " or ".join({"cuda": "CUDA", "rocm": "ROCm", "cpu": "CPU"}[b] for b in ext.build.backends)
        reason += f"; its source build needs a {names} build of torch"
    return None, reason


def _admits(release: ExtRelease, torch: Version) -> bool:
    return release.requires_torch is None or release.requires_torch.contains(torch, prereleases=True)


def _wheel_pick(ext: Extension, found: Any) -> ExtensionPick:
    release, wheels = found.release, found.wheels
    if wheels.where in ("pypi", "url", "sdist"):
        fragment = f"#sha256={found.sha256}" if found.sha256 else ""
        requirement = f"{ext.name} @ {found.url}{fragment}"
    else:
        requirement = f"{ext.name}=={found.pin}"
    notes = list(ext.notes) if ext.kind == "jit" else []
    return ExtensionPick(
        name=ext.name,
        version=release.version,
        requirement=requirement,
        where=wheels.where,
        file=found.name,
        url=found.url,
        sha256=found.sha256,
        index=found.index,
        gpu_code=tuple(wheels.gpu.names()),
        kind=ext.kind,
        notes=tuple(notes),
        source=wheels.source,
    )


def _build_pick(
    ext: Extension, release: ExtRelease, build: TorchBuild, gpus: tuple[GpuTarget, ...]
) -> ExtensionPick:
    needs = ext.build
    assert needs is not None
    cuda = variant_cuda(build.variant)
    nvcc = "nvcc" + (f" {needs.nvcc}" if needs.nvcc else "")
    if cuda is not None and needs.nvcc_same_minor:
        nvcc += f" of CUDA {cuda} exactly (torch's; its setup.py refuses another)"
    elif cuda is not None and needs.nvcc_major_of_torch:
        nvcc += (
            f" of CUDA {cuda.major}.x (torch's CUDA {cuda}: torch.utils.cpp_extension refuses another major)"
        )
    arch_list = (
        _arch_list(gpus, packed=needs.arch_packed) if gpus else "the GPUs of the machine that builds it"
    )
    plan = BuildPlan(
        nvcc=nvcc,
        arch_env=needs.arch_env,
        arch_list=arch_list,
        compiler=needs.compiler,
        time=needs.time,
        requires=needs.requires,
        env=needs.env,
        config_settings=needs.config_settings,
        source=needs.source,
    )
    requirement = needs.requirement.format(version=release.version, tag=f"v{release.version}")
    return ExtensionPick(
        name=ext.name,
        version=release.version,
        requirement=requirement,
        where="build",
        no_build_isolation=needs.no_build_isolation,
        build=plan,
        kind=ext.kind,
        notes=(f"built from source: no {ext.name} wheel fits torch {build.torch}+{build.variant}",),
        source=release.source,
    )


def torch_build(release: Release, variant: str, target: Target, *, conda: bool = False) -> TorchBuild:
    return TorchBuild(
        release.torch,
        variant,
        target.python,
        target.platform,
        torch_cxx11_abi(release.torch, variant, conda=conda),
    )


def candidate_failures(
    release: Release,
    variant: str,
    target: Target,
    requests: tuple[ExtensionRequest, ...],
    *,
    allow_build: bool,
) -> list[tuple[str, str]]:
    """The ``extension`` rule's failures for one torch candidate ([] when every request has a pick)."""
    build = torch_build(release, variant, target)
    failures = []
    for request in requests:
        pick, reason = _pick(request, build, target.gpus, allow_build)
        if pick is None:
            failures.append((RULE, reason))
    return failures


def pick_all(
    release: Release,
    variant: str,
    target: Target,
    requests: tuple[ExtensionRequest, ...],
    *,
    allow_build: bool,
) -> tuple[ExtensionPick, ...]:
    """The picks of a candidate that fits the rule (candidate_failures is empty for it)."""
    build = torch_build(release, variant, target)
    picks = []
    for request in requests:
        pick, _reason = _pick(request, build, target.gpus, allow_build)
        if pick is not None:
            picks.append(pick)
    return tuple(picks)


def passed_over(
    release: Release, variant: str, target: Target, requests: tuple[ExtensionRequest, ...]
) -> list[tuple[str, str]]:
    """Newer releases of each extension than its pick, each with why it was passed over (for
    ``--explain``): at most three per extension."""
    build = torch_build(release, variant, target)
    out = []
    for request in requests:
        pick, _reason = _pick(request, build, target.gpus, False)
        ext = load_extensions()[request.name]
        newer = [r for r in _in_range(ext, request.spec) if pick is None or r.version > pick.version]
        for r in newer[:3]:
            out.append((f"{ext.name} {r.version}", why_not(ext, r, build)))
    return out


def with_extensions(plan: Plan, release: Release, variant: str, request: Request) -> Plan:
    """``plan`` with the picks of its candidate and, for --explain, the newer extension releases
    passed over; the warnings a pick carries (a source build, a JIT op) join the plan's."""
    import dataclasses

    from envkit.resolve.plan import Rejection

    if not request.extensions:
        return plan
    target = plan.target
    picks = pick_all(release, variant, target, request.extensions, allow_build=request.allow_build)
    over = tuple(Rejection(c, r) for c, r in passed_over(release, variant, target, request.extensions))
    warnings = [*plan.warnings, *(note for pick in picks for note in pick.plan_notes())]
    return dataclasses.replace(
        plan, extensions=picks, rejected=plan.rejected + over, warnings=tuple(warnings)
    )


def _buildable(target: Target, request: Request, variant: str) -> list[str]:
    """The extensions asked for that a source build could give: a build recipe that works against
    torch's ``variant``, and GPUs it supports."""
    found = []
    for r in request.extensions:
        ext = load_extensions()[r.name]
        build = ext.build
        if build is not None and build.builds_for(variant) and _gpu_failure(ext, target.gpus) is None:
            found.append(r.name)
    return found


def run_on_cpu(request: Request) -> bool:
    """Whether every extension asked for could be had with a CPU build of torch: a wheel set for
    CPU builds (or for any build), or a source build that works against one. flash-attn, vllm and
    xformers have neither: ``--cuda cpu`` is then no way out."""
    for r in request.extensions:
        ext = load_extensions()[r.name]
        wheels = any(not w.cuda or "cpu" in w.cuda for rel in _in_range(ext, r.spec) for w in rel.wheels)
        if not wheels and not (ext.build is not None and ext.build.builds_for("cpu") and request.allow_build):
            return False
    return True


def way_out(candidate: str, target: Target, request: Request) -> WayOut:
    from envkit.errors import WayOut

    buildable = _buildable(target, request, candidate.partition("+")[2])
    if buildable and not request.allow_build:
        text = f"--allow-build (builds {', '.join(buildable)} from source for torch {candidate})"
        return WayOut(RULE, text, candidate=candidate, value="--allow-build")
    names = ", ".join(str(r) for r in request.extensions)
    return WayOut(RULE, f"without --with {names}, torch {candidate} fits", candidate=candidate)


def _torch_span(builds: Sequence[tuple[Release, str]]) -> str:
    versions = sorted({r.torch for r, _v in builds})
    if not versions:
        return "none"
    return str(versions[0]) if len(versions) == 1 else f"{versions[0]} … {versions[-1]}"


def conflict(summary: str, machine: Sequence[tuple[Release, str]], target: Target, request: Any) -> str:
    """The NoBuildError summary, with one paragraph on why the extensions rule every torch build
    out that the target runs (``machine``: the candidates that fail on extensions alone)."""
    if not machine:
        return summary  # the machine alone rules every build out: the reasons say why
    accepted: dict[str, list[tuple[Release, str]]] = {}
    first: dict[str, str] = {}
    for request_one in request.extensions:
        fits = []
        for release, variant in machine:
            pick, reason = _pick(
                request_one, torch_build(release, variant, target), target.gpus, request.allow_build
            )
            if pick is not None:
                fits.append((release, variant))
            else:
                first.setdefault(request_one.name, reason)
        accepted[request_one.name] = fits
    newest = max(machine, key=lambda c: (c[0].torch, variant_cuda(c[1]) or Version("0")))
    parts = []
    alone = [r for r in request.extensions if not accepted[r.name]]
    for r in alone:
        parts.append(
            f"{r} has no wheel for any torch build this target runs (torch {_torch_span(machine)}); "
            f"for the newest, {newest[0].torch}+{newest[1]}: {first[r.name]}"
        )
    if not alone:
        spans = "; ".join(f"{r} fits torch {_torch_span(accepted[r.name])}" for r in request.extensions)
        parts.append(f"{spans}: no torch build has wheels for all of them")
    ways = []
    buildable = _buildable(target, request, newest[1])
    if buildable and not request.allow_build:
        ways.append(f"--allow-build to compile {', '.join(buildable)}")
    blamed = alone or list(request.extensions)
    unsupported = [r.name for r in blamed if _gpu_failure(load_extensions()[r.name], target.gpus)]
    ranged = [r.name for r in blamed if r.name not in unsupported]
    if ranged:
        ways.append("a wider range for " + " or ".join(ranged))
    leave = "leave " + " or ".join(r.name for r in blamed) + " out"
    ways.append(f"or {leave}" if ways else leave)
    return f"{summary}\n{'. '.join(parts)}. Try {', '.join(ways)}."
