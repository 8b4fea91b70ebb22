"""The resolver: the cases the issue names, tables over the knowledge base itself, and properties."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from envkit.errors import InputError, NoBuildError
from envkit.knowledge import load_knowledge, variant_cuda
from envkit.resolve import Channel, CudaKind, Plan, Request, parse_cuda_request, parse_torch_spec, resolve
from envkit.resolve.target import GpuTarget, Target, parse_gpu
from envkit.versions import ComputeCapability, NvVersion, Version
from tests.conftest import check_property, examples

K = load_knowledge()


def target(
    driver: str | None, *gpus: str, python: str | None = "3.11", platform: str = "linux-x86_64"
) -> Target:
    return Target(
        platform=platform,
        driver=NvVersion(driver) if driver else None,
        gpus=tuple(parse_gpu(g, K) for g in gpus),
        python=Version(python) if python else None,
    )


def plan(t: Target, cuda: str = "auto", torch: str | None = None, channel: str = "pip") -> Plan:
    return resolve(
        K,
        t,
        Request(
            torch=parse_torch_spec(torch) if torch else None,
            cuda=parse_cuda_request(cuda),
            channel=Channel(channel),
        ),
    )


# The cases the issue names -----------------------------------------------------------------------


def test_driver_470_gets_cu118_at_most() -> None:
    p = plan(target("470.82.01", "sm_70"))
    assert p.variant == "cu118"
    assert p.torch == Version("2.7.1")  # the last release with cu118 wheels
    # 470 is below 11.8's own driver (520.61.05): minor-version compatibility, and the wheel has
    # sm_70 SASS, so nothing needs PTX JIT (rules.build_on_driver): no warning.
    assert p.warnings == ()
    # Without a GPU, whether one needs the PTX is not known: the plan says so.
    assert "minor-version compatibility" in plan(target("470.82.01")).warnings[0]


def test_rtx_5090_needs_torch_2_7_with_cu128_or_newer() -> None:
    p = plan(target("570.86.10", "RTX 5090"))
    assert p.torch >= Version("2.7")
    cuda = variant_cuda(p.variant)
    assert cuda is not None and cuda >= Version("12.8")
    with pytest.raises(NoBuildError) as info:
        plan(target("570.86.10", "RTX 5090"), torch="2.6.*")
    assert "sm_120" in info.value.message


def test_tesla_p100_gets_cu126_or_older() -> None:
    p = plan(target("580.65.06", "Tesla P100-PCIE-16GB"))
    cuda = variant_cuda(p.variant)
    assert cuda is not None and cuda <= Version("12.6")
    assert any(
        "sm_60 is not in the cu130 build" in r.reason or "(sm_60) is not in the cu130" in r.reason
        for r in p.rejected
    )


def test_h200_with_driver_580_gets_cu130_not_cu132() -> None:
    p = plan(target("580.65.06", "NVIDIA H200"))
    assert p.variant == "cu130"
    assert p.warnings == ()
    assert p.index_url == "https://download.pytorch.org/whl/cu130"


def test_driver_535_gets_the_newest_torch_through_cu12x_without_a_warning_where_every_gpu_has_sass() -> None:
    p = plan(target("535.104.05", "sm_90"))
    newest_with_cu12 = max(
        r.torch for r in K.releases if any(v.startswith("cu12") for v in r.variants["linux-x86_64"])
    )
    assert p.torch == newest_with_cu12
    assert p.variant.startswith("cu12")
    assert p.warnings == ()  # sm_90 SASS in the wheel: minor-version compatibility runs it in full
    # The smallest gap: the oldest cu12 variant of the release, the newer ones passed over.
    cu12 = sorted(v for v in K.release(p.torch).variants["linux-x86_64"] if v.startswith("cu12"))
    assert p.variant == cu12[0]
    older = plan(target("535.104.05", "sm_90"), torch="2.8.*")
    assert older.variant == "cu126" and older.warnings == ()
    assert [r.candidate for r in older.rejected if "minor-version compatibility" in r.reason] == [
        "2.8.0+cu128",
        "2.8.0+cu129",
    ]
    assert any(r.reason == "driver 535.104.05 < 580.65.06 needed by CUDA 13.x" for r in p.rejected)
    # No GPU given: whether a GPU needs the wheel's PTX is not known, and the plan says so.
    bare = plan(target("535.104.05"))
    assert (bare.torch, bare.variant) == (p.torch, p.variant)
    assert "minor-version compatibility" in bare.warnings[0] and "--gpu" in bare.warnings[0]


def test_conda_cuda_12_1_is_the_old_pytorch_channel_route() -> None:
    p = plan(target("550.54.15", "sm_80"), cuda="12.1", channel="conda")
    assert p.torch == Version("2.5.1")
    assert p.conda is not None
    assert p.conda.channels[:2] == ("pytorch", "nvidia")
    assert "pytorch-cuda=12.1" in p.conda.dependencies
    assert p.conda_command() == (
        "conda install python=3.11 pytorch=2.5.1 torchvision=0.20.1 torchaudio=2.5.1 pytorch-cuda=12.1 "
        "-c pytorch -c nvidia -c defaults --override-channels"
    )


def test_conda_never_offers_the_pytorch_channel_past_2_5_1() -> None:
    with pytest.raises(NoBuildError) as info:
        # 2.14.0: past the pytorch channel (2.5.1) and past conda-forge's newest build (2.13.0).
        plan(target("580.65.06", "sm_80"), torch="2.14.0", channel="conda")
    assert "--channel pip" in info.value.hint


def test_conda_forge_offers_only_the_releases_it_built() -> None:
    # conda-forge never built 2.9.0: its pull request bumped to 2.9.0, then to 2.9.1 before it was
    # merged (knowledge/conda.toml); 2.9.1 is there, with linux-64's cuda129 build.
    with pytest.raises(NoBuildError):
        plan(target("580.65.06", "sm_90"), torch="==2.9.0", channel="conda")
    assert plan(target("580.65.06", "sm_90"), torch="==2.9.1", channel="conda").variant == "cu129"


def test_machine_without_gpu_gets_cpu() -> None:
    p = plan(target(None))
    assert p.variant == "cpu"
    assert p.torch == K.releases[0].torch
    assert p.requirements()[0] == f"torch=={p.torch}+cpu"


def test_planning_a_cuda_build_from_a_gpu_less_login_node() -> None:
    p = plan(target(None), cuda="12.6")
    assert p.variant == "cu126"
    assert any("without a driver" in w for w in p.warnings)


def test_cuda_major_takes_the_newest_fitting_minor() -> None:
    p = plan(target("580.65.06", "sm_90"), cuda="12")
    assert p.variant == max(
        (v for v in K.release(p.torch).variants["linux-x86_64"] if v.startswith("cu12")), key=variant_cuda
    )  # type: ignore[union-attr]


def test_python_range_limits_the_release() -> None:
    p = plan(target("550.54.15", "sm_80", python="3.9"))
    assert Version("3.9") in K.release(p.torch).python  # type: ignore[union-attr]
    assert p.torch < Version("2.9")


def test_unlisted_variants_only_when_asked() -> None:
    auto = plan(target("575.51.03", "sm_90"), torch="2.13.0")
    assert auto.variant != "cu129"
    asked = plan(target("575.51.03", "sm_90"), cuda="12.9", torch="2.13.0")
    assert asked.variant == "cu129"
    assert any("not in pytorch.org's install matrix" in w for w in asked.warnings)


def test_volta_on_a_driver_past_r580_has_no_build() -> None:
    with pytest.raises(NoBuildError) as info:
        plan(target("590.44.01", "Tesla V100-SXM2-32GB"))
    assert "R580 is the last branch" in info.value.message
    assert "--cuda cpu" in info.value.hint


def test_blackwell_on_an_old_driver_has_no_build() -> None:
    with pytest.raises(NoBuildError) as info:
        plan(target("535.104.05", "RTX 5090"))
    assert "needs driver R570 or newer" in info.value.message


def test_nothing_fits_lists_reasons_and_ways_out() -> None:
    with pytest.raises(NoBuildError) as info:
        plan(target("470.82.01", "sm_80"), torch=">=2.8")
    error = info.value
    assert error.exit_code == 3
    assert "2.15.0+cu130: driver 470.82.01 < 580.65.06 needed by CUDA 13.x" in error.message
    assert "upgrade the driver to ≥ 525.60.13" in error.hint
    assert "widen --torch: torch 2.7.1+cu118 fits" in error.hint


def test_mixed_gpus_need_one_wheel_for_both() -> None:
    p = plan(target("570.86.10", "sm_70", "sm_90"))
    row = K.arch_for(K.release(p.torch), p.variant, "linux-x86_64")  # type: ignore[arg-type]
    assert row is not None and row.covers(ComputeCapability(7, 0)) and row.covers(ComputeCapability(9, 0))


def test_windows_uses_windows_wheels_and_the_r580_floor_for_cuda_13() -> None:
    p = plan(target("576.02", "RTX 5090", platform="windows-x86_64"))
    cuda = variant_cuda(p.variant)
    assert cuda is not None and cuda.major == 12  # 576 is below the 13.x floor (R580)
    assert p.variant in K.release(p.torch).variants["windows-x86_64"]  # type: ignore[union-attr]


def test_macos_gets_plain_pypi() -> None:
    p = plan(target(None, platform="macos-arm64"))
    assert p.variant == "cpu"
    assert p.index_url is None
    assert p.requirements()[0] == f"torch=={p.torch}"


def test_rocm_only_when_asked() -> None:
    p = plan(target(None), cuda="rocm6.2", torch="2.5.1")
    assert p.variant == "rocm6.2"


def test_plan_json_contract() -> None:
    data = plan(target("535.104.05", "sm_90")).to_json()
    assert data["schema"] == "envkit.plan/1"
    for key in (
        "torch",
        "torchvision",
        "torchaudio",
        "variant",
        "cuda",
        "python",
        "channel",
        "index_url",
        "conda",
        "warnings",
        "rejected",
    ):
        assert key in data
    assert data["conda"] is None
    assert data["rejected"][0] == {
        "candidate": "2.15.0+cu130",
        "reason": "driver 535.104.05 < 580.65.06 needed by CUDA 13.x",
    }
    assert data["commands"]["pip"].startswith("pip install torch==2.14.1+cu126 torchvision==0.29.1")


@pytest.mark.parametrize("text", ["13.x", "cuda12", "1", "", "rocmx", "cu9", "cu1234", "09.2", "9.22"])
def test_bad_cuda_requests(text: str) -> None:
    with pytest.raises(InputError, match="--cuda"):
        parse_cuda_request(text)


def test_cuda_request_forms() -> None:
    assert parse_cuda_request("12.1").variant == "cu121"
    assert parse_cuda_request("cu121").variant == "cu121"
    # CUDA 9.x folders have two digits (download.pytorch.org/whl/cu92: torch 1.2-1.7).
    assert parse_cuda_request("9.2").variant == "cu92" and parse_cuda_request("CU92").variant == "cu92"
    assert parse_cuda_request("12").major == 12
    assert parse_cuda_request("AUTO").kind is CudaKind.AUTO
    with pytest.raises(InputError, match="--torch"):
        parse_torch_spec("two.five")
    assert parse_torch_spec("2.5.1").contains("2.5.1")
    assert parse_torch_spec("2.5.*").contains("2.5.0")


# Tables over the knowledge base itself (light-the-torch's pattern) -----------------------------

LINUX_CUDA = [(r, v) for r in K.releases for v in r.variants["linux-x86_64"] if v.startswith("cu")]


@pytest.mark.parametrize(("release", "variant"), LINUX_CUDA, ids=lambda x: str(getattr(x, "torch", x)))
def test_a_new_driver_accepts_every_variant(release, variant) -> None:  # type: ignore[no-untyped-def]
    row = K.arch_for(release, variant, "linux-x86_64")
    assert row is not None
    gpu = row.sass[-1]
    # The newest driver that still drives the GPU: R580 is the last branch for sm_70 and older.
    last = min((r.last_branch for r in K.driver_rules if r.applies(gpu) and r.last_branch), default=None)
    driver = NvVersion(f"{last}.95.05" if last else "999.99.99")
    p = resolve(
        K,
        Target("linux-x86_64", driver, (GpuTarget(gpu),), release.python[-1]),
        Request(torch=parse_torch_spec(str(release.torch)), cuda=parse_cuda_request(variant)),
    )
    assert (p.torch, p.variant) == (release.torch, variant)


@pytest.mark.parametrize(("release", "variant"), LINUX_CUDA, ids=lambda x: str(getattr(x, "torch", x)))
def test_a_driver_below_the_floor_accepts_none(release, variant) -> None:  # type: ignore[no-untyped-def]
    cuda = variant_cuda(variant)
    floor = K.driver_floors(cuda)[0]  # type: ignore[arg-type]
    assert floor is not None
    below = NvVersion(f"{floor.major - 1}.0")
    with pytest.raises(NoBuildError):
        resolve(
            K,
            Target("linux-x86_64", below, (), release.python[-1]),
            Request(torch=parse_torch_spec(str(release.torch)), cuda=parse_cuda_request(variant)),
        )


# Properties --------------------------------------------------------------------------------------

DRIVERS = sorted(
    {t.linux_driver for t in K.toolkits.values()}
    | {f.linux_min_driver for f in K.families.values() if f.linux_min_driver is not None}
    | {
        NvVersion(v)
        for v in (
            "470.82.01",
            "535.104.05",
            "550.54.15",
            "565.57.01",
            "575.51.03",
            "580.95.05",
            "590.44.01",
            "610.43.02",
        )
    }
)
CCS = sorted({g.cc for g in K.gpus})
PYTHONS = [Version(f"3.{m}") for m in range(8, 16)]
PLATFORMS = ["linux-x86_64", "linux-aarch64", "windows-x86_64"]

targets = st.builds(
    lambda platform, driver, ccs, python: Target(platform, driver, tuple(GpuTarget(c) for c in ccs), python),
    st.sampled_from(PLATFORMS),
    st.sampled_from(DRIVERS),
    st.lists(st.sampled_from(CCS), min_size=1, max_size=2),
    st.sampled_from(PYTHONS),
)


def _try(t: Target, request: Request) -> Plan | None:
    try:
        return resolve(K, t, request)
    except NoBuildError:
        return None


# The properties run 20 examples in the default suite, 300 under -m slow.
@examples(20, 300)
def test_a_newer_driver_never_yields_an_older_variant(max_examples: int) -> None:
    check_property(max_examples, _newer_driver, targets, st.sampled_from(DRIVERS))


def _newer_driver(t: Target, other: NvVersion) -> None:
    low, high = sorted([t.driver, other])  # type: ignore[type-var]
    a = _try(Target(t.platform, low, t.gpus, t.python), Request())
    b = _try(Target(t.platform, high, t.gpus, t.python), Request())
    if a is None:
        return
    dropped = any(
        rule.applies(g.cc) and rule.last_branch is not None and high.major > rule.last_branch
        for g in t.gpus
        for rule in K.driver_rules
    )
    if dropped:  # the newer branch no longer supports the GPU (R470 Kepler, R580 Volta): no build is right
        assert b is None
        return
    assert b is not None, "a newer driver lost every build"
    assert b.torch >= a.torch
    if b.torch == a.torch:
        assert variant_cuda(b.variant) >= variant_cuda(a.variant)  # type: ignore[operator]


@examples(20, 300)
def test_every_plan_satisfies_every_rule(max_examples: int) -> None:
    check_property(
        max_examples,
        _plan_satisfies_rules,
        targets,
        st.sampled_from(["auto", "12", "13", "cpu", "12.6", "11.8"]),
    )


def _plan_satisfies_rules(t: Target, cuda: str) -> None:
    p = _try(t, Request(cuda=parse_cuda_request(cuda)))
    if p is None:
        return
    release = K.release(p.torch)
    assert release is not None
    assert p.variant in release.variants[t.platform]
    assert t.python in release.python
    cuda_version = variant_cuda(p.variant)
    if cuda_version is None:
        return
    floor = K.driver_floors(cuda_version)[0]
    assert floor is not None and t.driver is not None and t.driver >= floor
    row = K.arch_for(release, p.variant, t.platform)
    assert row is not None
    for gpu in t.gpus:
        assert row.covers(gpu.cc), (p.candidate, gpu.cc)
        for rule in K.driver_rules:
            if rule.applies(gpu.cc) and rule.last_branch is not None:
                assert t.driver.major <= rule.last_branch


@examples(20, 300)
def test_auto_never_picks_a_variant_without_a_gpus_arch(max_examples: int) -> None:
    check_property(max_examples, _auto_covers_the_gpus, targets)


def _auto_covers_the_gpus(t: Target) -> None:
    p = _try(t, Request())
    if p is None:
        return
    assert p.variant.startswith("cu")  # a GPU target never silently gets the CPU build
    row = K.arch_for(K.release(p.torch), p.variant, t.platform)  # type: ignore[arg-type]
    assert row is not None
    assert all(row.covers(g.cc) for g in t.gpus)


def test_exact_cuda_the_driver_cannot_run_points_to_the_older_cuda() -> None:
    with pytest.raises(NoBuildError) as info:
        plan(target("470.82.01", "sm_80"), cuda="12.1")
    error = info.value
    assert error.message.splitlines()[1] == "  2.5.1+cu121: driver 470.82.01 < 525.60.13 needed by CUDA 12.x"
    assert "no cu121 build for linux-x86_64" in error.message
    assert (
        error.hint
        == "upgrade the driver to ≥ 525.60.13 (for torch 2.5.1+cu121); or --cuda 11.8 (torch 2.7.1+cu118 fits)"
    )
