"""Tegra binary compatibility: torch's own rule, ported as tests.

pytorch/pytorch test/test_cuda_compatibility.py@211757a85b72 (TestCodeCompatibleWithDevice) checks
torch.cuda._code_compatible_with_device(device_cc, code_cc) against DEVICE_REQUIREMENT; each case
below is one of its assertions, in envkit's terms (sass_runs(code, device)), plus the pairs
issue 25 names, where envkit's rule used to let desktop SASS run on a Jetson."""

from __future__ import annotations

import pytest

from envkit.knowledge import load_knowledge, sass_runs
from envkit.resolve import rules
from envkit.versions import ComputeCapability


def cc(value: int) -> ComputeCapability:
    return ComputeCapability(value // 10, value % 10)


# (device_cc, code_cc, expected): torch's test file, each assertTrue / assertFalse.
TORCH_CASES = [
    (80, 80, True),  # test_compatible_cases
    (86, 80, True),
    (80, 86, False),  # test_backward_incompatible
    (90, 80, False),  # test_cross_major_incompatible
    (75, 80, False),
    (53, 50, False),  # test_igpu_cases
    (87, 80, False),
    (53, 53, True),
    (110, 101, True),  # test_special_case_sm101_on_sm110
    (990, 990, True),  # test_unknown_code_cc: an unknown code cc is its own major's interval
    (991, 990, True),
]

# Issue 25's pairs: desktop SASS of the same major on a Jetson (all False), and Thor.
ISSUE_CASES = [
    (87, 80, False),  # sm_80 on Orin
    (53, 50, False),  # sm_50 on TX1 / Nano
    (62, 60, False),  # sm_60 on TX2
    (62, 61, False),  # sm_61 on TX2
    (72, 70, False),  # sm_70 on Xavier
    (101, 100, False),  # sm_100 on Thor as CUDA 12.8/12.9 report it
    (110, 101, True),  # sm_101 code on Thor as CUDA 13 reports it (renamed sm_110)
    (110, 110, True),
    (101, 101, True),
    (87, 87, True),
    (121, 120, True),  # GB10 (DGX Spark) runs sm_120: not a Tegra part in torch's table
    (103, 100, True),  # B300
    (89, 86, True),
]


@pytest.mark.parametrize(("device", "code", "expected"), TORCH_CASES + ISSUE_CASES)
def test_sass_runs_as_torch_says(device: int, code: int, expected: bool) -> None:
    assert sass_runs(cc(code), cc(device)) is expected


def test_the_resolver_rule_and_the_table_rule_are_one() -> None:
    build = rules.BuildArches(rules.ArchOrigin.REPORTED, sass=(cc(80), cc(90)))
    assert rules.arch_coverage(build, cc(87)).runs is False  # Orin: no sm_87 in a server wheel
    assert rules.arch_coverage(build, cc(86)).runs is True
    ptx = rules.BuildArches(rules.ArchOrigin.REPORTED, sass=(cc(80),), ptx=(cc(80),))
    assert rules.arch_coverage(ptx, cc(87)).via_ptx  # PTX still JIT-compiles for a Tegra GPU
    k = load_knowledge()
    orin = next(g for g in k.gpus if g.model.startswith("Jetson Orin"))
    row = next(a for a in k.arch if a.variant == "cu126" and a.platform == "linux-aarch64")
    assert row.covers(orin.cc) is any(sass_runs(s, orin.cc) for s in row.sass) or any(
        p <= orin.cc for p in row.ptx
    )
