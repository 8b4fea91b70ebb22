"""The compatibility checks: the installed torch build against the driver and the GPUs, and the
driver against the GPUs and the torch releases. Every fix is the resolver's plan for this machine.

- torch.driver_compat: the build's CUDA needs the driver's minor-version-compatibility floor (fail)
  and, for PTX JIT / torch.compile, the toolkit's own driver (warn). "The NVIDIA driver on your
  system is too old (found version 12040)" is the failure (pytorch/pytorch#162531).
- torch.gpu_arch: "sm_120 is not compatible with the current PyTorch installation" / "no kernel
  image is available for execution on the device" (pytorch/pytorch#150733; ComfyUI#16438).
- torch.cpu_build_on_gpu: the CPU-only wheel installed by accident on a GPU machine (torchchat#587).
- driver.support is envkit.checks.driver_support's.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Final, Optional

from envkit.checks._common import (
    deep_hint,
    headline,
    join_lines,
    outranked_by_evidence,
    pip_command,
    torch_absent,
)
from envkit.errors import NoBuildError
from envkit.knowledge import Knowledge, load_knowledge
from envkit.report import CheckResult, Status
from envkit.resolve import Channel, CudaKind, CudaRequest, Plan, Request, resolve, rules
from envkit.resolve.target import GpuTarget, Target, is_jetson, target_from_facts, visible_gpu_targets
from envkit.versions import NvVersion, Version

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

    from envkit.facts import Facts

__all__ = [
    "check_cpu_build_on_gpu",
    "check_gpu_arch",
    "check_torch_driver_compat",
    "plan_fix",
]


def _request(facts: Facts, torch: Optional[SpecifierSet] = None, *, cpu: bool = False) -> Request:
    conda_torch = any(p.name == "pytorch" for p in facts.torch.conda_packages)
    channel = Channel.CONDA if conda_torch else Channel.PIP
    cuda = CudaRequest(CudaKind.CPU) if cpu else CudaRequest(CudaKind.AUTO)
    return Request(torch=torch, cuda=cuda, channel=channel)


def _plan(
    facts: Facts,
    knowledge: Knowledge,
    torch: Optional[SpecifierSet] = None,
    *,
    target: Optional[Target] = None,
) -> Plan:
    """The resolver's plan for the machine the facts describe (a paste's, never the reader's)."""
    target = target or target_from_facts(facts, knowledge)
    return resolve(knowledge, target, _request(facts, torch))


def _command(plan: Plan, facts: Facts) -> str:
    """The command that installs ``plan`` into the inspected environment."""
    if plan.conda is not None:
        command = plan.conda_command()
        if command is not None:
            return command
    names = {d.name for d in facts.torch.distributions}
    packages = ("torch", *(p for p in ("torchvision", "torchaudio") if p in names))
    return plan.pip_command(pip_command(facts), packages)


def _way_out_lines(error: NoBuildError, facts: Facts, k: Knowledge, target: Target) -> list[str]:
    """The resolver's ways out as fixes for this machine: a driver upgrade with the command that
    follows it, the CPU build's command, the rest as the resolver words them."""
    lines: list[str] = []
    for way in error.ways_out:
        line = way.text
        try:
            if way.rule == "driver" and way.driver:
                after = dataclasses.replace(target, driver=NvVersion(way.driver))
                then = _command(_plan(facts, k, target=after), facts)
                line = f"upgrade the driver to ≥ {way.driver}, then: {then}"
            elif way.value == "cpu" and way.rule in ("cpu", "cuda"):
                plan = resolve(k, target, _request(facts, cpu=True))
                line = f"the CPU build: {_command(plan, facts)}"
        except NoBuildError:
            pass
        lines.append(line if not lines else f"or {line}")
    return lines


