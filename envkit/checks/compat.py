"""The compatibility checks: the installed torch build against the driver and the GPUs, and the
driver against the GPUs and the torch releases. Every fix is the resolver's plan for this machine.

- torch.driver_compat: the build's CUDA needs the driver's minor-version-compatibility floor (fail)
  and, for PTX JIT / torch.compile, the toolkit's own driver (warn). "The NVIDIA driver on your
  system is too old (found version 12040)" is the failure (pytorch/pytorch#162531).
- torch.gpu_arch: "sm_120 is not compatible with the current PyTorch installation" / "no kernel
  image is available for execution on the device" (pytorch/pytorch#150733; ComfyUI#16438).
- torch.cpu_build_on_gpu: the CPU-only wheel installed by accident on a GPU machine (torchchat#587).
- driver.support: a driver branch that dropped the GPU (R580 is the last for Maxwell/Pascal/Volta),
  one too old for the GPU (Blackwell needs R570), or too old for current torch releases.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from packaging.specifiers import SpecifierSet

from envkit.checks._common import fix_lines, headline, join_lines, pip_command
from envkit.errors import NoBuildError
from envkit.knowledge import ArchRow, Knowledge, Release, load_knowledge
from envkit.report import CheckResult, Status
from envkit.resolve import Channel, Plan, Request, resolve
from envkit.resolve.target import GpuTarget, is_jetson, target_from_facts, visible_gpu_targets
from envkit.versions import ComputeCapability, parse_compute_capability

if TYPE_CHECKING:
    from envkit.facts import Facts

__all__ = [
    "check_cpu_build_on_gpu",
    "check_driver_support",
    "check_gpu_arch",
    "check_torch_driver_compat",
    "plan_fix",
]


def _plan(facts: Facts, knowledge: Knowledge, torch: Optional[SpecifierSet] = None) -> Plan:
    conda_torch = any(p.name == "pytorch" for p in facts.torch.conda_packages)
    channel = Channel.CONDA if conda_torch else Channel.PIP
    return resolve(knowledge, target_from_facts(facts, knowledge), Request(torch=torch, channel=channel))


def _first_way_out(error: NoBuildError) -> str:
    return error.hint.split("; or ")[0] if error.hint else error.message.splitlines()[0]


def plan_fix(facts: Facts, knowledge: Optional[Knowledge] = None) -> str:
    """The command that installs the build the resolver picks for this machine, for this env."""
    knowledge = knowledge or load_knowledge()
    try:
        plan = _plan(facts, knowledge)
    except NoBuildError as exc:
        return exc.hint or exc.message.splitlines()[0]
    if plan.conda is not None:
        command = plan.conda_command()
        if command is not None:
            return command
    names = {d.name for d in facts.torch.distributions}
    packages = ("torch", *(p for p in ("torchvision", "torchaudio") if p in names))
    return plan.pip_command(pip_command(facts), packages)


def _gpus(facts: Facts, knowledge: Knowledge) -> list[tuple[str, GpuTarget]]:
    return [
        (f"GPU {gpu.index} ({gpu.name or 'unknown'}, {target.cc.sm})", target)
        for gpu, target in visible_gpu_targets(facts, knowledge)
    ]


def check_torch_driver_compat(facts: Facts) -> CheckResult:
    cid = "torch.driver_compat"
    torch, driver = facts.torch, facts.driver.version
    if not torch.installed or torch.cuda is None:
        return CheckResult(cid, Status.SKIP, "no CUDA build of torch to check")
    if driver is None:
        return CheckResult(cid, Status.SKIP, f"torch {torch.version} is a CUDA build but no driver was found")
    if is_jetson(driver):
        return CheckResult(cid, Status.SKIP, f"driver {driver} is a Jetson (L4T) release; not checked")
    k = load_knowledge()
    windows = bool(facts.python and facts.python.platform and facts.python.platform.startswith("windows"))
    floor, own = k.driver_floors(torch.cuda, windows=windows)
    label = f"torch {torch.version} (CUDA {torch.cuda})"
    if floor is not None and driver < floor:
        return CheckResult(
            cid,
            Status.FAIL,
            f"{label} needs driver ≥ {floor}; this is {driver}",
            detail=f"CUDA {torch.cuda.major}.x runs on drivers from {floor} on (NVIDIA's minor-version "
            "compatibility floor, CUDA release notes Table 2); torch.cuda.is_available() is False and "
            "torch says 'The NVIDIA driver on your system is too old'",
            fix=join_lines(plan_fix(facts, k), f"or upgrade the driver to ≥ {floor}"),
        )
    if own is not None and driver < own:
        return CheckResult(
            cid,
            Status.WARN,
            f"{label} runs on driver {driver} only through minor-version compatibility",
            detail=f"CUDA {torch.cuda} shipped with driver {own}. Below it, PTX JIT fails ('the provided "
            "PTX was compiled with an unsupported toolchain'): torch.compile's Triton kernels and GPUs "
            "without SASS in the wheel need a driver ≥ the toolkit's",
            fix=join_lines(f"upgrade the driver to ≥ {own}", f"or: {plan_fix(facts, k)}"),
        )
    cuda = f" (CUDA {facts.driver.cuda_version})" if facts.driver.cuda_version else ""
    return CheckResult(cid, Status.PASS, f"{label} runs on driver {driver}{cuda}")


def _arch_row(facts: Facts, k: Knowledge) -> tuple[Optional[ArchRow], str]:
    """The build's architectures: from the deep probe when run, else from the knowledge base."""
    deep = facts.torch.deep
    if deep is not None and deep.ok and deep.arch_list:
        sass: list[ComputeCapability] = []
        ptx: list[ComputeCapability] = []
        for name in deep.arch_list:
            cc = parse_compute_capability(name)
            if cc is not None:
                (ptx if name.startswith("compute_") else sass).append(cc)
        reported = ArchRow(SpecifierSet(), "", "", tuple(sass), tuple(ptx), "torch.cuda.get_arch_list()")
        return reported, "reported by torch"
    torch = facts.torch
    release = k.release(torch.version) if torch.version else None
    platform = facts.python.platform if facts.python and facts.python.platform else "linux-x86_64"
    variant = torch.variant
    if release is None or variant is None:
        return None, ""
    return k.arch_for(release, variant, platform), "of the official wheel"


