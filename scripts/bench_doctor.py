#!/usr/bin/env python3
"""Time `envkit doctor --json` (and `--deep`) against `python -m torch.utils.collect_env`.

The commands run alternately in the same environment, so machine noise hits them alike; the
script prints each median and the ratio envkit / collect_env, in wall time and in CPU time (user +
system of the command and every child it waited for: on a shared machine the CPU figures drift less
than the wall ones). Both run with their modules compiled once, as installed packages are
(``_bench.bytecode_env``). Targets (issue #2, on the 2-core CI machine kind): doctor <= 0.15x
collect_env, doctor --deep <= 1.0x; issue #21: doctor <= 0.10x.

    python scripts/bench_doctor.py --runs 7
"""

from __future__ import annotations

import argparse
import resource
import sys

from _bench import bytecode_env, print_medians
from _bench import timed as _timed


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # doctor exits 1 when a check fails: still a full run
    wall = _timed(argv, env=env, timeout=300, ok=(0, 1))[0]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


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
    env = bytecode_env()
    times: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for argv in commands.values():  # one warm-up each: page cache, .pyc files
        timed(argv, env)
    for _ in range(args.runs):
        for name, argv in commands.items():
            wall, used = timed(argv, env)
            times[name].append(wall)
            cpu[name].append(used)
    print(f"runs per command: {args.runs} (alternating), python {sys.version.split()[0]}")
    print("wall time")
    print_medians(times, base="collect_env", width=14)
    print("CPU time (user + system, children included)")
    print_medians(cpu, base="collect_env", width=14)


if __name__ == "__main__":
    main()
