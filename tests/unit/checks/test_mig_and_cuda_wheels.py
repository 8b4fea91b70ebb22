"""gpu.mig, the CUDA-wheel family of torch.duplicates (from the package lines alone), and
torch.cuda_libs on pasted reports (system CUDA libraries beside the ones a pip torch bundles)."""

from __future__ import annotations

import dataclasses

import pytest

from envkit.checks import CHECKS
from envkit.checks.gpu import check_gpu_mig
from envkit.checks.torch import check_torch_cuda_libs, check_torch_duplicates
from envkit.facts import (
    DeepTorchFacts,
    Distribution,
    Facts,
    GpuFacts,
    HostFacts,
    SharedLib,
    ToolkitFacts,
    TorchFacts,
    facts_from_json,
    facts_to_json,
)
from envkit.report import Status
from envkit.versions import ComputeCapability, Version

A100 = GpuFacts(index=0, name="NVIDIA A100-SXM4-80GB", compute_capability=ComputeCapability(8, 0))


def test_registered() -> None:
    assert CHECKS["gpu.mig"] is check_gpu_mig


def test_mig_slices_warn_with_what_mig_means_and_both_ways_out() -> None:
    """pytorch/pytorch#130181: an A100 split into two 3g.40gb MIG devices."""
    gpu = dataclasses.replace(A100, mig_enabled=True, mig_devices=("3g.40gb", "3g.40gb"))
    result = check_gpu_mig(Facts(gpus=(gpu,)))
    assert result.status is Status.WARN
    assert result.summary == (
        "GPU 0 (NVIDIA A100-SXM4-80GB) is split into 2 MIG devices (3g.40gb x2); "
        "a CUDA process sees only one of them"
    )
    assert "a process can use one MIG device only" in result.detail
    assert "NCCL collectives across slices" in result.detail
    assert "CUDA_VISIBLE_DEVICES=MIG-<uuid>" in result.fix
    assert "sudo nvidia-smi -i 0 -mig 0" in result.fix


def test_mig_mode_from_nvml_without_the_device_list_warns() -> None:
    gpu = dataclasses.replace(A100, mig_enabled=True, mig_pending=True)
    result = check_gpu_mig(Facts(gpus=(gpu, GpuFacts(index=1, name="x", mig_enabled=False))))
    assert result.status is Status.WARN
    assert result.summary == "GPU 0 (NVIDIA A100-SXM4-80GB) is in MIG mode"


def test_one_mig_device_chosen_by_cuda_visible_devices_passes() -> None:
    gpu = dataclasses.replace(A100, mig_enabled=True, mig_devices=("3g.40gb", "3g.40gb"))
    host = HostFacts(env={"CUDA_VISIBLE_DEVICES": "MIG-4b1d3c2a-0000-5555-aaaa-0123456789ab"})
    assert check_gpu_mig(Facts(host=host, gpus=(gpu,))).status is Status.PASS
    two = HostFacts(env={"CUDA_VISIBLE_DEVICES": "MIG-a,MIG-b"})
    assert check_gpu_mig(Facts(host=two, gpus=(gpu,))).status is Status.WARN


@pytest.mark.parametrize(
    ("gpus", "status"),
    [
        ((), Status.SKIP),
        ((GpuFacts(index=0, name="x", mig_enabled=False),), Status.PASS),
        ((GpuFacts(index=0, name="x"),), Status.SKIP),  # NVML did not say
        ((GpuFacts(index=0, name="x", source="collect_env"),), Status.PASS),  # nvidia-smi -L lists none
    ],
)
def test_no_mig(gpus: tuple[GpuFacts, ...], status: Status) -> None:
    assert check_gpu_mig(Facts(gpus=gpus)).status is status


def test_new_fields_survive_the_json_round_trip() -> None:
    facts = Facts(
        gpus=(GpuFacts(index=0, mig_enabled=True, mig_devices=("1g.10gb", "2g.20gb")),),
        torch=TorchFacts(
            distributions=(Distribution("vllm", Version("0.6.3"), requires_torch=("torch==2.4.0",)),)
        ),
    )
    again = facts_from_json(facts_to_json(facts))
    assert again == facts
    # A report from before the fields existed still reads (their defaults).
    data = facts_to_json(facts)
    del data["gpus"][0]["mig_devices"]
    del data["torch"]["distributions"][0]["requires_torch"]
    old = facts_from_json(data)
    assert old.gpus[0].mig_devices == () and old.torch.distributions[0].requires_torch == ()


