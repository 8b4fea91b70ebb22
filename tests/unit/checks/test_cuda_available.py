"""torch.cuda_available: a CUDA build that cannot use CUDA fails with the cause the evidence shows
and both ways out; a CPU build, or no evidence, skips; a working GPU machine passes."""

from __future__ import annotations

from envkit.checks import CHECKS
from envkit.checks.cuda_available import check_torch_cuda_available
from envkit.facts import (
    CondaPackage,
    DeepTorchFacts,
    Distribution,
    DriverFacts,
    Facts,
    GpuFacts,
    HostFacts,
    PythonFacts,
    TorchFacts,
)
from envkit.report import Status
from envkit.versions import ComputeCapability, NvVersion, Version

CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"


def paste(torch: TorchFacts, **more: object) -> Facts:
    python = PythonFacts(executable="python", selected_by="collect_env", platform="linux-x86_64")
    return Facts(python=python, torch=torch, **more)  # type: ignore[arg-type]


def deep(available: bool, *warnings: str) -> DeepTorchFacts:
    return DeepTorchFacts(ok=True, cuda_available=available, warnings=warnings)


def test_registered() -> None:
    assert CHECKS["torch.cuda_available"] is check_torch_cuda_available


def test_no_driver_on_the_node_fails_with_both_ways_out() -> None:
    # pytorch/pytorch#77520: torch 1.10.2 (CUDA 11.3), no GPU and no driver answered.
    torch = TorchFacts(
        version=Version("1.10.2"),
        cuda=Version("11.3"),
        distributions=(
            Distribution("torch", Version("1.10.2")),
            Distribution("torchvision", Version("0.11.3")),
            Distribution("torchaudio", Version("0.10.2")),
        ),
        deep=deep(False),
    )
    result = check_torch_cuda_available(paste(torch))
    assert result.status is Status.FAIL
    assert (
        result.summary
        == "torch 1.10.2 (CUDA 11.3) cannot use CUDA: no NVIDIA driver or GPU answered on this node"
    )
    assert "login node" in result.detail and "NVIDIA runtime" in result.detail
    fixes = result.fix.splitlines()
    assert any("nvidia-smi" in f for f in fixes)
    assert any("docker run --gpus all" in f and "--nv" in f for f in fixes)
    assert fixes[-1] == (
        "or, to run on the CPU here: python -m pip install torch==1.10.2 torchvision==0.11.3 "
        f"torchaudio==0.10.2 {CPU_INDEX}"
    )


def test_torch_says_no_driver() -> None:
    # pytorch/pytorch#74733: torch 1.7.0+cu110, "Found no NVIDIA driver on your system".
    torch = TorchFacts(
        version=Version("1.7.0+cu110"),
        cuda=Version("11.0"),
        deep=deep(False),
        cuda_init_error="no_driver",
        cuda_init_message="Found no NVIDIA driver on your system",
    )
    result = check_torch_cuda_available(paste(torch))
    assert result.status is Status.FAIL
    assert result.summary.endswith("torch found no NVIDIA driver (libcuda could not be loaded)")
    assert "torch said: Found no NVIDIA driver on your system" in result.detail
    assert f"python -m pip install torch==1.7.0 {CPU_INDEX}" in result.fix


def test_message_alone_is_enough_when_the_paste_is_cut_short() -> None:
    # Only torch's warning survived: no version line, no "Is CUDA available".
    torch = TorchFacts(cuda_init_error="init_failed", cuda_init_message="CUDA driver initialization failed")
    result = check_torch_cuda_available(paste(torch))
    assert result.status is Status.FAIL
    assert (
        result.summary == "this CUDA build of torch cannot use CUDA: the CUDA driver could not be initialized"
    )
    assert f"python -m pip install torch {CPU_INDEX}" in result.fix


