#!/usr/bin/env python3
"""The verifier's own overhead on the CPU, three ways:

1. the full CPU verify (device, compile, amp, dist) against the compile check alone, cold caches for
   both (every `envkit verify` run compiles into a fresh inductor cache), alternating runs.
   Target (issues #5, #13): full / compile-only <= 1.3, since the other checks run beside the compile;
2. the time from envkit's start to the first probe running (the interpreter's inspection) and to
   the first verify probe, measured from outside: --python is a wrapper that notes when each child
   starts, then runs the real interpreter;
3. two `torchrun --nnodes 2` launchers on 127.0.0.1 (c10d rendezvous, gloo) running
   `-m envkit verify --checks dist` against the same launchers running a bare all_reduce script.
   Target (issue #13): <= 1.5x.

    python scripts/bench_verify.py --runs 3
    python scripts/bench_verify.py --runs 3 --only startup,torchrun
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _bench import print_medians
from _bench import timed as _timed

TORCHRUN = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or shutil.which("torchrun")
# What the envkit run is compared with: the collective alone, through the same launcher.
ALL_REDUCE = """\
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(1 << 20)
dist.all_reduce(t)
assert t[0].item() == dist.get_world_size()
dist.destroy_process_group()
"""


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


def full_against_compile(runs: int) -> None:
    commands = {"compile only": "compile", "full verify": "device,compile,amp,dist"}
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, checks in commands.items():
            elapsed, statuses = timed(checks)
            times[name].append(elapsed)
            print(f"  {name:13s} {elapsed:6.2f} s  {statuses}", file=sys.stderr)
    print(f"runs per command: {runs} (alternating, cold inductor cache each run)")
    print_medians(times, base="compile only", width=13, digits=2)
    ratio = statistics.median(times["full verify"]) / statistics.median(times["compile only"])
    print(f"target: full verify <= 1.3x compile only: {ratio:.2f}x {'ok' if ratio <= 1.3 else 'MISSED'}")


def to_first_probe(runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="envkit-bench-verify-") as tmp:
        log = Path(tmp) / "starts.log"
        wrapper = Path(tmp) / "python"
        wrapper.write_text(
            f'#!/bin/sh\nprintf "%s %s\\n" "$(date +%s.%N)" "$*" >> {log}\nexec {sys.executable} "$@"\n',
            encoding="utf-8",
        )
        wrapper.chmod(0o755)
        first: list[float] = []
        first_verify: list[float] = []
        total: list[float] = []
        for _ in range(runs):
            log.unlink(missing_ok=True)
            argv = [
                sys.executable,
                "-m",
                "envkit",
                "verify",
                "--json",
                "--python",
                str(wrapper),
                "--checks",
                "device",
            ]
            start = time.time()
            elapsed, _proc = _timed(argv, timeout=300)
            starts = [line.split(" ", 1) for line in log.read_text(encoding="utf-8").splitlines()]
            first.append(float(starts[0][0]) - start)
            first_verify.append(next(float(t) for t, args in starts if "verify_" in args) - start)
            total.append(elapsed)
    print(f"envkit verify --checks device, {runs} runs:")
    print_medians(
        {"to the first probe": first, "to verify.device": first_verify, "whole run": total},
        width=19,
        digits=3,
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _two_nodes(worker: list[str]) -> float:
    """Wall seconds for two torchrun launchers (one rank each) on 127.0.0.1 running ``worker``."""
    port = _free_port()
    argv = [
        str(TORCHRUN),
        *("--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d"),
        *("--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", f"bench-{port}", "--max-restarts", "0"),
        *worker,
    ]
    start = time.perf_counter()
    nodes = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outputs = [node.communicate(timeout=300) for node in nodes]
    elapsed = time.perf_counter() - start
    if any(node.returncode for node in nodes):
        sys.exit(f"{' '.join(argv)} failed: {[err[-600:] for _out, err in outputs]}")
    return elapsed


def torchrun_dist(runs: int) -> None:
    if TORCHRUN is None:
        print("torchrun not found (it comes with torch): multi-node comparison skipped")
        return
    with tempfile.TemporaryDirectory(prefix="envkit-bench-verify-") as tmp:
        script = Path(tmp) / "all_reduce.py"
        script.write_text(ALL_REDUCE, encoding="utf-8")
        workers = {
            "bare all_reduce": [str(script)],
            "envkit verify dist": [
                "-m",
                "envkit",
                "verify",
                "--checks",
                "dist",
                "--json",
                "--python",
                sys.executable,
            ],
        }
        times: dict[str, list[float]] = {name: [] for name in workers}
        for _ in range(runs):
            for name, worker in workers.items():
                elapsed = _two_nodes(worker)
                times[name].append(elapsed)
                print(f"  {name:18s} {elapsed:6.2f} s", file=sys.stderr)
    print(f"two torchrun --nnodes 2 launchers on 127.0.0.1, {runs} runs each (alternating):")
    print_medians(times, base="bare all_reduce", width=18, digits=2)
    ratio = statistics.median(times["envkit verify dist"]) / statistics.median(times["bare all_reduce"])
    verdict = "ok" if ratio <= 1.5 else "MISSED"
    print(f"target: envkit verify dist <= 1.5x bare all_reduce: {ratio:.2f}x {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--only", default="full,startup,torchrun", help="comma list of full, startup, torchrun"
    )
    args = parser.parse_args()
    parts = set(args.only.split(","))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    if "full" in parts:
        full_against_compile(args.runs)
    if "startup" in parts:
        to_first_probe(args.runs)
    if "torchrun" in parts:
        torchrun_dist(args.runs)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
