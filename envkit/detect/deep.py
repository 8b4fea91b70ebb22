"""``--deep``: import torch in the target interpreter (a subprocess with a timeout) and read what
the build reports: CUDA availability, devices, compiled architectures, cuDNN, NCCL, bf16.

A failed import is an answer (``ok`` false with the exception); a segfault, hang or garbage is a
failed probe whose error says which, with the tail of stderr.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from envkit.facts import DeepTorchFacts, DeviceInfo
from envkit.system import run_probe
from envkit.versions import parse_compute_capability, parse_version

if TYPE_CHECKING:
    from envkit.detect.pyenv import Interpreter
    from envkit.system import System

__all__ = ["DEEP_HANG", "deep_budget", "deep_unanswered", "detect_deep", "parse_deep"]

DEEP_TIMEOUT_S: Final = 60.0
# What the deep probe leaves of the run's time for stopping it and for the checks: a quarter of
# what remains, at most 1.5 s (SIGTERM, its grace, SIGKILL: envkit._proc.TERM_GRACE_S twice).
DEEP_RESERVE_S: Final = 1.5
DEEP_HANG: Final = "import torch did not finish in"


def deep_budget(system: System) -> float:
    """Seconds the torch probe may take so that it ends (or is stopped) inside the run's deadline."""
    remaining = system.remaining()
    if remaining is None:
        return DEEP_TIMEOUT_S
    return max(0.1, min(DEEP_TIMEOUT_S, remaining - min(DEEP_RESERVE_S, remaining / 4)))


def deep_unanswered(budget: float) -> DeepTorchFacts:
    """The deep facts when the probe did not answer in time: a failure, never "not inspected"."""
    return DeepTorchFacts(
        ok=False,
        error=f"{DEEP_HANG} {budget:.1f} s (the probe was stopped; a hang here is usually a wedged "
        "GPU or a slow network filesystem; a larger --timeout tells which)",
        duration_s=round(budget, 3),
        timed_out=True,
    )


def detect_deep(system: System, interp: Interpreter, *, budget: float | None = None) -> DeepTorchFacts:
    timeout = deep_budget(system) if budget is None else budget
    outcome = run_probe(system, interp.path, "torch_probe.py", timeout=timeout)
    if outcome.result.timed_out:
        return deep_unanswered(timeout)
    if outcome.data is None:
        return DeepTorchFacts(
            ok=False,
            error=f"the torch probe failed: {outcome.error}",
            duration_s=round(outcome.result.duration_s, 3),
        )
    return parse_deep(outcome.data)


def parse_deep(data: dict[str, Any]) -> DeepTorchFacts:
    """Turn the torch probe's JSON into facts (unknown or odd values become None)."""
    devices = tuple(
        DeviceInfo(str(d.get("name")), parse_compute_capability(str(d.get("cc", ""))))
        for d in data.get("devices") or []
        if isinstance(d, dict)
    )
    cudnn = data.get("cudnn")
    return DeepTorchFacts(
        ok=bool(data.get("ok")),
        error=data.get("error"),
        version=parse_version(str(data["version"])) if data.get("version") else None,
        cuda_available=data.get("cuda_available"),
        device_count=data.get("device_count"),
        xpu_available=data.get("xpu_available") if isinstance(data.get("xpu_available"), bool) else None,
        arch_list=tuple(str(a) for a in data.get("arch_list") or []),
        cudnn=cudnn if isinstance(cudnn, int) else None,
        nccl=parse_version(str(data["nccl"])) if data.get("nccl") else None,
        bf16_supported=data.get("bf16"),
        devices=devices,
        warnings=tuple(str(w) for w in data.get("warnings") or []),
        duration_s=data.get("duration_s"),
    )
