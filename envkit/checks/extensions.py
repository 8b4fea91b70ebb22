"""torch.extensions: the stack above torch (flash-attn, xformers, vllm, bitsandbytes, DeepSpeed,
torchao, PyG's compiled packages, …) judged against the installed torch, from what the environment
says of them (their versions, local labels and Requires-Dist; a pasted report's ``[pip3] …`` and
``conda list`` lines alike) and what the knowledge base knows of each release
(envkit/knowledge/extensions/*.toml): the torch it was built for, the torch builds (CUDA variant,
C++ ABI) its wheels exist for, and the GPUs its kernels cover. Each finding's fix is the exact wheel
for the installed torch (envkit.resolve.extensions, as ``resolve --with`` picks it), or the torch the
installed release was built for.

What a finding rests on: a local label (``torch_scatter 2.1.2+pt27cu118``: built for torch 2.7 and
CUDA 11.8), the release's own Requires-Dist (``vllm 0.19.1`` requires ``torch==2.10.0``), the table
of its wheels (flash-attn 2.8.3's wheels are for torch 2.4-2.8: beside torch 2.14 it was built from
source or belongs to another torch). The loader's own verdict (an ``undefined symbol``) is
verify.extensions' (it imports each) and torch.extension_load's (from an error text).
"""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING, Final, Optional

from envkit.checks._common import fix_lines, headline, join_lines, pip_command
from envkit.checks.ext_jetson import jetson_fix, replaced_jetpack_torch
from envkit.knowledge.extensions import load_extension, torch_cxx11_abi
from envkit.report import CheckResult, Status
from envkit.versions import ComputeCapability, Version

if TYPE_CHECKING:
    from envkit.facts import Distribution, Facts
    from envkit.knowledge.extensions import Extension, ExtRelease
    from envkit.resolve.ext_wheels import TorchBuild

__all__ = ["check_extensions", "extension_fixes"]

ID: Final = "torch.extensions"
# PyG's local version: +pt28cu126 -> torch 2.8, cu126 (its building.yml's "Set version" step).
_PYG_LABEL: Final = re.compile(r"^pt(\d)(\d+)(cpu|cu\d+)$")


def _torch_build(facts: Facts) -> Optional[TorchBuild]:
    # The wheel tables' rules (packaging.tags) only where an extension is installed.
    from envkit.resolve.ext_wheels import TorchBuild

    torch = facts.torch
    if torch.version is None:
        return None
    variant = torch.variant or "cpu"
    python = facts.python.version if facts.python is not None else None
    platform = (facts.python.platform if facts.python is not None else None) or "linux-x86_64"
    conda = any(p.name in ("pytorch", "libtorch") for p in torch.conda_packages)
    public = Version(torch.version.public)
    return TorchBuild(
        public,
        variant,
        Version(f"{python.major}.{python.minor}") if python is not None else None,
        platform,
        torch_cxx11_abi(public, variant, conda=conda),
    )


def _gpus(facts: Facts) -> list[tuple[str, ComputeCapability]]:
    return [
        (g.name or f"GPU {g.index}", g.compute_capability)
        for g in facts.visible_gpus
        if g.compute_capability is not None
    ]


def _built_for(
    dist: Distribution, release: Optional[ExtRelease], build: TorchBuild
) -> list[tuple[Status, str]]:
    """What the distribution's own metadata and the table say of the torch it was made for."""
    findings: list[tuple[Status, str]] = []
    label = f"{dist.name} {dist.version}"
    local = dist.version.local if dist.version is not None else None
    pyg = _PYG_LABEL.match(local or "")
    here = f"{build.torch}+{build.variant}"
    if pyg is not None:
        minor, variant = f"{pyg.group(1)}.{pyg.group(2)}", pyg.group(3)
        if minor != f"{build.torch.major}.{build.torch.minor}" or variant != build.variant:
            findings.append(
                (Status.FAIL, f"{label} was built for torch {minor} {variant} (its version), this is {here}")
            )
    elif local and local.startswith("cu") and build.variant.startswith("cu") and local != build.variant:
        findings.append(
            (Status.FAIL, f"{label} was built for CUDA {local} (its version), torch is {build.variant}")
        )
    pins = [s for s in dist.requires_torch if s.strip()]
    spec = release.requires_torch if release is not None else None
    if pins:
        from packaging.requirements import InvalidRequirement, Requirement

        with contextlib.suppress(InvalidRequirement):
            spec = Requirement(pins[0].split(";")[0]).specifier
    if spec is not None and str(spec) and not spec.contains(build.torch, prereleases=True):
        exact = any(s.operator == "==" for s in spec)
        findings.append(
            (
                Status.FAIL if exact else Status.WARN,
                f"{label} requires torch{spec} (its Requires-Dist), this is {here}",
            )
        )
    return findings


