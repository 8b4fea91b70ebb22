"""The compatibility rules' one home (envkit.resolve.rules): each verdict on the knowledge base itself,
the probes' own copy of arch coverage against it, and the callers that format their messages from it."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest

from envkit.checks.compat import check_gpu_arch, check_torch_driver_compat
from envkit.checks.driver_support import check_driver_support
from envkit.errors import NoBuildError
from envkit.facts import DriverFacts, Facts, GpuFacts, HostFacts, PythonFacts, TorchFacts
from envkit.knowledge import load_knowledge
from envkit.report import Status
from envkit.resolve import Request, parse_cuda_request, resolve, rules
from envkit.resolve.target import GpuTarget, Target, parse_gpu, target_from_facts
from envkit.versions import ComputeCapability, NvVersion, Version

K = load_knowledge()
CC = ComputeCapability


# 1. the driver floor --------------------------------------------------------------------------------


def test_cuda_10_2_needs_its_own_driver_and_410_is_below_it() -> None:
    v = rules.driver_floor(K, Version("10.2"), NvVersion("410.104"))
    assert v.status is rules.FloorStatus.TOO_OLD
    assert v.reason is rules.FloorReason.TOOLKIT_DRIVER
    assert str(v.floor) == "440.33" and v.minor_version_compatibility is False
    assert v.family == "CUDA 10.2" and not v.runs


def test_cuda_12_4_on_535_runs_only_through_minor_version_compatibility() -> None:
    v = rules.driver_floor(K, Version("12.4"), NvVersion("535.104.05"))
    assert v.status is rules.FloorStatus.MINOR_VERSION and v.runs
    assert (str(v.floor), str(v.toolkit_driver)) == ("525.60.13", "550.54.14")
    assert v.reason is rules.FloorReason.FAMILY_FLOOR and v.family == "CUDA 12.x"


def test_windows_12x_floor_is_table_2s_528_33() -> None:
    v = rules.driver_floor(K, Version("12.1"), NvVersion("527.41"), windows=True)
    assert str(v.floor) == "528.33" and v.status is rules.FloorStatus.TOO_OLD


def test_a_cuda_the_table_lacks_is_unknown_never_a_pass() -> None:
    v = rules.driver_floor(K, Version("8.0"), NvVersion("580.65.06"))
    assert v.status is rules.FloorStatus.UNKNOWN and v.reason is rules.FloorReason.NO_FAMILY
    assert v.floor is None and not v.runs


def test_no_driver_gives_the_requirement_only() -> None:
    v = rules.driver_floor(K, Version("13.0"))
    assert v.status is rules.FloorStatus.NO_DRIVER and str(v.floor) == "580.65.06"


# 2. the driver branch -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("driver", "windows", "branch"),
    [
        ("581.57", True, 580),  # R580 U4 for Windows
        ("538.78", True, 535),  # "535.183.06 (Linux) / 538.78 (Windows)", NVIDIA's R535 notes
        ("572.83", True, 570),  # "570.133.20 (Linux) / 572.83 (Windows)", NVIDIA's R570 notes
        ("474.44", True, 470),  # the last Kepler driver for Windows
        ("566.14", True, 565),
        ("419.67", True, 418),
        ("580.95.05", False, 580),
        ("590.44.01", False, 590),
    ],
)
def test_the_branch_of_a_driver(driver: str, windows: bool, branch: int) -> None:
    assert rules.driver_branch(K, NvVersion(driver), windows=windows) == branch


def test_windows_581_is_r580_so_pascal_is_still_supported() -> None:
    gtx = parse_gpu("GTX 1080 Ti", K)
    on_windows = rules.gpu_driver_support(K, gtx.cc, NvVersion("581.57"), windows=True)
    assert on_windows.status is rules.BranchStatus.SUPPORTED and on_windows.last_branch == 580
    on_linux = rules.gpu_driver_support(K, gtx.cc, NvVersion("590.44.01"))
    assert on_linux.status is rules.BranchStatus.DROPPED and "Pascal" in on_linux.what


@pytest.mark.parametrize(
    ("gpu", "driver", "status", "branch"),
    [
        ("RTX 4090", "470.82.01", rules.BranchStatus.TOO_OLD, 520),
        ("sm_90", "470.82.01", rules.BranchStatus.TOO_OLD, 520),
        ("A100", "440.33.01", rules.BranchStatus.TOO_OLD, 450),
        ("RTX 5090", "565.57.01", rules.BranchStatus.TOO_OLD, 570),
        ("sm_103", "570.124.06", rules.BranchStatus.TOO_OLD, 575),
        ("sm_110", "575.57.08", rules.BranchStatus.TOO_OLD, 580),
        ("Tesla K80", "470.82.01", rules.BranchStatus.SUPPORTED, None),
        ("Tesla K80", "535.104.05", rules.BranchStatus.DROPPED, 470),
        ("H100", "535.104.05", rules.BranchStatus.SUPPORTED, None),
    ],
)
def test_driver_branch_against_every_architecture(
    gpu: str, driver: str, status: rules.BranchStatus, branch: int | None
) -> None:
    target = parse_gpu(gpu, K)
    v = rules.gpu_driver_support(K, target.cc, NvVersion(driver), name=target.name)
    assert v.status is status
    if status is rules.BranchStatus.TOO_OLD:
        assert v.first_branch == branch
    if status is rules.BranchStatus.DROPPED:
        assert v.last_branch == branch


def test_a_product_row_applies_by_name() -> None:
    cc = CC(12, 0)
    named = rules.gpu_driver_support(
        K, cc, NvVersion("570.133.20"), name="NVIDIA RTX PRO 6000 Blackwell Server Edition"
    )
    assert named.status is rules.BranchStatus.TOO_OLD and named.first_branch == 575
    assert rules.gpu_driver_support(K, cc, NvVersion("570.133.20")).supported


def test_a_gpu_newer_than_every_row_is_unknown() -> None:
    v = rules.gpu_driver_support(K, CC(13, 0), NvVersion("610.43.02"))
    assert v.status is rules.BranchStatus.UNKNOWN


# 3. arch coverage -----------------------------------------------------------------------------------


def test_an_official_wheel_has_its_exact_list() -> None:
    build = rules.build_arches(K, torch=Version("2.6.0+cu126"), variant="cu126")
    assert build.origin is rules.ArchOrigin.OFFICIAL
    assert rules.arch_coverage(build, CC(12, 0)).status is rules.ArchStatus.MISSING
    assert rules.arch_coverage(build, CC(8, 9)).runs is True  # sm_86 SASS runs on 8.9


@pytest.mark.parametrize(
    ("torch", "cuda", "cc", "status"),
    [
        ("1.7.0", "10.2", CC(8, 0), rules.ArchStatus.ABOVE_TOOLKIT),  # CUDA 10.2 stops at sm_75
        ("2.7.0.dev20250310+cu124", "12.4", CC(12, 0), rules.ArchStatus.ABOVE_TOOLKIT),
        ("2.6.0.dev20241112+cu121", "12.1", CC(12, 0), rules.ArchStatus.ABOVE_TOOLKIT),
        ("2.10.0a0+git1234", "13.0", CC(6, 1), rules.ArchStatus.BELOW_TOOLKIT),  # nothing below sm_75
        ("2.9.0a0+git1234", "12.8", CC(9, 0), rules.ArchStatus.WITHIN_TOOLKIT),
        ("1.1.0", "11.1", CC(8, 6), rules.ArchStatus.WITHIN_TOOLKIT),
        # 8.7 is Orin, a Tegra GPU: desktop sm_86 SASS does not run on it (torch's
        # DEVICE_REQUIREMENT; CUDA's "Binary Compatibility"), and nvcc 11.1 has no sm_87
        ("1.1.0", "11.1", CC(8, 7), rules.ArchStatus.ABOVE_TOOLKIT),
    ],
)
def test_an_unlisted_build_is_bounded_by_its_toolkit(
    torch: str, cuda: str, cc: ComputeCapability, status: rules.ArchStatus
) -> None:
    build = rules.build_arches(K, torch=Version(torch), cuda=Version(cuda), variant=None)
    assert build.origin is rules.ArchOrigin.TOOLKIT
    assert rules.arch_coverage(build, cc).status is status


def test_a_reported_list_wins_and_ptx_covers_newer_gpus() -> None:
    build = rules.build_arches(
        K, torch=Version("2.6.0+cu126"), variant="cu126", reported=("sm_80", "sm_90", "compute_90")
    )
    assert build.origin is rules.ArchOrigin.REPORTED
    v = rules.arch_coverage(build, CC(12, 0))
    assert v.status is rules.ArchStatus.COVERED and v.via_ptx


def test_nothing_known_is_unknown() -> None:
    build = rules.build_arches(K, torch=None, variant=None, cuda=None)
    assert rules.arch_coverage(build, CC(9, 0)).runs is None


def _probe_util() -> object:
    path = Path(__file__).resolve().parents[3] / "envkit" / "probes" / "envkit_probe_util.py"
    spec = importlib.util.spec_from_file_location("envkit_probe_util_parity", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_probes_arch_coverage_agrees_with_the_rule() -> None:
    """verify_device runs in the target interpreter and cannot import envkit: its own `covered` must
    give the rule's answer for every arch row of the knowledge base and every GPU it knows."""
    covered = _probe_util().covered  # type: ignore[attr-defined]
    ccs = sorted({g.cc for g in K.gpus} | {c for row in K.arch for c in (*row.sass, *row.ptx)})
    checked = 0
    for row in K.arch:
        build = rules.BuildArches(rules.ArchOrigin.OFFICIAL, row.sass, row.ptx)
        for cc in ccs:
            assert covered(row.names(), cc.major, cc.minor) == bool(rules.arch_coverage(build, cc).runs), (
                row.torch,
                row.variant,
                row.platform,
                cc,
            )
            checked += 1
    assert checked > 1000