def test_a_container_is_named_when_the_facts_show_one() -> None:
    torch = TorchFacts(
        version=Version("2.1.0a0+29c30b1"),
        cuda=Version("12.1"),
        deep=deep(
            False,
            "CUDA initialization: Found no NVIDIA driver on your system. (Triggered internally at "
            "/opt/pytorch/pytorch/c10/cuda/CUDAFunctions.cpp:108.)",
        ),
        cuda_init_error="no_driver",
    )
    result = check_torch_cuda_available(paste(torch))
    first = result.fix.splitlines()[0]
    assert first.startswith("torch's message comes from an NGC container's build") and "--gpus all" in first
    assert "torch==2.1.0 --index-url" in result.fix  # the release an NGC 2.1.0a0 build leads to
    plain = TorchFacts(version=Version("2.4.0+cu121"), cuda=Version("12.1"), cuda_init_error="no_driver")
    by_hostname = check_torch_cuda_available(paste(plain, host=HostFacts(hostname="3f2a9c1b7d4e")))
    assert "Docker container id" in by_hostname.detail


def test_gpus_listed_but_no_driver_usable() -> None:
    torch = TorchFacts(version=Version("2.4.0+cu121"), cuda=Version("12.1"), cuda_init_error="init_failed")
    gpu = GpuFacts(index=0, name="NVIDIA A100-SXM4-80GB", compute_capability=ComputeCapability(8, 0))
    result = check_torch_cuda_available(paste(torch, gpus=(gpu,)))
    assert result.status is Status.FAIL
    assert "1 GPU(s) are listed" in result.detail


def test_driver_too_old_points_at_the_driver() -> None:
    torch = TorchFacts(
        cuda=Version("12.1"),
        cuda_init_error="driver_too_old",
        reported_driver_cuda=Version("11.0"),
        cuda_init_message="The NVIDIA driver on your system is too old (found version 11000)",
    )
    result = check_torch_cuda_available(paste(torch))
    assert result.status is Status.FAIL
    assert result.summary == (
        "torch (CUDA 12.1) cannot use CUDA: the NVIDIA driver is too old (it provides CUDA 11.0) for CUDA 12.1"
    )
    assert "torch.driver_compat" in result.detail


def test_forward_compatibility_error_804() -> None:
    torch = TorchFacts(
        version=Version("2.3.0+cu121"),
        cuda=Version("12.1"),
        deep=deep(False),
        cuda_init_error="cuda_error",
        cuda_init_message="Error 804: forward compatibility was attempted on non supported HW",
    )
    result = check_torch_cuda_available(paste(torch))
    assert "cuda-compat" in result.summary and "LD_LIBRARY_PATH" in result.fix


def test_no_gpus_names_cuda_visible_devices() -> None:
    torch = TorchFacts(version=Version("2.5.1+cu124"), cuda=Version("12.4"), cuda_init_error="no_gpus")
    host = HostFacts(env={"CUDA_VISIBLE_DEVICES": ""})
    result = check_torch_cuda_available(
        paste(torch, host=host, driver=DriverFacts(version=NvVersion("550.54.15")))
    )
    assert "CUDA_VISIBLE_DEVICES=''" in result.detail


def test_conda_pytorch_gets_conda_cpuonly() -> None:
    torch = TorchFacts(
        version=Version("2.1.0"),
        cuda=Version("12.1"),
        conda_packages=(
            CondaPackage("pytorch", Version("2.1.0"), "py3.10_cuda12.1_cudnn8.9.2_0", "pytorch"),
        ),
        deep=deep(False),
    )
    assert check_torch_cuda_available(paste(torch)).fix.splitlines()[-1] == (
        "or, to run on the CPU here: conda install pytorch==2.1.0 cpuonly -c pytorch"
    )


def test_false_with_a_driver_and_gpus_and_no_reason() -> None:
    torch = TorchFacts(version=Version("2.5.1+cu124"), cuda=Version("12.4"), deep=deep(False))
    gpu = GpuFacts(index=0, name="NVIDIA H100 80GB HBM3", compute_capability=ComputeCapability(9, 0))
    facts = paste(torch, gpus=(gpu,), driver=DriverFacts(version=NvVersion("550.54.15")))
    result = check_torch_cuda_available(facts)
    assert result.status is Status.FAIL
    assert "driver 550.54.15, 1 GPU(s) listed" in result.summary


