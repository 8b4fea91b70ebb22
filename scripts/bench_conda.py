#!/usr/bin/env python3
"""rattler's solve + install (the worker ``envkit create --backend rattler`` runs) against pip's
install of the same packages: torch 2.13.0 (CPU) and its dependencies, once as wheels in a
find-links folder, once as conda packages (the same files under lib/pythonX.Y/site-packages, made
from those wheels with conda-package-handling) in a local channel indexed by rattler. Alternating
runs; medians and ratios.

    python scripts/bench_conda.py --runs 3 [--work DIR]

- rattler cold: an empty package cache each run (every .conda extracted, then linked);
- rattler warm: the cache of the previous run (linking only: what a second environment costs);
- pip: ``pip install --no-index --find-links`` into a fresh venv (the venv made before the clock
  starts), resolving the same dependencies from the same files; and with ``--no-compile``, as pip
  compiles every module to bytecode while rattler writes the package's files alone.

Needs py-rattler and conda-package-handling (the test extra). Without --work a temporary folder is
used and removed.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from _bench import print_medians

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "envkit" / "create" / "backends" / "rattler_worker.py"
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


def wheels(folder: Path) -> list[Path]:
    if not any(folder.glob("torch-*.whl")):
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "torch==2.13.0", "-d", str(folder)], check=True
        )
    return sorted(folder.glob("*.whl"))


def conda_package(wheel: Path, channel: Path, names: set[str], work: Path) -> str:
    """The wheel's files as a noarch conda package; returns its name."""
    import conda_package_handling.api as cph
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name, parse_wheel_filename

    name, wheel_version, _build, _tags = parse_wheel_filename(wheel.name)
    version = wheel_version.public  # conda's version; torch's local label (+cpu) goes in the build
    build = f"{wheel_version.local}_0" if wheel_version.local else "py_0"
    src = work / f"{name}-{version}"
    shutil.rmtree(src, ignore_errors=True)
    site = src / "lib" / f"python{PY}" / "site-packages"
    site.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    depends = []
    meta = next(site.glob("*.dist-info/METADATA")).read_text(encoding="utf-8", errors="replace")
    for line in meta.splitlines():
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if (req.marker is None or req.marker.evaluate({"extra": ""})) and canonicalize_name(
                req.name
            ) in names:
                depends.append(f"{canonicalize_name(req.name)} {req.specifier}".strip())
    files, paths = [], []
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        rel = path.relative_to(src).as_posix()
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        files.append(rel)
        paths.append(
            {"_path": rel, "path_type": "hardlink", "sha256": digest, "size_in_bytes": path.stat().st_size}
        )
    info = src / "info"
    info.mkdir()
    index = {
        "name": str(name),
        "version": str(version),
        "build": build,
        "build_number": 0,
        "depends": depends,
        "subdir": "noarch",
        "noarch": "generic",
        "timestamp": int(time.time() * 1000),
    }
    (info / "index.json").write_text(json.dumps(index))
    (info / "paths.json").write_text(json.dumps({"paths": paths, "paths_version": 1}))
    (info / "files").write_text("\n".join(files) + "\n")
    out = channel / "noarch"
    out.mkdir(parents=True, exist_ok=True)
    filename = f"{name}-{version}-{build}.conda"
    cph.create(
        str(src),
        ["info/index.json", "info/paths.json", "info/files", *files],
        filename,
        out_folder=str(out),
        compression_level=3,
    )
    shutil.rmtree(src)
    return str(name)


def build_channel(wheel_files: list[Path], channel: Path, work: Path) -> None:
    import rattler.index
    from packaging.utils import canonicalize_name, parse_wheel_filename

    if (channel / "noarch" / "repodata.json").exists():
        return
    names = {str(canonicalize_name(parse_wheel_filename(w.name)[0])) for w in wheel_files}
    for wheel in wheel_files:
        conda_package(wheel, channel, names, work)
    (channel / "linux-64").mkdir(exist_ok=True)
    asyncio.run(rattler.index.index_fs(channel, write_zst=False, write_shards=False, force=True))


