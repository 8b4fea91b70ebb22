"""A report as Prometheus metrics: the text format node_exporter's textfile collector reads
(``preflight --metrics FILE``, ``doctor --format prometheus``) and OpenMetrics 1.0
(``doctor --format openmetrics``). README "Metrics" lists every family.

Names, units and labels follow Prometheus's naming conventions (prometheus/docs:
docs/practices/naming.md@c105550a, https://prometheus.io/docs/practices/naming/): one ``envkit_``
prefix, base units spelled as a suffix (``_seconds``, ``_bytes_per_second``, ``_ratio``),
``_timestamp_seconds`` for a time, ``_info`` pseudo-metrics with value 1 for metadata, ``_total``
for counters, and no label that names the host (Prometheus adds ``instance``) or grows without
bound (no paths, no per-run values, no free text such as a check's summary).

The text itself (the two formats, escaping, redaction of every label value) is
envkit.render.exposition's; this module says which families a report makes.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Optional

from envkit import __version__
from envkit.render.exposition import Family, exposition, family
from envkit.report import Status

if TYPE_CHECKING:
    from collections.abc import Iterator

    from envkit.facts import Facts
    from envkit.report import CheckResult, Report

__all__ = ["STATUS_VALUE", "Family", "WatchState", "families", "openmetrics_text", "prometheus_text"]

# envkit_check_status's value map: ordered by severity, so that max() over a node's checks is its
# worst verdict and `== 2` selects failures; a check that could not run sits below a pass.
STATUS_VALUE: Final = {Status.FAIL: 2, Status.WARN: 1, Status.PASS: 0, Status.SKIP: -1}


@dataclass(frozen=True)
class WatchState:
    """What ``preflight --every`` adds to each run's metrics."""

    runs: int
    skipped: int
    interval_s: float