def test_a_working_gpu_machine_passes() -> None:
    torch = TorchFacts(
        version=Version("2.5.1+cu124"),
        cuda=Version("12.4"),
        deep=DeepTorchFacts(ok=True, cuda_available=True, device_count=8),
    )
    gpu = GpuFacts(index=0, name="NVIDIA H100 80GB HBM3", compute_capability=ComputeCapability(9, 0))
    result = check_torch_cuda_available(
        paste(torch, gpus=(gpu,), driver=DriverFacts(version=NvVersion("550.54.15")))
    )
    assert result.status is Status.PASS
    assert (
        result.summary
        == "torch 2.5.1+cu124 (CUDA 12.4) can use CUDA (torch.cuda.is_available(), 8 device(s))"
    )


def test_cpu_and_rocm_builds_skip() -> None:
    cpu = check_torch_cuda_available(paste(TorchFacts(version=Version("2.5.1+cpu"), deep=deep(False))))
    assert cpu.status is Status.SKIP and "CPU-only build" in cpu.summary
    rocm = TorchFacts(version=Version("2.5.1+rocm6.2"), hip="6.2", deep=deep(True))
    assert "ROCm 6.2" in check_torch_cuda_available(paste(rocm)).summary
    not_compiled = TorchFacts(cuda_init_error="not_compiled")
    assert check_torch_cuda_available(paste(not_compiled)).status is Status.SKIP


def test_no_evidence_skips_and_says_what_is_missing() -> None:
    nothing = check_torch_cuda_available(
        paste(TorchFacts(version=Version("2.5.1+cu124"), cuda=Version("12.4")))
    )
    assert nothing.status is Status.SKIP
    assert nothing.summary == "nothing says whether torch can use CUDA"
    assert "envkit doctor --deep" in nothing.fix
    assert check_torch_cuda_available(paste(TorchFacts())).status is Status.SKIP  # not installed
    # A paste cut before the "CUDA used to build" line with no local version: unknown build.
    unknown = TorchFacts(distributions=(Distribution("torch", None),), deep=deep(False))
    assert check_torch_cuda_available(paste(unknown)).summary == "nothing says whether torch is a CUDA build"


def test_a_paste_cut_before_the_gpu_lines_claims_no_driver_absence() -> None:
    torch = TorchFacts(version=Version("2.5.1+cu124"), cuda=Version("12.4"), deep=deep(False))
    facts = Facts(torch=torch, unknown=("gpus", "driver.version", "torch.distributions"))
    result = check_torch_cuda_available(facts)
    assert result.status is Status.FAIL
    assert (
        result.summary == "torch 2.5.1+cu124 (CUDA 12.4) cannot use CUDA: torch.cuda.is_available() is False"
    )
    assert "whether a driver is there is not known" in result.detail
    assert "login node" not in result.detail


def test_a_rocm_build_is_judged_by_torch_cuda_too() -> None:
    # A ROCm build answers through torch.cuda (HIP): collect_env's "Is CUDA available" is its verdict.
    # "Is CUDA available: False" beside an AMD Instinct MI300X (a collect_env from a ROCm 6.2 wheel,
    # the complaint of pytorch/pytorch#99983) was a skip, "CUDA is not expected", and doctor said all
    # was well.
    from envkit.facts import AccelGpu, VendorFacts

    mi300x = VendorFacts("amd", gpus=(AccelGpu(0, "AMD Instinct MI300X", None, None, "gfx942"),))
    rocm = TorchFacts(version=Version("2.5.1+rocm6.2"), hip="6.2.41133-dd7f95766", deep=deep(False))
    failed = check_torch_cuda_available(paste(rocm, amd=mi300x))
    assert failed.status is Status.FAIL
    assert failed.summary.startswith("torch 2.5.1+rocm6.2 (ROCm 6.2.41133-dd7f95766) cannot use the AMD GPU")
    assert "/dev/kfd" in failed.fix and "render" in failed.fix
    assert failed.fix.splitlines()[-1].endswith("install torch==2.5.1 " + CPU_INDEX)
    works = check_torch_cuda_available(paste(TorchFacts(version=rocm.version, hip=rocm.hip, deep=deep(True))))
    assert works.status is Status.PASS and "HIP" in works.summary
    unknown = check_torch_cuda_available(paste(TorchFacts(version=rocm.version, hip=rocm.hip)))
    assert unknown.status is Status.SKIP and "not expected" not in unknown.summary


