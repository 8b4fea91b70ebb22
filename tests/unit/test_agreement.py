"""One envkit: what envkit plans, its own checks accept, and what its checks prescribe, they accept.

Three properties over a matrix of targets (GPU generations x drivers x Pythons x platforms x
channels x every spec format, the container formats included), each run as a user's commands would
run it (the functions behind ``envkit spec``, ``spec --check`` and ``doctor``):

1. plan -> render -> ``spec --check``: the files ``envkit spec`` writes for a target draw no finding
   from ``spec --check`` on that same target, unless the plan carries the warning itself.
2. plan -> the facts of that installed build -> doctor: no driver, architecture, companion or
   container finding, unless the plan carries it.
3. every fix doctor prints, applied to the facts: tests/unit/test_agreement_fixes.py.

Where a property fails, the rule is what is fixed, never the property (envkit.resolve.rules holds
the rules both sides call). The default suite runs a few examples of each, derandomized (the same
on every run, no example database); ``pytest -m slow`` runs many more.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from envkit.checks import CHECKS
from envkit.commands import spec as spec_command
from envkit.errors import InputError, NoBuildError
from envkit.facts import (
    CondaPackage,
    ContainerFacts,
    Distribution,
    DriverFacts,
    Facts,
    GpuFacts,
    HostFacts,
    PythonFacts,
    TorchFacts,
)
from envkit.knowledge import PLATFORMS, load_knowledge
from envkit.report import CheckResult, Status
from envkit.resolve import Plan, rules
from envkit.resolve.plan import PlanFlags
from envkit.resolve.target import parse_gpu
from envkit.specs.render import FORMATS
from envkit.system import System
from envkit.versions import ComputeCapability, NvVersion, Version

K = load_knowledge()

FAST = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,  # the default suite is the same on every run; the slow one explores
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
SLOW = settings(FAST, max_examples=300, derandomize=False)

# Every GPU generation envkit knows, one model each per kind of host (the name as --gpu takes it,
# and its cc): Arm servers' GPUs (Grace, AWS Graviton) on linux-aarch64 only, Jetsons left out
# (their L4T drivers are not checked), the rest on x86-64.
_ARM_HOST = re.compile(r"^(GH200|GB200|GB300|GB10|T4G)")


def _gpus(arm: bool) -> tuple[tuple[ComputeCapability, str], ...]:
    by_cc: dict[ComputeCapability, str] = {}
    for gpu in K.gpus:
        if gpu.model.startswith("Jetson") or (not arm and _ARM_HOST.match(gpu.model)):
            continue
        try:
            name = gpu.model if parse_gpu(gpu.model, K).cc == gpu.cc else gpu.cc.sm
        except InputError:  # a row that names a family ("RTX PRO Blackwell (6000/5000/…)")
            name = gpu.cc.sm
        by_cc.setdefault(gpu.cc, name)
    return tuple(sorted(by_cc.items()))


GPUS = {False: _gpus(arm=False), True: _gpus(arm=True)}

# Every driver a CUDA toolkit shipped with, every family floor, and drivers between them.
_LINUX = {tk.linux_driver for tk in (*K.toolkits.values(), *K.toolkit_updates) if tk.linux_driver}
_LINUX |= {f.linux_min_driver for f in K.families.values() if f.linux_min_driver}
_LINUX |= {NvVersion(v) for v in ("470.82.01", "535.104.05", "550.54.15", "570.124.06", "575.57.08")}
LINUX_DRIVERS = tuple(sorted(d for d in _LINUX if d.major >= 384))
_WINDOWS = {tk.windows_driver for tk in (*K.toolkits.values(), *K.toolkit_updates) if tk.windows_driver}
WINDOWS_DRIVERS = tuple(sorted(d for d in _WINDOWS if d.major >= 385)) or LINUX_DRIVERS
PYTHONS = ("3.9", "3.10", "3.11", "3.12", "3.13", "3.14")
SYSTEM = System()  # every flag is given: nothing of this machine is detected


@dataclasses.dataclass(frozen=True)
class Case:
    platform: str
    driver: Optional[NvVersion]
    gpus: tuple[tuple[ComputeCapability, str], ...]
    python: str

    def flags(self, fmt: str = "pip", channel: str = "pip") -> PlanFlags:
        return PlanFlags(
            driver=str(self.driver) if self.driver else None,
            gpus=tuple(name for _, name in self.gpus),
            no_gpu=self.driver is None and not self.gpus,
            platform=self.platform,
            python=self.python,
            channel=channel,
        )

    def __str__(self) -> str:
        gpus = " ".join(f"--gpu '{name}'" for _, name in self.gpus)
        driver = f"--driver {self.driver}" if self.driver else "--no-gpu" if not self.gpus else ""
        return f"--platform {self.platform} --python {self.python} {driver} {gpus}".strip()


def _one_driver_drives(gpus: Sequence[tuple[ComputeCapability, str]]) -> bool:
    """Some driver envkit knows drives every one of ``gpus`` (a Kepler beside a Blackwell has none)."""
    return any(
        all(
            rules.gpu_driver_support(K, cc, d, name=name).status is not rules.BranchStatus.DROPPED
            and rules.gpu_driver_support(K, cc, d, name=name).status is not rules.BranchStatus.TOO_OLD
            for cc, name in gpus
        )
        for d in LINUX_DRIVERS
    )


@st.composite
def cases(draw: st.DrawFn) -> Case:
    platform = draw(st.sampled_from(PLATFORMS))
    python = draw(st.sampled_from(PYTHONS))
    if platform.startswith("macos") or draw(st.integers(0, 9)) == 0:
        return Case(platform, None, (), python)  # no NVIDIA GPU at all
    drivers = WINDOWS_DRIVERS if platform.startswith("windows") else LINUX_DRIVERS
    # Mostly drivers of the last five years, where torch releases are; older ones too.
    recent = [d for d in drivers if d.major >= 450]
    driver = draw(st.sampled_from(recent if draw(st.integers(0, 4)) else drivers))
    pool = GPUS[platform == "linux-aarch64"]
    gpus = draw(st.lists(st.sampled_from(pool), min_size=0, max_size=2, unique=True))
    assume(_one_driver_drives(gpus))
    return Case(platform, driver, tuple(gpus), python)


def _bad(results: Sequence[CheckResult]) -> list[CheckResult]:
    return [r for r in results if r.status in (Status.WARN, Status.FAIL)]


def _carried(result: CheckResult, warnings: Sequence[str]) -> bool:
    """A warning the plan carries itself (the same finding, said when the plan was made)."""
    if result.status is not Status.WARN or result.id not in ("spec.driver", "torch.driver_compat"):
        return False  # only the build's own driver warning; a base image's is another finding
    return any("minor-version compatibility" in w for w in warnings) and (
        "minor-version compatibility" in result.summary
    )


def _describe(results: Sequence[CheckResult]) -> str:
    return "\n".join(f"{r.id} {r.status.value}: {r.summary}\n  fix: {r.fix}" for r in results)


# 1. plan -> render -> spec --check --------------------------------------------------------------


def _render_then_check(case: Case, fmt: str, tmp: Path) -> None:
    flags = case.flags(fmt)
    try:
        made = spec_command.render(
            SYSTEM,
            "pt2",
            flags,
            fmt=fmt,
            out=str(tmp),
            mirrors=(),
            pip_in_conda=False,
            name=None,
            to_stdout=False,
            force=True,
        )
    except (NoBuildError, InputError):
        return  # nothing planned (no build, no base image): nothing written to check
    for written in made.written:
        if written.name in ("pyproject.toml", "virtual-packages.yml"):
            continue  # spec --check reads environment.yml, requirements.txt and container files
        check = spec_command.check(SYSTEM, str(written), case.flags(fmt))
        bad = [r for r in _bad(check.results) if not _carried(r, made.warnings)]
        assert not bad, f"envkit spec pt2 --format {fmt} {case}\n{written.name}:\n{_describe(bad)}"


def _plan_of(case: Case, fmt: str) -> Plan:
    from envkit.planning import make_plan
    from envkit.specs.render import spec_flags
    from envkit.specs.template import load_template

    return make_plan(SYSTEM, spec_flags(load_template("pt2"), case.flags(fmt), fmt))


def _rendered_files_pass_their_own_check(
    case: Case, fmt: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _render_then_check(case, fmt, tmp_path_factory.mktemp("spec"))


@settings(FAST, max_examples=12)  # each example writes its files and reads them back
@given(case=cases(), fmt=st.sampled_from(FORMATS))
def test_what_spec_writes_spec_check_accepts(
    case: Case, fmt: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _rendered_files_pass_their_own_check(case, fmt, tmp_path_factory)


@pytest.mark.slow
@SLOW
@given(case=cases(), fmt=st.sampled_from(FORMATS))
def test_what_spec_writes_spec_check_accepts_many(
    case: Case, fmt: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _rendered_files_pass_their_own_check(case, fmt, tmp_path_factory)


# 2. plan -> the facts of that installed build -> doctor ------------------------------------------

# What doctor says of a build on a machine: the driver, the architectures, the companions, the
# build's kind, and (in a container) the image against the host driver.
JUDGES = (
    "driver.support",
    "torch.driver_compat",
    "torch.gpu_arch",
    "torch.cpu_build_on_gpu",
    "torch.companions",
    "torch.duplicates",
    "container.cuda_driver",
)


def _facts(case: Case, plan: Plan, *, image_cuda: Optional[Version] = None) -> Facts:
    """The machine of ``case`` with ``plan``'s build installed as its channel installs it."""
    prefix = "/opt/venv" if image_cuda is not None else "/envs/pt"
    site = f"{prefix}/lib/python{plan.python or case.python}/site-packages"
    local = plan.requirements(("torch",))[0].partition("+")[2]
    suffix = f"+{local}" if local else ""
    conda: tuple[CondaPackage, ...] = ()
    dists = [Distribution("torch", Version(f"{plan.torch}{suffix}"), site)]
    if plan.conda is not None and plan.conda.dependencies:
        # From conda: the pytorch package, and its torchvision / torchaudio of the same release.
        conda = (CondaPackage("pytorch", plan.torch, "cuda" if plan.cuda else "cpu"),)
        dists = [Distribution("torch", plan.torch, site)]
    dists += [
        Distribution("torchvision", Version(f"{plan.torchvision}{suffix}"), site),
        Distribution("torchaudio", Version(f"{plan.torchaudio}{suffix}"), site),
    ]
    gpus = tuple(
        GpuFacts(index=i, name=name, compute_capability=cc) for i, (cc, name) in enumerate(case.gpus)
    )
    container = ContainerFacts()
    if image_cuda is not None:
        container = ContainerFacts(
            kind="docker", evidence=("/.dockerenv",), image_cuda=image_cuda, image_cuda_source="CUDA_VERSION"
        )
    python = plan.python or Version(case.python)
    return Facts(
        host=HostFacts(nvidia_pci_devices=tuple(f"0000:{i:02x}:00.0" for i in range(len(gpus)))),
        driver=DriverFacts(version=case.driver, source="nvml") if case.driver else DriverFacts(),
        gpus=gpus,
        python=PythonFacts(
            executable=f"{prefix}/bin/python",
            selected_by="VIRTUAL_ENV",
            version=Version(f"{python}.1"),
            platform=plan.platform,
            installers={"pip": f"{prefix}/bin/python -m pip"},
        ),
        torch=TorchFacts(
            version=dists[0].version,
            cuda=plan.cuda,
            location=f"{site}/torch",
            distributions=tuple(dists),
            conda_packages=conda,
        ),
        container=container,
    )