# 4. conda-forge's lines -----------------------------------------------------------------------------


def test_conda_forge_lines() -> None:
    selector = K.conda.forge_cuda_selector
    # The CUDA build by its build string (cuda{XY}_…, the feedstock's recipe) and cuda-version X.Y.
    assert rules.conda_forge_dependencies(K, Version("2.7.1"), Version("12.8")) == (
        "pytorch=2.7.1=cuda128*",
        f"{selector}=12.8",
    )
    assert rules.conda_forge_dependencies(K, Version("2.7.1"), None) == ("pytorch=2.7.1=cpu*",)


# The callers ----------------------------------------------------------------------------------------


def target(driver: str, *gpus: str, platform: str = "linux-x86_64", python: str = "3.11") -> Target:
    return Target(platform, NvVersion(driver), tuple(parse_gpu(g, K) for g in gpus), python=Version(python))


def test_r470_cannot_plan_for_hopper_and_the_error_carries_records() -> None:
    with pytest.raises(NoBuildError) as info:
        resolve(K, target("470.82.01", "sm_90"), Request())
    error = info.value
    assert error.summary.startswith("no torch build fits linux-x86_64, driver 470.82.01, sm_90")
    assert any(r.rule == "gpu_driver" for r in error.rejected)
    # One upgrade for the GPU's branch and the build's CUDA: R520 drives Hopper, and cu118 (floor
    # 450.80.02, sm_90 SASS) runs on any R520 driver.
    way = error.ways_out[0]
    assert (way.rule, way.driver) == ("driver", "520.61.05")
    assert way.text == "upgrade the driver to ≥ 520.61.05, the R520 branch or newer (for torch 2.7.1+cu118)"
    assert error.ways_out[-1].value == "cpu"  # --cuda cpu
    assert error.hint == "; or ".join(w.text for w in error.ways_out)  # the text renders the records
    assert all(f"  {r.candidate}: {r.reason}" in error.message for r in error.rejected[:8])


