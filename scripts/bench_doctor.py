#!/usr/bin/env python3
"""Time `envkit doctor --json` (and `--deep`) against `python -m torch.utils.collect_env`.

The commands run alternately in the same environment, so machine noise hits them alike; the
script prints each median and the ratio envkit / collect_env. Targets (issue #2, on the 2-core CI
machine kind): doctor <= 0.15x collect_env, doctor --deep <= 1.0x.

    python scripts/bench_doctor.py --runs 7
"""

from __future__ import annotations

import argparse
import sys

from _bench import print_medians
from _bench import timed as _timed


def timed(argv: list[str]) -> float:
    # doctor exits 1 when a check fails: still a full run
    return _timed(argv, timeout=300, ok=(0, 1))[0]


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
    print(f"runs per command: {args.runs} (alternating), python {sys.version.split()[0]}")
    print_medians(times, base="collect_env", width=14)


if __name__ == "__main__":
    main()
