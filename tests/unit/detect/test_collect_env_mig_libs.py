"""Pasted collect_env reports, rendered with torch's own formatter: MIG devices below their GPU, the
loader error pasted with the report, and what a paste cannot show (LD_LIBRARY_PATH); then the
checks of issue 11's class 6 on them."""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any, Callable

import pytest

from envkit.checks import run_checks
from envkit.detect.collect_env import parse_collect_env
from envkit.report import Status
from tests.conftest import torch_collect_env

Render = Callable[..., str]


@pytest.fixture(scope="module")
def render() -> Render:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the CPU test wheel warns about a missing numpy
        collect_env: ModuleType = torch_collect_env()  # no torch import (tests/conftest.py)

    def _render(**fields: Any) -> str:
        values: dict[str, Any] = dict.fromkeys(collect_env.SystemEnv._fields)
        values.update(pip_version="pip3", **fields)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            text: str = collect_env.pretty_str(collect_env.SystemEnv(**values))
        return "Collecting environment information...\n" + text + "\n"

    return _render


def test_mig_devices_are_read_with_their_profiles(render: Render) -> None:
    """pytorch/pytorch#130181: `nvidia-smi -L` lists the MIG devices below their GPU (collect_env
    strips the UUIDs: torch/utils/collect_env.py get_gpu_info)."""
    text = render(
        torch_version="2.5.0.dev20240705+cu121",
        cuda_compiled_version="12.1",
        is_cuda_available="True",
        nvidia_gpu_models=(
            "GPU 0: NVIDIA A100-SXM4-80GB\n  MIG 3g.40gb     Device  0:\n  MIG 3g.40gb     Device  1:\n"
            "GPU 1: NVIDIA A100-SXM4-80GB"
        ),
        nvidia_driver_version="535.161.08",
        pip_packages="torch==2.5.0.dev20240705+cu121",
    )
    facts = parse_collect_env(text)
    assert [(g.index, g.mig_enabled, g.mig_devices) for g in facts.gpus] == [
        (0, True, ("3g.40gb", "3g.40gb")),
        (1, None, ()),
    ]
    (mig,) = run_checks(facts, ["gpu.mig"])
    assert mig.status is Status.WARN
    assert "GPU 0 (NVIDIA A100-SXM4-80GB) is split into 2 MIG devices (3g.40gb x2)" in mig.summary


def test_a_paste_leaves_ld_library_path_unknown(render: Render) -> None:
    facts = parse_collect_env(render(torch_version="2.5.1+cu124", is_cuda_available="True"))
    assert "env" in facts.host.unanswered
    assert "LD_LIBRARY_PATH" not in facts.host.env


def test_the_loader_error_pasted_with_the_report_is_torch_error(render: Render) -> None:
    """pytorch/pytorch#111469: the nvJitLink 'undefined symbol' above a report whose torch did not import,
    with a system CUDA 12.1 nvcc: the pairing is the cause (torch.cuda_libs fails)."""
    error = (
        "ImportError: /venv/lib/python3.10/site-packages/torch/lib/../../nvidia/cusparse/lib/"
        "libcusparse.so.12: undefined symbol: __nvJitLinkAddData_12_1, version libnvJitLink.so.12"
    )
    text = (
        error
        + "\n\n"
        + render(
            torch_version="N/A",
            is_cuda_available="N/A",
            cuda_runtime_version="12.1.105",
            nvidia_gpu_models="GPU 0: NVIDIA GeForce RTX 4090",
            nvidia_driver_version="545.23.08",
            pip_packages="nvidia-nvjitlink-cu12==12.3.52\ntorch==2.1.0",
        )
    )
    facts = parse_collect_env(text)
    assert facts.torch.error is not None
    assert "PyTorch version: N/A" in facts.torch.error
    assert "__nvJitLinkAddData_12_1" in facts.torch.error
    (libs,) = run_checks(facts, ["torch.cuda_libs"])
    assert libs.status is Status.FAIL
    assert "a system CUDA 12.1.105 toolkit" in libs.summary
    assert libs.fix.startswith("unset LD_LIBRARY_PATH")


def test_a_healthy_paste_with_a_distro_cudnn_and_a_system_nvcc_is_not_flagged(render: Render) -> None:
    """vllm-project/vllm#14537 (healthy): the distro's cuDNN 9.2.1 and a CUDA 12.4 nvcc beside torch
    2.5.1+cu124 and its wheels; torch imports and sees the GPUs."""
    text = render(
        torch_version="2.5.1+cu124",
        cuda_compiled_version="12.4",
        is_cuda_available="True",
        cuda_runtime_version="12.4.131",
        nvidia_gpu_models="GPU 0: NVIDIA H200",
        nvidia_driver_version="550.127.08",
        cudnn_version=(
            "Probably one of the following:\n/usr/lib/x86_64-linux-gnu/libcudnn.so.9.2.1\n"
            "/usr/lib/x86_64-linux-gnu/libcudnn_adv.so.9.2.1"
        ),
        pip_packages=(
            "nvidia-cudnn-cu12==9.1.0.70\nnvidia-ml-py==12.560.30\n"
            "nvidia-nccl-cu12==2.21.5\ntorch==2.5.1+cu124\ntorchvision==0.20.1+cu124\n"
            "triton==3.1.0"
        ),
    )
    checks = {r.id: r for r in run_checks(parse_collect_env(text))}
    assert checks["torch.cuda_libs"].status is Status.PASS
    assert checks["torch.cuda_libs"].summary.endswith("(2 bundled nvidia-* wheels)")
    assert checks["torch.duplicates"].status is Status.PASS
    assert checks["torch.companions"].status is Status.PASS
    assert (
        checks["torch.companions"].summary
        == "torchvision 0.20.1+cu124 and triton 3.1.0 match torch 2.5.1+cu124"
    )
    assert checks["gpu.mig"].status is Status.PASS


def test_nccl_wheels_of_two_majors_with_torch_cut_from_the_paste(render: Render) -> None:
    """pytorch/pytorch#186591: PyTorch version N/A, nvidia-nccl-cu12 beside nvidia-nccl-cu13."""
    text = render(
        torch_version="N/A",
        is_cuda_available="N/A",
        nvidia_gpu_models="GPU 0: NVIDIA H100 80GB HBM3",
        pip_packages="nvidia-nccl-cu12==2.29.3\nnvidia-nccl-cu13==2.29.7",
    )
    (dup,) = run_checks(parse_collect_env(text), ["torch.duplicates"])
    assert dup.status is Status.FAIL
    assert "nvidia-nccl-cu12 2.29.3 beside CUDA 13's" in dup.summary
