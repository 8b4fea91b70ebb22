"""The checks that judge what an error text says (and torch.compile's toolchain, NCCL's build on a
machine): each names the cause with a fix that runs, and skips without evidence."""

from __future__ import annotations

import dataclasses

import pytest

from envkit.checks import CHECKS, run_checks
from envkit.detect.collect_env import UNREPORTED_CHECKS
from envkit.detect.errtext import read_error_text
from envkit.facts import (
    Distribution,
    DriverFacts,
    Facts,
    GpuFacts,
    HostFacts,
    SharedLib,
    TorchFacts,
)
from envkit.report import Report, Status
from envkit.versions import ComputeCapability, NvVersion, Version
from tests.unit.checks.test_checks import HEALTHY

SITE = "/srv/venvs/a/lib/python3.11/site-packages"


def _cause(text: str) -> tuple[str, Status, str, str]:
    """The most likely cause doctor --from names (the checks a text can inform, as diagnose_file runs)."""
    facts = read_error_text(text).facts
    report = Report.new(facts, run_checks(facts, [c for c in CHECKS if c not in UNREPORTED_CHECKS]))
    cause = report.cause
    assert cause is not None, [(c.id, c.status, c.summary) for c in report.checks]
    return cause.id, cause.status, cause.summary, cause.fix


def test_nvjitlink_from_a_toolkit_on_ld_library_path() -> None:
    cid, status, summary, fix = _cause(
        f"OSError: {SITE}/nvidia/cusparse/lib/libcusparse.so.12: undefined symbol: __nvJitLinkGetLinkedCubin_12_6, "
        "version libnvJitLink.so.12"
    )
    assert (cid, status) == ("torch.cuda_libs", Status.FAIL)
    assert summary.startswith("libcusparse.so.12 needs nvJitLink ≥ 12.6")
    assert fix.startswith("unset LD_LIBRARY_PATH")


def test_a_cuda_library_loaded_from_a_toolkit_folder_names_it() -> None:
    cid, _status, _summary, fix = _cause(
        "ImportError: /usr/local/cuda-12.2/lib64/libcublas.so.12: undefined symbol: cublasLtGetStatusString, "
        "version libcublasLt.so.12"
    )
    assert cid == "torch.cuda_libs" and "/usr/local/cuda-12.2/lib64" in fix


def test_flash_attn_built_for_another_torch() -> None:
    cid, status, summary, fix = _cause(
        f"ImportError: {SITE}/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so: undefined symbol: "
        "_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE\n"
        "torch==2.6.0+cu124\nflash-attn==2.7.0.post2\n"
    )
    assert (cid, status) == ("torch.extension_load", Status.FAIL)
    assert "flash-attn" in summary and "another torch than torch 2.6.0+cu124" in summary
    assert "--no-build-isolation flash-attn" in fix and fix.startswith("python -m pip install")


def test_torchvision_ops_get_the_paired_torchvision() -> None:
    cid, _status, _summary, fix = _cause(
        "RuntimeError: operator torchvision::nms does not exist\ntorch==2.5.1+cu121\ntorchvision==0.18.0+cu121\n"
    )
    # The versions say it first (torch.companions), and both name the torchvision of torch 2.5.1.
    assert cid == "torch.companions"
    assert "torchvision==0.20.1" in fix and "torch==2.5.1" in fix


def test_xformers_built_for_another_torch_installs_from_the_pytorch_index() -> None:
    cid, _status, summary, fix = _cause(
        "xFormers was built for: PyTorch 2.3.1+cu121 with CUDA 1201 (you have 2.4.0+cu121)\n"
        "torch==2.4.0+cu121\nxformers==0.0.27\n"
    )
    assert cid == "torch.extension_load" and "built for torch 2.3.1+cu121" in summary
    assert fix.endswith("xformers --index-url https://download.pytorch.org/whl/cu121")


def test_nvml_mismatch_is_the_driver() -> None:
    cid, status, _summary, fix = _cause("Failed to initialize NVML: Driver/library version mismatch\n")
    assert (cid, status) == ("driver.loaded", Status.FAIL) and fix.startswith("reboot")


def test_fabric_manager_error_802() -> None:
    cid, _status, summary, fix = _cause("RuntimeError: CUDA error: system not yet initialized\n")
    assert cid == "torch.cuda_available" and "fabric manager" in summary
    assert "nvidia-fabricmanager" in fix


def test_oom_held_by_another_process() -> None:
    cid, status, summary, fix = _cause(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 2 has a total capacity "
        "of 23.53 GiB of which 44.88 MiB is free. Process 991 has 21.10 GiB memory in use. Including "
        "non-PyTorch memory, this process has 2.37 GiB memory in use. Of the allocated memory 1.9 GiB is "
        "allocated by PyTorch, and 20.00 MiB is reserved by PyTorch but unallocated."
    )
    assert (cid, status) == ("gpu.memory", Status.FAIL)
    assert summary == "GPU 2 is out of memory because process 991 hold 21.10 GiB of its 23.53 GiB"
    assert fix.startswith("nvidia-smi --query-compute-apps")


def test_oom_of_the_process_itself_is_a_warning_with_the_fragmentation_fix() -> None:
    cid, status, _summary, fix = _cause(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity "
        "of 79.15 GiB of which 300.00 MiB is free. Including non-PyTorch memory, this process has 78.80 GiB "
        "memory in use. Of the allocated memory 70.00 GiB is allocated by PyTorch, and 8.00 GiB is reserved by "
        "PyTorch but unallocated."
    )
    assert (cid, status) == ("gpu.memory", Status.WARN)
    assert fix.startswith("export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")


