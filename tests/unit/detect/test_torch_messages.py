"""torch's own warnings and errors, every release's wording, read into evidence.

The messages are built from torch's templates with the values of a case, as torch formats them
(the template's file and tag are named with each).
"""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envkit.detect.torch_messages import TorchMessages, read_torch_messages, with_messages
from envkit.facts import Facts, IncompatibleGpu, TorchFacts, facts_from_json, facts_to_json
from envkit.versions import ComputeCapability, Version

# c10/cuda/CUDAFunctions.cpp device_count_impl (v1.8.0 … v2.13.0), as device_count() warns it.
TOO_OLD = (
    "CUDA initialization: The NVIDIA driver on your system is too old (found version {found}). Please "
    "update your GPU driver by downloading and installing a new version from the URL: "
    "http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a "
    "PyTorch version that has been compiled with your version of the CUDA driver. (Triggered internally "
    "at ../c10/cuda/CUDAFunctions.cpp:108.)"
)
NO_DRIVER = (
    "CUDA initialization: Found no NVIDIA driver on your system. Please check that you have an NVIDIA "
    "GPU and installed a driver from http://www.nvidia.com/Download/index.aspx (Triggered internally at "
    "../c10/cuda/CUDAFunctions.cpp:109.)"
)
# torch/cuda/__init__.py _check_driver (v1.0.0 … v1.7.1): the same words, raised with newlines.
NO_DRIVER_1X = """
Found no NVIDIA driver on your system. Please check that you
have an NVIDIA GPU and installed a driver from
http://www.nvidia.com/Download/index.aspx"""
# torch/cuda/__init__.py _check_cubins (v1.7.0 … v2.13.0).
CUBINS = """
{name} with CUDA capability sm_{sm} is not compatible with the current PyTorch installation.
The current PyTorch install supports CUDA capabilities {arches}.
If you want to use the {name} GPU with PyTorch, please check the instructions at https://pytorch.org/get-started/locally/
"""
# torch/cuda/__init__.py _check_capability's old_gpu_warn (v1.6.0 … v2.7.1; "that we support" before).
OLD_GPU = """
    Found GPU%d %s which is of cuda capability %d.%d.
    PyTorch no longer supports this GPU because it is too old.
    The minimum cuda capability supported by this library is %d.%d.
    """
# torch/cuda/__init__.py _check_capability (v2.8.0 …).
RANGE = """
    Found GPU%d %s which is of cuda capability %d.%d.
    Minimum and Maximum cuda capability supported by this version of PyTorch is
    (%d.%d) - (%d.%d)
    """

# torch/cuda/__init__.py _check_capability's incorrect_binary_warn (v1.0.0 … v1.x).
NEEDS_CUDA = """
    Found GPU%d %s which requires CUDA_VERSION >= %d to
     work properly, but your PyTorch was compiled
     with CUDA_VERSION %d. Please install the correct PyTorch binary
     using instructions from https://pytorch.org
    """


def test_driver_too_old_gives_the_driver_cuda() -> None:
    # pytorch/pytorch#112553: "found version 11040" on driver 470.182.03 (R470 speaks CUDA 11.4).
    found = read_torch_messages([TOO_OLD.format(found=11040)])
    assert found.cuda_init_error == "driver_too_old"
    assert found.reported_driver_cuda == Version("11.4")
    assert found.cuda_init_message == "The NVIDIA driver on your system is too old (found version 11040)"
    assert read_torch_messages([TOO_OLD.format(found=10010)]).reported_driver_cuda == Version("10.1")
    assert read_torch_messages([TOO_OLD.format(found=12080)]).reported_driver_cuda == Version("12.8")


@pytest.mark.parametrize("text", [NO_DRIVER, NO_DRIVER_1X, "AssertionError: " + NO_DRIVER_1X])
def test_no_driver_in_every_wording(text: str) -> None:
    found = read_torch_messages([text])
    assert found.cuda_init_error == "no_driver"
    assert found.reported_driver_cuda is None


