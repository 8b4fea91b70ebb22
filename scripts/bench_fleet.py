#!/usr/bin/env python3
"""`envkit fleet DIR --json` against a plain `json.load` loop over the same files, side by side.

The reports are generated into a temporary folder from a real doctor report (an H200 node, driver
580, torch 2.11+cu130: tests/data/reports/h200-580-torch2.11-cu130.json), renamed per node, with
what differs on every node of a real fleet (the run's time, the GPU's UUID, temperature and power,
and the health check's line that shows them) and deviations planted: another driver, a node
without its GPU, another torch build, a failing check, a NCCL variable set on a few nodes, and one
report cut short (a node that died mid-write).

Targets (issue #13): fleet over 10,000 reports <= 1.0x the json.load loop, both started as fresh
interpreters and run alternately, the page cache warm for both, judged on the median of the
paired ratios (each fleet run over the loop run just before it); 100,000 reports must also work
(the time and the peak RSS of the child are printed). Then 1,000 reports as another envkit version
wrote them, whose checks fleet runs again on every node's facts (--older).

    python scripts/bench_fleet.py                 # 10,000 reports, 9 runs each, then 100,000 once
    python scripts/bench_fleet.py --nodes 2000 --runs 1 --large 0 --older 0
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Optional

from _bench import bytecode_env, print_medians

BASE = Path(__file__).resolve().parent.parent / "tests" / "data" / "reports" / "h200-580-torch2.11-cu130.json"
_HOST = "@@HOST@@"
OLDER = "0.0.9"  # another envkit's reports: their checks are run again (fleet.aggregate.verdicts)
# What the comparison parses: the same files, the same order, every document fully loaded.
_LOAD = """\
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    try:
        json.load(open(f, "rb"))
    except ValueError:  # the report cut short
        pass
"""


def _templates(version: Optional[str] = None) -> dict[str, str]:
    """Report texts with a host placeholder: the base node and one per planted deviation."""
    base = json.loads(BASE.read_text(encoding="utf-8"))
    if version:
        base["envkit_version"] = version

    base["host"] = base["facts"]["host"]["hostname"] = _HOST
    # What differs on every node of a real fleet: the time of the run, each GPU's UUID and its
    # readings (temperature, power), and the health check's line that shows them.
    base["created"] = "2026-11-29T19:@@MIN@@:00+00:00"
    base["duration_s"] = "@@DURATION@@"
    gpu = base["facts"]["gpus"][0]
    gpu.update(uuid="GPU-@@UUID@@", temperature_c="@@TEMP@@", power_w="@@POWER@@")
    health = next(c for c in base["checks"] if c["id"] == "gpu.health")
    health["detail"] = health["detail"].replace("36 \u00b0C 79/700 W", "@@TEMP@@ \u00b0C @@POWER@@/700 W")
    assert "@@TEMP@@" in health["detail"], health["detail"]

    def text(doc: dict[str, Any]) -> str:
        return json.dumps(doc, indent=2, ensure_ascii=False)  # as `envkit doctor --json` writes it

    def variant(change: Callable[[dict[str, Any]], None]) -> str:
        doc = json.loads(text(base))  # a copy
        change(doc)
        return text(doc)

    def driver(doc: dict[str, Any]) -> None:
        doc["facts"]["driver"]["version"] = "580.126.09"

    def no_gpu(doc: dict[str, Any]) -> None:
        doc["facts"]["gpus"] = []

    def torch(doc: dict[str, Any]) -> None:
        doc["facts"]["torch"]["version"] = "2.10.0+cu130"

    def failing(doc: dict[str, Any]) -> None:
        check = doc["checks"][2]
        check.update(status="fail", summary="GPU 0: 3 uncorrected ECC errors", fix="drain the node")

    def nccl(doc: dict[str, Any]) -> None:
        doc["facts"]["host"]["env"]["NCCL_SOCKET_IFNAME"] = "eth0"

    return {
        "base": text(base),
        "driver": variant(driver),
        "no_gpu": variant(no_gpu),
        "torch": variant(torch),
        "failing": variant(failing),
        "nccl": variant(nccl),
    }


def _node(template: str, n: int) -> str:
    """Node ``n``'s report: its name, and readings that vary from node to node."""
    temp, power = 30 + n % 17, 70 + n % 41
    return (
        template.replace(_HOST, f"gpu-node-{n:06d}")
        .replace("@@MIN@@", f"{n % 60:02d}")
        .replace('"@@DURATION@@"', f"{5 + n % 300 / 100:.2f}")
        .replace("@@UUID@@", str(uuid.UUID(int=n * 2654435761 % 2**128)))
        .replace('"@@TEMP@@"', str(temp))
        .replace('"@@POWER@@"', f"{power}.{n % 10}")
        .replace("@@TEMP@@", str(temp))
        .replace("@@POWER@@", str(power))
    )


