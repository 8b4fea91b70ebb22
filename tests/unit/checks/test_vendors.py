"""driver.amd, driver.intel, torch.gpu_vendor and torch.gfx_arch on hand-built facts: each verdict,
and the resolver's plan as the fix under each failure."""

from __future__ import annotations

import dataclasses

from envkit.checks.vendors import check_amd_driver, check_gfx_arch, check_gpu_vendor, check_intel_driver
from envkit.facts import (
    AccelGpu,
    DeepTorchFacts,
    DriverFacts,
    Facts,
    GpuFacts,
    PythonFacts,
    TorchFacts,
    VendorFacts,
)
from envkit.report import Status
from envkit.versions import ComputeCapability, NvVersion, Version

PYTHON = PythonFacts(
    executable="/envs/pt/bin/python", selected_by="PATH", version=Version("3.11.9"), platform="linux-x86_64"
)
MI300X = VendorFacts(
    "amd",
    gpus=(AccelGpu(0, "AMD Instinct MI300X", "0000:05:00.0", "0x74a1", "gfx942", 196592),),
    driver="amdgpu",
    driver_version="6.12.12",  # ROCm 6.4's kernel driver (amd.toml [[amdgpu_module]])
    sources=("sysfs",),
)
ARC = VendorFacts(
    "intel",
    gpus=(AccelGpu(0, "Intel Arc B580 Graphics", "0000:03:00.0", "0xe20b", "bmg"),),
    driver="xe",
    sources=("sysfs",),
)


def torch(version: str, *, hip: str | None = None, cuda: str | None = None) -> TorchFacts:
    return TorchFacts(
        version=Version(version),
        cuda=Version(cuda) if cuda else None,
        hip=hip,
        location="/envs/pt/lib/python3.11/site-packages/torch",
    )


ROCM_TORCH = torch("2.6.0+rocm6.2.4", hip="6.2.41134")
CUDA_TORCH = torch("2.5.1+cu124", cuda="12.4")
CPU_TORCH = torch("2.5.1+cpu")
AMD_BOX = Facts(python=PYTHON, amd=MI300X, torch=ROCM_TORCH)
NVIDIA_BOX = Facts(
    python=PYTHON,
    driver=DriverFacts(version=NvVersion("550.54.15"), cuda_version=Version("12.4"), source="nvml"),
    gpus=(GpuFacts(index=0, name="NVIDIA H100 80GB HBM3", compute_capability=ComputeCapability(9, 0)),),
    torch=CUDA_TORCH,
)


def test_rocm_torch_on_an_amd_box_passes() -> None:
    assert check_gpu_vendor(AMD_BOX).status is Status.PASS
    gfx = check_gfx_arch(AMD_BOX)
    assert gfx.status is Status.PASS and "gfx942" in gfx.detail
    amd = check_amd_driver(AMD_BOX)
    assert amd.status is Status.PASS and "ROCm 6.4's kernel driver" in amd.summary


def test_rocm_torch_on_an_nvidia_box_fails_with_the_cuda_plan() -> None:
    result = check_gpu_vendor(dataclasses.replace(NVIDIA_BOX, torch=ROCM_TORCH))
    assert result.status is Status.FAIL and "a build for AMD GPUs" in result.summary
    assert "NVIDIA GPUs" in result.summary
    assert "download.pytorch.org/whl/cu" in result.fix


def test_cuda_torch_on_an_amd_box_fails_with_the_rocm_plan() -> None:
    result = check_gpu_vendor(dataclasses.replace(AMD_BOX, torch=CUDA_TORCH))
    assert result.status is Status.FAIL and "AMD GPUs" in result.summary
    assert "download.pytorch.org/whl/rocm" in result.fix


def test_cpu_torch_beside_an_intel_gpu_fails_with_the_xpu_plan() -> None:
    result = check_gpu_vendor(Facts(python=PYTHON, intel=ARC, torch=CPU_TORCH))
    assert result.status is Status.FAIL and "CPU-only build" in result.summary
    assert "download.pytorch.org/whl/xpu" in result.fix


def test_no_gpu_and_no_torch_skip() -> None:
    assert check_gpu_vendor(Facts(python=PYTHON, torch=CPU_TORCH)).status is Status.SKIP
    assert check_gpu_vendor(Facts(python=PYTHON, amd=MI300X)).status is Status.SKIP
    assert check_gfx_arch(NVIDIA_BOX).status is Status.SKIP


def test_a_gfx_target_the_wheel_lacks_fails() -> None:
    apu = dataclasses.replace(
        MI300X, gpus=(AccelGpu(0, "AMD Radeon 780M", None, "0x15bf", "gfx1103"),), driver_version=None
    )
    result = check_gfx_arch(dataclasses.replace(AMD_BOX, amd=apu))
    assert result.status is Status.FAIL and "gfx1103" in result.summary
    assert "--nightly" in result.fix


