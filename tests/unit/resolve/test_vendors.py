"""The resolver on AMD and Intel GPUs (ROCm and XPU wheels), and what --explain says it passed over."""

from __future__ import annotations

import pytest

from envkit.errors import InputError, NoBuildError
from envkit.knowledge import load_knowledge
from envkit.resolve import Channel, Plan, Request, parse_cuda_request, resolve
from envkit.resolve.plan import parse_torch_spec
from envkit.resolve.target import AccelTarget, GpuTarget, Target, parse_any_gpu, target_from_flags
from envkit.versions import NvVersion, Version

K = load_knowledge()
BASE = Target(platform="linux-x86_64", driver=None, gpus=(), python=Version("3.11"))


def flags(*gpus: str, driver: str | None = None, platform: str = "linux-x86_64") -> Target:
    return target_from_flags(K, base=BASE, gpus=gpus, driver=driver, platform=platform)


def name(p: Plan) -> str:
    return f"{p.torch}+{p.variant}"


def plan(t: Target, cuda: str = "auto") -> Plan:
    return resolve(K, t, Request(cuda=parse_cuda_request(cuda), channel=Channel("pip")))


# --gpu: AMD and Intel names and targets ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "vendor", "arch"),
    [
        ("MI300X", "amd", "gfx942"),
        ("gfx942", "amd", "gfx942"),
        ("gfx90a:sramecc+:xnack-", "amd", "gfx90a"),
        ("Instinct MI210", "amd", "gfx90a"),
        ("RX 7900 XTX", "amd", "gfx1100"),
        ("Arc B580", "intel", "bmg"),
        ("Arc A770", "intel", "dg2"),
    ],
)
def test_gpu_flag_names_amd_and_intel_gpus(text: str, vendor: str, arch: str) -> None:
    gpu = parse_any_gpu(text, K)
    assert isinstance(gpu, AccelTarget)
    assert (gpu.vendor, gpu.arch) == (vendor, arch)


def test_nvidia_names_stay_nvidia() -> None:
    assert isinstance(parse_any_gpu("RTX 4090", K), GpuTarget)
    assert isinstance(parse_any_gpu("sm_90", K), GpuTarget)


@pytest.mark.parametrize(("text", "nearest"), [("MI300Z", "MI300X"), ("Arc C770", "Arc A770")])
def test_an_unknown_amd_or_intel_name_gets_the_nearest_known_ones(text: str, nearest: str) -> None:
    with pytest.raises(InputError) as info:
        parse_any_gpu(text, K)
    assert nearest in str(info.value)


def test_driver_beside_amd_gpus_is_the_amdgpu_driver() -> None:
    t = flags("MI300X", driver="6.12.12")
    assert t.driver is None and t.amd_driver == "6.12.12" and t.has_amd and not t.has_nvidia
    with pytest.raises(InputError):
        flags("Arc B580", driver="1.3")
    with pytest.raises(InputError):
        flags("MI300X", driver="not-a-version")


# Plans -------------------------------------------------------------------------------------------


def test_mi300x_gets_the_newest_rocm_wheel_that_carries_gfx942() -> None:
    p = plan(flags("MI300X"))
    assert p.variant.startswith("rocm") and p.index_url.endswith(f"/whl/{p.variant}")
    row = K.vendors.rocm_row(p.torch, p.variant)
    assert row is not None and "gfx942" in row.gfx
    doc = p.to_json()
    assert doc["gpu_vendor"] == "amd" and doc["rocm"] == p.variant.removeprefix("rocm")
    assert doc["target"]["accelerators"] == [{"vendor": "amd", "arch": "gfx942", "name": "MI300X"}]
    # No driver given: the plan says the amdgpu driver was not checked.
    assert any("amdgpu driver was not checked" in w for w in p.warnings)
    assert name(plan(flags("gfx942"))) == name(p)