def test_a_cuda_build_on_an_amd_machine_is_torch_gpu_vendors_finding() -> None:
    # A CUDA torch beside an AMD MI300X and no NVIDIA GPU: torch.gpu_vendor fails with the ROCm plan;
    # this check told the user to install the NVIDIA driver ('docker run --gpus all').
    from envkit.facts import AccelGpu, VendorFacts

    mi300x = VendorFacts(
        "amd", gpus=(AccelGpu(0, "AMD Instinct MI300X", None, "0x74a1", "gfx942"),), sources=("sysfs",)
    )
    cuda = TorchFacts(version=Version("2.5.1+cu124"), cuda=Version("12.4"), deep=deep(False))
    result = check_torch_cuda_available(paste(cuda, amd=mi300x))
    assert result.status is Status.SKIP and "torch.gpu_vendor" in result.summary


def test_an_xpu_build_is_not_called_cpu_only() -> None:
    # torch 2.7.1+xpu from a collect_env (pytorch/pytorch#157775's version): torch.installed said
    # '(CPU-only)', this check 'is a CPU-only build', the header '(CPU)'.
    from envkit.checks.torch import check_torch_installed

    xpu = TorchFacts(version=Version("2.7.1+xpu"))
    facts = paste(xpu)
    assert "XPU" in check_torch_installed(facts).summary
    assert "CPU" not in check_torch_installed(facts).summary
    result = check_torch_cuda_available(facts)
    assert result.status is Status.SKIP and "XPU build" in result.summary and "CPU" not in result.summary


# pytorch/pytorch#147226's collect_env (torch 2.6.0+xpu on Ubuntu 24.04; torch.xpu.is_available()
# False with "Failed to initialize XPU devices. The driver may not be installed …"), cut to the lines
# the reader needs; "Is XPU available" as torch 2.6's collect_env prints it.
XPU_FALSE = """Collecting environment information...
PyTorch version: 2.6.0+xpu
Is debug build: False
CUDA used to build PyTorch: None
ROCM used to build PyTorch: N/A

OS: Ubuntu 24.04.2 LTS (x86_64)
Libc version: glibc-2.39

Python version: 3.10.16 (main, Dec 11 2024, 16:24:50) [GCC 11.2.0] (64-bit runtime)
Is CUDA available: False
CUDA runtime version: No CUDA
GPU models and configuration: No CUDA
Nvidia driver version: No CUDA
cuDNN version: No CUDA
Is XPU available: False
HIP runtime version: N/A

Versions of relevant libraries:
[pip3] torch==2.6.0+xpu
"""


def test_an_xpu_build_that_cannot_see_its_gpu_fails_with_intels_fixes() -> None:
    # Before: 'is an XPU build' SKIP, and collect_env's "Is XPU available: False" went unread.
    from envkit.detect.collect_env import parse_collect_env

    facts = parse_collect_env(XPU_FALSE)
    assert facts.torch.deep is not None and facts.torch.deep.xpu_available is False
    result = check_torch_cuda_available(facts)
    assert result.status is Status.FAIL, result
    assert "torch.xpu.is_available() is False" in result.summary
    fix = result.fix or ""
    assert "sycl-ls" in fix and "Level Zero" in fix and "render" in fix
    # 2.6 wheels bring the SYCL runtime: the driver is the requirement (intel.toml, get_start_xpu 2.12).
    assert "torch 2.6.0 needs the Intel GPU driver with Level Zero" in fix
    assert "torch==2.6.0 --index-url https://download.pytorch.org/whl/cpu" in fix
    # 2.5 needs Deep Learning Essentials sourced (get_start_xpu 2.5, 'Software Prerequisite').
    old = parse_collect_env(XPU_FALSE.replace("2.6.0+xpu", "2.5.1+xpu"))
    assert "Deep Learning Essentials" in (check_torch_cuda_available(old).fix or "")