def generate(folder: Path, nodes: int, *, version: Optional[str] = None) -> int:
    """``nodes`` report files in ``folder``; returns their total size in bytes. ``version``: as if
    that envkit wrote them (fleet then runs the checks again on every node's facts)."""
    texts = _templates(version)
    planted = {"driver": 97, "no_gpu": 1009, "torch": 499, "failing": 1013, "nccl": 211}
    size = 0
    for n in range(1, nodes + 1):
        kind = next((k for k, every in planted.items() if n % every == 0), "base")
        body = _node(texts[kind], n)
        if n == nodes // 2:
            body = body[: len(body) // 3]  # a node that died mid-write: listed, not fatal
        data = body.encode("utf-8")
        (folder / f"gpu-node-{n:06d}.json").write_bytes(data)
        size += len(data)
    return size


# Both commands run with bytecode kept as an installed envkit has it (scripts/_bench.py).
_ENV = bytecode_env()


def run_rss(argv: list[str], ok: tuple[int, ...] = (0,)) -> tuple[float, int, bytes, float]:
    """(wall seconds, the child's own peak RSS in KiB, its stdout, its CPU seconds: user + system).

    The peak comes from GNU time where it is installed: os.wait4's ru_maxrss also counts the pages
    the child shared with this process between fork and exec (this process holds a 10,000-node
    fleet's output by then)."""
    with tempfile.TemporaryDirectory() as tmp:
        peak_file = Path(tmp) / "peak"
        gnu_time = Path("/usr/bin/time")
        wrapped = [str(gnu_time), "-f", "%M", "-o", str(peak_file), *argv] if gnu_time.exists() else argv
        with open(Path(tmp) / "out", "w+b") as out, open(Path(tmp) / "err", "w+b") as err:
            start = time.perf_counter()
            child = subprocess.Popen(wrapped, stdout=out, stderr=err, env=_ENV)
            _, status, usage = os.wait4(child.pid, 0)
            elapsed = time.perf_counter() - start
            code = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        peak = int(peak_file.read_text().split()[-1]) if peak_file.exists() else usage.ru_maxrss
    if code not in ok:
        sys.exit(f"{' '.join(argv)} failed ({code}): {stderr.decode()[-600:]}")
    return elapsed, peak, stdout, usage.ru_utime + usage.ru_stime


def fleet_argv(folder: Path) -> list[str]:
    return [sys.executable, "-m", "envkit", "fleet", str(folder), "--json"]


def compare(folder: Path, runs: int) -> None:
    commands = {
        "json.load loop": [sys.executable, "-c", _LOAD, str(folder)],
        "envkit fleet": fleet_argv(folder),
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    rss: dict[str, list[int]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    run_rss(commands["json.load loop"])  # warm the page cache for both
    for _ in range(runs):
        for name, argv in commands.items():
            elapsed, peak, stdout, seconds = run_rss(argv, ok=(0, 1))
            times[name].append(elapsed)
            rss[name].append(peak)
            cpu[name].append(seconds)
            print(
                f"  {name:15s} {elapsed:6.2f} s  CPU {seconds:6.2f} s  peak RSS {peak / 1024:6.0f} MiB",
                file=sys.stderr,
            )
            if name == "envkit fleet":
                summary = json.loads(stdout)["summary"]
                print(f"    {summary}", file=sys.stderr)
    print_medians(times, base="json.load loop", width=15, digits=2)
    print("CPU seconds (user + system; steadier than wall time on a shared machine):")
    print_medians(cpu, base="json.load loop", width=15, digits=2)
    for name, values in rss.items():
        print(f"{name:15s} peak RSS median {statistics.median(values) / 1024:.0f} MiB")
    # Each fleet run over the loop run just before it: a pair shares the machine's state of the
    # moment, so the median of the pairs' ratios drifts less than the ratio of the two medians.
    pairs = [f / j for f, j in zip(times["envkit fleet"], times["json.load loop"])]
    ratio = statistics.median(pairs)
    print(
        f"paired ratios {' '.join(f'{r:.2f}' for r in pairs)}; "
        f"target: envkit fleet <= 1.0x the json.load loop: {ratio:.2f}x {'ok' if ratio <= 1.0 else 'MISSED'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument(
        "--runs", type=int, default=9, help="pairs (single pairs spread ±30%% on a shared machine)"
    )
    parser.add_argument("--large", type=int, default=100_000, help="reports for the one large run (0: none)")
    parser.add_argument(
        "--older", type=int, default=1_000, help="reports from another envkit version, one run (0: none)"
    )
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load:.2f} at the start")
    with tempfile.TemporaryDirectory(prefix="envkit-bench-fleet-") as tmp:
        folder = Path(tmp) / "small"
        folder.mkdir()
        size = generate(folder, args.nodes)
        print(f"{args.nodes} reports, {size / 1e6:.0f} MB, {args.runs} runs each (alternating)")
        compare(folder, args.runs)
    if args.large:
        with tempfile.TemporaryDirectory(prefix="envkit-bench-fleet-") as tmp:
            folder = Path(tmp) / "large"
            folder.mkdir()
            size = generate(folder, args.large)
            elapsed, peak, stdout, seconds = run_rss(fleet_argv(folder), ok=(0, 1))
            summary = json.loads(stdout)["summary"]
            print(
                f"{args.large} reports, {size / 1e9:.1f} GB: "
                f"envkit fleet {elapsed:.1f} s (CPU {seconds:.1f} s), "
                f"peak RSS {peak / 1024:.0f} MiB, {summary['nodes']} nodes, "
                f"{summary['unreadable']} unreadable"
            )
    if args.older:
        with tempfile.TemporaryDirectory(prefix="envkit-bench-fleet-") as tmp:
            folder = Path(tmp) / "older"
            folder.mkdir()
            generate(folder, args.older, version=OLDER)
            elapsed, peak, stdout, seconds = run_rss(fleet_argv(folder), ok=(0, 1))
            print(
                f"{args.older} reports from envkit {OLDER} (checks run again on each node): "
                f"envkit fleet {elapsed:.1f} s, peak RSS {peak / 1024:.0f} MiB"
            )
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