def check_gpu_arch(facts: Facts) -> CheckResult:
    cid = "torch.gpu_arch"
    torch = facts.torch
    if not torch.installed or torch.cuda is None:
        return CheckResult(cid, Status.SKIP, "no CUDA build of torch to check")
    k = load_knowledge()
    gpus = _gpus(facts, k)
    if not gpus:
        return CheckResult(cid, Status.SKIP, "no visible GPU with a known compute capability")
    row, origin = _arch_row(facts, k)
    if row is None:
        return CheckResult(
            cid,
            Status.SKIP,
            f"torch {torch.version} is not an official wheel envkit knows",
            detail="run `envkit doctor --deep` to read the build's architecture list from torch itself",
        )
    built = " ".join(row.names())
    missing = [label for label, gpu in gpus if not row.covers(gpu.cc)]
    if missing:
        return CheckResult(
            cid,
            Status.FAIL,
            headline([f"{missing[0]} has no code in torch {torch.version}", *missing[1:]]),
            detail=join_lines(
                *(f"{m}: not covered" for m in missing),
                f"compiled architectures ({origin}): {built}",
                "CUDA fails with 'no kernel image is available for execution on the device'",
            ),
            fix=plan_fix(facts, k),
        )
    return CheckResult(
        cid,
        Status.PASS,
        f"every GPU is in torch {torch.version}'s architectures",
        detail=f"compiled architectures ({origin}): {built}",
    )


