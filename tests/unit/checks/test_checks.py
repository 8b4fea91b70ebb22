"""Every check on hand-built facts: each verdict, and a fix under each warn/fail."""

from __future__ import annotations

import dataclasses

import pytest

from envkit.checks import CHECKS, run_checks
from envkit.checks.driver import check_driver_loaded
from envkit.checks.gpu import check_gpu_health
from envkit.checks.nccl import check_nccl_env
from envkit.checks.shm import check_shm
from envkit.checks.toolkit import check_toolkit_nvcc
from envkit.checks.torch import check_torch_cuda_libs, check_torch_duplicates, check_torch_installed
from envkit.facts import (
    CondaPackage,
    DeepTorchFacts,
    Distribution,
    DriverFacts,
    Facts,
    GpuFacts,
    HostFacts,
    NetInterface,
    PythonFacts,
    SharedLib,
    ToolkitFacts,
    TorchFacts,
)
from envkit.report import Status
from envkit.versions import ComputeCapability, NvVersion, Version

DRIVER = DriverFacts(version=NvVersion("550.54.15"), cuda_version=Version("12.4"), source="nvml")
HEALTHY_GPU = GpuFacts(
    index=0,
    name="NVIDIA H100 80GB HBM3",
    compute_capability=ComputeCapability(9, 0),
    ecc_enabled=True,
    ecc_pending=True,
    ecc_uncorrected_volatile=0,
    mig_enabled=False,
    mig_pending=False,
    remapped_rows_pending=False,
    remapped_rows_failure=False,
    pcie_gen=5,
    pcie_gen_max=5,
    pcie_width=16,
    pcie_width_max=16,
    clock_events=("gpu_idle",),
    temperature_c=35,
    temperature_slowdown_c=87,
)
PYTHON = PythonFacts(
    executable="/envs/pt/bin/python",
    selected_by="CONDA_PREFIX",
    version=Version("3.11.9"),
    installers={"pip": "/envs/pt/bin/python -m pip"},
)
CUDA_TORCH = TorchFacts(
    version=Version("2.5.1+cu124"),
    cuda=Version("12.4"),
    location="/envs/pt/lib/python3.11/site-packages/torch",
    distributions=(
        Distribution("torch", Version("2.5.1+cu124"), "/envs/pt/lib/python3.11/site-packages"),
        Distribution("nvidia-cudnn-cu12", Version("9.1.0.70"), "/envs/pt/lib/python3.11/site-packages"),
        Distribution("nvidia-nccl-cu12", Version("2.21.5"), "/envs/pt/lib/python3.11/site-packages"),
        Distribution("torchvision", Version("0.20.1+cu124"), "/envs/pt/lib/python3.11/site-packages"),
    ),
)
HEALTHY = Facts(
    host=HostFacts(
        nvidia_pci_devices=("0000:18:00.0",),
        nvidia_module_loaded=True,
        shm_bytes=32 * 1024**3,
        interfaces=(
            NetInterface("lo", True),
            NetInterface("eth0", True),
            NetInterface("ib0", False),
        ),
    ),
    driver=DRIVER,
    gpus=(HEALTHY_GPU,),
    toolkits=(
        ToolkitFacts(
            nvcc="/usr/local/cuda-12.4/bin/nvcc",
            version=Version("12.4.131"),
            root="/usr/local/cuda-12.4",
            sources=("PATH",),
            on_path=True,
        ),
    ),
    python=PYTHON,
    torch=CUDA_TORCH,
)


def with_host(**changes: object) -> Facts:
    return dataclasses.replace(HEALTHY, host=dataclasses.replace(HEALTHY.host, **changes))


def with_gpu(**changes: object) -> Facts:
    return dataclasses.replace(HEALTHY, gpus=(dataclasses.replace(HEALTHY_GPU, **changes),))


def with_torch(**changes: object) -> Facts:
    return dataclasses.replace(HEALTHY, torch=dataclasses.replace(CUDA_TORCH, **changes))


# Checks that judge an error text only (doctor --from TEXT, --error FILE).
ERROR_TEXT_CHECKS = ("torch.extension_load", "gpu.memory", "nccl.failure")