def rattler_run(channel: Path, prefix: Path, cache: Path) -> tuple[float, float, float]:
    """(wall, solve, install) seconds of one worker run."""
    request = {
        "schema": "envkit.rattler-request/1",
        "prefix": str(prefix),
        "channels": [channel.as_uri()],
        "specs": ["torch==2.13.0"],
        "platform": "linux-64",
        "virtual_packages": [
            ["__unix", "0"],
            ["__linux", "5.10"],
            ["__glibc", "2.28"],
            ["__archspec", "1", "x86_64"],
        ],
        "package_cache": str(cache / "pkgs"),
        "repodata_cache": str(cache / "repodata"),
        "history": {"cmd": "bench_conda", "specs": ["torch==2.13.0"]},
        "marker": "ENVKIT-RATTLER-RESULT",
    }
    shutil.rmtree(prefix, ignore_errors=True)
    path = prefix.with_suffix(".json")
    path.write_text(json.dumps(request))
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(WORKER), str(path)], capture_output=True, text=True, timeout=1800
    )
    wall = time.perf_counter() - start
    answer = json.loads(proc.stdout.split("ENVKIT-RATTLER-RESULT")[-2])
    if not answer.get("ok"):
        raise SystemExit(f"rattler failed: {answer}")
    return wall, answer["solve_s"], answer["install_s"]


def pip_run(wheelhouse: Path, venv: Path, *options: str) -> float:
    shutil.rmtree(venv, ignore_errors=True)  # a venv left by an interrupted run would have torch already
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    start = time.perf_counter()
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index"]
    subprocess.run(
        [*pip, *options, "--find-links", str(wheelhouse), "torch==2.13.0"], check=True, timeout=1800
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work")
    args = parser.parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="envkit-bench-conda-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        wheelhouse = work / "wheels"
        wheelhouse.mkdir(exist_ok=True)
        wheel_files = wheels(wheelhouse)
        channel = work / "channel"
        built = time.perf_counter()
        build_channel(wheel_files, channel, work / "build")
        size = sum(w.stat().st_size for w in wheel_files) / 1e6
        took = time.perf_counter() - built
        print(
            f"{len(wheel_files)} packages ({size:.0f} MB of wheels); channel ready in {took:.0f} s",
            file=sys.stderr,
        )
        times: dict[str, list[float]] = {
            "pip install": [],
            "pip --no-compile": [],
            "rattler cold": [],
            "rattler warm": [],
        }
        parts: dict[str, list[float]] = {"cold solve": [], "cold install": [], "warm install": []}
        warm_cache = work / "cache-warm"
        shutil.rmtree(warm_cache, ignore_errors=True)
        for run in range(args.runs):
            times["pip install"].append(pip_run(wheelhouse, work / f"pip-{run}"))
            # pip compiles every .py to bytecode as it installs; a noarch conda package has no
            # .pyc and rattler compiles nothing (conda would compile noarch: python packages).
            times["pip --no-compile"].append(pip_run(wheelhouse, work / f"pipnc-{run}", "--no-compile"))
            cold = work / f"cache-cold-{run}"
            shutil.rmtree(cold, ignore_errors=True)
            wall, solve, install = rattler_run(channel, work / f"cold-{run}", cold)
            times["rattler cold"].append(wall)
            parts["cold solve"].append(solve)
            parts["cold install"].append(install)
            if run == 0:  # fill the warm cache once
                rattler_run(channel, work / "warm-fill", warm_cache)
            wall, _solve, install = rattler_run(channel, work / f"warm-{run}", warm_cache)
            times["rattler warm"].append(wall)
            parts["warm install"].append(install)
            for old in (
                work / f"pip-{run}",
                work / f"pipnc-{run}",
                work / f"cold-{run}",
                work / f"warm-{run}",
                cold,
            ):
                shutil.rmtree(old, ignore_errors=True)
        print_medians(times, base="pip install")
        for name, values in parts.items():
            print(f"  rattler {name}: median {sorted(values)[len(values) // 2]:.2f} s")
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