def test_an_amdgpu_driver_from_another_rocm_release_is_a_warning() -> None:
    # amdgpu 6.12 is ROCm 6.4's kernel driver (amd.toml [[amdgpu_module]]), tested with 6.1–6.4.
    p = plan(flags("MI300X", driver="6.12.12"))
    assert any("ROCm 6.4's kernel driver" in w for w in p.warnings)
    assert plan(flags("MI300X", driver="6.12.12"), cuda="rocm6.4").warnings == ()


def test_an_amd_plan_says_whether_the_driver_was_unknown_or_not_given() -> None:
    # `envkit resolve --gpu MI300X` (no --driver) warned 'envkit does not know which ROCm release
    # this driver is', as if a driver had been given.
    bare = " ".join(plan(flags("MI300X")).warnings)
    assert "its version is not known (--driver" in bare and "which ROCm release" not in bare
    odd = " ".join(plan(flags("MI300X", driver="6.99.1")).warnings)
    assert "which ROCm release amdgpu 6.99.1 is" in odd


def test_explicit_rocm_variant_and_rocm_kind() -> None:
    assert plan(flags("MI210"), cuda="rocm6.2").variant == "rocm6.2"
    assert plan(flags("MI210"), cuda="rocm").variant.startswith("rocm")
    # Asked for on a machine without an AMD GPU (an image built for another): a plan that says so.
    other = plan(flags("RTX 4090", driver="550.54.15"), cuda="rocm")
    assert any("for AMD GPUs: the target has none" in w for w in other.warnings)
    # Not asked for: an NVIDIA machine never gets a ROCm build, nor an AMD one a CUDA build.
    assert plan(flags("RTX 4090", driver="550.54.15")).variant.startswith("cu")
    assert not any(r.candidate.endswith(("+cu126", "+cu130")) for r in plan(flags("MI300X")).rejected)


def test_arc_b580_gets_an_xpu_wheel_and_its_driver_requirement() -> None:
    p = plan(flags("Arc B580"))
    assert p.variant == "xpu" and p.index_url.endswith("/whl/xpu")
    family = K.vendors.intel_family("bmg")
    assert family is not None and p.torch >= family.first_torch
    assert any("Level Zero" in w for w in p.warnings)
    assert p.to_json()["gpu_vendor"] == "intel"
    assert name(plan(flags("Arc B580"), cuda="xpu")) == name(p)


def test_xpu_families_run_from_the_release_pytorch_and_intel_name() -> None:
    # PyTorch 2.5 ("Intel Client GPUs", Intel's 2.5 post: Arc discrete graphics) runs the Arc A-Series;
    # 2.6 added Arc B-Series and Core Ultra Series 2 (Lunar / Arrow Lake) (Intel's 2.6 release post).
    # They were said to start at 2.7 (the oldest page envkit had read), so --torch 2.5.1 on an A770
    # and --torch 2.6.0 on a B580 were 'no build'.
    def pinned(gpu: str, torch: str) -> Plan:
        request = Request(
            cuda=parse_cuda_request("auto"), channel=Channel("pip"), torch=parse_torch_spec(torch)
        )
        return resolve(K, flags(gpu), request)

    assert name(pinned("Arc A770", "==2.5.1")) == "2.5.1+xpu"
    assert name(pinned("Arc B580", "==2.6.0")) == "2.6.0+xpu"
    assert name(pinned("Lunar Lake", "==2.6.0")) == "2.6.0+xpu"
    with pytest.raises(NoBuildError):
        pinned("Arc B580", "==2.5.1")