@pytest.mark.parametrize(
    ("text", "kind", "message"),
    [
        (
            (
                "UserWarning: CUDA initialization: CUDA driver initialization failed, you might not have a "
                "CUDA gpu. (Triggered internally at /opt/conda/conda-bld/pytorch/work/c10/cuda/CUDAFunctions.cpp:108.)"
            ),
            "init_failed",
            "CUDA driver initialization failed, you might not have a CUDA gpu",
        ),
        (
            (
                "CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up "
                "environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start. Setting "
                "the available devices to be zero."
            ),
            "unknown_error",
            "CUDA unknown error - this may be due to an incorrectly set up environment",
        ),
        (
            (
                "CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
                "functions before calling NumCudaDevices() that might have already set an error? Error 804: "
                "forward compatibility was attempted on non supported HW (Triggered internally at …)"
            ),
            "cuda_error",
            "Error 804: forward compatibility was attempted on non supported HW",
        ),
        ("RuntimeError: No CUDA GPUs are available", "no_gpus", "No CUDA GPUs are available"),
        (
            'raise AssertionError("Torch not compiled with CUDA enabled")',
            "not_compiled",
            "Torch not compiled with CUDA enabled",
        ),
    ],
)
def test_other_cuda_initialization_messages(text: str, kind: str, message: str) -> None:
    found = read_torch_messages([text])
    assert (found.cuda_init_error, found.cuda_init_message) == (kind, message)


def test_the_most_specific_message_wins() -> None:
    found = read_torch_messages(["No CUDA GPUs are available", TOO_OLD.format(found=11000)])
    assert found.cuda_init_error == "driver_too_old"


def test_incompatible_device_gives_the_exact_arch_list_and_the_gpu() -> None:
    text = "/x/torch/cuda/__init__.py:146: UserWarning: " + CUBINS.format(
        name="NVIDIA GeForce RTX 5090", sm=120, arches="sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"
    )
    found = read_torch_messages(text.splitlines())
    assert found.supported_arches == ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
    assert found.incompatible_gpus == (
        IncompatibleGpu("NVIDIA GeForce RTX 5090", None, ComputeCapability(12, 0), "no_kernels"),
    )
    assert found.cuda_init_error is None


def test_hard_wraps_and_quotes_do_not_hide_a_message() -> None:
    text = "UserWarning: " + CUBINS.format(
        name="NVIDIA GeForce RTX 3090", sm=86, arches="sm_37 sm_50 sm_60 sm_61 sm_70 sm_75 compute_37"
    )
    wrapped = [
        w for line in text.splitlines() for w in textwrap.wrap(line, 40, break_long_words=False) or [""]
    ]
    found = read_torch_messages(wrapped)
    assert found.supported_arches[-1] == "compute_37" and len(found.supported_arches) == 7
    assert found.incompatible_gpus[0].name == "NVIDIA GeForce RTX 3090"
    assert found.incompatible_gpus[0].compute_capability == ComputeCapability(8, 6)


def test_too_old_gpus_with_their_index_and_the_build_minimum() -> None:
    # turboderp-org/exllamav2#786: torch 2.7.0+cu128 on a GTX 1080 Ti and a P100.
    texts = [
        OLD_GPU % (0, "NVIDIA GeForce GTX 1080 Ti", 6, 1, 7, 5),
        OLD_GPU % (1, "Tesla P100-PCIE-16GB", 6, 0, 7, 5),
        CUBINS.format(
            name="NVIDIA GeForce GTX 1080 Ti",
            sm=61,
            arches="sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_120",
        ),
    ]
    found = read_torch_messages(texts)
    assert found.supported_cc_min == ComputeCapability(7, 5)
    # One entry per GPU: the cubins warning of GPU 0 (no index) is the same GPU.
    assert [(g.index, g.name, g.reason) for g in found.incompatible_gpus] == [
        (0, "NVIDIA GeForce GTX 1080 Ti", "too_old"),
        (1, "Tesla P100-PCIE-16GB", "too_old"),
    ]
    assert found.supported_arches[-1] == "compute_120"


def test_old_gpu_wording_of_1x() -> None:
    text = OLD_GPU.replace("supported by this library", "that we support") % (0, "Tesla K20c", 3, 5, 3, 7)
    found = read_torch_messages([text])
    assert found.supported_cc_min == ComputeCapability(3, 7)
    assert found.incompatible_gpus[0].compute_capability == ComputeCapability(3, 5)


