"""gpu.memory: a CUDA out-of-memory error, and whose memory it was.

torch's message says it (c10/cuda/CUDACachingAllocator.cpp, read by envkit.detect.errtext): the
GPU's total, what is free, what this process holds (PyTorch's own and, since torch 2.1, the rest:
"Including non-PyTorch memory, this process has …"), and each other process's use ("Process 1234
has … memory in use"). When other processes hold most of the GPU, no batch size helps: the GPU
is busy (another job, a notebook kernel left running, a zombie worker). When this process holds
it, the work does not fit, and a large "reserved but unallocated" share is fragmentation, which
``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` addresses (torch's own advice in the
message; docs/source/notes/cuda.rst "Optimizing memory usage with PYTORCH_CUDA_ALLOC_CONF").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from envkit.checks._common import join_lines
from envkit.report import CheckResult, Status

if TYPE_CHECKING:
    from envkit.facts import CudaOom, Facts

__all__ = ["check_gpu_memory"]

ID: Final = "gpu.memory"
_SMI_APPS: Final = "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"


def _gib(mib: float) -> str:
    return f"{mib / 1024:.2f} GiB" if mib >= 1024 else f"{mib:.0f} MiB"


def _others_mib(oom: CudaOom) -> float:
    """Memory in use by others: what they were named with, else what is neither free nor this
    process's (the rest is the driver's context and other processes)."""
    named = sum(mib for _pid, mib in oom.others)
    if named:
        return named
    if oom.total_mib is None or oom.free_mib is None or oom.process_mib is None:
        return 0.0
    return max(0.0, oom.total_mib - oom.free_mib - oom.process_mib)


def check_gpu_memory(facts: Facts) -> CheckResult:
    oom = facts.errors.oom
    if oom is None:
        if not facts.errors.read:
            return CheckResult(
                ID, Status.SKIP, "no error text to read (envkit doctor --error FILE reads one)"
            )
        return CheckResult(ID, Status.SKIP, "the error text shows no CUDA out-of-memory error")
    gpu = f"GPU {oom.gpu}" if oom.gpu is not None else "the GPU"
    if oom.total_mib is None:
        return CheckResult(
            ID,
            Status.FAIL,
            f'CUDA ran out of memory on {gpu} outside torch\'s allocator ("CUDA error: out of memory")',
            detail="the error came from a CUDA call before or beside torch's caching allocator (creating "
            "the context, a library's workspace): the GPU was already full, usually by another process",
            fix=f"{_SMI_APPS}  (stop what holds the GPU, or pick a free one: CUDA_VISIBLE_DEVICES=<index>)",
        )
    others = _others_mib(oom)
    total = oom.total_mib
    mine = oom.process_mib
    figures = join_lines(
        f"{gpu}: {_gib(total)} in all, {_gib(oom.free_mib or 0)} free"
        + (f", this process {_gib(mine)}" if mine is not None else "")
        + (f", tried to allocate {_gib(oom.tried_mib)}" if oom.tried_mib is not None else ""),
        *(f"process {pid} holds {_gib(mib)}" for pid, mib in oom.others),
    )
    if others >= 0.5 * total or (mine is not None and others > mine and others >= 0.25 * total):
        pids = ", ".join(str(pid) for pid, _ in oom.others)
        who = (
            f"process {pids}" if len(oom.others) == 1 else f"processes {pids}" if pids else "other processes"
        )
        return CheckResult(
            ID,
            Status.FAIL,
            f"{gpu} is out of memory because {who} hold {_gib(others)} of its {_gib(total)}",
            detail=join_lines(figures, "no batch size fixes this: the GPU is busy with other work"),
            fix=f"{_SMI_APPS}  then stop {who} (kill <pid>) or use a free GPU: CUDA_VISIBLE_DEVICES=<index>",
        )
    fragmented = (
        oom.unallocated_mib is not None and oom.tried_mib is not None and oom.unallocated_mib >= oom.tried_mib
    )
    fix = "use less memory: a smaller batch or sequence length, bf16/fp16, activation checkpointing"
    if fragmented:
        fix = (
            "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True  (the memory is there but fragmented); "
            + fix
        )
    return CheckResult(
        ID,
        Status.WARN,
        f"the work needs more memory than {gpu} has: this process holds "
        f"{_gib(mine if mine is not None else total - (oom.free_mib or 0))} of {_gib(total)}",
        detail=join_lines(
            figures,
            f"{_gib(oom.unallocated_mib or 0)} is reserved by PyTorch but unallocated (fragmentation)"
            if fragmented
            else "",
        ),
        fix=fix,
    )