@pytest.mark.parametrize(
    ("last", "fix_has"),
    [
        ("Error while creating shared memory segment /dev/shm/nccl-x (size 9637888)", "--ipc=host"),
        (
            "socketStartConnect: Connect to 172.17.0.3<60427> failed : Connection refused",
            "NCCL_SOCKET_IFNAME",
        ),
        ("Cuda failure 'peer access is not supported between these two devices'", "NCCL_P2P_DISABLE=1"),
    ],
)
def test_nccl_failure_by_cause(last: str, fix_has: str) -> None:
    cid, _status, _summary, fix = _cause(
        "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled "
        f"system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3\nLast error:\n{last}\n"
    )
    assert cid == "nccl.failure" and fix_has in fix


def test_triton_without_libcuda_so() -> None:
    cid, status, _summary, fix = _cause("/usr/bin/ld: cannot find -lcuda: No such file or directory\n")
    assert (cid, status) == ("torch.compile_toolchain", Status.FAIL)
    assert "ln -s libcuda.so.1" in fix and "TRITON_LIBCUDA_PATH" in fix


def test_no_kernel_image_without_the_gpu_named() -> None:
    facts = read_error_text(
        "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    ).facts
    result = CHECKS["torch.gpu_arch"](facts)
    assert result.status is Status.FAIL
    assert "nvidia-smi --query-gpu=name,compute_cap" in result.fix


def test_the_text_checks_skip_without_an_error_text() -> None:
    for cid in ("torch.extension_load", "gpu.memory", "nccl.failure"):
        assert CHECKS[cid](HEALTHY).status is Status.SKIP


# torch.compile_toolchain on a machine ---------------------------------------------------------------


def _compile_machine(**host: object) -> Facts:
    torch = dataclasses.replace(
        HEALTHY.torch, distributions=(*HEALTHY.torch.distributions, Distribution("triton", Version("3.1.0")))
    )
    libs = (SharedLib("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "cuda", Version("1"), "ld.so.cache"),)
    base = dataclasses.replace(HEALTHY.host, c_compiler="/usr/bin/gcc", cuda_libs=libs)
    return dataclasses.replace(HEALTHY, torch=torch, host=dataclasses.replace(base, **host))  # type: ignore[arg-type]


def test_libcuda_so_1_only_warns_with_the_symlink() -> None:
    result = CHECKS["torch.compile_toolchain"](_compile_machine())
    assert result.status is Status.WARN and "only libcuda.so.1" in result.summary
    assert result.fix.startswith("sudo ln -s libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so")


def test_no_compiler_warns_and_everything_there_passes() -> None:
    both = (
        SharedLib("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "cuda", Version("1"), "ld.so.cache"),
        SharedLib("/usr/lib/x86_64-linux-gnu/libcuda.so", "cuda", None, "ld.so.cache"),
    )
    assert (
        CHECKS["torch.compile_toolchain"](_compile_machine(c_compiler="", cuda_libs=both)).status
        is Status.WARN
    )
    assert CHECKS["torch.compile_toolchain"](_compile_machine(cuda_libs=both)).status is Status.PASS


# nccl.version -----------------------------------------------------------------------------------------


def _nccl_machine(nccl: str, wheel: str, gpu: str, cc: tuple[int, int], driver: str = "570.86.15") -> Facts:
    torch = TorchFacts(
        version=Version("2.6.0+cu126"),
        cuda=Version("12.6"),
        distributions=(Distribution("torch", Version("2.6.0+cu126")), Distribution(wheel, Version(nccl))),
    )
    gpus = (GpuFacts(index=0, name=gpu, compute_capability=ComputeCapability(*cc)),)
    return Facts(driver=DriverFacts(version=NvVersion(driver)), gpus=gpus, torch=torch, host=HostFacts())


def test_an_nccl_without_blackwell_code_warns() -> None:
    result = CHECKS["nccl.version"](_nccl_machine("2.21.5", "nvidia-nccl-cu12", "NVIDIA B200", (10, 0)))
    assert result.status is Status.WARN and "no Blackwell code (NCCL's first is 2.25.1)" in result.summary
    assert result.fix.startswith("python -m pip install -U nvidia-nccl-cu12")


def test_a_cuda_13_nccl_on_volta_fails_and_a_fitting_one_passes() -> None:
    volta = _nccl_machine("2.28.3", "nvidia-nccl-cu13", "Tesla V100-SXM2-32GB", (7, 0), driver="580.65.06")
    assert CHECKS["nccl.version"](volta).status is Status.FAIL
    hopper = _nccl_machine("2.21.5", "nvidia-nccl-cu12", "NVIDIA H100 80GB HBM3", (9, 0))
    assert CHECKS["nccl.version"](hopper).status is Status.PASS


def test_the_driver_below_the_ncll_cuda_floor_fails() -> None:
    old = _nccl_machine("2.21.5", "nvidia-nccl-cu12", "NVIDIA A100-SXM4-80GB", (8, 0), driver="470.82.01")
    result = CHECKS["nccl.version"](old)
    assert result.status is Status.FAIL and "needs driver ≥ 525.60.13" in result.summary
