"""One envkit, third property: every fix doctor prints, applied to the facts (the install it names,
the driver it asks for), removes its finding and raises no other.

The machines are tests.unit.test_agreement's (platforms x drivers x GPU generations x Pythons),
each with some build of torch on it: any release and wheel variant of its platform, its
torchvision of the same release or of another. Where the property fails, the rule is what is fixed.
"""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envkit.facts import (
    CondaPackage,
    Distribution,
    DriverFacts,
    Facts,
    GpuFacts,
    HostFacts,
    PythonFacts,
    TorchFacts,
)
from envkit.knowledge import variant_cuda
from envkit.report import CheckResult, Status
from envkit.versions import NvVersion, Version
from tests.unit.test_agreement import (
    FAST,
    LINUX_DRIVERS,
    SLOW,
    WINDOWS_DRIVERS,
    Case,
    K,
    _describe,
    _judge,
    cases,
)

_RANK = {Status.PASS: 0, Status.SKIP: 0, Status.WARN: 1, Status.FAIL: 2}
_PIN = re.compile(r"\b(torch|torchvision|torchaudio)==(\S+)")
_CONDA_PIN = re.compile(r"\b(pytorch|torchvision|torchaudio)=([0-9][^=\s\"]*)")
_INDEX = re.compile(r"--index-url \S*/whl/(\w+)")
_DRIVER_AT_LEAST = re.compile(r"(?:upgrade the (?:host's )?driver to (?:≥ )?|install driver )([0-9][0-9.]*)")
_BRANCH = re.compile(r"(?:from|to) the R(\d+) branch")


@st.composite
def installed(draw: st.DrawFn) -> tuple[Case, Facts]:
    """A machine of ``cases()`` with some build of torch on it (any release and wheel variant of
    its platform, its companions of the same release or of another): what doctor may meet."""
    case = draw(cases())
    releases = [r for r in K.releases if r.variants.get(case.platform)]
    release = draw(st.sampled_from(releases))
    variant = draw(st.sampled_from(release.variants[case.platform]))
    pythons = release.python_on(case.platform)
    case = dataclasses.replace(case, python=str(draw(st.sampled_from(pythons))))
    companion = release if draw(st.integers(0, 3)) else draw(st.sampled_from(releases))
    local = "" if case.platform.startswith("macos") else f"+{variant}"
    site = f"/envs/pt/lib/python{case.python}/site-packages"
    gpus = tuple(
        GpuFacts(index=i, name=name, compute_capability=cc) for i, (cc, name) in enumerate(case.gpus)
    )
    facts = Facts(
        host=HostFacts(nvidia_pci_devices=tuple(f"0000:{i:02x}:00.0" for i in range(len(gpus)))),
        driver=DriverFacts(version=case.driver, source="nvml") if case.driver else DriverFacts(),
        gpus=gpus,
        python=PythonFacts(
            executable="/envs/pt/bin/python",
            selected_by="VIRTUAL_ENV",
            version=Version(f"{case.python}.1"),
            platform=case.platform,
            installers={"pip": "/envs/pt/bin/python -m pip"},
        ),
        torch=TorchFacts(
            version=Version(f"{release.torch}{local}"),
            cuda=variant_cuda(variant),
            hip=variant[4:] if variant.startswith("rocm") else None,
            location=f"{site}/torch",
            distributions=(
                Distribution("torch", Version(f"{release.torch}{local}"), site),
                Distribution("torchvision", Version(f"{companion.torchvision}{local}"), site),
            ),
        ),
    )
    return case, facts