def test_a_healthy_machine_passes_everything() -> None:
    results = run_checks(HEALTHY)
    assert [r.id for r in results] == list(CHECKS)
    # Without --deep nothing says whether torch can use CUDA: torch.cuda_available skips (never a
    # pass by default); with the deep probe's answer it passes.
    expected = {**dict.fromkeys(CHECKS, Status.PASS), "torch.cuda_available": Status.SKIP}
    # Not in a container: the container checks skip and say so.
    expected.update(dict.fromkeys((c for c in CHECKS if c.startswith("container.")), Status.SKIP))
    # No error text (doctor --error) to read; no triton, so torch.compile's GPU path does not apply.
    expected.update(dict.fromkeys(ERROR_TEXT_CHECKS + ("torch.compile_toolchain",), Status.SKIP))
    # No flash-attn, xformers, vllm … installed: nothing for torch.extensions to judge.
    expected["torch.extensions"] = Status.SKIP
    # An NVIDIA machine has no AMD or Intel GPU and no ROCm / XPU build: those checks skip.
    expected.update(dict.fromkeys(("driver.amd", "driver.intel", "torch.gfx_arch"), Status.SKIP))
    assert {r.id: r.status for r in results} == expected
    deep = DeepTorchFacts(ok=True, version=CUDA_TORCH.version, cuda_available=True, device_count=1)
    assert CHECKS["torch.cuda_available"](with_torch(deep=deep)).status is Status.PASS


def test_every_warn_and_fail_has_a_fix() -> None:
    broken = [
        with_gpu(ecc_uncorrected_volatile=3),
        with_host(
            shm_bytes=64 * 1024**2,
            env={"NCCL_SOCKET_IFNAME": "eth9", "NCCL_ASYNC_ERROR_HANDLING": "1"},
        ),
        with_torch(
            distributions=CUDA_TORCH.distributions
            + (Distribution("torch", Version("2.3.0"), "/root/.local/lib"),)
        ),
    ]
    for facts in broken:
        for result in run_checks(facts):
            if result.status in (Status.WARN, Status.FAIL):
                assert result.fix, result.id


# driver.loaded --------------------------------------------------------------------------------


def test_driver_pass() -> None:
    result = check_driver_loaded(HEALTHY)
    assert result.status is Status.PASS
    assert result.summary == "driver 550.54.15 (CUDA 12.4) via nvml, 1 GPU"


def test_no_gpu_no_driver_is_skipped() -> None:
    result = check_driver_loaded(Facts(host=HostFacts(nvidia_module_loaded=False)))
    assert result.status is Status.SKIP


def test_gpu_on_the_bus_without_driver_fails() -> None:
    facts = Facts(
        host=HostFacts(nvidia_pci_devices=("0000:01:00.0",), nvidia_module_loaded=False),
        driver=DriverFacts(nvml_error="LibraryNotFound: NVML Shared Library Not Found"),
    )
    result = check_driver_loaded(facts)
    assert result.status is Status.FAIL
    assert result.summary == "1 NVIDIA GPU(s) on the PCI bus but no working NVIDIA driver"
    assert result.fix.startswith("sudo modprobe nvidia; if the module is missing, install")


def test_container_without_the_nvidia_runtime() -> None:
    # The host's module is loaded (sysfs shows it) but the container has no libnvidia-ml.
    facts = Facts(
        host=HostFacts(nvidia_pci_devices=("0000:01:00.0",), nvidia_module_loaded=True),
        driver=DriverFacts(nvml_error="LibraryNotFound: NVML Shared Library Not Found"),
    )
    result = check_driver_loaded(facts)
    assert result.status is Status.FAIL
    assert "Container Toolkit" in result.fix


def test_module_without_user_space_library() -> None:
    facts = Facts(host=HostFacts(nvidia_module_loaded=True), driver=DriverFacts(nvml_error=None))
    result = check_driver_loaded(facts)
    assert result.status is Status.FAIL
    assert "install the NVIDIA driver" in result.fix