def test_windows_581_runs_the_gtx_1080_ti_on_cu126() -> None:
    plan = resolve(K, target("581.57", "GTX 1080 Ti", platform="windows-x86_64"), Request())
    assert plan.candidate == "2.14.1+cu126"


def test_a_jetson_orin_gets_no_download_pytorch_org_build() -> None:
    # L4T r36.4.3 is JetPack 6.1/6.2: NVIDIA's JetPack index, never an SBSA wheel (jetson.toml).
    orin = target("36.4.3", "Jetson AGX Orin", platform="linux-aarch64", python="3.10")
    plan = resolve(K, orin, Request())
    assert plan.jetpack == "6.1 / 6.2" and plan.index_url == "https://pypi.jetson-ai-lab.io/jp6/cu126"
    assert plan.requirements()[0] == "torch==2.5.0"  # the JetPack wheels carry no local tag
    assert "download.pytorch.org" not in plan.pip_command()
    # Asked for a download.pytorch.org build, or for a Python the JetPack has no wheels for: refused,
    # with the JetPack's own way out.
    py312 = dataclasses.replace(orin, python=Version("3.12"))
    for request, t in ((Request(cuda=parse_cuda_request("cu130")), orin), (Request(), py312)):
        with pytest.raises(NoBuildError) as info:
            resolve(K, t, request)
        jetson = next(w for w in info.value.ways_out if w.rule == "jetson")
        assert "pypi.jetson-ai-lab.io/jp6/cu126" in jetson.text