def _installs(facts: Facts, line: str) -> Facts:
    """``facts`` after the install command in ``line`` (pip's from a wheel index, or conda's)."""
    torch = facts.torch
    pins = dict(_PIN.findall(line))
    conda = not pins and " install " in line
    if conda:
        pins = {("torch" if n == "pytorch" else n): v for n, v in _CONDA_PIN.findall(line)}
    if "torch" not in pins:
        return facts
    version = Version(pins["torch"])
    index = _INDEX.search(line)
    macos = facts.python is not None and str(facts.python.platform).startswith("macos")
    if conda:
        forge = re.search(r"cuda-version=(\d+)", line)
        channel = re.search(r"pytorch-cuda=(\d+\.\d+)", line)
        # conda-forge's __cuda picks the minor: the newest the driver runs, within the major.
        cuda = Version(channel.group(1)) if channel else None
        if forge and facts.driver.version is not None:
            cuda = K.cuda_for_driver(facts.driver.version)
            if cuda is None or cuda.major != int(forge.group(1)):
                cuda = Version(f"{forge.group(1)}.0")
        variant, local = None, ""
    else:
        variant = index.group(1) if index else version.local
        cuda = variant_cuda(variant) if variant else None
        local = f"+{variant}" if variant and version.local is None and not macos else ""
    dists = []
    for dist in torch.distributions:
        if dist.name in pins:
            pinned = Version(pins[dist.name])
            dist = dataclasses.replace(dist, version=Version(f"{pinned}{local}") if local else pinned)
        dists.append(dist)
    if "torch" not in {d.name for d in dists}:
        dists.append(Distribution("torch", version, torch.location))
    conda_packages = (CondaPackage("pytorch", version, "cuda" if cuda else "cpu"),) if conda else ()
    return dataclasses.replace(
        facts,
        torch=dataclasses.replace(
            torch,
            version=Version(f"{version}{local}") if local else version,
            cuda=cuda,
            distributions=tuple(dists),
            conda_packages=conda_packages,
        ),
    )


def _upgrades_driver(facts: Facts, line: str) -> Facts:
    """``facts`` after the driver the line asks for: exactly the minimum it names (the branch's
    oldest driver envkit knows, for "the R570 branch")."""
    found = _DRIVER_AT_LEAST.search(line)
    if found:
        driver = NvVersion(found.group(1).rstrip("."))
    else:
        branch = _BRANCH.search(line)
        if not branch:
            return facts
        known = [d for d in (*LINUX_DRIVERS, *WINDOWS_DRIVERS) if d.major == int(branch.group(1))]
        driver = min(known) if known else NvVersion(f"{branch.group(1)}.00")
    return dataclasses.replace(facts, driver=dataclasses.replace(facts.driver, version=driver))


def _apply(facts: Facts, line: str) -> Facts:
    return _installs(_upgrades_driver(facts, line), line)


def _every_fix_works(case: Case, facts: Facts) -> None:
    before = _judge(facts)
    for cid, result in before.items():
        if result.status not in (Status.WARN, Status.FAIL) or not result.fix:
            continue
        for line in result.fix.splitlines():
            after_facts = _apply(facts, line)
            if after_facts == facts:
                continue  # a fix that is no install and no driver (a command to read more)
            after = _judge(after_facts)
            where = f"{case}, torch {facts.torch.version}: {cid} {result.status.value}: {result.summary}"
            assert _RANK[after[cid].status] == 0 or _unchecked(after[cid], after_facts), (
                f"{where}\n  fix: {line}\n  after it: {after[cid].status.value}: {after[cid].summary}"
            )
            worse = [r for other, r in after.items() if _RANK[r.status] > _RANK[before[other].status]]
            assert not worse, f"{where}\n  fix: {line}\n  raises:\n{_describe(worse)}"


def _unchecked(result: CheckResult, facts: Facts) -> bool:
    """The warning every plan for a machine whose GPUs are not known carries: minor-version
    compatibility whose need for PTX JIT cannot be judged (rules.BuildStatus.UNCHECKED)."""
    return (
        result.status is Status.WARN
        and "minor-version compatibility" in result.summary
        and not any(g.compute_capability for g in facts.visible_gpus)
    )


@settings(FAST, max_examples=10)  # each example searches drivers for driver.support's fix
@given(machine=installed())
def test_every_fix_doctor_prints_works(machine: tuple[Case, Facts]) -> None:
    _every_fix_works(*machine)


@pytest.mark.slow
@SLOW
@given(machine=installed())
def test_every_fix_doctor_prints_works_many(machine: tuple[Case, Facts]) -> None:
    _every_fix_works(*machine)