def test_driver_upgraded_without_reboot() -> None:
    facts = Facts(
        host=HostFacts(nvidia_module_loaded=True, nvidia_pci_devices=("0000:01:00.0",)),
        driver=DriverFacts(
            version=NvVersion("550.54.15"),
            source="/proc/driver/nvidia/version",
            nvml_error="LibRmVersionMismatch: RM has detected an NVML/RM version mismatch.",
        ),
    )
    result = check_driver_loaded(facts)
    assert result.status is Status.FAIL
    assert "LibRmVersionMismatch" in result.summary
    assert "reboot" in result.fix


def test_driver_sees_none_of_the_gpus() -> None:
    facts = dataclasses.replace(HEALTHY, gpus=())
    result = check_driver_loaded(facts)
    assert result.status is Status.FAIL
    assert "sees none of the 1 NVIDIA GPU(s)" in result.summary


def test_wsl_without_driver_explains() -> None:
    result = check_driver_loaded(Facts(host=HostFacts(wsl=True)))
    assert result.status is Status.SKIP
    assert "Windows" in result.detail


# gpu.health -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "status", "words"),
    [
        ({"ecc_uncorrected_volatile": 2}, Status.FAIL, "2 uncorrected ECC error(s)"),
        ({"remapped_rows_failure": True}, Status.FAIL, "row remapping failed"),
        ({"remapped_rows_pending": True}, Status.WARN, "row remap is pending"),
        ({"retired_pages_pending": True}, Status.WARN, "page retirement is pending"),
        ({"error": "GpuIsLost: GPU is lost"}, Status.FAIL, "is unusable: GpuIsLost"),
        (
            {"clock_events": ("gpu_idle", "hw_thermal")},
            Status.WARN,
            "clocks held down by hw_thermal",
        ),
        ({"clock_events": ("sw_power_cap",)}, Status.PASS, "healthy"),
        ({"pcie_width": 8}, Status.WARN, "PCIe link x8 of x16"),
        ({"pcie_gen": 1}, Status.PASS, "healthy"),  # idle GPUs drop the link generation
        ({"temperature_c": 84}, Status.WARN, "84 °C, slowdown at 87 °C"),
        ({"ecc_pending": False}, Status.WARN, "ECC mode change is pending"),
        ({"mig_enabled": False, "mig_pending": True}, Status.WARN, "MIG mode change is pending"),
    ],
)
def test_gpu_health(changes: dict[str, object], status: Status, words: str) -> None:
    result = check_gpu_health(with_gpu(**changes))
    assert result.status is status
    assert words in result.summary


def test_one_bad_gpu_among_many_is_named() -> None:
    gpus = tuple(dataclasses.replace(HEALTHY_GPU, index=i) for i in range(8))
    gpus = gpus[:5] + (dataclasses.replace(gpus[5], ecc_uncorrected_volatile=1),) + gpus[6:]
    result = check_gpu_health(dataclasses.replace(HEALTHY, gpus=gpus))
    assert result.status is Status.FAIL
    assert result.summary.startswith("GPU 5 (NVIDIA H100 80GB HBM3)")
    assert "nvidia-smi -r -i 5" in result.fix


def test_gpu_health_names_each_fix_once() -> None:
    both = dataclasses.replace(HEALTHY_GPU, remapped_rows_pending=True, retired_pages_pending=True)
    result = check_gpu_health(dataclasses.replace(HEALTHY, gpus=(both,)))
    assert result.status is Status.WARN
    assert result.summary == "GPU 0 (NVIDIA H100 80GB HBM3): a row remap is pending (+1 more)"
    assert result.fix == "reset the GPU to apply it: sudo nvidia-smi -r -i 0"


def test_gpu_health_all_unknown_fields_pass() -> None:
    result = check_gpu_health(dataclasses.replace(HEALTHY, gpus=(GpuFacts(index=0, name="Tesla K80"),)))
    assert result.status is Status.PASS


# toolkit.nvcc ---------------------------------------------------------------------------------


def toolkit(version: str, sources: tuple[str, ...], root: str | None = None) -> ToolkitFacts:
    return ToolkitFacts(
        nvcc=f"{root or '/usr'}/bin/nvcc",
        version=Version(version),
        root=root,
        sources=sources,
        on_path="PATH" in sources,
    )


