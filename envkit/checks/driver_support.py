"""driver.support: the driver against the GPUs (a branch that dropped one, R580 the last for
Maxwell/Pascal/Volta; one too old for it, Blackwell needs R570) and against the torch releases
(none at all, or none of the current ones).

Its fix is the driver that ends the finding and starts no other: the oldest driver envkit knows
(NVIDIA's Table 3 drivers and the minor-version floors) that drives every GPU and gives the
resolver a plan it runs without a warning (rules.build_on_driver), then the command that installs
that plan. Where no driver would give a torch build (the platform, the Python or the GPUs rule
every build out), the driver is not what stands in the way, and this check does not blame it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Optional

from packaging.specifiers import SpecifierSet

from envkit.checks._common import join_lines, outranked_by_evidence
from envkit.checks.compat import _command, _gpus, _plan, _windows
from envkit.errors import NoBuildError
from envkit.knowledge import Knowledge, Release, load_knowledge
from envkit.report import CheckResult, Status
from envkit.resolve import rules
from envkit.resolve.jetson import is_jetson_target, jetson_driver_note
from envkit.resolve.target import GpuTarget, Target, is_jetson, target_from_facts

if TYPE_CHECKING:
    from envkit.facts import Facts
    from envkit.resolve import Plan
    from envkit.versions import NvVersion

__all__ = ["check_driver_support"]


def check_driver_support(facts: Facts) -> CheckResult:
    # The branch rules and the release tables say what cannot work in general; where CUDA is seen
    # working here, their failure is a warning naming the disagreement.
    return outranked_by_evidence(_driver_support(facts), facts)


def _driver_support(facts: Facts) -> CheckResult:
    cid = "driver.support"
    driver = facts.driver.version
    if driver is None:
        return CheckResult(cid, Status.SKIP, "no NVIDIA driver")
    k = load_knowledge()
    target = target_from_facts(facts, k)
    if is_jetson(driver) or is_jetson_target(k, target):
        # A Jetson's driver comes with its L4T release: what it runs is the JetPack's torch.
        jetpack = jetson_driver_note(k, target)
        if jetpack is None:
            return CheckResult(cid, Status.SKIP, f"driver {driver} is a Jetson (L4T) release; not checked")
        return CheckResult(cid, Status.PASS, f"driver {driver} is a Jetson's: {jetpack}")
    windows = _windows(facts, k)
    gpus = _gpus(facts, k)
    fails: list[str] = []
    unknown: list[str] = []
    for label, gpu in gpus:
        v = rules.gpu_driver_support(k, gpu.cc, driver, name=gpu.name, windows=windows)
        if v.status is rules.BranchStatus.DROPPED:
            fails.append(
                f"driver {driver} (R{v.branch}) does not support {label}: "
                f"R{v.last_branch} is the last branch for {v.what}"
            )
        elif v.status is rules.BranchStatus.TOO_OLD:
            fails.append(f"{label} needs driver R{v.first_branch} or newer ({v.what}); this is {driver}")
        elif v.status is rules.BranchStatus.UNKNOWN:
            unknown.append(label)
    current = _current_releases(k)
    first, last = current[-1].torch, current[0].torch
    span = f"{first.major}.{first.minor}–{last.major}.{last.minor}"
    newer = SpecifierSet(f">={first}")
    if fails:
        fix = _driver_fix(facts, k, target, gpus, newer) or _driver_fix(facts, k, target, gpus, None)
        return CheckResult(
            cid,
            Status.FAIL,
            fails[0],
            detail=join_lines(*fails),
            fix=fix or "install a driver that drives every GPU here (no one driver envkit knows does)",
        )
    # The resolver answers both questions, so the fixes name the driver this GPU and this
    # platform need (an RTX 5090 needs a CUDA 12.8+ wheel, not just any CUDA 12 one).
    try:
        plan: Optional[Plan] = _plan(facts, k)
    except NoBuildError as error:
        if not _driver_limits(facts, k, target, None):
            return CheckResult(
                cid,
                Status.PASS,
                f"driver {driver} supports every GPU",
                detail=join_lines(
                    f"no torch release envkit knows runs on {target.describe()}, whatever the driver: "
                    "`envkit resolve` lists why",
                    error.summary,
                ),
            )
        return CheckResult(
            cid,
            Status.FAIL,
            f"driver {driver} runs no torch release envkit knows (≥ {k.releases[-1].torch}) on these GPUs",
            detail=error.message,
            fix=_driver_fix(facts, k, target, gpus, newer) or _driver_fix(facts, k, target, gpus, None),
        )
    note = ""
    runs_current = True
    try:
        _plan(facts, k, newer)
    except NoBuildError:
        if _driver_limits(facts, k, target, newer):
            assert plan is not None
            return CheckResult(
                cid,
                Status.WARN,
                f"driver {driver} is too old for every current torch release ({span}); "
                f"the newest it runs is {plan.candidate}",
                fix=_driver_fix(facts, k, target, gpus, newer),
            )
        note = f"no current torch release ({span}) runs on {target.describe()}, whatever the driver"
        runs_current = False
    if plan is not None and plan.torch < k.releases[0].torch:
        note = join_lines(note, f"the newest torch it runs is {plan.candidate}")
    if unknown:
        return CheckResult(
            cid,
            Status.SKIP,
            f"envkit has no driver-branch data that says whether driver {driver} drives {unknown[0]}",
            detail=join_lines(
                *(f"{label}: no [[arch_min_driver]] / [[deprecation]] row decides it" for label in unknown),
                f"it runs current torch ({span})" if runs_current else "",
                note,
            ),
        )
    # A Tesla K80 on R470: the driver is right for the GPU, but no current build has its
    # architecture; the summary does not claim what the note denies.
    runs = (
        f" and runs current torch ({span})" if runs_current else f" (no current torch ({span}) runs on them)"
    )
    return CheckResult(cid, Status.PASS, f"driver {driver} supports every GPU{runs}", detail=note)


def _driver_limits(facts: Facts, k: Knowledge, target: Target, torch: Optional[SpecifierSet]) -> bool:
    """Whether the driver is what rules every build out: with the driver left unchecked, a build fits."""
    try:
        _plan(facts, k, torch, target=dataclasses.replace(target, driver=None))
    except NoBuildError:
        return False
    return True


def _known_drivers(k: Knowledge, *, windows: bool) -> list[NvVersion]:
    """The drivers envkit can name: each toolkit's own (NVIDIA's Table 3, GA and updates) and each
    CUDA major's minor-version floor (Table 2), oldest first."""
    found = set()
    for tk in (*k.toolkits.values(), *k.toolkit_updates):
        driver = (tk.windows_driver if windows else None) or tk.linux_driver
        if driver is not None:
            found.add(driver)
    for family in k.families.values():
        floor = (family.windows_min_driver if windows else None) or family.linux_min_driver
        if floor is not None:
            found.add(floor)
    return sorted(found)


