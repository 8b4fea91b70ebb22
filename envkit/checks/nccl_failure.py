"""nccl.failure: an NCCL error in the text, and what NCCL's own words point at.

torch prints NCCL's result ("unhandled system error", NVIDIA/nccl src/init.cc ncclGetErrorString)
and, since NCCL 2.13, NCCL's last WARN line ("Last error: …"); NCCL_DEBUG=WARN prints the same as
"NCCL WARN …". The usual causes and their fixes follow NCCL's troubleshooting guide
(docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html: "Docker" for /dev/shm,
"PCI Access Control Services (ACS)" for peer-to-peer, "Networking issues" for interfaces and IB).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from envkit.checks._common import join_lines
from envkit.report import CheckResult, Status

if TYPE_CHECKING:
    from envkit.facts import Facts

__all__ = ["check_nccl_failure"]

ID: Final = "nccl.failure"
_DEBUG: Final = "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET"
_CAUSES: Final = {
    "shm": (
        "NCCL could not create its shared-memory segment in /dev/shm (too small: Docker gives 64 MiB)",
        (
            "docker run --ipc=host … (or --shm-size=8g); in Kubernetes mount an emptyDir with medium: Memory "
            "at /dev/shm; NCCL_SHM_DISABLE=1 works around it, slower"
        ),
    ),
    "socket": (
        (
            "NCCL could not connect to another rank over TCP (wrong interface, a firewall, or an address "
            "the other node cannot reach)"
        ),
        (
            "export NCCL_SOCKET_IFNAME=<the interface the nodes reach each other on> (`ip -br addr`), and "
            f"let the ports through the firewall; {_DEBUG} shows the interface NCCL picked"
        ),
    ),
    "p2p": (
        "GPU peer-to-peer access failed (PCIe ACS / the IOMMU blocks it, or a VM does not pass it through)",
        (
            "export NCCL_P2P_DISABLE=1 to confirm; then disable PCIe ACS or boot with iommu=pt (NCCL's "
            "troubleshooting guide, 'PCI Access Control Services')"
        ),
    ),
    "ib": (
        "NCCL's InfiniBand / RoCE transport failed",
        (
            "export NCCL_IB_DISABLE=1 to confirm (TCP instead); check the HCA with ibstat / ibv_devinfo and "
            "pick it with NCCL_IB_HCA"
        ),
    ),
    "cuda": (
        "a CUDA call inside NCCL failed",
        f"see the driver and architecture checks; rerun with {_DEBUG} for the call",
    ),
    "remote": (
        "another rank exited or the network dropped: this rank's error is a consequence",
        "read the first failing rank's log (the one that did not print this error)",
    ),
}


def check_nccl_failure(facts: Facts) -> CheckResult:
    nccl = facts.errors.nccl
    if nccl is None:
        if not facts.errors.read:
            return CheckResult(
                ID, Status.SKIP, "no error text to read (envkit doctor --error FILE reads one)"
            )
        return CheckResult(ID, Status.SKIP, "the error text shows no NCCL error")
    version = (
        f"NCCL {nccl.version}" + (f" (CUDA {nccl.cuda})" if nccl.cuda else "") if nccl.version else "NCCL"
    )
    said = f"NCCL said: {nccl.last_error}" if nccl.last_error else ""
    if nccl.cause is None:
        return CheckResult(
            ID,
            Status.FAIL,
            f"{version}: {nccl.result}; the text does not say why",
            detail=join_lines(said, "NCCL names its reason only in its own log lines"),
            fix=f"rerun with {_DEBUG} (and TORCH_DISTRIBUTED_DEBUG=DETAIL); then envkit doctor --error LOG",
        )
    why, fix = _CAUSES[nccl.cause]
    detail = [said, f"{version}: {nccl.result}"]
    if nccl.cause == "shm" and facts.host.shm_bytes is not None:
        detail.append(f"/dev/shm here: {facts.host.shm_bytes / 2**20:.0f} MiB")
    if nccl.cause == "socket" and facts.host.interfaces:
        detail.append("interfaces up here: " + ", ".join(i.name for i in facts.host.interfaces if i.up))
    return CheckResult(ID, Status.FAIL, f"{version} failed: {why}", detail=join_lines(*detail), fix=fix)
