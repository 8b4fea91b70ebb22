"""Before ``create --allow-build`` makes anything: the CUDA toolkit its source builds will use.

A planned source build (flash-attn, apex, a PyG package) compiles here with the nvcc that
torch.utils.cpp_extension finds (CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda), and cpp_extension
refuses one of another CUDA major than torch's ("The detected CUDA version (X) mismatches the version
that was used to compile PyTorch (Y)"). Without this check create installs torch and the build's
requirements, then fails in the build step after minutes of downloads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envkit.checks.toolkit import pick_build_toolkit
from envkit.detect.toolkit import detect_toolkits
from envkit.errors import InputError
from envkit.knowledge import variant_cuda
from envkit.knowledge.extensions import load_extensions

if TYPE_CHECKING:
    from envkit.resolve.plan import Plan
    from envkit.system import System

__all__ = ["check_build_toolkit"]


def check_build_toolkit(system: System, plan: Plan) -> None:
    """InputError (exit 2) when the plan's source builds need nvcc of torch's CUDA major and the
    toolkit they would use is missing, of another major, or outside the project's range."""
    cuda = variant_cuda(plan.variant)
    builds = [p for p in plan.extensions if p.build is not None]
    if cuda is None or not builds:
        return  # no build, or not a CUDA torch (ROCm builds use hipcc)
    names = ", ".join(f"{p.name} {p.version}" for p in builds)
    hint = (
        f"install the CUDA {cuda.major}.x toolkit and set CUDA_HOME to it, or plan for the CUDA your "
        f"nvcc has (--cuda), or leave --allow-build out"
    )
    toolkit = pick_build_toolkit(detect_toolkits(system))
    if toolkit is None or toolkit.version is None:
        found = "no nvcc was found (PATH, CUDA_HOME, CUDA_PATH, /usr/local/cuda*)"
        if toolkit is not None:
            found = f"{toolkit.nvcc} reports no CUDA version"
        raise InputError(
            f"--allow-build: {names} compile here with nvcc of CUDA {cuda.major}.x (torch {plan.torch}+"
            f"{plan.variant}); {found}",
            hint=hint,
        )
    where = f"nvcc {toolkit.version} at {toolkit.nvcc} (via {', '.join(toolkit.sources)})"
    for pick in builds:
        needs = load_extensions()[pick.name].build
        if needs is None:
            continue
        if needs.nvcc_major_of_torch and toolkit.version.major != cuda.major:
            raise InputError(
                f"--allow-build: {pick.name} {pick.version} compiles here with {where}, but torch "
                f"{plan.torch}+{plan.variant} is CUDA {cuda}: torch.utils.cpp_extension refuses another "
                "CUDA major",
                hint=hint,
            )
        if needs.nvcc is not None and not needs.nvcc.contains(toolkit.version, prereleases=True):
            raise InputError(
                f"--allow-build: {pick.name} {pick.version} builds with nvcc{needs.nvcc}; the one it "
                f"would use is {where}",
                hint=hint,
            )