def paste(**torch: object) -> Facts:
    """Facts as a pasted collect_env gives them: no platform, no interpreter path."""
    gpu = torch.pop("gpu", ("Tesla P100-PCIE-16GB", CC(6, 0)))
    driver = torch.pop("driver", "410.104")
    name, cc = gpu  # type: ignore[misc]
    return Facts(
        driver=DriverFacts(version=NvVersion(str(driver)), source="collect_env"),
        gpus=(GpuFacts(index=0, name=name, compute_capability=cc, source="collect_env"),),
        python=PythonFacts(executable="python", selected_by="collect_env", version=Version("3.8")),
        torch=TorchFacts(**torch),  # type: ignore[arg-type]
    )


def test_torch_150_cu102_on_410_fails_with_no_minor_version_compatibility() -> None:
    result = check_torch_driver_compat(paste(version=Version("1.5.0"), cuda=Version("10.2")))
    assert result.status is Status.FAIL
    assert result.summary == "torch 1.5.0 (CUDA 10.2) needs driver ≥ 440.33; this is 410.104"
    assert "no minor-version compatibility" in result.detail


def test_an_unknown_floor_skips_and_says_what_is_missing() -> None:
    result = check_torch_driver_compat(paste(version=Version("0.4.1"), cuda=Version("8.0")))
    assert result.status is Status.SKIP
    assert "does not know which driver CUDA 8.0 needs" in result.summary
    assert "no CUDA 8.x row" in result.detail


def test_an_a100_under_the_official_1_6_0_cu102_wheel_fails_on_its_exact_list() -> None:
    # torch 1.6.0+cu102's list: pytorch/builder:main@8d064bfcfe2e manywheel/build.sh (3.7;5.0;6.0;7.0;7.5).
    facts = paste(
        version=Version("1.6.0"), cuda=Version("10.2"), gpu=("A100-SXM4-40GB", CC(8, 0)), driver="450.80.02"
    )
    result = check_gpu_arch(facts)
    assert result.status is Status.FAIL
    assert "compiled architectures (of the official wheel): sm_37 sm_50 sm_60 sm_70 sm_75" in result.detail


def test_an_a100_under_a_cu102_build_envkit_does_not_list_fails() -> None:
    # A source build (1.6.0a0+git…) is no official wheel: only CUDA 10.2's own bound is known.
    facts = paste(
        version=Version("1.6.0a0+b31f58d"),
        cuda=Version("10.2"),
        gpu=("A100-SXM4-40GB", CC(8, 0)),
        driver="450.80.02",
    )
    result = check_gpu_arch(facts)
    assert result.status is Status.FAIL
    assert "not an official wheel envkit knows" in result.detail
    assert "CUDA 10.2 cannot emit sm_80 code" in result.detail