def test_toolkit_major_mismatch_names_the_matching_toolkit() -> None:
    facts = dataclasses.replace(
        HEALTHY,
        toolkits=(
            toolkit("13.0.88", ("PATH", "/usr/local/cuda"), "/usr/local/cuda-13.0"),
            toolkit("12.4.131", ("/usr/local/cuda-12.4",), "/usr/local/cuda-12.4"),
        ),
        driver=dataclasses.replace(DRIVER, cuda_version=Version("13.0")),
    )
    result = check_toolkit_nvcc(facts)
    assert result.status is Status.WARN
    assert "nvcc 13.0.88 vs torch built with CUDA 12.4" in result.summary
    assert result.fix == "export CUDA_HOME=/usr/local/cuda-12.4 PATH=/usr/local/cuda-12.4/bin:$PATH"


def test_toolkit_newer_than_driver() -> None:
    facts = dataclasses.replace(HEALTHY, toolkits=(toolkit("12.8.93", ("PATH",), "/usr/local/cuda-12.8"),))
    result = check_toolkit_nvcc(facts)
    assert result.status is Status.WARN
    assert "newer than the driver's CUDA 12.4" in result.summary


def test_cuda_home_and_path_disagree() -> None:
    facts = dataclasses.replace(
        HEALTHY,
        toolkits=(
            toolkit("12.1.105", ("PATH",), "/usr/local/cuda-12.1"),
            toolkit("12.4.131", ("CUDA_HOME",), "/opt/cuda-12.4"),
        ),
    )
    result = check_toolkit_nvcc(facts)
    assert result.status is Status.WARN
    assert "nvcc on PATH is 12.1.105 but builds use 12.4.131 (CUDA_HOME)" in result.summary


def test_no_toolkit_is_skipped() -> None:
    result = check_toolkit_nvcc(dataclasses.replace(HEALTHY, toolkits=()))
    assert result.status is Status.SKIP
    assert "torch is built with CUDA 12.4" in result.summary


def test_broken_nvcc_warns() -> None:
    facts = dataclasses.replace(
        HEALTHY,
        toolkits=(
            ToolkitFacts(
                nvcc="/usr/bin/nvcc",
                sources=("PATH",),
                on_path=True,
                error="`/usr/bin/nvcc --version` exited with 127",
            ),
        ),
    )
    assert check_toolkit_nvcc(facts).status is Status.WARN


# torch.installed ------------------------------------------------------------------------------


def test_torch_missing_warns_with_the_env_pip() -> None:
    result = check_torch_installed(dataclasses.replace(HEALTHY, torch=TorchFacts()))
    assert result.status is Status.WARN
    assert result.summary == "torch is not installed in /envs/pt/bin/python (CONDA_PREFIX)"
    assert result.fix.startswith("/envs/pt/bin/python -m pip install torch")


def test_uv_venv_without_pip_gets_uv_pip() -> None:
    python = dataclasses.replace(PYTHON, installers={"uv": "/usr/bin/uv"})
    result = check_torch_installed(dataclasses.replace(HEALTHY, torch=TorchFacts(), python=python))
    assert result.fix.startswith("uv pip --python /envs/pt/bin/python install torch")


def test_broken_torch_install_fails() -> None:
    result = check_torch_installed(with_torch(error="torch/version.py is missing"))
    assert result.status is Status.FAIL
    assert "--force-reinstall --no-deps torch==2.5.1" in result.fix


def test_import_failure_from_deep_probe_fails() -> None:
    deep = DeepTorchFacts(ok=False, error="import torch failed: OSError: libcudnn.so.9: undefined symbol")
    result = check_torch_installed(with_torch(deep=deep))
    assert result.status is Status.FAIL
    assert result.summary == "torch 2.5.1+cu124 does not import"
    assert "undefined symbol" in result.detail


def test_cuda_unavailable_with_a_visible_gpu_fails() -> None:
    deep = DeepTorchFacts(
        ok=True,
        cuda_available=False,
        device_count=0,
        warnings=("The NVIDIA driver on your system is too old (found version 11040).",),
    )
    result = check_torch_installed(with_torch(deep=deep))
    assert result.status is Status.FAIL
    assert "too old" in result.detail