def plan_fix(facts: Facts, knowledge: Optional[Knowledge] = None, *, gpus: tuple[GpuTarget, ...] = ()) -> str:
    """The command that installs the build the resolver picks for the machine the facts describe,
    into the inspected environment; when none fits, the ways out (a driver upgrade and the command
    after it, the CPU build), one a line. ``gpus``: the GPUs to plan for where the facts list none
    (torch's own warning named them: a paste cut down to the error)."""
    knowledge = knowledge or load_knowledge()
    target = target_from_facts(facts, knowledge)
    if gpus and not target.gpus:
        target = dataclasses.replace(target, gpus=gpus)
    # What the facts did not say about the platform, so that a reader sees whose machine it is for.
    assumed = [f"({a})" for a in target.assumed if a.startswith("assumed")]
    try:
        plan = _plan(facts, knowledge, target=target)
    except NoBuildError as exc:
        return join_lines(*_way_out_lines(exc, facts, knowledge, target), *assumed) or exc.summary
    return join_lines(_command(plan, facts), *assumed)


def _gpus(facts: Facts, knowledge: Knowledge) -> list[tuple[str, GpuTarget]]:
    """The visible GPUs with their compute capability; without any, the ones torch's own
    incompatible-device warning names (a paste cut short keeps only that)."""
    found = [
        (f"GPU {gpu.index} ({gpu.name or 'unknown'}, {target.cc.sm})", target)
        for gpu, target in visible_gpu_targets(facts, knowledge)
    ]
    if not found:
        for warned in facts.torch.incompatible_gpus:
            cc = warned.compute_capability
            if cc is not None:
                index = "" if warned.index is None else f"GPU {warned.index} "
                found.append((f"{index}({warned.name}, {cc.sm})", GpuTarget(cc, warned.name)))
    return found


def _windows(facts: Facts, k: Knowledge) -> bool:
    return target_from_facts(facts, k).platform.startswith("windows")


def _torch_says_too_old(facts: Facts) -> CheckResult:
    """torch said "The NVIDIA driver on your system is too old (found version 11000)" and the facts
    name no driver: the CUDA version the driver speaks stands for it (11000 -> CUDA 11.0, whose
    toolkit's driver the real one is at least)."""
    k = load_knowledge()
    torch, spoken = facts.torch, facts.torch.reported_driver_cuda
    label = f"torch {torch.version}" if torch.version else "torch"
    if torch.cuda is not None:
        label += f" (CUDA {torch.cuda})"
    speaks = f" (it speaks CUDA {spoken})" if spoken else ""
    need = rules.driver_floor(k, torch.cuda, windows=_windows(facts, k)) if torch.cuda else None
    needs = f"; the build needs ≥ {need.floor}" if need is not None and need.floor else ""
    fixes = [f"upgrade the driver to ≥ {need.floor}"] if need is not None and need.floor else []
    toolkit = k.toolkit(spoken) if spoken else None
    if toolkit is not None:
        # A plan for the driver it at least is: a build that runs on it as it is.
        windows = _windows(facts, k)
        floor = (toolkit.windows_driver if windows else None) or toolkit.linux_driver
        target = dataclasses.replace(target_from_facts(facts, k), driver=floor)
        try:
            plan = _plan(facts, k, target=target)
            fixes.append(f"or a build for CUDA {spoken}'s driver: {_command(plan, facts)}")
        except NoBuildError:
            pass
    return CheckResult(
        "torch.driver_compat",
        Status.FAIL,
        f"torch says the NVIDIA driver is too old for {label}{speaks}{needs}",
        detail=join_lines(torch.cuda_init_message, "torch.cuda.is_available() is False"),
        fix=join_lines(*fixes) or "upgrade the NVIDIA driver (nvidia.com/Download)",
    )


