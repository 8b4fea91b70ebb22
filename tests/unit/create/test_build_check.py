"""create --allow-build checks the toolkit its source builds will use before it makes anything
(envkit.create.build_check): fake toolkit trees, the way tests/unit/detect/test_toolkit.py makes them."""

from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet

from envkit.create.build_check import check_build_toolkit
from envkit.errors import InputError
from envkit.knowledge import load_knowledge
from envkit.resolve import Request, resolve
from envkit.resolve.extensions import parse_extensions
from envkit.resolve.target import GpuTarget, Target
from envkit.versions import ComputeCapability, NvVersion, Version
from tests.unit.detect.test_toolkit import NVCC_12_4, toolkit

H100 = Target(
    platform="linux-x86_64",
    driver=NvVersion("550.54.15"),
    gpus=(GpuTarget(ComputeCapability(9, 0)),),
    python=Version("3.11"),
)


def _plan(torch: str, allow_build: bool):  # type: ignore[no-untyped-def]
    request = Request(
        torch=SpecifierSet(torch), extensions=parse_extensions(["flash-attn"]), allow_build=allow_build
    )
    return resolve(load_knowledge(), H100, request)


def test_a_source_build_needs_nvcc_of_torchs_cuda_major(machine) -> None:  # type: ignore[no-untyped-def]
    # flash-attn has no wheel for torch 2.14 (publish.yml@a8aa52b1ab3e): a build against 2.14.1+cu126.
    plan = _plan("==2.14.1", allow_build=True)
    assert plan.variant == "cu126" and plan.extensions[0].build is not None
    with pytest.raises(InputError, match="no nvcc was found") as caught:
        check_build_toolkit(machine.system(), plan)
    assert "CUDA 12.x toolkit" in caught.value.hint
    # This machine kind's case: nvcc 13.0 on PATH beside a cu126 torch, which cpp_extension refuses.
    toolkit(machine.root, "cuda-13.0", NVCC_12_4.replace("12.4", "13.0"))
    machine.env["CUDA_HOME"] = "/usr/local/cuda-13.0"
    with pytest.raises(InputError, match=r"nvcc 13\.0\.131 .*refuses another CUDA major"):
        check_build_toolkit(machine.system(), plan)
    toolkit(machine.root, "cuda-12.4", NVCC_12_4)
    machine.env["CUDA_HOME"] = "/usr/local/cuda-12.4"
    check_build_toolkit(machine.system(), plan)  # the toolkit cpp_extension takes fits


def test_no_build_no_toolkit_needed(machine) -> None:  # type: ignore[no-untyped-def]
    check_build_toolkit(machine.system(), _plan("==2.8.0", allow_build=True))  # a wheel fits
