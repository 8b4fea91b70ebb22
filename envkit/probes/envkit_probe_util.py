"""Shared by the verify probes: arguments in, one JSON answer out between markers.

Probes run in the TARGET interpreter (Python >= 3.8, stdlib + torch, nothing from envkit); the
probes folder is their sys.path[0], so they import this module by name.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Callable, Dict, List, Tuple

# statistics and traceback (~5 ms of imports) are imported where they are used: the environment
# probe that every `envkit doctor` waits for needs neither.


def read_args() -> Tuple[str, Dict[str, Any]]:
    """(marker, config): ``probe.py MARKER [JSON]``."""
    marker = sys.argv[1] if len(sys.argv) > 1 else "@@"
    config: Dict[str, Any] = {}
    if len(sys.argv) > 2:
        try:
            config = json.loads(sys.argv[2])
        except ValueError:
            config = {}
    return marker, config


def emit(marker: str, data: Dict[str, Any]) -> None:
    sys.stdout.write(marker + json.dumps(data, default=str) + marker + "\n")
    sys.stdout.flush()


def error_text(exc: BaseException, lines: int = 6) -> str:
    """The exception's last lines: enough to classify it, short enough to show."""
    import traceback

    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return "\n".join(text.splitlines()[-lines:])


def run(main: Callable[[Dict[str, Any]], Dict[str, Any]]) -> None:
    """Run ``main(config)`` and print its answer; an exception becomes a failed answer."""
    marker, config = read_args()
    start = time.monotonic()
    try:
        data = main(config)
    except BaseException as exc:  # the probe must answer whatever happened
        data = {"status": "fail", "summary": type(exc).__name__, "error": error_text(exc)}
    data.setdefault("metrics", {})
    data["metrics"]["probe_s"] = round(time.monotonic() - start, 3)
    emit(marker, data)


def import_torch() -> Tuple[Any, float, List[str]]:
    """Import torch, timing it and keeping the warnings it prints (driver too old, …)."""
    import warnings

    start = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import torch
    seconds = round(time.monotonic() - start, 3)
    return torch, seconds, sorted({str(w.message).strip()[:300] for w in caught})


def median_seconds(
    fn: Callable[[], Any], iters: int, *, warmup: int = 0, sync: Callable[[], Any] = lambda: None
) -> float:
    """The median wall time of ``iters`` calls of ``fn`` (each followed by ``sync``), after
    ``warmup`` untimed ones."""
    import statistics

    for _ in range(warmup):
        fn()
        sync()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _per_call(fn: Callable[[], Any], reps: int, sync: Callable[[], Any]) -> float:
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - start) / reps


def compare_speed(
    base: Callable[[], Any],
    other: Callable[[], Any],
    *,
    samples: int = 7,
    sample_s: float = 0.02,
    warmup: int = 3,
    sync: Callable[[], Any] = lambda: None,
    max_reps: int = 10000,
) -> Dict[str, Any]:
    """How much faster ``other`` is than ``base``, as a figure with its spread.

    Both are warmed up (``warmup`` untimed calls: a compiled function's first calls still compile,
    autotune and fill caches); each timing sample runs enough calls to last ``sample_s`` (a GPU
    kernel of 50 us is launch overhead and clock jitter on its own); the samples alternate between
    the two, so that a clock or a neighbour that changes mid-run weighs on both alike. The speedup
    is the median of the per-sample ratios, its spread half their interquartile range; a figure
    whose spread is not smaller than itself is no result (``speedup_ok`` False)."""
    import statistics

    for _ in range(warmup):
        base()
        other()
    sync()
    one = max(_per_call(base, 1, sync), _per_call(other, 1, sync), 1e-7)
    reps = max(1, min(max_reps, round(sample_s / one)))
    base_s: List[float] = []
    other_s: List[float] = []
    for _ in range(samples):
        base_s.append(_per_call(base, reps, sync))
        other_s.append(_per_call(other, reps, sync))
    ratios = [b / o for b, o in zip(base_s, other_s) if o > 0]
    speedup = statistics.median(ratios) if ratios else None
    spread = None
    if len(ratios) >= 4:
        q1, _q2, q3 = statistics.quantiles(ratios, n=4)
        spread = (q3 - q1) / 2
    return {
        "eager_ms": round(statistics.median(base_s) * 1000, 4),
        "compiled_ms": round(statistics.median(other_s) * 1000, 4),
        "speedup": round(speedup, 3) if speedup is not None else None,
        "speedup_spread": round(spread, 3) if spread is not None else None,
        "speedup_ok": speedup is not None and spread is not None and spread < speedup,
        "samples": len(ratios),
        "calls_per_sample": reps,
    }


def bf16_native(torch: Any) -> bool:
    """bf16 in the GPU's hardware, not emulated: recent torch says True on T4/V100 through
    emulation unless asked (pytorch#124996)."""
    try:
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    except TypeError:  # older torch has no including_emulation argument (and no emulation)
        return bool(torch.cuda.get_device_capability()[0] >= 8)


# Tegra SASS runs on its own GPU alone and desktop SASS never on a Tegra GPU (CUDA C Programming
# Guide, "Binary Compatibility"; torch's DEVICE_REQUIREMENT): the same table as
# envkit.knowledge.TEGRA_SASS, written out because a probe imports nothing from envkit.
TEGRA_SASS = {
    (5, 3): ((5, 3),),
    (6, 2): ((6, 2),),
    (7, 2): ((7, 2),),
    (8, 7): ((8, 7),),
    (10, 1): ((10, 1), (11, 0)),
}


def sass_runs(code: Tuple[int, int], device: Tuple[int, int]) -> bool:
    """Whether SASS for ``code`` runs on a GPU of capability ``device``."""
    if code in TEGRA_SASS:
        return device in TEGRA_SASS[code]
    return code[0] == device[0] and code[1] <= device[1] and device not in TEGRA_SASS


def covered(arch_list: List[str], major: int, minor: int) -> bool:
    """Whether SASS that runs on the GPU (``sass_runs``) or compute_XY PTX (not newer) is there."""
    for name in arch_list:
        digits = name.split("_", 1)[-1].rstrip("abf")
        if not digits.isdigit() or len(digits) < 2:
            continue
        a_major, a_minor = int(digits[:-1]), int(digits[-1])
        if name.startswith("sm_") and sass_runs((a_major, a_minor), (major, minor)):
            return True
        if name.startswith("compute_") and (a_major, a_minor) <= (major, minor):
            return True
    return False