def check_torch_driver_compat(facts: Facts) -> CheckResult:
    cid = "torch.driver_compat"
    torch, driver = facts.torch, facts.driver.version
    if driver is None and torch.driver_too_old:
        return _torch_says_too_old(facts)
    if not torch.installed or torch.cuda is None:
        return CheckResult(cid, Status.SKIP, "no CUDA build of torch to check")
    if driver is None:
        return CheckResult(cid, Status.SKIP, f"torch {torch.version} is a CUDA build but no driver was found")
    if is_jetson(driver):
        return CheckResult(cid, Status.SKIP, f"driver {driver} is a Jetson (L4T) release; not checked")
    k = load_knowledge()
    v = rules.driver_floor(k, torch.cuda, driver, windows=_windows(facts, k))
    label = f"torch {torch.version} (CUDA {torch.cuda})"
    if v.status is rules.FloorStatus.UNKNOWN:
        lacks = (
            f"no CUDA {torch.cuda.major}.x row"
            if v.reason is rules.FloorReason.NO_FAMILY
            else (
                f"no CUDA {v.cuda} toolkit row, and CUDA {torch.cuda.major}.x has no minor-version "
                "compatibility"
            )
        )
        return CheckResult(
            cid,
            Status.SKIP,
            f"envkit does not know which driver CUDA {v.cuda} needs ({label} on driver {driver})",
            detail=f"the knowledge base has {lacks} (NVIDIA's CUDA release notes, Tables 2 and 3)",
        )
    if v.status is rules.FloorStatus.TOO_OLD:
        if v.reason is rules.FloorReason.FAMILY_FLOOR:
            why = (
                f"{v.family} runs on drivers from {v.floor} on (NVIDIA's minor-version compatibility "
                "floor, CUDA release notes Table 2)"
            )
        else:
            why = (
                f"CUDA {v.cuda} needs its own toolkit's driver, {v.floor} or newer (CUDA release notes "
                f"Table 3; CUDA {v.cuda.major}.x has no minor-version compatibility)"
            )
            if v.minor_version_compatibility:  # CUDA 11.0 GA shipped below the 11.x floor
                why = f"CUDA {v.cuda} runs on drivers from {v.floor} on (its toolkit's driver, Table 3)"
        result = CheckResult(
            cid,
            Status.FAIL,
            f"{label} needs driver ≥ {v.floor}; this is {driver}",
            detail=f"{why}; torch.cuda.is_available() is False and torch says 'The NVIDIA driver on "
            "your system is too old'",
            fix=join_lines(plan_fix(facts, k), *_driver_upgrade(facts, k, v)),
        )
        return outranked_by_evidence(result, facts)
    if v.status is rules.FloorStatus.MINOR_VERSION:
        return _minor_version(facts, k, v, label)
    cuda = f" (CUDA {facts.driver.cuda_version})" if facts.driver.cuda_version else ""
    return CheckResult(cid, Status.PASS, f"{label} runs on driver {driver}{cuda}")


def _coverage(facts: Facts, k: Knowledge) -> list[rules.ArchVerdict]:
    """The installed build's code for each visible GPU (rules.arch_coverage)."""
    build = _build(facts, k)
    return [rules.arch_coverage(build, gpu.cc) for _, gpu in _gpus(facts, k)]


def _driver_upgrade(facts: Facts, k: Knowledge, floor: rules.FloorVerdict) -> list[str]:
    """ "or upgrade the driver to ≥ X": the driver that runs the installed build without a warning
    (rules.clean_driver), where that driver still drives every GPU here (R470 was the last for
    Kepler: no upgrade helps there)."""
    windows = _windows(facts, k)
    driver = rules.clean_driver(k, floor.cuda, _coverage(facts, k), windows=windows) or floor.floor
    if driver is None:
        return []
    for _, gpu in _gpus(facts, k):
        branch = rules.gpu_driver_support(k, gpu.cc, driver, name=gpu.name, windows=windows)
        if branch.status is rules.BranchStatus.DROPPED:
            return []
    return [f"or upgrade the driver to ≥ {driver}"]


