#!/usr/bin/env python3
"""The same CPU torch environment made by `envkit create --backend uv` and by
`python -m venv && pip install …`, alternately, from the same wheelhouse (offline, so the network
does not count); prints both medians and the ratio.

Target (issue #4, on the 2-core CI machine kind): envkit with uv <= 0.5x the plain pip route.

    python scripts/bench_create.py --runs 3 [--wheelhouse DIR]

Without --wheelhouse, one is filled first: `pip download torch==2.13.0` (the torch wheel comes from
this machine's find-links folder, its dependencies from the package registry).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _bench import print_medians
from _bench import timed as _timed

TORCH = "torch==2.13.0"


def timed(argv: list[str], env: dict[str, str]) -> float:
    return _timed(argv, env=env, timeout=1800)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--wheelhouse")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="envkit-bench-create-"))
    wheelhouse = Path(args.wheelhouse) if args.wheelhouse else work / "wheelhouse"
    if not args.wheelhouse:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", TORCH, "--dest", str(wheelhouse)], check=True
        )
    env = {**os.environ, "ENVKIT_ENVS_DIR": str(work / "envs")}
    times: dict[str, list[float]] = {"python -m venv && pip install": [], "envkit create --backend uv": []}
    try:
        for run in range(args.runs):
            pip_env = work / f"pip-{run}"
            times["python -m venv && pip install"].append(
                timed([sys.executable, "-m", "venv", str(pip_env)], env)
                + timed(
                    [
                        str(pip_env / "bin" / "python"),
                        "-m",
                        "pip",
                        "install",
                        "-q",
                        TORCH,
                        "--no-index",
                        "--find-links",
                        str(wheelhouse),
                    ],
                    env,
                )
            )
            times["envkit create --backend uv"].append(
                timed(
                    [
                        sys.executable,
                        "-m",
                        "envkit",
                        "create",
                        f"uv-{run}",
                        "--template",
                        "pt2-minimal",
                        "--backend",
                        "uv",
                        "--torch",
                        "2.13.0",
                        "--cuda",
                        "cpu",
                        "--no-gpu",
                        "--python",
                        "3.11",
                        "--wheelhouse",
                        str(wheelhouse),
                        "--offline",
                        "--no-verify",
                    ],
                    env,
                )
            )
            for name, values in times.items():
                print(f"  run {run + 1}: {name:32s} {values[-1]:6.2f} s", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    where = f"python {sys.version.split()[0]}"
    print(f"runs per route: {args.runs} (alternating, offline from one wheelhouse), {where}")
    print_medians(times, base="python -m venv && pip install", width=32, digits=2)


if __name__ == "__main__":
    main()
