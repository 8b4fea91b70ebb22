"""Checks: pure functions ``Facts -> CheckResult``, registered here under their stable ids.

A check never runs a process; it reads Facts (and the knowledge base). Ids are a contract: scripts
and ``--expect`` files name them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Final

from envkit.checks.companions import check_torch_companions
from envkit.checks.compat import check_cpu_build_on_gpu, check_gpu_arch, check_torch_driver_compat
from envkit.checks.compile_toolchain import check_compile_toolchain
from envkit.checks.container import (
    check_container_capabilities,
    check_container_cuda_driver,
    check_container_gpus,
)
from envkit.checks.cuda_available import check_torch_cuda_available
from envkit.checks.driver import check_driver_loaded
from envkit.checks.driver_support import check_driver_support
from envkit.checks.extension_load import check_extension_load
from envkit.checks.extensions import check_extensions
from envkit.checks.gpu import check_gpu_health, check_gpu_mig
from envkit.checks.memory import check_gpu_memory
from envkit.checks.nccl import check_nccl_env
from envkit.checks.nccl_build import check_nccl_version
from envkit.checks.nccl_failure import check_nccl_failure
from envkit.checks.shm import check_shm
from envkit.checks.toolkit import check_toolkit_nvcc
from envkit.checks.torch import check_torch_cuda_libs, check_torch_duplicates, check_torch_installed
from envkit.checks.vendors import check_amd_driver, check_gfx_arch, check_gpu_vendor, check_intel_driver
from envkit.facts import Facts
from envkit.report import CHECK_BROKEN, CheckResult, Status

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["AREAS", "CHECKS", "Check", "run_checks"]

Check = Callable[[Facts], CheckResult]

CHECKS: Final[dict[str, Check]] = {
    "driver.loaded": check_driver_loaded,
    "driver.support": check_driver_support,
    "gpu.health": check_gpu_health,
    "gpu.mig": check_gpu_mig,
    "gpu.memory": check_gpu_memory,
    "driver.amd": check_amd_driver,
    "driver.intel": check_intel_driver,
    "toolkit.nvcc": check_toolkit_nvcc,
    "python.shm": check_shm,
    "torch.installed": check_torch_installed,
    "torch.duplicates": check_torch_duplicates,
    "torch.cuda_libs": check_torch_cuda_libs,
    "torch.companions": check_torch_companions,
    "torch.extensions": check_extensions,
    "torch.extension_load": check_extension_load,
    "torch.compile_toolchain": check_compile_toolchain,
    "torch.cuda_available": check_torch_cuda_available,
    "torch.driver_compat": check_torch_driver_compat,
    "torch.gpu_arch": check_gpu_arch,
    "torch.cpu_build_on_gpu": check_cpu_build_on_gpu,
    "torch.gpu_vendor": check_gpu_vendor,
    "torch.gfx_arch": check_gfx_arch,
    "nccl.env": check_nccl_env,
    "nccl.failure": check_nccl_failure,
    "nccl.version": check_nccl_version,
    "container.gpus": check_container_gpus,
    "container.cuda_driver": check_container_cuda_driver,
    "container.capabilities": check_container_capabilities,
}

# Report sections, in display order.
AREAS: Final = {
    "driver": "GPU drivers",
    "gpu": "GPUs",
    "toolkit": "CUDA toolkit",
    "python": "Python",
    "torch": "PyTorch",
    "nccl": "NCCL / distributed",
    "container": "Container",
    "verify": "Verification",
}


def run_checks(facts: Facts, only: Iterable[str] | None = None) -> tuple[CheckResult, ...]:
    """Run every registered check (or those named) on ``facts``.

    A check that raises is reported as a warning naming the exception: one broken check must not
    hide the others' results.
    """
    wanted = list(only) if only is not None else list(CHECKS)
    results = []
    for cid in wanted:
        try:
            result = CHECKS[cid](facts)
        except Exception as exc:  # noqa: BLE001 -- a bug in a check becomes its verdict
            result = CheckResult(
                cid,
                Status.WARN,
                f"{CHECK_BROKEN}: {type(exc).__name__}: {exc}",
                fix="please report this at the envkit issue tracker with `envkit doctor --json`",
            )
        results.append(result)
    return tuple(results)