def _judge(facts: Facts) -> dict[str, CheckResult]:
    return {cid: CHECKS[cid](facts) for cid in JUDGES}


def _installed_build_passes_doctor(case: Case, fmt: str) -> None:
    from envkit.specs.container import CONTAINER_FORMATS, choose_image, image_kind
    from envkit.specs.template import load_template

    try:
        if fmt in CONTAINER_FORMATS:
            plan = spec_command._container_plan(  # the plan `envkit spec --format docker` renders
                SYSTEM,
                _spec_flags(case, fmt),
                load_template("pt2"),
                python_given=True,
                torch_given=False,
            )
            image = choose_image(plan, K, want=image_kind(load_template("pt2")))
            facts = _facts(case, plan, image_cuda=image.cuda)
        else:
            plan = _plan_of(case, fmt)
            facts = _facts(case, plan)
    except (NoBuildError, InputError):
        return
    bad = [
        r
        for r in _judge(facts).values()
        if r.status in (Status.WARN, Status.FAIL) and not _carried(r, plan.warnings)
    ]
    # driver.support's "too old for every current torch release" is about the driver, and the plan
    # says it in its own way: it is for an older torch.
    bad = [r for r in bad if not (r.id == "driver.support" and r.status is Status.WARN)]
    assert not bad, f"plan {plan.candidate} for {case} ({fmt}), installed:\n{_describe(bad)}"


def _spec_flags(case: Case, fmt: str) -> PlanFlags:
    from envkit.specs.render import spec_flags
    from envkit.specs.template import load_template

    return spec_flags(load_template("pt2"), case.flags(fmt), fmt)


@FAST
@given(case=cases(), fmt=st.sampled_from(FORMATS))
def test_what_envkit_installs_doctor_accepts(case: Case, fmt: str) -> None:
    _installed_build_passes_doctor(case, fmt)


@pytest.mark.slow
@SLOW
@given(case=cases(), fmt=st.sampled_from(FORMATS))
def test_what_envkit_installs_doctor_accepts_many(case: Case, fmt: str) -> None:
    _installed_build_passes_doctor(case, fmt)