def _minor_version(facts: Facts, k: Knowledge, floor: rules.FloorVerdict, label: str) -> CheckResult:
    """Below the toolkit's own driver, at or above the floor: rules.build_on_driver decides with the
    build's code for the GPUs here, as the resolver does."""
    cid = "torch.driver_compat"
    driver, own = floor.driver, floor.toolkit_driver
    gpus = _gpus(facts, k)
    build = _build(facts, k)
    coverage = [rules.arch_coverage(build, gpu.cc) for _, gpu in gpus]
    v = rules.build_on_driver(k, floor.cuda, driver, coverage, windows=_windows(facts, k))
    mvc = (
        f"CUDA {floor.cuda} shipped with driver {own}; below it NVIDIA's minor-version compatibility "
        "runs code compiled to SASS but cannot JIT-compile newer PTX "
        "(docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html)"
    )
    if v.status is rules.BuildStatus.MINOR_VERSION:
        have = " ".join(sorted({gpu.cc.sm for _, gpu in gpus}))
        return CheckResult(
            cid,
            Status.PASS,
            f"{label} runs on driver {driver} through minor-version compatibility",
            detail=join_lines(
                mvc,
                f"the build has SASS for every GPU here ({have}): nothing needs PTX JIT; torch.compile's "
                "Triton kernels are assembled by Triton's own ptxas",
            ),
        )
    if v.status is rules.BuildStatus.PTX_JIT:
        only = ", ".join(label_ for label_, gpu in gpus if gpu.cc in v.ptx_only)
        return CheckResult(
            cid,
            Status.FAIL,
            f"{label} has only PTX for {only}, which driver {driver} cannot JIT-compile",
            detail=join_lines(
                mvc,
                "CUDA fails with 'the provided PTX was compiled with an unsupported toolchain'",
            ),
            fix=join_lines(plan_fix(facts, k), f"or upgrade the driver to ≥ {own}"),
        )
    return CheckResult(
        cid,
        Status.WARN,
        f"{label} runs on driver {driver} only through minor-version compatibility",
        detail=join_lines(
            mvc,
            "whether a GPU here needs the build's PTX is not known (no GPU with a known compute "
            f"capability, or no architecture list for this build: {deep_hint(facts, 'the list')})",
        ),
        fix=join_lines(f"upgrade the driver to ≥ {own}", *_another_build(facts, k)),
    )


def _another_build(facts: Facts, k: Knowledge) -> list[str]:
    """The resolver's fix as an alternative ("or: …"), unless it is the build already installed."""
    fix = plan_fix(facts, k)
    version = facts.torch.version
    if version is not None and f"torch=={version} " in fix + " ":
        return []
    return [f"or: {fix}"]


def _build(facts: Facts, k: Knowledge) -> rules.BuildArches:
    """The build's architectures: torch's own list (the deep probe) when read, else the knowledge
    base's for an official wheel, else the bound of the CUDA it was built with."""
    torch = facts.torch
    reported = torch.arch_list  # the deep probe's get_arch_list(), else torch's own warning's list
    return rules.build_arches(
        k,
        torch=torch.version,
        variant=torch.variant,
        platform=target_from_facts(facts, k).platform,
        cuda=torch.cuda,
        reported=reported,
        # A conda build is judged as the resolver planned it: by the pip wheel's list of its CUDA
        # (linux-x86_64's where the platform has none); the plan says it takes them to match.
        or_linux=any(p.name == "pytorch" for p in torch.conda_packages),
    )


_ORIGIN: Final = {
    rules.ArchOrigin.REPORTED: "reported by torch",
    rules.ArchOrigin.OFFICIAL: "of the official wheel",
}


def _arch_finding(label: str, v: rules.ArchVerdict) -> str:
    cuda = f"CUDA {v.build.cuda}"
    if v.status is rules.ArchStatus.BELOW_TOOLKIT:
        lowest = min(v.build.toolkit_sass).sm
        return f"{label}: {cuda} emits nothing below {lowest}; no build made with it runs here"
    if v.status is rules.ArchStatus.ABOVE_TOOLKIT:
        return (
            f"{label}: {cuda} cannot emit {v.cc.sm} code (its newest is {max(v.build.toolkit_sass).sm}); "
            "only PTX JIT could run it"
        )
    if v.via_ptx:
        return f"{label}: only older PTX, and torch says this GPU is not compatible with the build"
    return f"{label}: not covered"


def _no_kernel_image(facts: Facts) -> Optional[CheckResult]:
    """CUDA's own "no kernel image is available" in an error text that names no GPU: the build (or
    an extension in the traceback) has no code for it; which GPU, nvidia-smi says."""
    said = facts.errors.event("no_kernel_image")
    if said is None:
        return None
    return CheckResult(
        "torch.gpu_arch",
        Status.FAIL,
        "CUDA says the build has no code for this GPU ('no kernel image is available for execution on "
        "the device')",
        detail=join_lines(
            said.message, "the text names no GPU, so which architecture is missing is not known"
        ),
        fix="nvidia-smi --query-gpu=name,compute_cap --format=csv  (then envkit doctor there, or "
        "envkit resolve --gpu <name>, names the build that has it)",
    )