def _drives_every_gpu(
    k: Knowledge, driver: NvVersion, gpus: list[tuple[str, GpuTarget]], windows: bool
) -> bool:
    return all(
        rules.gpu_driver_support(k, gpu.cc, driver, name=gpu.name, windows=windows).status
        in (rules.BranchStatus.SUPPORTED, rules.BranchStatus.UNKNOWN)
        for _, gpu in gpus
    )


def _driver_fix(
    facts: Facts,
    k: Knowledge,
    target: Target,
    gpus: list[tuple[str, GpuTarget]],
    torch: Optional[SpecifierSet],
) -> str:
    """The driver that ends driver.support's finding and starts no other, then the command that
    installs the build the resolver picks with it: the oldest one envkit knows above this driver, or,
    where the GPUs need an older branch than this one (R470 for Kepler), the newest below it.
    "" when no driver envkit knows does it."""
    driver = facts.driver.version
    assert driver is not None
    windows = _windows(facts, k)
    known = _known_drivers(k, windows=windows)
    # Upward first, oldest first: the smallest upgrade; else downward, newest first (R470 for Kepler).
    for candidates, upgrade in (
        ([d for d in known if d > driver], True),
        ([d for d in reversed(known) if d.major < driver.major], False),
    ):
        for candidate in candidates:
            plan = _fits(facts, k, target, gpus, torch, candidate, windows)
            if plan is None:
                continue
            if upgrade:
                return f"upgrade the driver to ≥ {candidate}, then: {_command(plan, facts)}"
            return (
                f"install driver {candidate} (or a newer one of the R{candidate.major} branch), then: "
                f"{_command(plan, facts)}"
            )
    return ""


def _fits(
    facts: Facts,
    k: Knowledge,
    target: Target,
    gpus: list[tuple[str, GpuTarget]],
    torch: Optional[SpecifierSet],
    driver: NvVersion,
    windows: bool,
) -> Optional[Plan]:
    """The plan on ``driver`` when that driver drives every GPU and runs it without a warning."""
    if not _drives_every_gpu(k, driver, gpus, windows):
        return None
    moved = dataclasses.replace(target, driver=driver)
    try:
        plan = _plan(facts, k, torch, target=moved)
    except NoBuildError:
        return None
    if plan.cuda is not None and not _clean(k, plan, moved, driver, windows):
        return None
    return plan


def _clean(k: Knowledge, plan: Plan, target: Target, driver: NvVersion, windows: bool) -> bool:
    """The plan's build runs on ``driver`` without a warning (rules.build_on_driver)."""
    assert plan.cuda is not None
    build = rules.build_arches(
        k, torch=plan.torch, variant=plan.variant, platform=plan.platform, or_linux=True
    )
    coverage = [rules.arch_coverage(build, g.cc) for g in target.gpus] if build.exact else []
    return rules.build_on_driver(k, plan.cuda, driver, coverage, windows=windows).clean


def _current_releases(k: Knowledge) -> list[Release]:
    """The releases of the newest three torch minors: what "current" means in these checks."""
    minors: list[tuple[int, int]] = []
    for release in k.releases:
        minor = (release.torch.major, release.torch.minor)
        if minor not in minors:
            minors.append(minor)
    keep = set(minors[:3])
    return [r for r in k.releases if (r.torch.major, r.torch.minor) in keep]