def test_probe_failure_fails() -> None:
    facts = dataclasses.replace(
        HEALTHY, python=dataclasses.replace(PYTHON, error="the environment probe failed: timed out")
    )
    assert check_torch_installed(facts).status is Status.FAIL


# torch.duplicates -----------------------------------------------------------------------------


def test_two_pip_torches() -> None:
    extra = Distribution("torch", Version("2.3.0+cu118"), "/root/.local/lib/python3.11/site-packages")
    result = check_torch_duplicates(with_torch(distributions=CUDA_TORCH.distributions + (extra,)))
    assert result.status is Status.FAIL
    assert result.summary.startswith("2 torch installs: 2.5.1+cu124 in /envs/pt/lib")
    assert "uninstall -y torch" in result.fix


def test_conda_pytorch_plus_pip_torch() -> None:
    conda = (CondaPackage("pytorch", Version("2.1.0"), "py3.10_cuda12.1_cudnn8.9.2_0", "pytorch"),)
    result = check_torch_duplicates(with_torch(conda_packages=conda))
    assert result.status is Status.FAIL
    assert "conda package pytorch 2.1.0" in result.summary
    assert "conda remove --force pytorch" in result.fix


def test_conda_pytorch_alone_is_fine() -> None:
    conda = (CondaPackage("pytorch", Version("2.5.1"), "py3.11_cuda12.4_cudnn9.1.0_0", "pytorch"),)
    dists = (Distribution("torch", Version("2.5.1"), "/envs/pt/lib/python3.11/site-packages"),)
    result = check_torch_duplicates(with_torch(conda_packages=conda, distributions=dists))
    assert result.status is Status.PASS


def test_cu12_and_cu13_wheels_mixed() -> None:
    dists = CUDA_TORCH.distributions + (Distribution("nvidia-cudnn-cu13", Version("9.13.0.50"), "/s"),)
    result = check_torch_duplicates(with_torch(distributions=dists))
    assert result.status is Status.FAIL
    assert "nvidia-cudnn-cu13" in result.summary


# torch.cuda_libs ------------------------------------------------------------------------------


def lib(path: str, family: str, version: str | None, source: str = "LD_LIBRARY_PATH") -> SharedLib:
    return SharedLib(path, family, Version(version) if version else None, source)


def test_old_cudnn_on_ld_library_path_fails() -> None:
    result = check_torch_cuda_libs(
        with_host(cuda_libs=(lib("/opt/cudnn8/lib/libcudnn.so.8", "cudnn", "8.9.2"),))
    )
    assert result.status is Status.FAIL
    assert "shadows nvidia-cudnn-cu12 9.1.0.70" in result.summary
    assert result.fix == "remove /opt/cudnn8/lib from LD_LIBRARY_PATH"


def test_same_major_other_minor_warns() -> None:
    result = check_torch_cuda_libs(
        with_host(cuda_libs=(lib("/usr/lib/libnccl.so.2.18.1", "nccl", "2.18.1"),))
    )
    assert result.status is Status.WARN


def test_same_version_is_harmless() -> None:
    result = check_torch_cuda_libs(
        with_host(
            cuda_libs=(
                lib("/x/libnccl.so.2.21.5", "nccl", "2.21.5"),
                lib("/y/libcudnn.so.9", "cudnn", "9"),
            )
        )
    )
    assert result.status is Status.PASS


def test_ld_cache_alone_is_harmless() -> None:
    result = check_torch_cuda_libs(
        with_host(cuda_libs=(lib("/usr/lib/libcudnn.so.8", "cudnn", "8", "ld.so.cache"),))
    )
    assert result.status is Status.PASS


def test_libcuda_stub_fails_even_without_torch() -> None:
    facts = dataclasses.replace(
        with_host(cuda_libs=(lib("/usr/local/cuda/lib64/stubs/libcuda.so", "cuda", None),)),
        torch=TorchFacts(),
    )
    result = check_torch_cuda_libs(facts)
    assert result.status is Status.FAIL
    assert "stub" in result.summary


def test_cpu_torch_is_skipped() -> None:
    result = check_torch_cuda_libs(with_torch(cuda=None, version=Version("2.13.0+cpu"), distributions=()))
    assert result.status is Status.SKIP


