#!/usr/bin/env python3
"""The full CPU verify (device, compile, amp, dist) against the compile check alone, cold caches for
both (every `envkit verify` run compiles into a fresh inductor cache), alternating runs.

Target (issue #5, on the 2-core CI machine kind): full / compile-only <= 1.3, since the other checks
run beside the compile.

    python scripts/bench_verify.py --runs 3
"""

from __future__ import annotations

import argparse
import json
import sys

from _bench import print_medians
from _bench import timed as _timed


def timed(checks: str) -> tuple[float, dict[str, str]]:
    argv = [
        sys.executable,
        "-m",
        "envkit",
        "verify",
        "--json",
        "--python",
        sys.executable,
        "--checks",
        checks,
    ]
    elapsed, proc = _timed(argv, timeout=900)
    statuses = {c["id"]: c["status"] for c in json.loads(proc.stdout)["checks"]}
    return elapsed, statuses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    commands = {"compile only": "compile", "full verify": "device,compile,amp,dist"}
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, checks in commands.items():
            elapsed, statuses = timed(checks)
            times[name].append(elapsed)
            print(f"  {name:13s} {elapsed:6.2f} s  {statuses}", file=sys.stderr)
    where = f"python {sys.version.split()[0]}"
    print(f"runs per command: {args.runs} (alternating, cold inductor cache each run), {where}")
    print_medians(times, base="compile only", width=13, digits=2)


if __name__ == "__main__":
    main()
