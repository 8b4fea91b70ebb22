"""gpu.health: ECC errors, pending page retirement / row remaps, throttling, PCIe link, lost GPUs;
gpu.mig: GPUs split into MIG devices.

Thresholds follow the trusted node-health tools: any volatile uncorrected ECC error or failed row
remap fails the node (facebookresearch/gcm:gcm/health_checks/checks/check_nvidia_smi.py@1b7bde97195d;
Azure/azurehpc-health-checks:customTests/azure_*.nhc@0e0a1ac26a64, NHC2019/NHC2007);
a pending remap or retirement needs a GPU reset (NVIDIA "Dynamic Page Retirement" / "Row
Remapping" docs); hardware slowdown, thermal and power-brake clock events warn (Azure, DCGM
``--clocksevent-mask``); a PCIe link narrower than its maximum warns. The link *generation* is not
judged at rest: GPUs drop it when idle (nvidia-smi documentation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from envkit.checks._common import and_list, fix_lines, headline, join_lines, plural
from envkit.report import CheckResult, Status

if TYPE_CHECKING:
    from envkit.facts import Facts, GpuFacts

__all__ = ["check_gpu_health", "check_gpu_mig"]

ID: Final = "gpu.health"
THROTTLE_EVENTS: Final = ("hw_slowdown", "hw_thermal", "hw_power_brake", "sw_thermal")
# Warn this close (°C) to the slowdown temperature.
THERMAL_MARGIN_C: Final = 5


def _gpu_label(gpu: GpuFacts) -> str:
    return f"GPU {gpu.index} ({gpu.name or 'unknown model'})"


def _problems(gpu: GpuFacts) -> tuple[list[str], list[str], list[str]]:
    """(failures, warnings, fixes) for one GPU."""
    fails: list[str] = []
    warns: list[str] = []
    fixes: list[str] = []
    label = _gpu_label(gpu)
    reset = f"sudo nvidia-smi -r -i {gpu.index}"
    if gpu.error:
        fails.append(f"{label} is unusable: {gpu.error}")
        fixes.append(f"drain the node, then reset the GPU ({reset}) or reboot")
        return fails, warns, fixes
    if gpu.ecc_uncorrected_volatile:
        fails.append(f"{label}: {gpu.ecc_uncorrected_volatile} uncorrected ECC error(s) since boot")
        fixes.append(f"drain the node and reset the GPU ({reset}); if errors recur, RMA it")
    if gpu.remapped_rows_failure:
        fails.append(f"{label}: row remapping failed (the memory cannot be repaired in place)")
        fixes.append(f"take GPU {gpu.index} out of service and RMA it")
    if gpu.remapped_rows_pending:
        warns.append(f"{label}: a row remap is pending")
        fixes.append(f"reset the GPU to apply it: {reset}")
    if gpu.retired_pages_pending:
        warns.append(f"{label}: a page retirement is pending")
        fixes.append(f"reset the GPU to apply it: {reset}")
    if None not in (gpu.ecc_enabled, gpu.ecc_pending) and gpu.ecc_enabled != gpu.ecc_pending:
        warns.append(f"{label}: an ECC mode change is pending")
        fixes.append("reboot (or reset the GPU) to apply the ECC mode")
    if None not in (gpu.mig_enabled, gpu.mig_pending) and gpu.mig_enabled != gpu.mig_pending:
        warns.append(f"{label}: a MIG mode change is pending")
        fixes.append(f"reset the GPU to apply it: {reset}")
    throttled = [e for e in (gpu.clock_events or ()) if e in THROTTLE_EVENTS]
    if throttled:
        warns.append(f"{label}: clocks held down by {and_list(throttled)}")
        fixes.append("check cooling, power cables and the power limit (`nvidia-smi -q -d PERFORMANCE`)")
    if gpu.pcie_width and gpu.pcie_width_max and gpu.pcie_width < gpu.pcie_width_max:
        warns.append(f"{label}: PCIe link x{gpu.pcie_width} of x{gpu.pcie_width_max}")
        fixes.append("reseat the GPU or check the slot/riser (`nvidia-smi -q -d PCIE`)")
    slowdown = gpu.temperature_slowdown_c
    if gpu.temperature_c is not None and slowdown and gpu.temperature_c >= slowdown - THERMAL_MARGIN_C:
        warns.append(f"{label}: {gpu.temperature_c} °C, slowdown at {gpu.temperature_slowdown_c} °C")
        fixes.append("check the airflow and fans")
    return fails, warns, fixes


def _describe(gpu: GpuFacts) -> str:
    parts = [f"{_gpu_label(gpu)}:"]
    if gpu.compute_capability:
        parts.append(f"CC {gpu.compute_capability}")
    if gpu.memory_total_mib:
        parts.append(f"{gpu.memory_total_mib / 1024:.0f} GiB")
    if gpu.ecc_enabled is not None:
        parts.append("ECC on" if gpu.ecc_enabled else "ECC off")
    if gpu.pcie_gen and gpu.pcie_gen_max:
        parts.append(f"PCIe gen {gpu.pcie_gen}/{gpu.pcie_gen_max} x{gpu.pcie_width}/{gpu.pcie_width_max}")
    if gpu.temperature_c is not None:
        parts.append(f"{gpu.temperature_c} °C")
    if gpu.power_w is not None and gpu.power_limit_w:
        parts.append(f"{gpu.power_w:.0f}/{gpu.power_limit_w:.0f} W")
    if not gpu.visible:
        parts.append("(hidden by CUDA_VISIBLE_DEVICES)")
    return " ".join(parts)


def check_gpu_health(facts: Facts) -> CheckResult:
    if not facts.gpus:
        return CheckResult(ID, Status.SKIP, "no GPUs to check")
    fails: list[str] = []
    warns: list[str] = []
    fixes: list[str] = []
    for gpu in facts.gpus:
        f, w, x = _problems(gpu)
        fails += f
        warns += w
        fixes += x
    inventory = [_describe(g) for g in facts.gpus]
    if fails or warns:
        return CheckResult(
            ID,
            Status.FAIL if fails else Status.WARN,
            headline(fails + warns),
            detail=join_lines(*fails, *warns, "", *inventory),
            fix=fix_lines(fixes),
        )
    names = sorted({g.name or "unknown model" for g in facts.gpus})
    return CheckResult(
        ID,
        Status.PASS,
        f"{plural(len(facts.gpus), 'GPU')} healthy ({and_list(names)})",
        detail=join_lines(*inventory),
    )


# NVIDIA's MIG user guide, "CUDA Device Enumeration" / "Application Considerations"
# (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/): a CUDA process enumerates one MIG
# device only, whatever CUDA_VISIBLE_DEVICES lists, and MIG devices have no GPU-to-GPU P2P (PCIe
# or NVLink), so NCCL cannot run a collective across slices; a device-count assert or "invalid
# device ordinal" follows (pytorch/pytorch#130181, ptrblck in pytorch/pytorch#102715).
MIG_ID: Final = "gpu.mig"


def _mig_label(gpu: GpuFacts) -> str:
    if not gpu.mig_devices:
        return f"{_gpu_label(gpu)} is in MIG mode"
    counts = {p: gpu.mig_devices.count(p) for p in dict.fromkeys(gpu.mig_devices)}
    profiles = and_list([f"{p}" + (f" x{n}" if n > 1 else "") for p, n in counts.items()])
    return f"{_gpu_label(gpu)} is split into {plural(len(gpu.mig_devices), 'MIG device')} ({profiles})"


def check_gpu_mig(facts: Facts) -> CheckResult:
    if not facts.gpus:
        return CheckResult(MIG_ID, Status.SKIP, "no GPUs to check")
    split = [g for g in facts.gpus if g.mig_enabled or g.mig_devices]
    if not split:
        pasted = all(g.source == "collect_env" for g in facts.gpus)
        if not pasted and all(g.mig_enabled is None for g in facts.gpus):
            return CheckResult(MIG_ID, Status.SKIP, "the driver did not report the GPUs' MIG mode")
        # nvidia-smi -L (a paste's GPU lines) lists every MIG device below its GPU: none there, none made.
        return CheckResult(MIG_ID, Status.PASS, "no GPU is in MIG mode")
    devices = sum(max(len(g.mig_devices), 1) for g in split)
    visible = [t.strip() for t in facts.host.env.get("CUDA_VISIBLE_DEVICES", "").split(",") if t.strip()]
    chosen = [t for t in visible if t.startswith("MIG-")]
    findings = [_mig_label(g) for g in split]
    detail = join_lines(
        *findings,
        "With MIG, CUDA shows a process MIG devices instead of the GPU, and a process can use one MIG "
        "device only (NVIDIA MIG user guide, CUDA device enumeration): torch.cuda.device_count() is 1 "
        "and cuda:1 does not exist, whatever CUDA_VISIBLE_DEVICES lists.",
        "MIG devices have no peer-to-peer path (PCIe or NVLink) between them: NCCL collectives across "
        "slices (DDP/FSDP over several MIG devices) are not supported.",
    )
    one_each = (
        "give each process one MIG device: CUDA_VISIBLE_DEVICES=MIG-<uuid> python train.py "
        "(the MIG-… UUIDs are in `nvidia-smi -L`)"
    )
    whole = (
        "for multi-GPU training use whole GPUs: sudo nvidia-smi -i {i} -mig 0 (no process may hold "
        "the GPU; reset it or reboot if the change stays pending)"
    )
    fixes = [one_each, *(whole.format(i=g.index) for g in split)]
    if len(chosen) == 1 and len(visible) == 1:
        return CheckResult(
            MIG_ID,
            Status.PASS,
            f"CUDA_VISIBLE_DEVICES selects one MIG device ({chosen[0]}) of {headline(findings)}",
            detail=detail,
        )
    summary = headline(findings)
    if devices > 1:
        summary += "; a CUDA process sees only one of them"
    return CheckResult(MIG_ID, Status.WARN, summary, detail=detail, fix=fix_lines(fixes))
