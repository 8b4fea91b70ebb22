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
import statistics
import subprocess
import sys
import time


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
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=900)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr[-400:]}")
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
    base = statistics.median(times["compile only"])
    where = f"python {sys.version.split()[0]}"
    print(f"runs per command: {args.runs} (alternating, cold inductor cache each run), {where}")
    for name, values in times.items():
        median = statistics.median(values)
        spread = f"min {min(values):.2f}, max {max(values):.2f}"
        print(f"{name:13s} median {median:6.2f} s  ({spread})  ratio {median / base:.2f}")


if __name__ == "__main__":
    main()