# python.shm -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "status"),
    [
        (64 * 1024**2, Status.FAIL),
        (512 * 1024**2, Status.WARN),
        (8 * 1024**3, Status.PASS),
        (None, Status.WARN),
    ],
)
def test_shm(size: int | None, status: Status) -> None:
    result = check_shm(with_host(shm_bytes=size))
    assert result.status is status
    if status is Status.FAIL:
        assert result.summary == "/dev/shm is only 64 MiB"
        assert "--ipc=host" in result.fix


# nccl.env -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "status", "words"),
    [
        ({}, Status.PASS, "no NCCL/gloo settings"),
        ({"NCCL_SOCKET_IFNAME": "eth0"}, Status.PASS, "1 NCCL/gloo settings"),
        ({"NCCL_SOCKET_IFNAME": "eth"}, Status.PASS, "none harmful"),
        ({"NCCL_SOCKET_IFNAME": "=eth0"}, Status.PASS, "none harmful"),
        ({"NCCL_SOCKET_IFNAME": "^docker,lo"}, Status.PASS, "none harmful"),
        ({"NCCL_SOCKET_IFNAME": "eth1"}, Status.FAIL, "matches no interface that is up"),
        (
            {"NCCL_SOCKET_IFNAME": "ib0"},
            Status.FAIL,
            "matches no interface that is up",
        ),  # ib0 is down
        ({"NCCL_SOCKET_IFNAME": "=eth"}, Status.FAIL, "matches no interface"),
        ({"NCCL_SOCKET_IFNAME": "eth0,ens"}, Status.WARN, "ens match no interface"),
        ({"GLOO_SOCKET_IFNAME": "enp1s0"}, Status.FAIL, "enp1s0 does not exist"),
        ({"GLOO_SOCKET_IFNAME": "ib0"}, Status.FAIL, "ib0 is down"),
        ({"NCCL_ASYNC_ERROR_HANDLING": "1"}, Status.WARN, "deprecated since torch 2.2"),
        ({"NCCL_P2P_DISABLE": "1"}, Status.WARN, "debugging switch"),
    ],
)
def test_nccl_env(env: dict[str, str], status: Status, words: str) -> None:
    result = check_nccl_env(with_host(env=env))
    assert result.status is status, result
    assert words in result.summary


def test_nccl_rename_fix_is_exact() -> None:
    result = check_nccl_env(with_host(env={"NCCL_ASYNC_ERROR_HANDLING": "1"}))
    assert result.fix == "export TORCH_NCCL_ASYNC_ERROR_HANDLING=1; unset NCCL_ASYNC_ERROR_HANDLING"


def test_a_crashing_check_does_not_hide_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(_facts: Facts) -> None:
        raise ZeroDivisionError("bug")

    monkeypatch.setitem(CHECKS, "python.shm", boom)
    results = {r.id: r for r in run_checks(HEALTHY)}
    assert results["python.shm"].status is Status.WARN
    assert "ZeroDivisionError: bug" in results["python.shm"].summary
    assert results["nccl.env"].status is Status.PASS


def test_shm_not_measured_in_time_is_a_skip_not_a_warning() -> None:
    result = check_shm(
        with_host(shm_bytes=None, unanswered=("shm_bytes",), notes=("shm_bytes: not gathered",))
    )
    assert result.status is Status.SKIP
    assert "missing" not in result.summary
    assert check_shm(with_host(shm_bytes=None)).status is Status.WARN  # measured and absent: warn


def test_driver_known_but_nvml_hung_is_not_install_the_driver() -> None:
    facts = dataclasses.replace(
        HEALTHY,
        gpus=(),
        driver=DriverFacts(
            version=NvVersion("550.54.15"),
            source="/proc/driver/nvidia/version",
            nvml_error="NoAnswer: NVML and nvidia-smi did not answer before the time limit",
        ),
    )
    result = check_driver_loaded(facts)
    assert result.status is Status.FAIL
    assert "550.54.15" in result.summary and "NoAnswer" in result.summary
    assert "install" not in (result.fix or "") and "xid" in (result.fix or "").lower()