def test_a_5090_under_a_cu124_nightly_fails() -> None:
    facts = paste(
        version=Version("2.7.0.dev20250310+cu124"),
        cuda=Version("12.4"),
        gpu=("NVIDIA GeForce RTX 5090", CC(12, 0)),
        driver="570.124.06",
    )
    assert check_gpu_arch(facts).status is Status.FAIL


def test_driver_support_on_windows_581_with_pascal_passes_the_branch() -> None:
    facts = dataclasses.replace(
        paste(version=Version("2.5.1+cu124"), cuda=Version("12.4"), gpu=("GTX 1080 Ti", CC(6, 1))),
        driver=DriverFacts(version=NvVersion("581.57"), source="collect_env"),
        host=HostFacts(os="Microsoft Windows 11 Pro"),
    )
    result = check_driver_support(facts)
    assert result.status is not Status.FAIL, result.summary


def test_a_paste_without_a_platform_is_not_the_readers_machine() -> None:
    facts = paste(version=Version("1.5.0"), cuda=Version("10.2"))
    t = target_from_facts(facts, K)
    assert t.platform == "linux-x86_64"
    assert any("assumed linux-x86_64" in a for a in t.assumed)
    windows = dataclasses.replace(facts, host=HostFacts(os="Microsoft Windows 10 Pro"))
    assert target_from_facts(windows, K).platform == "windows-x86_64"
    gh200 = dataclasses.replace(
        facts, gpus=(GpuFacts(index=0, name="NVIDIA GH200 480GB", compute_capability=CC(9, 0)),)
    )
    t = target_from_facts(gh200, K)
    assert t.platform == "linux-aarch64" and any("Arm host" in a for a in t.assumed)
    # The facts' own platform, and the caller's machine only for facts it detected itself.
    assert target_from_facts(facts, K, local_platform="macos-arm64").platform == "macos-arm64"
    assert GpuTarget(CC(9, 0)).label == "sm_90"


# build_on_driver: one verdict for the resolver, torch.driver_compat and spec.driver --------------


def _mvc(coverage: list[rules.ArchVerdict]) -> rules.BuildVerdict:
    return rules.build_on_driver(K, Version("12.6"), NvVersion("535.104.05"), coverage)


def test_minor_version_compatibility_with_sass_for_every_gpu_is_clean() -> None:
    build = rules.BuildArches(rules.ArchOrigin.OFFICIAL, (ComputeCapability(8, 0),), ())
    v = _mvc([rules.arch_coverage(build, ComputeCapability(8, 0))])
    assert v.status is rules.BuildStatus.MINOR_VERSION and v.clean and v.runs
    assert v.needed_driver is None


def test_minor_version_compatibility_where_a_gpu_needs_the_ptx_fails() -> None:
    build = rules.BuildArches(
        rules.ArchOrigin.OFFICIAL, (ComputeCapability(8, 0),), (ComputeCapability(8, 0),)
    )
    v = _mvc([rules.arch_coverage(build, ComputeCapability(9, 0))])
    assert v.status is rules.BuildStatus.PTX_JIT and not v.runs and not v.clean
    assert v.ptx_only == (ComputeCapability(9, 0),)
    assert v.needed_driver == NvVersion("560.28.03")  # CUDA 12.6's own driver


def test_minor_version_compatibility_without_gpus_is_unchecked() -> None:
    v = _mvc([])
    assert v.status is rules.BuildStatus.UNCHECKED and v.runs and not v.clean


def test_the_toolkit_driver_runs_everything_and_below_the_floor_nothing() -> None:
    assert (
        rules.build_on_driver(K, Version("12.6"), NvVersion("560.28.03"), []).status is rules.BuildStatus.RUNS
    )
    low = rules.build_on_driver(K, Version("12.6"), NvVersion("520.61.05"), [])
    assert low.status is rules.BuildStatus.TOO_OLD and low.needed_driver == NvVersion("525.60.13")
