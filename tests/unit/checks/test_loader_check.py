"""torch.cuda_libs from the loader's view of this machine (TorchFacts.loader, envkit.detect.loader):
a library resolved outside the build's own files is named with its version against the one the
build needs, and the fix names the variable or folder that sent the loader there."""

from __future__ import annotations

import dataclasses

from envkit.checks.cuda_loader import loader_verdict
from envkit.checks.torch import check_torch_cuda_libs
from envkit.facts import Distribution, Facts, ResolvedLib
from envkit.report import Status
from envkit.versions import Version
from tests.unit.checks.test_checks import HEALTHY

SITE = "/envs/pt/lib/python3.11/site-packages"


def _with(*libs: ResolvedLib, wheels: tuple[Distribution, ...] = ()) -> Facts:
    torch = HEALTHY.torch
    torch = dataclasses.replace(torch, loader=libs, distributions=torch.distributions + wheels)
    return dataclasses.replace(HEALTHY, torch=torch)


def _own(soname: str, family: str, folder: str) -> ResolvedLib:
    return ResolvedLib(
        soname,
        "libtorch_cuda.so",
        f"{SITE}/nvidia/{folder}/lib/{soname}",
        "RUNPATH",
        family,
        Version("12"),
        True,
    )


CUBLAS_WHEEL = Distribution("nvidia-cublas-cu12", Version("12.4.5.8"), SITE)


def test_every_library_the_builds_own_is_no_finding() -> None:
    facts = _with(_own("libcublas.so.12", "cublas", "cublas"), _own("libcudnn.so.9", "cudnn", "cudnn"))
    assert loader_verdict(facts) is None


def test_an_older_cublas_on_ld_library_path_fails_and_names_its_folder() -> None:
    old = ResolvedLib(
        "libcublas.so.12",
        "libtorch_cuda.so",
        "/usr/local/cuda-12.1/lib64/libcublas.so.12",
        "LD_LIBRARY_PATH",
        "cublas",
        Version("12.1.3.1"),
        False,
    )
    result = check_torch_cuda_libs(_with(old, wheels=(CUBLAS_WHEEL,)))
    assert result.status is Status.FAIL
    assert "libcublas.so.12 resolves to /usr/local/cuda-12.1/lib64/libcublas.so.12" in result.summary
    assert "nvidia-cublas-cu12 12.4.5.8" in result.summary
    assert result.fix.startswith("unset LD_LIBRARY_PATH") and "/usr/local/cuda-12.1/lib64" in result.fix


def test_a_newer_minor_of_the_same_major_warns() -> None:
    newer = ResolvedLib(
        "libcublas.so.12", "libtorch_cuda.so", "/opt/cuda-12.8/lib64/libcublas.so.12", "LD_LIBRARY_PATH",
        "cublas", Version("12.8.4.1"), False,
    )  # fmt: skip
    result = loader_verdict(_with(newer, wheels=(CUBLAS_WHEEL,)))
    assert result is not None and result.status is Status.WARN and "usually loads" in result.summary


def test_a_preloaded_library_names_ld_preload() -> None:
    pre = ResolvedLib(
        "libnccl.so.2", "libtorch_cuda.so", "/opt/nccl-2.18/lib/libnccl.so.2", "LD_PRELOAD",
        "nccl", Version("2.18.3"), False,
    )  # fmt: skip
    result = loader_verdict(_with(pre))  # HEALTHY bundles nvidia-nccl-cu12 2.21.5
    assert result is not None and result.status is Status.FAIL
    assert result.fix.startswith("unset LD_PRELOAD")


def test_the_wheel_installed_elsewhere_is_reinstalled_beside_torch() -> None:
    # The wheel is listed, yet the loader found the distribution's copy: torch's RUNPATH
    # ($ORIGIN/../../nvidia/cublas/lib) does not reach it (a user-site install, a broken wheel).
    cached = ResolvedLib(
        "libcublas.so.12", "libtorch_cuda.so", "/usr/lib/x86_64-linux-gnu/libcublas.so.12", "ld.so.cache",
        "cublas", Version("12.0.2.224"), False,
    )  # fmt: skip
    result = loader_verdict(_with(cached, wheels=(CUBLAS_WHEEL,)))
    assert result is not None and result.status is Status.FAIL
    assert "install --force-reinstall nvidia-cublas-cu12==12.4.5.8" in result.fix


def test_a_build_without_its_own_copies_uses_the_systems_by_design() -> None:
    # An NGC image or a source build: torch bundles no nvidia-* wheel; the toolkit's cuBLAS is its own.
    torch = dataclasses.replace(
        HEALTHY.torch, distributions=(Distribution("torch", Version("2.6.0a0"), SITE),)
    )
    libs = (
        ResolvedLib("libcublas.so.12", "libtorch_cuda.so", "/usr/local/cuda/lib64/libcublas.so.12", "ld.so.cache",
                    "cublas", Version("12.8.3.14"), False),
        ResolvedLib("libcudart.so.12", "libtorch_cuda.so", "/usr/local/cuda/lib64/libcudart.so.12", "ld.so.cache",
                    "cudart", Version("12.8.57"), False),
    )  # fmt: skip
    facts = dataclasses.replace(HEALTHY, torch=dataclasses.replace(torch, loader=libs))
    assert loader_verdict(facts) is None


def test_a_cudart_of_another_major_than_the_build_fails_even_without_wheels() -> None:
    torch = dataclasses.replace(HEALTHY.torch, distributions=())
    cudart = ResolvedLib(
        "libcudart.so.12", "libc10_cuda.so", "/usr/local/cuda-11.8/lib64/libcudart.so.12", "LD_LIBRARY_PATH",
        "cudart", Version("11.8"), False,
    )  # fmt: skip
    facts = dataclasses.replace(HEALTHY, torch=dataclasses.replace(torch, loader=(cudart,)))
    result = loader_verdict(facts)
    assert result is not None and result.status is Status.FAIL and "made with CUDA 12.4" in result.summary


def test_a_library_found_nowhere_fails_with_a_reinstall() -> None:
    gone = ResolvedLib("libnvJitLink.so.12", "libcusparse.so.12", None, "not found", "nvjitlink", None, None)
    result = loader_verdict(_with(gone))
    assert result is not None and result.status is Status.FAIL
    assert "libnvJitLink.so.12 (needed by libcusparse.so.12) is found nowhere" in result.summary
    assert "install --force-reinstall torch==2.5.1" in result.fix
