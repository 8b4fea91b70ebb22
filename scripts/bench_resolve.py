#!/usr/bin/env python3
"""Median wall time of `envkit resolve --json` (process start included), side by side with a bare
`python -c pass` and `envkit --version`, so the figures show what envkit itself adds.

Target (issue #3, on the 2-core CI machine kind): resolve --json <= 0.3 s with the knowledge base
loaded.

    python scripts/bench_resolve.py --runs 11
"""

from __future__ import annotations

import argparse
import sys

from _bench import print_medians
from _bench import timed as _timed


def timed(argv: list[str]) -> float:
    return _timed(argv, timeout=120)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    py = sys.executable
    envkit = [py, "-m", "envkit"]
    commands = {
        "python -c pass": [py, "-c", "pass"],
        "envkit --version": [*envkit, "--version"],
        "resolve (flags)": [
            *envkit,
            "resolve",
            "--json",
            "--driver",
            "550.54.15",
            "--gpu",
            "sm_90",
            "--python",
            "3.11",
            "--platform",
            "linux-x86_64",
        ],
        "resolve (detect)": [*envkit, "resolve", "--json"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for argv in commands.values():
        timed(argv)
    for _ in range(args.runs):
        for name, argv in commands.items():
            times[name].append(timed(argv))
    print(f"runs per command: {args.runs} (alternating), python {sys.version.split()[0]}")
    print_medians(times)


if __name__ == "__main__":
    main()
