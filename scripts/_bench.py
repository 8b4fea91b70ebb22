"""What the benchmark scripts share: timing one command, and the medians-and-ratios table.

The scripts run as ``python scripts/bench_*.py``, so this folder is on their sys.path.
"""

from __future__ import annotations

import os
import stat
import statistics
import subprocess
import sys
import tempfile
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


def bytecode_env() -> dict[str, str]:
    """This environment, with bytecode kept as an installed package keeps it (pip compiles every
    module at install time). Where PYTHONDONTWRITEBYTECODE is set (this machine kind sets it), each
    run of a source checkout would compile envkit anew (~0.1 s of CPU) while torch's modules load
    compiled: the compiled files go to a folder of this user's outside the tree instead
    (PYTHONPYCACHEPREFIX, as tests/conftest.py does), never one another user could write."""
    env = dict(os.environ)
    if not env.get("PYTHONDONTWRITEBYTECODE") or env.get("PYTHONPYCACHEPREFIX") or not hasattr(os, "getuid"):
        return env
    folder = os.path.join(tempfile.gettempdir(), f"envkit-bench-pycache-{os.getuid()}")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return env
    if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077:
        env.pop("PYTHONDONTWRITEBYTECODE")
        env["PYTHONPYCACHEPREFIX"] = folder
    return env


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