@pytest.mark.parametrize(
    ("name", "version", "library", "major"),
    [
        ("nvidia-nccl-cu12", "2.29.3", "nccl", 12),
        ("nvidia_cudnn_cu13", "9.13.0.50", "cudnn", 13),
        ("nvidia-cuda-runtime", "13.0.96", "cuda-runtime", 13),  # CUDA 13's suffix-less wheels
        ("nvidia-cublas", "13.1.1.3", "cublas", 13),
        ("nvidia-cufft", "12.0.0.61", "cufft", None),  # a CUDA 13 wheel numbered 12: no major from it
        ("nvidia-ml-py", "12.560.30", None, None),  # NVML bindings, not a library torch loads
        ("nvidia-cudnn-frontend", "1.18.0", None, None),
        ("nvidia-cutlass-dsl", "4.4.2", None, None),
        ("torch", "2.5.1", None, None),
    ],
)
def test_cuda_library_wheels(name: str, version: str, library: str | None, major: int | None) -> None:
    dist = Distribution(name, Version(version))
    assert (dist.cuda_library, dist.cuda_major) == (library, major)


def test_nccl_of_two_cuda_majors_fails_without_torch_in_the_paste() -> None:
    """pytorch/pytorch#186591: `import torch` fails with undefined symbol ncclCommResume; collect_env
    printed PyTorch version N/A and the two NCCL wheels. ptrblck: uninstall the cu12 one."""
    torch = TorchFacts(
        distributions=(
            Distribution("nvidia-nccl-cu12", Version("2.29.3")),
            Distribution("nvidia-nccl-cu13", Version("2.29.7")),
        ),
        error="collect_env could not import torch (PyTorch version: N/A)",
    )
    result = check_torch_duplicates(Facts(torch=torch))
    assert result.status is Status.FAIL
    assert "nvidia-nccl-cu12 2.29.3 beside CUDA 13's" in result.summary
    assert result.fix.startswith("python -m pip uninstall -y nvidia-nccl-cu12  then reinstall torch")
    assert "pytorch/pytorch#186591" in result.detail
    assert "PyTorch version: N/A" in result.detail


def test_torch_own_cuda_decides_which_family_goes() -> None:
    dists = (
        Distribution("torch", Version("2.5.1+cu124")),
        Distribution("nvidia-nccl-cu13", Version("2.29.7")),
        Distribution("nvidia-cudnn-cu13", Version("9.13.0.50")),
        Distribution("nvidia-cuda-runtime", Version("13.0.96")),
        Distribution("nvidia-nccl-cu12", Version("2.21.5")),
        Distribution("nvidia-ml-py", Version("12.560.30")),
    )
    torch = TorchFacts(version=Version("2.5.1+cu124"), cuda=Version("12.4"), distributions=dists)
    result = check_torch_duplicates(Facts(torch=torch))
    assert result.status is Status.FAIL
    assert "beside CUDA 12's (torch is a CUDA 12.4 build)" in result.summary
    assert "uninstall -y nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-nccl-cu13" in result.fix
    assert "nvidia-ml-py" not in result.fix


def test_nvidia_ml_py_does_not_count_as_a_bundled_cuda_wheel() -> None:
    dists = tuple(
        Distribution(n, Version(v))
        for n, v in [
            ("torch", "2.5.1"),
            ("nvidia-cudnn-cu12", "9.1.0.70"),
            ("nvidia-nccl-cu12", "2.21.5"),
            ("nvidia-cublas-cu12", "12.4.5.8"),
            ("nvidia-cuda-runtime-cu12", "12.4.127"),
            ("nvidia-ml-py", "12.560.30"),
        ]
    )
    torch = TorchFacts(version=Version("2.5.1+cu124"), cuda=Version("12.4"), distributions=dists)
    result = check_torch_cuda_libs(Facts(torch=torch))
    assert result.status is Status.PASS
    assert result.summary == "no system CUDA libraries shadow torch's (4 bundled nvidia-* wheels)"
    assert check_torch_duplicates(Facts(torch=torch)).status is Status.PASS