def test_torch_own_arch_list_outranks_the_table() -> None:
    # --deep read torch.cuda.get_arch_list(): a local build for gfx1103 only.
    deep = DeepTorchFacts(ok=True, version=Version("2.6.0+rocm6.2.4"), arch_list=("gfx1103",))
    built = dataclasses.replace(ROCM_TORCH, deep=deep)
    result = check_gfx_arch(dataclasses.replace(AMD_BOX, torch=built))
    assert result.status is Status.FAIL and "reported by torch" in result.detail


def test_unknown_rocm_build_skips_and_says_how_to_know() -> None:
    local = torch("2.6.0a0+git1234", hip="6.2.41134")
    result = check_gfx_arch(dataclasses.replace(AMD_BOX, torch=local))
    assert result.status is Status.SKIP and "--deep" in result.detail


def test_amdgpu_driver_of_another_rocm_release_warns() -> None:
    # ROCm 6.4's driver (amdgpu 6.12) is tested with ROCm 6.1–6.4 user space; a 7.2 wheel is not.
    far = dataclasses.replace(AMD_BOX, torch=torch("2.11.0+rocm7.2", hip="7.2.0"))
    result = check_amd_driver(far)
    assert result.status is Status.WARN and "ROCm 6.4's driver" in result.summary
    assert result.fix


def test_amd_tools_without_kfd_warn_and_paste_skips() -> None:
    tools_only = dataclasses.replace(MI300X, sources=("amd-smi",))
    result = check_amd_driver(dataclasses.replace(AMD_BOX, amd=tools_only))
    assert result.status is Status.WARN and "/dev/kfd" in result.fix
    pasted = dataclasses.replace(MI300X, sources=("collect_env",))
    assert check_amd_driver(dataclasses.replace(AMD_BOX, amd=pasted)).status is Status.SKIP
    unanswered = Facts(unknown=("amd",))
    assert check_amd_driver(unanswered).status is Status.SKIP
    assert check_amd_driver(Facts()).status is Status.SKIP


def test_intel_level_zero_missing_fails() -> None:
    opencl_only = dataclasses.replace(ARC, level_zero=False)
    result = check_intel_driver(Facts(intel=opencl_only))
    assert result.status is Status.FAIL and "Level Zero" in result.summary
    assert check_intel_driver(Facts(intel=ARC)).status is Status.PASS
    unbound = dataclasses.replace(ARC, driver=None)
    assert check_intel_driver(Facts(intel=unbound)).status is Status.FAIL
    igpu = dataclasses.replace(ARC, gpus=(AccelGpu(0, "Intel UHD Graphics 630", None, "0x3e92"),))
    assert check_intel_driver(Facts(intel=igpu)).status is Status.SKIP


def test_xpu_torch_older_than_the_family_warns() -> None:
    # Battlemage is supported from torch 2.6 on (intel.toml first_torch): 2.5's XPU build warns.
    old = Facts(python=PYTHON, intel=ARC, torch=torch("2.5.1+xpu"))
    result = check_gfx_arch(old)
    assert result.status is Status.WARN and "2.6" in result.summary
    new = dataclasses.replace(old, torch=torch("2.6.0+xpu"))
    assert check_gfx_arch(new).status is Status.PASS


def test_hsa_override_gfx_version_runs_a_gfx_target_the_build_lacks() -> None:
    # A Radeon 780M (gfx1103) or RX 6700 XT (gfx1031) with HSA_OVERRIDE_GFX_VERSION=11.0.0 / 10.3.0,
    # the stopgap AMD's own forums and ROCm issues give (ROCm/MIOpen#3096 sets 10.3.0): the runtime
    # reports gfx1100 / gfx1030, which the wheels carry. It was a failure ('has no code'); it is a
    # warning that says what runs.
    from envkit.detect.host import relevant_env
    from envkit.facts import HostFacts

    apu = VendorFacts(
        "amd", gpus=(AccelGpu(0, "AMD Radeon 780M", None, "0x15bf", "gfx1103"),), sources=("sysfs",)
    )
    base = Facts(python=PYTHON, amd=apu, torch=ROCM_TORCH)
    assert check_gfx_arch(base).status is Status.FAIL
    env = relevant_env({"HSA_OVERRIDE_GFX_VERSION": "11.0.0", "HOME": "/root"})
    assert env == {"HSA_OVERRIDE_GFX_VERSION": "11.0.0"}
    result = check_gfx_arch(dataclasses.replace(base, host=HostFacts(env=env)))
    assert result.status is Status.WARN and "HSA_OVERRIDE_GFX_VERSION=11.0.0" in result.summary
    assert "gfx1100" in result.summary
    # An override to a target the build lacks too is still the failure.
    env = {"HSA_OVERRIDE_GFX_VERSION": "9.4.1"}
    assert check_gfx_arch(dataclasses.replace(base, host=HostFacts(env=env))).status is Status.FAIL
