"""python.shm: is /dev/shm big enough for NCCL and DataLoader workers?

NCCL's shared-memory transport and torch DataLoader workers both live in /dev/shm; Docker gives a
container 64 MiB unless run with --ipc=host or --shm-size, the classic cause of "unhandled system
error" in NCCL and "bus error" in DataLoader workers (pytorch/pytorch#37004, NVIDIA/nccl#473).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from envkit.checks._common import join_lines
from envkit.facts import ContainerKind
from envkit.report import CheckResult, Status

if TYPE_CHECKING:
    from envkit.facts import Facts

__all__ = ["check_shm"]

ID: Final = "python.shm"
MIB: Final = 1024 * 1024
# Below this, multi-worker data loading and NCCL fail outright (Docker's default is 64 MiB).
FAIL_BELOW: Final = 256 * MIB
# Below this, large batches with several workers run out.
WARN_BELOW: Final = 1024 * MIB
FIX: Final = (
    "in Docker: run with --ipc=host (or --shm-size=16g); in Kubernetes: mount an emptyDir with "
    "medium: Memory at /dev/shm; on a host: sudo mount -o remount,size=16G /dev/shm"
)


# Inside a container the fix is the way it was started, not a remount (docs.docker.com/reference/cli/
# docker/container/run/#ipc and --shm-size; Kubernetes: kubernetes.io/docs/concepts/storage/volumes/
# #emptydir, medium: Memory); Apptainer shares the host's /dev/shm.
CONTAINER_FIXES: Final = {
    ContainerKind.DOCKER: "docker run --ipc=host …  (or --shm-size=16g; compose: ipc: host or shm_size: 16g)",
    ContainerKind.PODMAN: "podman run --ipc=host …  (or --shm-size=16g)",
    ContainerKind.KUBERNETES: "mount an emptyDir with medium: Memory (sizeLimit: 16Gi) at /dev/shm in "
    "the pod spec",
    ContainerKind.APPTAINER: "Apptainer shares the host's /dev/shm: on the host, "
    "sudo mount -o remount,size=16G /dev/shm",
}


def _fix(facts: Facts) -> str:
    kind = facts.container.kind
    return CONTAINER_FIXES.get(kind, FIX) if kind is not None else FIX


def check_shm(facts: Facts) -> CheckResult:
    size = facts.host.shm_bytes
    fix = _fix(facts)
    if size is None and "shm_bytes" in facts.host.unanswered:
        # Not measured (its reader hung), which says nothing about /dev/shm itself.
        return CheckResult(
            ID, Status.SKIP, "/dev/shm was not measured in time", detail=join_lines(*facts.host.notes)
        )
    if size is None:
        return CheckResult(
            ID,
            Status.WARN,
            "/dev/shm is missing or unreadable",
            detail="NCCL's shared-memory transport and DataLoader workers need it",
            fix=fix,
        )
    shown = f"{size / MIB:.0f} MiB" if size < 10 * 1024 * MIB else f"{size / (1024 * MIB):.0f} GiB"
    if size < FAIL_BELOW:
        return CheckResult(
            ID,
            Status.FAIL,
            f"/dev/shm is only {shown}",
            detail="NCCL ('unhandled system error') and DataLoader workers ('bus error') fail with "
            "this little shared memory; Docker's default is 64 MiB",
            fix=fix,
        )
    if size < WARN_BELOW:
        return CheckResult(
            ID,
            Status.WARN,
            f"/dev/shm is {shown}",
            detail="enough for small jobs; several DataLoader workers with large batches run out",
            fix=fix,
        )
    return CheckResult(ID, Status.PASS, f"/dev/shm is {shown}")
