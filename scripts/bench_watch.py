#!/usr/bin/env python3
"""The cost of one `envkit preflight --every` run against one `envkit preflight` process, both
writing the same --metrics and --nfd-labels files.

A watch runs in one process: after its first run, a run costs detection and the checks only (no
interpreter start, no imports). This script starts a watch, waits for its first runs (warm-up),
then reads the watch's own CPU time (/proc/PID/stat: user + system, its children included once
they are reaped) and resident memory (/proc/PID/status VmRSS) at two run counts (from the
envkit_watch_runs_total it writes) and divides by the runs between them. The one-shot command runs
as many times, its CPU time from getrusage(RUSAGE_CHILDREN). It prints CPU seconds and wall
seconds per run for each, their ratio, and the watch's memory at the start and the end of the
measured runs (a growing figure would be a leak).

    python scripts/bench_watch.py --runs 20 --every 1s
    python scripts/bench_watch.py --runs 20 --every 0.2s --memory-runs 800
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

TICKS = os.sysconf("SC_CLK_TCK")


def families(path: Path) -> dict[str, float]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    return {f.name: f.samples[0].value for f in text_string_to_metric_families(text) if f.samples}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # utime, stime, cutime, cstime: fields 14-17 of proc(5), here 11-14 after the name
    return sum(int(v) for v in fields[11:15]) / TICKS


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def wait_runs(path: Path, runs: int, proc: subprocess.Popen[str], timeout: float) -> dict[str, float]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            sys.exit(f"the watch ended ({proc.returncode}): {proc.stderr.read() if proc.stderr else ''}")
        seen = families(path)
        if seen.get("envkit_watch_runs", 0) >= runs:
            return seen
        time.sleep(0.01)
    sys.exit(f"no run {runs} within {timeout} s")


def watch_cost(args: argparse.Namespace, folder: Path) -> tuple[float, float, float, float, float]:
    prom, labels = folder / "watch.prom", folder / "watch-labels"
    argv = [sys.executable, "-m", "envkit", "preflight", "--every", args.every, "--quiet"]
    argv += ["--metrics", str(prom), "--nfd-labels", str(labels), *args.extra]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        warm = 3
        first = wait_runs(prom, warm, proc, 120)
        cpu0, rss0, t0 = cpu_seconds(proc.pid), rss_mib(proc.pid), time.monotonic()
        durations = [first["envkit_run_duration_seconds"]]
        for n in range(warm + 1, warm + args.runs + 1):
            durations.append(wait_runs(prom, n, proc, 120)["envkit_run_duration_seconds"])
        cpu1, rss1, t1 = cpu_seconds(proc.pid), rss_mib(proc.pid), time.monotonic()
        # --memory-runs: the same watch goes on; its memory every eighth of the way (a leak grows
        # with the runs; a warming cache or allocator settles).
        step = max(1, args.memory_runs // 8)
        for n in range(step, args.memory_runs + 1, step):
            wait_runs(prom, n, proc, 600)
            print(f"  after run {n:5d}: VmRSS {rss_mib(proc.pid):.1f} MiB", flush=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    del t0, t1
    return (cpu1 - cpu0) / args.runs, statistics.median(durations[1:]), rss0, rss1, max(durations[1:])


def oneshot_cost(args: argparse.Namespace, folder: Path) -> tuple[float, float]:
    prom, labels = folder / "once.prom", folder / "once-labels"
    argv = [sys.executable, "-m", "envkit", "preflight", "--quiet", "--metrics", str(prom)]
    argv += ["--nfd-labels", str(labels), *args.extra]
    subprocess.run(argv, capture_output=True, check=False)  # warm-up: page cache, .pyc files
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    walls = []
    for _ in range(args.runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        walls.append(time.perf_counter() - start)
        if proc.returncode not in (0, 1):
            sys.exit(f"envkit preflight failed ({proc.returncode}): {proc.stderr[-600:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / args.runs
    return cpu, statistics.median(walls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="measured runs of each (default 20)")
    parser.add_argument("--every", default="1s", help="the watch's interval (default 1s)")
    parser.add_argument(
        "--memory-runs",
        type=int,
        default=0,
        help="then let the watch reach this many runs, printing its memory",
    )
    parser.add_argument(
        "extra", nargs="*", help="more preflight arguments (after --), e.g. --expect node.toml"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        w_cpu, w_wall, rss0, rss1, w_max = watch_cost(args, folder)
        o_cpu, o_wall = oneshot_cost(args, folder)
    print(f"{args.runs} runs each, --metrics and --nfd-labels; the watch every {args.every}")
    print(f"watch run     CPU {w_cpu:6.3f} s  wall {w_wall:6.3f} s (median run duration, max {w_max:.3f})")
    print(f"one-shot run  CPU {o_cpu:6.3f} s  wall {o_wall:6.3f} s (median, process start included)")
    print(f"ratio watch / one-shot: CPU {w_cpu / o_cpu:.2f}, wall {w_wall / o_wall:.2f}")
    print(f"watch memory: VmRSS {rss0:.1f} MiB after the warm-up, {rss1:.1f} MiB {args.runs} runs later")


if __name__ == "__main__":
    main()
