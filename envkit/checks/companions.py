"""torch.companions: torchvision / torchaudio / triton made for another torch release, and installed
packages whose metadata pins another torch.

torchvision's and torchaudio's compiled operators are built against one torch release: beside
another one they fail to load, and the first call says ``operator torchvision::nms does not exist``
(pytorch/vision#4226, vllm-project/vllm-ascend#477) or ``undefined symbol`` in ``_C.so``. Which
releases pair is torchvision's README compatibility table (pytorch/vision README.md, "Installation")
and torchaudio's compatibility matrix (pytorch/audio docs, "Installing pre-built binaries"); the
knowledge base's releases.toml holds each torch release's torchvision, torchaudio and triton. Their
PyPI metadata says the same: a torchvision release wheel requires ``torch==<its torch>`` exactly
(pytorch/vision setup.py: ``pytorch_dep += "==" + PYTORCH_VERSION``), and a torch wheel requires
``triton==<its triton>`` (pytorch/pytorch .github/scripts/generate_binary_build_matrix.py), whose
compiler torch.compile's Inductor drives through private APIs that change every triton minor.

Packages built against torch (vllm, xformers, torch-npu, …) pin it in their ``Requires-Dist``; the
local probe reads those from the installed dist-info (a pasted report lists versions only, so
there only the companions' versions are judged).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Final, Optional

from envkit.checks._common import and_list, fix_lines, headline, join_lines, pip_command, torch_absent
from envkit.knowledge import is_variant, load_knowledge
from envkit.report import CheckResult, Status
from envkit.resolve.plan import PYTORCH_INDEX
from envkit.versions import Version

if TYPE_CHECKING:
    from envkit.facts import Distribution, Facts
    from envkit.knowledge import Knowledge, Release

__all__ = ["COMPANIONS", "check_torch_companions"]

ID: Final = "torch.companions"
# The packages each torch release names its own version of (releases.toml).
COMPANIONS: Final = ("torchvision", "torchaudio", "triton")
_SOURCE: Final = {
    "torchvision": "torchvision's README compatibility table",
    "torchaudio": "torchaudio's compatibility matrix",
    "triton": "torch's own Requires-Dist (triton==…)",
}


def _base(version: Version) -> Version:
    # The release's length is in the key: Version("2.5.1") == Version("2.5.1.0"), but their base
    # versions are written otherwise, and the findings quote them.
    return _base_of(version, len(version.release))


@functools.lru_cache(maxsize=1024)  # the table's few hundred versions, asked for per check run
def _base_of(version: Version, _parts: int) -> Version:
    return Version(version.base_version)


def _companion(release: Release, name: str) -> Optional[Version]:
    value: Optional[Version] = getattr(release, name)
    return value


def _made_for(knowledge: Knowledge, name: str, version: Version) -> tuple[list[Release], list[Release]]:
    """The torch releases that ship ``name`` at this exact version, and those of its series
    (same major.minor: torchvision 0.20.x is torch 2.5's)."""
    base = _base(version)
    exact, series = [], []
    for release in knowledge.releases:
        theirs = _companion(release, name)
        if theirs is None:
            continue
        if _base(theirs) == base:
            exact.append(release)
        if theirs.release[:2] == base.release[:2]:
            series.append(release)
    return exact, series


def _torch_names(releases: list[Release]) -> str:
    ordered = sorted({r.torch for r in releases})
    return and_list([str(v) for v in ordered])


def _judge(knowledge: Knowledge, dist: Distribution, torch: Version) -> tuple[Optional[Status], str]:
    """(FAIL / WARN / PASS, or None when the table does not know it; the finding)."""
    label = f"{dist.name} {dist.version}"
    if dist.version is None:
        return None, f"{dist.name}: no version to compare"
    exact, series = _made_for(knowledge, dist.name, dist.version)
    mine = _base(torch)
    if any(r.torch == mine for r in exact):
        return Status.PASS, f"{label} is torch {mine}'s"
    if any(r.torch.release[:2] == mine.release[:2] for r in series):
        if exact:
            return Status.WARN, (
                f"{label} is torch {_torch_names(exact)}'s, not {mine}'s (the same series, so it "
                f"usually loads, but its wheel pins torch=={min(r.torch for r in exact)}: `pip check` "
                "reports the conflict)"
            )
        return Status.PASS, f"{label} is of torch {mine.major}.{mine.minor}'s series"
    if series:
        made = _torch_names(exact or series)
        return Status.FAIL, f"{label} is made for torch {made} ({_SOURCE[dist.name]}), not torch {mine}"
    return None, f"{label}: not in envkit's release table"


def _marker_env(facts: Facts) -> dict[str, str]:
    """The marker variables of the inspected interpreter that Facts know (PEP 508)."""
    env: dict[str, str] = {}
    python = facts.python
    if python is None:
        return env
    if python.version is not None:
        env["python_version"] = f"{python.version.major}.{python.version.minor}"
        env["python_full_version"] = str(python.version)
    system, _, machine = (python.platform or "").partition("-")
    if system:
        env["sys_platform"] = {"windows": "win32", "macos": "darwin"}.get(system, system)
        env["platform_system"] = {"windows": "Windows", "macos": "Darwin", "linux": "Linux"}.get(
            system, system
        )
    if machine:
        env["platform_machine"] = {"arm64": "arm64" if system == "macos" else "aarch64"}.get(machine, machine)
    return env


def _pin(dist: Distribution, torch: Version, env: dict[str, str]) -> tuple[Optional[Status], str]:
    """Whether the distribution's own requirement on torch admits this torch."""
    if not dist.requires_torch:
        return None, ""
    # packaging's requirement parser (~4 ms of imports) only for a package that pins torch.
    from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
    from packaging.requirements import InvalidRequirement, Requirement

    for text in dist.requires_torch:
        try:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
        except (InvalidRequirement, InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
            continue
        if not req.specifier or req.specifier.contains(torch, prereleases=True):
            return Status.PASS, f"{dist.name} {dist.version} requires {text}"
        exact = any(s.operator in ("==", "===") for s in req.specifier)
        wants = f"{req.name}{req.specifier}"
        finding = f"{dist.name} {dist.version} requires {wants} (its metadata), this torch is {torch}"
        return Status.FAIL if exact else Status.WARN, finding
    return None, ""


def _index(torch: Version) -> str:
    """Where this torch build came from: its local label's folder on download.pytorch.org, or PyPI
    (a version without one is PyPI's wheel)."""
    local = (torch.local or "").split(".")[0]
    if torch.is_devrelease:
        return f" --pre --index-url {PYTORCH_INDEX}/nightly/{local or 'cpu'}"
    return f" --index-url {PYTORCH_INDEX}/{torch.local}" if local and is_variant(torch.local or "") else ""


def _matching_set(facts: Facts, release: Optional[Release], names: list[str]) -> str:
    """The pip command that installs this torch with the companions made for it."""
    torch = facts.torch.version
    assert torch is not None
    pip = pip_command(facts)
    installed = {d.name for d in facts.torch.distributions}
    wanted: list[str] = [n for n in ("torchvision", "torchaudio") if n in installed or n in names]
    if "triton" in names:
        wanted.append("triton")
    if torch.is_devrelease:
        # A nightly's companions are the same night's nightlies.
        return f"{pip} install --force-reinstall torch=={torch.public} {' '.join(wanted)}{_index(torch)}"
    if release is None:
        return (
            f"install the {and_list(wanted)} release made for torch {torch.public} "
            "(torchvision's README compatibility table), from the index torch came from"
        )
    pins = [f"torch=={torch.public}"]
    for name in wanted:
        version = _companion(release, name)
        if version is not None:
            pins.append(f"{name}=={version}")
    return f"{pip} install {' '.join(pins)}{_index(torch)}"


def check_torch_companions(facts: Facts) -> CheckResult:
    torch = facts.torch
    if not torch.installed:
        return CheckResult(ID, Status.SKIP, torch_absent(facts))
    if torch.version is None:
        return CheckResult(ID, Status.SKIP, "torch's version is not known; no companions to compare")
    knowledge = load_knowledge()
    env = _marker_env(facts)
    fails: list[str] = []
    warns: list[str] = []
    fine: list[str] = []
    matching: list[str] = []  # "torchvision 0.20.1", for the summary
    unknown: list[str] = []
    wrong: list[str] = []  # companions to reinstall
    pinned: list[str] = []  # other packages made for another torch
    for dist in torch.distributions:
        if dist.name == "torch":
            continue
        status, finding = _judge(knowledge, dist, torch.version) if dist.name in COMPANIONS else (None, "")
        if status is None or status is Status.PASS:
            # The table does not know it (or it matches): the package's own pin has the last word.
            pin_status, pin_finding = _pin(dist, torch.version, env)
            if pin_status is not None and (status is None or pin_status is not Status.PASS):
                status, finding = pin_status, pin_finding
        if status is None:
            if finding:
                unknown.append(finding)
            continue
        {Status.FAIL: fails, Status.WARN: warns, Status.PASS: fine}[status].append(finding)
        if status is Status.PASS:
            matching.append(f"{dist.name} {dist.version}")
        else:
            (wrong if dist.name in COMPANIONS else pinned).append(dist.name)
    if not (fails or warns or fine):
        if unknown:
            return CheckResult(
                ID,
                Status.SKIP,
                f"torch {torch.version}'s companions are not in envkit's release table",
                detail=join_lines(*unknown),
            )
        return CheckResult(
            ID, Status.SKIP, "no torchvision, torchaudio, triton or package pinning torch to compare"
        )
    if fails or warns:
        release = knowledge.release(torch.version)
        fixes = []
        if wrong:
            fixes.append(_matching_set(facts, release, wrong))
        for name in pinned:
            fixes.append(
                f"install the {name} release made for torch {torch.version.public}, or the torch "
                f"{name} requires (`{pip_command(facts, installs=False)} show {name}`, Requires)"
            )
        return CheckResult(
            ID,
            Status.FAIL if fails else Status.WARN,
            headline(fails + warns),
            detail=join_lines(
                *fails,
                *warns,
                *fine,
                *unknown,
                "torchvision and torchaudio load C++ operators compiled against one torch release; "
                "beside another they fail ('operator torchvision::nms does not exist', 'undefined "
                "symbol'). torch.compile drives the triton its release requires.",
            ),
            fix=fix_lines(fixes),
        )
    return CheckResult(
        ID,
        Status.PASS,
        f"{and_list(matching)} match torch {torch.version}"
        if len(matching) <= 3
        else f"{len(matching)} packages match torch {torch.version}",
        detail=join_lines(*fine, *unknown),
    )