def test_an_xpu_build_that_sees_its_gpu_passes_and_true_is_never_contradicted() -> None:
    # intel/torch-xpu-ops#2024's report: "Is XPU available: True" and the driver lines torch adds after it.
    from envkit.detect.collect_env import parse_collect_env

    text = XPU_FALSE.replace(
        "Is XPU available: False",
        "Is XPU available: True\nXPU used to build PyTorch: 20250201\nIntel GPU driver version:\n"
        "* libze1:\t1.21.9.0-1136~22.04\nIntel GPU models onboard:\n* Intel(R) Data Center GPU Max 1100",
    )
    result = check_torch_cuda_available(parse_collect_env(text))
    assert result.status is Status.PASS and "torch.xpu.is_available()" in result.summary
    # An XPU build without the line (torch before 2.5's collect_env, a paste cut short) skips.
    cut = parse_collect_env(XPU_FALSE.replace("Is XPU available: False\n", ""))
    skip = check_torch_cuda_available(cut)
    assert skip.status is Status.SKIP and "XPU build" in skip.summary


def test_the_deep_probe_reports_xpu_available() -> None:
    from envkit.detect.deep import parse_deep

    answer = {"ok": True, "version": "2.7.1+xpu", "cuda_available": False, "xpu_available": False}
    xpu = TorchFacts(version=Version("2.7.1+xpu"), deep=parse_deep(answer))
    assert check_torch_cuda_available(paste(xpu)).status is Status.FAIL
    assert parse_deep({**answer, "xpu_available": True}).xpu_available is True
    assert parse_deep({"ok": True, "xpu_available": "yes"}).xpu_available is None


def test_the_torch_probe_asks_torch_xpu_only_of_a_build_with_the_xpu_runtime() -> None:
    # No XPU build of torch is installable here (torch 2.13.0 CPU): the probe's question is put to
    # stand-ins with torch's attribute names (torch._C._has_xpu, torch.xpu.is_available); the slow
    # suite's real `doctor --deep` runs it on the real CPU build, where _has_xpu is False.
    import importlib
    import sys
    from types import SimpleNamespace

    from envkit.system import PROBES_DIR

    sys.path.insert(0, str(PROBES_DIR))
    probe = importlib.import_module("torch_probe")
    asked: list[bool] = []

    def is_available() -> bool:
        asked.append(True)
        return False

    cpu = SimpleNamespace(_C=SimpleNamespace(_has_xpu=False), xpu=SimpleNamespace(is_available=is_available))
    assert probe._xpu_available(cpu) is None and not asked
    xpu = SimpleNamespace(_C=SimpleNamespace(_has_xpu=True), xpu=SimpleNamespace(is_available=is_available))
    assert probe._xpu_available(xpu) is False and asked
    assert probe._xpu_available(SimpleNamespace(_C=SimpleNamespace())) is None


def test_a_source_build_that_answers_true_is_an_xpu_build_and_false_on_a_cpu_build_says_nothing() -> None:
    # vllm-project/vllm#8655: torch 2.5.0a0+git136e28f built from source with XPU (no +xpu tag); the
    # check said 'a CPU-only build' beside torch.xpu.is_available() True.
    from envkit.detect.collect_env import parse_collect_env

    source = XPU_FALSE.replace("2.6.0+xpu", "2.5.0a0+git136e28f")
    true = check_torch_cuda_available(
        parse_collect_env(source.replace("XPU available: False", "XPU available: True"))
    )
    assert true.status is Status.PASS and "Intel GPU" in true.summary
    # collect_env prints "Is XPU available: False" for a CPU build too (pytorch/pytorch#150260).
    cpu = check_torch_cuda_available(parse_collect_env(XPU_FALSE.replace("2.6.0+xpu", "2.6.0+cpu")))
    assert cpu.status is Status.SKIP and "CPU-only" in cpu.summary