def _loader(dist: Distribution, build: TorchBuild, facts: Facts) -> tuple[list[tuple[Status, str]], bool]:
    """(findings from the loader's view of the distribution's .so files, whether they all load)."""
    binaries = [b for b in facts.torch.extension_binaries if b.package == dist.name]
    findings: list[tuple[Status, str]] = []
    label = f"{dist.name} {dist.version}"
    for binary in binaries:
        name = binary.file.rsplit("/", 1)[-1]
        if binary.undefined:
            symbol = binary.undefined[0]
            # std::string is "Ss" in the old C++ ABI's mangling, "…__cxx1112basic_string…" in the new.
            abi = "__cxx11" in symbol or re.search(r"Ss(?:[A-Z_0-9]|$)", symbol) is not None
            why = "the other C++ ABI than torch's" if abi else "another torch"
            findings.append(
                (
                    Status.FAIL,
                    f"{label} ({name}) was built for {why}: the loader finds no {symbol} in {here(build)}",
                )
            )
        wanted = build.variant[2:-1] if build.variant.startswith("cu") else None
        for soname in binary.not_found:
            major = re.match(r"libcudart\.so\.(\d+)", soname)
            if major is not None and wanted is not None and major.group(1) != wanted:
                findings.append(
                    (
                        Status.FAIL,
                        f"{label} ({name}) was built for CUDA {major.group(1)}: torch is {build.variant}",
                    )
                )
    return findings, bool(binaries) and not findings and not any(b.not_found for b in binaries)


def here(build: TorchBuild) -> str:
    return f"torch {build.torch}+{build.variant}"


def _judge(ext: Extension, dist: Distribution, build: TorchBuild, facts: Facts) -> tuple[Status, str]:
    from envkit.resolve.ext_wheels import describe_sets, match_release

    if dist.version is None:
        return Status.SKIP, f"{dist.name}: no version to judge"
    release = ext.release(Version(dist.version.public))
    findings = _built_for(dist, release, build)
    jetson = replaced_jetpack_torch(facts, dist, release, build)
    if jetson is not None:
        findings.append((Status.FAIL, jetson))
    loaded, loads = _loader(dist, build, facts)
    findings += loaded
    label = f"{dist.name} {dist.version}"
    gpus = _gpus(facts) if build.variant.startswith("cu") else []
    old = [n for n, cc in gpus if ext.min_cc is not None and cc < ext.min_cc]
    if old:
        findings.append(
            (
                Status.FAIL,
                f"{ext.name} supports compute capability {ext.min_cc} and newer; {', '.join(old)} is older",
            )
        )
    if release is None:
        if findings:
            return max(findings, key=lambda f: f[0] is Status.FAIL)
        return Status.SKIP, f"{label}: not in envkit's table of {ext.name} releases"
    found = match_release(release, build)
    if found is None and not findings and loads:
        findings.append(
            (Status.PASS, f"{label} was built here: the loader resolves every torch symbol it needs")
        )
    elif found is None and not findings:
        if ext.kind in ("compiled", "pinned", "ctypes") and release.wheels:
            what = describe_sets(release)
            findings.append(
                (
                    Status.WARN,
                    (
                        f"no prebuilt {label} wheel fits torch {build.torch}+{build.variant} (its "
                        f"wheels: {what}): it was built from source here, or belongs to another torch "
                        "(`envkit verify --checks extensions` imports it)"
                    ),
                )
            )
    elif found is not None:
        code = found.wheels.gpu
        missing = [n for n, cc in gpus if code.known and not code.covers(cc)]
        if missing:
            findings.append(
                (
                    Status.FAIL,
                    f"{label}'s kernels are built for {' '.join(code.names())}: none runs on "
                    + ", ".join(missing),
                )
            )
    if ext.kind == "jit" and build.variant.startswith("cu"):
        toolkits = [t.version for t in facts.toolkits if t.version is not None]
        cuda_major = build.variant[2:-1]
        if not any(str(v.major) == cuda_major for v in toolkits):
            have = ", ".join(str(v) for v in toolkits) or "none"
            findings.append(
                (
                    Status.WARN,
                    (
                        f"{ext.name}'s ops JIT-compile with nvcc of CUDA {cuda_major}.x (torch's); "
                        f"nvcc found: {have}"
                    ),
                )
            )
    if not findings:
        return Status.PASS, f"{label} fits torch {build.torch}+{build.variant}"
    if all(s is Status.PASS for s, _ in findings):
        return Status.PASS, "; ".join(text for _, text in findings)
    findings = [f for f in findings if f[0] is not Status.PASS]
    worst = Status.FAIL if any(s is Status.FAIL for s, _ in findings) else Status.WARN
    return worst, "; ".join(text for _, text in findings)


