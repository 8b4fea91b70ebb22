#!/usr/bin/env python3
"""Time `envkit doctor --json` (and `--deep`) against `python -m torch.utils.collect_env`.

The commands run alternately in the same environment, so machine noise hits them alike; the
script prints each median and the ratio envkit / collect_env. Targets (issue #2, on the 2-core CI
machine kind): doctor <= 0.15x collect_env, doctor --deep <= 1.0x.

    python scripts/bench_doctor.py --runs 7
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):  # doctor exits 1 when a check fails: still a full run
        sys.exit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (default 5)")
    args = parser.parse_args()
    py = sys.executable
    commands = {
        "collect_env": [py, "-m", "torch.utils.collect_env"],
        "doctor": [py, "-m", "envkit", "doctor", "--json", "--python", py],
        "doctor --deep": [py, "-m", "envkit", "doctor", "--json", "--deep", "--python", py],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for argv in commands.values():  # one warm-up each: page cache, .pyc files
        timed(argv)
    for _ in range(args.runs):
        for name, argv in commands.items():
            times[name].append(timed(argv))
    base = statistics.median(times["collect_env"])
    print(f"runs per command: {args.runs} (alternating), python {sys.version.split()[0]}")
    for name, values in times.items():
        median = statistics.median(values)
        spread = f"min {min(values):.3f}, max {max(values):.3f}"
        print(f"{name:14s} median {median:6.3f} s  ({spread})  ratio {median / base:.3f}")


if __name__ == "__main__":
    main()