def test_minimum_and_maximum_wording_of_2_8() -> None:
    found = read_torch_messages([RANGE % (0, "NVIDIA GB10", 12, 1, 8, 0, 12, 0)])
    assert (found.supported_cc_min, found.supported_cc_max) == (
        ComputeCapability(8, 0),
        ComputeCapability(12, 0),
    )
    assert found.incompatible_gpus == (
        IncompatibleGpu("NVIDIA GB10", 0, ComputeCapability(12, 1), "too_new"),
    )
    low = read_torch_messages([RANGE % (0, "NVIDIA GeForce MX350", 6, 1, 7, 0, 12, 0)])
    assert low.incompatible_gpus[0].reason == "too_old"


def test_compute_capability_cc_wording_gives_the_torch_version() -> None:
    # torch/cuda/__init__.py _warn_unsupported_code (v2.12.0 …).
    text = "\n".join(
        [
            "Found GPU0 NVIDIA GeForce GTX 1080 which is of compute capability (CC) 6.1.",
            "The following list shows the CCs this version of PyTorch was built for and the hardware CCs it supports:",
            "- 7.5 which supports hardware CC >=7.5",
            (
                "Your installed torch==2.13.0+cu130 does not include kernels for this GPU. Reinstall the same "
                "version against a CUDA build that does, e.g.:"
            ),
            "  For CUDA 12.6 use pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126",
        ]
    )
    found = read_torch_messages([text])
    assert found.torch_version == Version("2.13.0+cu130")
    assert found.incompatible_gpus == (
        IncompatibleGpu("NVIDIA GeForce GTX 1080", 0, ComputeCapability(6, 1)),
    )


def test_1x_requires_cuda_version_wording_gives_the_build_cuda() -> None:
    # torch/cuda/__init__.py _check_capability's incorrect_binary_warn (v1.0.0 … v1.x).
    text = NEEDS_CUDA % (0, "GeForce RTX 2080 Ti", 10000, 9000)
    found = read_torch_messages([text])
    assert found.built_cuda == Version("9.0")
    assert found.incompatible_gpus[0].reason == "needs_newer_cuda"


def test_text_without_torch_messages_gives_nothing() -> None:
    assert read_torch_messages(["PyTorch version: 2.5.1", "Is CUDA available: True", ""]) == TorchMessages()


@given(st.lists(st.text(max_size=300), max_size=8))
def test_any_text_is_read_without_raising(texts: list[str]) -> None:
    assert isinstance(read_torch_messages(texts), TorchMessages)


def test_with_messages_keeps_what_the_facts_hold_and_the_json_round_trip() -> None:
    torch = TorchFacts(version=Version("2.1.0+cu121"), cuda=Version("12.1"))
    merged = with_messages(torch, read_torch_messages([TOO_OLD.format(found=11040)]))
    assert merged.version == Version("2.1.0+cu121") and merged.cuda == Version("12.1")
    assert merged.driver_too_old and merged.reported_driver_cuda == Version("11.4")
    texts = [
        OLD_GPU % (0, "NVIDIA GeForce GTX 1080 Ti", 6, 1, 7, 5),
        CUBINS.format(name="X", sm=61, arches="sm_75"),
    ]
    merged = with_messages(merged, read_torch_messages(texts))
    assert merged.cuda_init_error == "driver_too_old"  # the first evidence stays
    assert merged.supported_arches == ("sm_75",) and merged.supported_cc_min == ComputeCapability(7, 5)
    facts = Facts(torch=merged)
    assert facts_from_json(facts_to_json(facts)) == facts
    # A report written before these fields existed still loads.
    data = facts_to_json(Facts(torch=torch))
    for key in ("cuda_init_error", "reported_driver_cuda", "supported_arches", "incompatible_gpus"):
        del data["torch"][key]
    assert facts_from_json(data).torch == torch


def test_torch_facts_evidence_properties() -> None:
    assert TorchFacts(supported_arches=("sm_70",)).installed
    assert TorchFacts(supported_arches=("sm_70",)).cuda_build is True
    assert TorchFacts(cuda_init_error="not_compiled").cuda_build is False
    assert TorchFacts(version=Version("2.5.1+cu124")).cuda_build is True
    assert TorchFacts(version=Version("2.5.1")).cuda_build is False
    assert TorchFacts().cuda_build is None and not TorchFacts().installed
    assert TorchFacts(supported_arches=("sm_70", "compute_70")).arch_list == ("sm_70", "compute_70")