def _fix(ext: Extension, facts: Facts, build: TorchBuild, dist: Optional[Distribution] = None) -> str:
    """The wheel of ``ext`` for the installed torch, or the torch to pin."""
    from envkit.resolve.ext_pick import ExtensionRequest
    from envkit.resolve.extensions import pick_one
    from envkit.resolve.target import GpuTarget

    pip = pip_command(facts)
    if dist is not None and dist.version is not None:
        release = ext.release(Version(dist.version.public))
        if replaced_jetpack_torch(facts, dist, release, build) is not None:
            back = jetson_fix(facts, ext.name, pip)
            if back is not None:
                return back
    gpus = tuple(GpuTarget(cc, name) for name, cc in _gpus(facts))
    pick, reason = pick_one(ExtensionRequest(ext.name), build, gpus)
    if pick is not None:
        where = f" --find-links {pick.index}" if pick.where == "find-links" and pick.index else ""
        if pick.where == "index" and pick.index:
            where = f" --extra-index-url {pick.index}"
        return f"{pip} install --force-reinstall --no-deps '{pick.requirement}'{where}"
    return (
        f"no {ext.name} wheel fits torch {build.torch}+{build.variant} ({reason}): pin the torch one "
        f"was made for; `envkit resolve --with {ext.name}` names it"
    )


def _installed(facts: Facts) -> list[tuple[Extension, Distribution]]:
    seen: dict[str, tuple[Extension, Distribution]] = {}
    for dist in facts.torch.distributions:
        ext = load_extension(dist.name)  # the installed ones' files alone
        if ext is not None and ext.name != "triton":  # triton is torch.companions'
            seen.setdefault(dist.name, (ext, dist))
    return list(seen.values())


def extension_fixes(facts: Facts) -> list[str]:
    """The fixes of the extensions that do not fit the installed torch (verify.extensions' too)."""
    build = _torch_build(facts)
    if build is None:
        return []
    return [
        _fix(ext, facts, build, dist)
        for ext, dist in _installed(facts)
        if _judge(ext, dist, build, facts)[0] in (Status.FAIL, Status.WARN)
    ]


def check_extensions(facts: Facts) -> CheckResult:
    installed = _installed(facts)
    if not installed:
        return CheckResult(
            ID, Status.SKIP, "no extension envkit knows (flash-attn, xformers, vllm, …) is installed"
        )
    build = _torch_build(facts)
    if build is None:
        return CheckResult(
            ID, Status.SKIP, "torch's version is not known: nothing to judge the extensions by"
        )
    verdicts = [(ext, _judge(ext, dist, build, facts)) for ext, dist in installed]
    dists = {ext.name: dist for ext, dist in installed}
    bad = [(ext, v) for ext, v in verdicts if v[0] in (Status.FAIL, Status.WARN)]
    fine = [text for _, (status, text) in verdicts if status is Status.PASS]
    unknown = [text for _, (status, text) in verdicts if status is Status.SKIP]
    if not bad and not fine:
        return CheckResult(ID, Status.SKIP, headline(unknown), detail=join_lines(*unknown))
    if not bad:
        return CheckResult(
            ID,
            Status.PASS,
            f"{len(fine)} extension(s) fit torch {build.torch}+{build.variant}",
            detail=join_lines(*fine, *unknown),
        )
    status = Status.FAIL if any(v[0] is Status.FAIL for _, v in bad) else Status.WARN
    return CheckResult(
        ID,
        status,
        headline([text for _, (_, text) in bad]),
        detail=join_lines(
            *(text for _, (_, text) in bad),
            *fine,
            *unknown,
            "a compiled extension fits one torch release (its C++ API has no stable ABI), one CUDA major "
            "and one C++ ABI; a package that pins torch makes pip replace the installed one",
        ),
        fix=fix_lines([_fix(ext, facts, build, dists[ext.name]) for ext, _ in bad]),
    )
