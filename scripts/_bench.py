"""What the benchmark scripts share: timing one command, and the medians-and-ratios table.

The scripts run as ``python scripts/bench_*.py``, so this folder is on their sys.path.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


def timed(
    argv: Sequence[str],
    *,
    env: Optional[Mapping[str, str]] = None,
    timeout: float = 600,
    ok: tuple[int, ...] = (0,),
) -> tuple[float, subprocess.CompletedProcess[str]]:
    """(wall seconds, the finished process); a run that exits outside ``ok`` ends the benchmark."""
    start = time.perf_counter()
    proc = subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        env=None if env is None else dict(env),
        check=False,
        timeout=timeout,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode not in ok:
        sys.exit(f"{' '.join(argv)} failed ({proc.returncode}): {(proc.stderr or proc.stdout)[-600:]}")
    return elapsed, proc


def print_medians(
    times: Mapping[str, Sequence[float]], *, base: Optional[str] = None, width: int = 18, digits: int = 3
) -> None:
    """One line per command: its median and spread, and with ``base`` its ratio to that one's median."""
    reference = statistics.median(times[base]) if base else None
    for name, values in times.items():
        median = statistics.median(values)
        spread = f"min {min(values):.{digits}f}, max {max(values):.{digits}f}"
        ratio = f"  ratio {median / reference:.{digits}f}" if reference else ""
        print(f"{name:{width}s} median {median:6.{digits}f} s  ({spread}){ratio}")