def check_gpu_arch(facts: Facts) -> CheckResult:
    cid = "torch.gpu_arch"
    torch = facts.torch
    k = load_knowledge()
    gpus = _gpus(facts, k) if torch.installed and torch.cuda_build else []
    if not gpus:
        said = _no_kernel_image(facts)
        if said is not None:
            return said
    if not torch.installed or not torch.cuda_build:
        return CheckResult(cid, Status.SKIP, "no CUDA build of torch to check")
    if not gpus:
        return CheckResult(cid, Status.SKIP, "no visible GPU with a known compute capability")
    build = _build(facts, k)
    verdicts = [(label, rules.arch_coverage(build, gpu.cc)) for label, gpu in gpus]
    # torch's own verdict on the device beats any inference: a GPU its warning names as without
    # kernels (or too old / too new) is not covered, even where older PTX would JIT in principle
    # (the CUDA libraries the build bundles have no code for it either).
    warned = {g.compute_capability for g in torch.incompatible_gpus if g.compute_capability is not None}
    failed = [(label, v) for label, v in verdicts if v.runs is False or (v.cc in warned and v.runs)]
    unknown = "not an official wheel envkit knows"
    name = f"torch {torch.version}" if torch.version else "this torch"
    if failed:
        first_label = failed[0][0]
        if build.exact:
            lead = f"{first_label} has no code in {name}"
            built = f"compiled architectures ({_ORIGIN[build.origin]}): {' '.join(build.names())}"
        else:
            lead = f"{first_label} cannot run {name} (a CUDA {build.cuda} build)"
            built = (
                f"{name} is {unknown}: its CUDA {build.cuda} bounds what it can contain "
                f"(nvcc {build.cuda} emits {' '.join(c.sm for c in build.toolkit_sass)})"
            )
        return CheckResult(
            cid,
            Status.FAIL,
            headline([lead, *(label for label, _ in failed[1:])]),
            detail=join_lines(
                *(_arch_finding(label, v) for label, v in failed),
                built,
                "CUDA fails with 'no kernel image is available for execution on the device'",
            ),
            fix=plan_fix(facts, k, gpus=tuple(gpu for _, gpu in gpus)),
        )
    if torch.variant is None and any(v.runs is None for _, v in verdicts):
        # A CUDA build whose CUDA the evidence lost (a paste without "CUDA used to build PyTorch"):
        # if no official CUDA wheel of this release has code for a GPU, none of them runs there.
        lacking = _in_no_official_cuda_wheel(facts, k, gpus)
        if lacking:
            wheels = " ".join(sorted({w for _, ws in lacking for w in ws}))
            return CheckResult(
                cid,
                Status.FAIL,
                headline([f"{lacking[0][0]} has no code in any CUDA wheel of {name}"]),
                detail=join_lines(
                    *(
                        f"{label}: none of {name}'s CUDA wheels ({' '.join(ws)}) has code for it"
                        for label, ws in lacking
                    ),
                    f"the build's CUDA is not known; every CUDA wheel of {name} was checked ({wheels})",
                    "CUDA fails with 'no kernel image is available for execution on the device'",
                ),
                fix=plan_fix(facts, k),
            )
    if any(v.runs is None for _, v in verdicts):
        bound = ""
        if build.origin is rules.ArchOrigin.TOOLKIT:
            bound = (
                f"CUDA {build.cuda} can emit code for every GPU here; whether this build has it is not known"
            )
        return CheckResult(
            cid,
            Status.SKIP,
            f"{name} is {unknown}",
            detail=join_lines(bound, deep_hint(facts, "the build's architecture list")),
        )
    return CheckResult(
        cid,
        Status.PASS,
        f"every GPU is in {name}'s architectures",
        detail=join_lines(
            f"compiled architectures ({_ORIGIN[build.origin]}): {' '.join(build.names())}",
            *(f"{label}: through PTX, JIT-compiled by the driver" for label, v in verdicts if v.via_ptx),
        ),
    )