def check_cpu_build_on_gpu(facts: Facts) -> CheckResult:
    cid = "torch.cpu_build_on_gpu"
    torch = facts.torch
    if not torch.installed:
        return CheckResult(cid, Status.SKIP, "torch is not installed")
    usable = [g for g in facts.visible_gpus if g.error is None]
    if not usable or facts.driver.version is None:
        return CheckResult(cid, Status.SKIP, "no usable NVIDIA GPU on this machine")
    if torch.cuda is not None or torch.hip:
        return CheckResult(cid, Status.PASS, f"torch {torch.version} is a GPU build")
    return CheckResult(
        cid,
        Status.FAIL,
        f"torch {torch.version} is a CPU-only build on a machine with {len(usable)} NVIDIA GPU(s)",
        detail="torch.cuda.is_available() is False with this build ('Torch not compiled with CUDA "
        "enabled'); on Windows and macOS a plain `pip install torch` gets the CPU build",
        fix=plan_fix(facts),
    )


def check_driver_support(facts: Facts) -> CheckResult:
    cid = "driver.support"
    driver = facts.driver.version
    if driver is None:
        return CheckResult(cid, Status.SKIP, "no NVIDIA driver")
    if is_jetson(driver):
        return CheckResult(cid, Status.SKIP, f"driver {driver} is a Jetson (L4T) release; not checked")
    k = load_knowledge()
    fails: list[str] = []
    fixes: list[str] = []
    for label, gpu in _gpus(facts, k):
        for rule in k.driver_rules:
            if not rule.applies(gpu.cc):
                continue
            if rule.last_branch is not None and driver.major > rule.last_branch:
                fails.append(
                    f"driver {driver} does not support {label}: "
                    f"R{rule.last_branch} is the last branch for {rule.what}"
                )
                fixes.append(f"install a driver from the R{rule.last_branch} branch")
            if rule.first_branch is not None and driver.major < rule.first_branch:
                fails.append(
                    f"{label} needs driver R{rule.first_branch} or newer ({rule.what}); this is {driver}"
                )
                fixes.append(f"upgrade the driver to the R{rule.first_branch} branch or newer")
    if fails:
        return CheckResult(
            cid,
            Status.FAIL,
            fails[0],
            detail=join_lines(*fails),
            fix=fix_lines(fixes),
        )
    # The resolver answers both questions, so the fixes name the driver this GPU and this
    # platform need (an RTX 5090 needs a CUDA 12.8+ wheel, not just any CUDA 12 one).
    current = _current_releases(k)
    first, last = current[-1].torch, current[0].torch
    span = f"{first.major}.{first.minor}–{last.major}.{last.minor}"
    try:
        plan = _plan(facts, k)
    except NoBuildError as error:
        return CheckResult(
            cid,
            Status.FAIL,
            f"driver {driver} runs no torch release envkit knows (≥ {k.releases[-1].torch}) on these GPUs",
            detail=error.message,
            fix=_first_way_out(error),
        )
    try:
        _plan(facts, k, SpecifierSet(f">={first}"))
    except NoBuildError as error:
        return CheckResult(
            cid,
            Status.WARN,
            f"driver {driver} is too old for every current torch release ({span}); "
            f"the newest it runs is {plan.candidate}",
            fix=_first_way_out(error),
        )
    note = ""
    if plan.torch < k.releases[0].torch:
        note = f"the newest torch it runs is {plan.candidate}"
    return CheckResult(
        cid, Status.PASS, f"driver {driver} supports every GPU and runs current torch ({span})", detail=note
    )


def _current_releases(k: Knowledge) -> list[Release]:
    """The releases of the newest three torch minors: what "current" means in these checks."""
    minors: list[tuple[int, int]] = []
    for release in k.releases:
        minor = (release.torch.major, release.torch.minor)
        if minor not in minors:
            minors.append(minor)
    keep = set(minors[:3])
    return [r for r in k.releases if (r.torch.major, r.torch.minor) in keep]