def _number(value: Any) -> Optional[float]:
    """A figure from a check's metrics, if it is one (bool is not; NaN and infinities are not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _timestamp(created: str) -> Optional[float]:
    try:
        return datetime.datetime.fromisoformat(created).timestamp()
    except ValueError:
        return None


def _fact_families(facts: Facts) -> Iterator[Optional[Family]]:
    driver = facts.driver
    if driver.version is not None:
        yield family(
            "envkit_driver",
            "info",
            "The NVIDIA driver: its version, branch and the newest CUDA it runs.",
            [
                (
                    {
                        "version": driver.version,
                        "branch": driver.version.release[0],
                        "cuda_version": driver.cuda_version or "",
                    },
                    1,
                )
            ],
        )
    # NVIDIA's GPUs (NVML / nvidia-smi), then AMD's and Intel's (envkit.detect.amd / intel).
    counts: list[tuple[dict[str, object], float]] = []
    if "gpus" not in facts.unknown:  # a paste that shows no GPU list says nothing of their count
        counts.append(({"vendor": "nvidia"}, len(facts.gpus)))
    rows: list[tuple[dict[str, object], float]] = [
        (
            {
                "vendor": "nvidia",
                "gpu": gpu.index,
                "model": gpu.name or "",
                "uuid": gpu.uuid or "",
                "compute_capability": gpu.compute_capability or "",
                "arch": gpu.compute_capability.sm if gpu.compute_capability is not None else "",
            },
            1,
        )
        for gpu in facts.gpus
    ]
    drivers: list[tuple[dict[str, object], float]] = []
    for other in (facts.amd, facts.intel):
        if not other.gpus:
            continue
        counts.append(({"vendor": other.vendor}, len(other.gpus)))
        rows += [
            (
                {
                    "vendor": other.vendor,
                    "gpu": gpu.index,
                    "model": gpu.name or "",
                    "uuid": "",
                    "compute_capability": "",
                    "arch": gpu.arch or "",
                },
                1,
            )
            for gpu in other.gpus
        ]
        drivers.append(
            (
                {
                    "vendor": other.vendor,
                    "driver": other.driver or "",
                    "version": other.driver_version or "",
                    "runtime_version": other.runtime or "",
                },
                1,
            )
        )
    yield family("envkit_gpus", "gauge", "GPUs the drivers report, per vendor.", counts)
    yield family(
        "envkit_gpu",
        "info",
        "One GPU: its vendor, index (as DCGM's gpu label for NVIDIA), model, UUID, compute capability "
        "and architecture (sm_90, gfx942, pvc).",
        rows,
    )
    yield family(
        "envkit_gpu_driver",
        "info",
        "An AMD or Intel GPU driver (amdgpu, xe, i915), its version and the ROCm / Level Zero runtime.",
        drivers,
    )
    torch = facts.torch
    if torch.version is not None:
        yield family(
            "envkit_torch",
            "info",
            "The inspected environment's torch build: version, wheel variant, its CUDA or HIP.",
            [
                (
                    {
                        "version": torch.version,
                        "variant": torch.variant or "",
                        "cuda_version": torch.cuda or "",
                        "hip_version": torch.hip or "",
                    },
                    1,
                )
            ],
        )
    nccl = torch.nccl_version()
    if nccl is not None:
        yield family(
            "envkit_nccl",
            "info",
            "The NCCL torch loads (--deep's answer, else its wheel).",
            [({"version": nccl}, 1)],
        )
    toolkits = sorted({str(t.version) for t in facts.toolkits if t.version is not None})
    yield family(
        "envkit_cuda_toolkit",
        "info",
        "A CUDA toolkit (nvcc) found on the machine.",
        [({"version": v}, 1) for v in toolkits],
    )
    python = facts.python
    if python is not None and python.version is not None:
        yield family(
            "envkit_python", "info", "The inspected interpreter's Python.", [({"version": python.version}, 1)]
        )


def _verify_families(checks: tuple[CheckResult, ...]) -> Iterator[Optional[Family]]:
    matmul: list[tuple[dict[str, object], float]] = []
    matmul_peak: list[tuple[dict[str, object], float]] = []
    copy: list[tuple[dict[str, object], float]] = []
    copy_peak: list[tuple[dict[str, object], float]] = []
    busbw: list[tuple[dict[str, object], float]] = []
    for check in checks:
        metrics = check.metrics
        if check.id == "verify.perf":
            for device in metrics.get("devices") or ():
                if not isinstance(device, dict):
                    continue
                where: dict[str, object] = {"device": f"cuda:{device.get('index')}"}
                for dtype in ("bf16", "fp16", "tf32"):
                    if (tflops := _number(device.get(f"{dtype}_tflops"))) is not None:
                        matmul.append(({**where, "dtype": dtype}, round(tflops * 1e12)))
                    if (ratio := _number(device.get(f"{dtype}_of_peak"))) is not None:
                        matmul_peak.append(({**where, "dtype": dtype}, ratio))
                if (gbs := _number(device.get("d2d_gbs"))) is not None:
                    copy.append((where, round(gbs * 1e9)))
                if (ratio := _number(device.get("d2d_of_peak"))) is not None:
                    copy_peak.append((where, ratio))
            cpu = metrics.get("cpu")
            if isinstance(cpu, dict):
                if (gflops := _number(cpu.get("fp32_gflops"))) is not None:
                    matmul.append(({"device": "cpu", "dtype": "fp32"}, round(gflops * 1e9)))
                if (gbs := _number(cpu.get("copy_gbs"))) is not None:
                    copy.append(({"device": "cpu"}, round(gbs * 1e9)))
        elif check.id == "verify.dist" and (gbs := _number(metrics.get("busbw_max_gbs"))) is not None:
            busbw.append(({"backend": metrics.get("backend") or ""}, round(gbs * 1e9)))
    yield family(
        "envkit_verify_matmul_operations_per_second",
        "gauge",
        "Matrix-multiply floating-point operations per second (TFLOP/s x 1e12) measured by verify.perf.",
        matmul,
        "operations_per_second",
    )
    yield family(
        "envkit_verify_matmul_peak_ratio",
        "gauge",
        "verify.perf's matmul rate over the GPU's datasheet peak (0-1).",
        matmul_peak,
        "ratio",
    )
    yield family(
        "envkit_verify_copy_bytes_per_second",
        "gauge",
        "Memory copy bandwidth measured by verify.perf (device to device on a GPU).",
        copy,
        "bytes_per_second",
    )
    yield family(
        "envkit_verify_copy_peak_ratio",
        "gauge",
        "verify.perf's copy bandwidth over the GPU's datasheet memory bandwidth (0-1).",
        copy_peak,
        "ratio",
    )
    yield family(
        "envkit_verify_dist_bus_bandwidth_bytes_per_second",
        "gauge",
        "verify.dist's best all_reduce bus bandwidth (nccl-tests' busbw).",
        busbw,
        "bytes_per_second",
    )


def families(report: Report, *, strict: bool = False, watch: Optional[WatchState] = None) -> list[Family]:
    """Every family of ``report``, in the order they are written (empty ones left out)."""
    code = report.exit_code(strict=strict)
    cause = report.cause
    found: list[Optional[Family]] = [
        family(
            "envkit_build", "info", "The envkit that wrote these metrics.", [({"version": __version__}, 1)]
        ),
        family(
            "envkit_healthy",
            "gauge",
            "1 when the run's verdict is healthy (exit 0), 0 when a check failed (with --strict: or warned).",
            [({}, 1 if code == 0 else 0)],
        ),
        family(
            "envkit_check_status",
            "gauge",
            "Each check's verdict: 2 fail, 1 warn, 0 pass, -1 skip (could not run: no evidence).",
            [({"check": c.id}, STATUS_VALUE[c.status]) for c in report.checks],
        ),
        # The cause's check id and status only: its summary is free text with figures in it ("GPU 3
        # has 12 volatile uncorrected ECC errors"), a new series whenever a figure moves, which
        # Prometheus's naming guide rules out for labels (unbounded values) and which restarts an
        # alert's `for:` clock on every change. The words are preflight's reason (stderr, --npd).
        family(
            "envkit_cause",
            "info",
            "The check that is the most likely cause of what warns or fails (doctor's first line); "
            "absent when none.",
            [] if cause is None else [({"check": cause.id, "status": cause.status.value}, 1)],
        ),
    ]
    if report.duration_s is not None:
        found.append(
            family(
                "envkit_run_duration_seconds",
                "gauge",
                "How long the run took, detection and checks included.",
                [({}, float(report.duration_s))],
                "seconds",
            )
        )
    if (stamp := _timestamp(report.created)) is not None:
        found.append(
            family(
                "envkit_run_timestamp_seconds",
                "gauge",
                "When the run finished, in seconds since the Unix epoch (alert when it gets old).",
                [({}, stamp)],
                "seconds",
            )
        )
    found += _fact_families(report.facts)
    found += _verify_families(report.checks)
    if watch is not None:
        found += [
            family(
                "envkit_watch_runs",
                "counter",
                "Runs of preflight --every since it started.",
                [({}, watch.runs)],
            ),
            family(
                "envkit_watch_runs_skipped",
                "counter",
                "Runs preflight --every skipped because the previous run's hung detector had not ended.",
                [({}, watch.skipped)],
            ),
            family(
                "envkit_watch_interval_seconds",
                "gauge",
                "preflight --every's interval.",
                [({}, watch.interval_s)],
                "seconds",
            ),
        ]
    return [f for f in found if f is not None]


def prometheus_text(report: Report, *, strict: bool = False, watch: Optional[WatchState] = None) -> str:
    """The Prometheus text format (0.0.4), as node_exporter's textfile collector reads it."""
    return exposition(families(report, strict=strict, watch=watch), openmetrics=False)


def openmetrics_text(report: Report, *, strict: bool = False) -> str:
    """OpenMetrics 1.0 text (application/openmetrics-text; version=1.0.0), ending in ``# EOF``."""
    return exposition(families(report, strict=strict), openmetrics=True)