def _pasted(torch: TorchFacts, *libs: SharedLib, nvcc: str | None = None) -> Facts:
    toolkits = (ToolkitFacts(nvcc="nvcc", version=Version(nvcc), on_path=True),) if nvcc else ()
    return Facts(host=HostFacts(cuda_libs=libs, unanswered=("env",)), toolkits=toolkits, torch=torch)


def _lib(path: str, version: str) -> SharedLib:
    return SharedLib(path, "cudnn", Version(version), "ld.so.cache")


def test_a_failed_import_beside_a_system_toolkit_names_the_pairing() -> None:
    """pytorch/pytorch#111469: libnvJitLink of a system CUDA 12.1 on LD_LIBRARY_PATH beside the
    wheels' newer one: "undefined symbol: __nvJitLinkAddData_12_1"."""
    torch = TorchFacts(
        distributions=(
            Distribution("torch", Version("2.1.0")),
            Distribution("nvidia-nvjitlink-cu12", Version("12.3.52")),
        ),
        error="collect_env could not import torch (PyTorch version: N/A): libcusparse.so.12: undefined "
        "symbol: __nvJitLinkAddData_12_1, version libnvJitLink.so.12",
    )
    result = check_torch_cuda_libs(_pasted(torch, nvcc="12.1.105"))
    assert result.status is Status.FAIL
    assert "a system CUDA 12.1.105 toolkit" in result.summary
    assert "__nvJitLinkAddData_12_1" in result.detail
    assert result.fix.startswith("unset LD_LIBRARY_PATH")


def test_a_cudnn_outside_the_system_folders_warns_on_a_paste() -> None:
    """pytorch/pytorch#80637: a module system's cuDNN 8.0.3 beside the 1.12 cu113 wheel's own."""
    torch = TorchFacts(
        version=Version("1.12.0+cu113"),
        cuda=Version("11.3"),
        distributions=(Distribution("torch", Version("1.12.0+cu113")),),
        deep=DeepTorchFacts(ok=True, cuda_available=True),
    )
    lib = _lib("/public/apps/cudnn/v8.0.3.33-cuda.11.0/cuda/lib64/libcudnn.so.8.0.3", "8.0.3")
    result = check_torch_cuda_libs(_pasted(torch, lib))
    assert result.status is Status.WARN
    assert "would shadow the cu113 wheel's own cudnn" in result.summary
    assert "/public/apps/cudnn/v8.0.3.33-cuda.11.0/cuda/lib64" in result.fix


@pytest.mark.parametrize(
    ("path", "version"),
    [
        ("/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0", "9.1.0"),  # a distribution package's
        ("/usr/local/cuda-12.4/lib64/libcudnn.so.9.1.0", "9.1.0"),  # the wheel's own version
    ],
)
def test_a_healthy_paste_with_a_system_cudnn_does_not_warn(path: str, version: str) -> None:
    """vllm-project/vllm#14537 (healthy): a distro cuDNN 9.2.1 beside torch 2.5.1+cu124's wheels."""
    torch = TorchFacts(
        version=Version("2.5.1+cu124"),
        cuda=Version("12.4"),
        distributions=(
            Distribution("torch", Version("2.5.1+cu124")),
            Distribution("nvidia-cudnn-cu12", Version("9.1.0.70")),
        ),
        deep=DeepTorchFacts(ok=True, cuda_available=True),
    )
    result = check_torch_cuda_libs(_pasted(torch, _lib(path, version), nvcc="12.4.131"))
    assert result.status is Status.PASS


def test_the_same_libraries_on_a_live_machine_are_left_to_the_ld_so_cache_rule() -> None:
    """Detected locally, LD_LIBRARY_PATH is known: a cuDNN only in the ld.so cache is harmless."""
    torch = TorchFacts(
        version=Version("1.12.0+cu113"),
        cuda=Version("11.3"),
        distributions=(Distribution("torch", Version("1.12.0+cu113")),),
    )
    lib = _lib("/public/apps/cudnn/v8.0.3.33-cuda.11.0/cuda/lib64/libcudnn.so.8.0.3", "8.0.3")
    assert check_torch_cuda_libs(Facts(host=HostFacts(cuda_libs=(lib,)), torch=torch)).status is Status.PASS