def test_windows_torch_2_5_xpu_installs_torch_alone() -> None:
    # PyTorch 2.5's get_start_xpu, 'Platform Windows': torch only, torchvision and torchaudio built
    # from source. The plan pinned torchvision==0.20.1 torchaudio==2.5.1 from an index without them.
    request = Request(
        cuda=parse_cuda_request("auto"), channel=Channel("pip"), torch=parse_torch_spec("==2.5.1")
    )
    windows = resolve(K, flags("Arc A770", platform="windows-x86_64"), request)
    assert windows.companions == ()
    assert (
        windows.pip_command()
        == "pip install torch==2.5.1+xpu --index-url https://download.pytorch.org/whl/xpu"
    )
    assert any("build them from source" in w and "torchvision and torchaudio" in w for w in windows.warnings)
    assert windows.to_json()["companions"] == [] and windows.to_json()["torchvision"] == "0.20.1"
    # Linux 2.5.1 and Windows 2.6.0 have them (the pages' 'pip3 install torch torchvision torchaudio').
    linux = resolve(K, flags("Arc A770"), request)
    assert linux.companions == ("torchvision", "torchaudio") and "torchvision==0.20.1" in linux.pip_command()
    newer = Request(
        cuda=parse_cuda_request("auto"), channel=Channel("pip"), torch=parse_torch_spec("==2.6.0")
    )
    assert (
        "torchaudio==2.6.0" in resolve(K, flags("Arc A770", platform="windows-x86_64"), newer).pip_command()
    )


def test_no_xpu_wheel_for_macos() -> None:
    with pytest.raises(NoBuildError):
        plan(flags("Arc B580", platform="macos-arm64"), cuda="xpu")


def test_a_gfx_target_no_release_carries_is_no_build_with_the_nightly_and_cpu_ways() -> None:
    with pytest.raises(NoBuildError) as info:
        plan(flags("gfx1103"))
    ways = {w.rule: w.text for w in info.value.ways_out}
    assert "envkit resolve --nightly --gpu gfx1103" in ways["nightly"]
    assert "--cuda cpu" in ways["cuda"]
    # gfx1036 (a Raphael iGPU) is in no list, nightly's either: CPU only.
    with pytest.raises(NoBuildError) as info:
        plan(flags("gfx1036"))
    assert "--cuda cpu" in {w.rule: w.text for w in info.value.ways_out}["cuda"]
    assert "nightly" not in {w.rule for w in info.value.ways_out}


def test_a_cpu_plan_on_a_machine_with_a_gpu_is_never_silent() -> None:
    with pytest.raises(NoBuildError):
        plan(flags("gfx1036"))  # auto refuses; --cuda cpu is the user's choice
    assert plan(flags("gfx1036"), cuda="cpu").variant == "cpu"


# What --explain lists -----------------------------------------------------------------------------


def test_rtx_5090_on_570_lists_every_newer_build_it_passed_over() -> None:
    t = Target(
        platform="linux-x86_64",
        driver=NvVersion("570.86.10"),
        gpus=(parse_any_gpu("RTX 5090", K),),  # type: ignore[arg-type]
        python=Version("3.11"),
    )
    p = plan(t)
    assert name(p) == "2.11.0+cu128"
    passed = {r.candidate: r.reason for r in p.rejected}
    assert "(--cuda 12.9 picks it)" in passed["2.13.0+cu129"]
    assert "install matrix does not list it" in passed["2.13.0+cu129"]
    # Every build of a newer release is there, with its reason; the CPU builds are not "passed over".
    newer = {
        f"{r.torch}+{v}"
        for r in K.releases
        if r.torch > p.torch
        for v in r.variants.get("linux-x86_64", ())
        if v.startswith("cu")
    }
    assert newer <= set(passed)
    assert not any(b.endswith("+cpu") for b in passed)
    explicit = plan(t, cuda="cu129")
    assert name(explicit) == "2.13.0+cu129"
    assert any("install matrix" in w for w in explicit.warnings)


def test_battlemage_g31_device_ids_are_bmg() -> None:
    # Arc Pro B70 / B65 (BMG-G31): 0xE220-0xE222 follow the G21 ids in the kernel's INTEL_BMG_IDS
    # (include/drm/intel/pciids.h, as the dri-devel patch fixing INTEL_BMG_IDS quotes it); a B70's
    # sysfs id was 'not a GPU torch's XPU build supports', and the plan the CPU build.
    for device in ("0xe220", "0xe221", "0xe222"):
        found = K.vendors.intel_by_device(device)
        assert found is not None and found.family == "bmg"