def _in_no_official_cuda_wheel(
    facts: Facts, k: Knowledge, gpus: list[tuple[str, GpuTarget]]
) -> list[tuple[str, tuple[str, ...]]]:
    """The GPUs (label, the wheels checked) that no official CUDA wheel of the installed release
    covers on the target's platform; empty when the release is not in the table."""
    torch = facts.torch
    release = k.release(torch.version) if torch.version is not None else None
    if release is None:
        return []
    platform = target_from_facts(facts, k).platform
    wheels = tuple(v for v in release.variants.get(platform, ()) if v.startswith("cu"))
    builds = [rules.build_arches(k, torch=torch.version, variant=v, platform=platform) for v in wheels]
    if not builds or any(b.origin is not rules.ArchOrigin.OFFICIAL for b in builds):
        return []  # a wheel without an arch row: nothing can be said of all of them
    return [
        (label, wheels)
        for label, gpu in gpus
        if all(rules.arch_coverage(b, gpu.cc).runs is False for b in builds)
    ]


def check_cpu_build_on_gpu(facts: Facts) -> CheckResult:
    cid = "torch.cpu_build_on_gpu"
    torch = facts.torch
    if not torch.installed:
        return CheckResult(cid, Status.SKIP, torch_absent(facts))
    usable = [g for g in facts.visible_gpus if g.error is None]
    if torch.cuda_init_error == "not_compiled" and not usable:
        return _said_cpu_build(facts)
    if not usable or facts.driver.version is None:
        return CheckResult(cid, Status.SKIP, "no usable NVIDIA GPU on the machine")
    if torch.cuda is not None or torch.hip:
        return CheckResult(cid, Status.PASS, f"torch {torch.version} is a GPU build")
    k = load_knowledge()
    try:
        _plan(facts, k)
    except NoBuildError as error:
        # No CUDA build runs here as the machine is (its driver, its Python, its platform): the CPU
        # build is no accident, and driver.support / `envkit resolve` name what stands in the way.
        return CheckResult(
            cid,
            Status.PASS,
            f"torch {torch.version} is a CPU build; no CUDA build fits this machine as it is",
            detail=join_lines(error.summary, "driver.support and `envkit resolve` say what would change it"),
        )
    return CheckResult(
        cid,
        Status.FAIL,
        f"torch {torch.version} is a CPU-only build on a machine with {len(usable)} NVIDIA GPU(s)",
        detail="torch.cuda.is_available() is False with this build ('Torch not compiled with CUDA "
        "enabled'); on Windows and macOS a plain `pip install torch` gets the CPU build",
        fix=plan_fix(facts, k),
    )


def _said_cpu_build(facts: Facts) -> CheckResult:
    """torch said "Torch not compiled with CUDA enabled" where the GPUs are not listed (an error
    text): the program asked for CUDA of a CPU-only build. The fix is a CUDA build for the driver
    the text shows (else for CUDA 12, which every driver from 525.60.13 runs)."""
    k = load_knowledge()
    target = target_from_facts(facts, k)
    driver = facts.driver.version
    fix = "install a CUDA build of torch: `envkit resolve` on the GPU machine names the one its driver runs"
    for major in (13, 12, 11) if driver is not None else (12,):
        request = dataclasses.replace(_request(facts), cuda=CudaRequest(CudaKind.MAJOR, major=major))
        try:
            plan = resolve(k, target, request)
        except NoBuildError:
            continue
        floor = rules.driver_floor(k, Version(f"{major}.0"))
        needs = (
            "" if driver is not None else f"  (CUDA {major} needs driver ≥ {floor.floor}: check nvidia-smi)"
        )
        fix = _command(plan, facts) + needs
        break
    label = f"torch {facts.torch.version}" if facts.torch.version else "torch"
    return CheckResult(
        "torch.cpu_build_on_gpu",
        Status.FAIL,
        f"{label} is a CPU-only build and the program asked for CUDA ('Torch not compiled with CUDA "
        "enabled')",
        detail=join_lines(
            f"the NVIDIA driver the text shows: {driver}"
            if driver
            else "the text shows no driver or GPU list",
            "on Windows and macOS a plain `pip install torch` gets the CPU build; a requirements pin "
            "without the CUDA index does the same on Linux for some releases",
        ),
        fix=fix,
    )
