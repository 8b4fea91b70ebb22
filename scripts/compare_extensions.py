#!/usr/bin/env python3
"""What envkit plans for the stack above torch, next to what plain ``pip install`` and
``uv pip install`` of the same names resolve, on 10 target machines, offline, and whether each runs.

    python scripts/compare_extensions.py [--no-uv] [--json]

The indexes are recorded: PyPI's files of torch and of each extension (tests/data/extensions/pypi/,
PyPI's simple JSON API as read on 2026-12-04), served on 127.0.0.1 as stand-in wheels with the real
names, versions, tags and Requires-Dist on torch (scripts/standin_wheels.py). pip and uv really
resolve against it (``pip install --dry-run --report``, ``uv pip compile``) for each target's
Python and platform tags, with torch and the stack's names, as a user would type them.

Whether a result runs is judged with envkit's own rules, stated per cell: the torch build PyPI
serves for that release on that platform (releases.toml's pypi_default) against the driver and the
GPU (envkit's resolver with that exact build asked for), and each extension's release against that
build (its wheel sets: torch, CUDA, C++ ABI, GPU kernels). A name with no wheel on PyPI (flash-attn,
PyG's packages: sdists; pyg-lib: not on PyPI) is what pip would then build from source or not find.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "data" / "extensions" / "pypi"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import standin_wheels as sw  # noqa: E402
from packaging.specifiers import SpecifierSet  # noqa: E402
from packaging.utils import parse_wheel_filename  # noqa: E402

from envkit.errors import NoBuildError  # noqa: E402
from envkit.knowledge import load_knowledge  # noqa: E402
from envkit.knowledge.extensions import load_extensions, torch_cxx11_abi  # noqa: E402
from envkit.resolve import Request, resolve  # noqa: E402
from envkit.resolve.ext_wheels import TorchBuild, match_release, platform_tags, why_not  # noqa: E402
from envkit.resolve.extensions import parse_extensions  # noqa: E402
from envkit.resolve.plan import parse_cuda_request  # noqa: E402
from envkit.resolve.target import Target, parse_gpu  # noqa: E402
from envkit.versions import NvVersion, Version  # noqa: E402

TARGETS: tuple[tuple[str, str, str, Optional[str], tuple[str, ...]], ...] = (
    # id, platform, python, driver, GPUs: common cloud and lab nodes (AWS p5/p4d/g5/g6, GCP a2/g2, …)
    ("h100-r550", "linux-x86_64", "3.11", "550.54.15", ("H100",)),
    ("h200-r580", "linux-x86_64", "3.12", "580.95.05", ("H200",)),
    ("a100-r535", "linux-x86_64", "3.10", "535.104.05", ("A100",)),
    ("a10g-r535", "linux-x86_64", "3.10", "535.104.05", ("A10G",)),
    ("l4-r570", "linux-x86_64", "3.12", "570.124.06", ("L4",)),
    ("t4-r525", "linux-x86_64", "3.10", "525.125.06", ("T4",)),
    ("v100-r535", "linux-x86_64", "3.11", "535.104.05", ("V100",)),
    ("rtx5090-r575", "linux-x86_64", "3.12", "575.57.08", ("RTX 5090",)),
    ("gh200-r580", "linux-aarch64", "3.12", "580.95.05", ("GH200",)),
    ("win-rtx4090", "windows-x86_64", "3.11", "576.80", ("RTX 4090",)),
)
STACKS: tuple[tuple[str, ...], ...] = (
    ("flash-attn",),
    ("vllm",),
    ("xformers", "bitsandbytes"),
    ("torch-scatter", "torch-sparse", "torch-cluster"),
    ("deepspeed",),
)
# pip takes explicit platforms as they are (no manylinux expansion): a glibc 2.28+ machine's list.
_PIP_PLATFORMS = {
    f"linux-{arch}": [f"manylinux_2_{n}_{arch}" for n in range(39, 16, -1)]
    + [f"manylinux2014_{arch}", f"manylinux1_{arch}", f"linux_{arch}"]
    for arch in ("x86_64", "aarch64")
}
_PIP_PLATFORMS["windows-x86_64"] = ["win_amd64"]
_UV_PLATFORMS = {
    "linux-x86_64": "x86_64-manylinux_2_28",
    "linux-aarch64": "aarch64-manylinux_2_28",
    "windows-x86_64": "x86_64-pc-windows-msvc",
}
# What plain pip does with a name whose PyPI files hold no wheel for the target (a stated fact per
# project, from its own install docs).
_NO_WHEEL = {
    "flash-attn": "sdist only: pip builds it, and its setup.py imports torch, absent from pip's isolated "
    "build (its README: pip install flash-attn --no-build-isolation)",
    "torch-scatter": "sdist only: pip compiles it against whatever torch the build sees (PyG's wheels are on "
    "data.pyg.org, which pip is not told of)",
    "torch-sparse": "sdist only: as torch-scatter",
    "torch-cluster": "sdist only: as torch-scatter",
    "pyg-lib": "not on PyPI: pip finds nothing",
    "deepspeed": "sdist only, which installs without compiling (its ops JIT later)",
}


# Names whose sdist installs as it is (nothing to compile at install time).
_SDIST_INSTALLS = frozenset({"deepspeed"})


def _target(k: Any, platform: str, python: str, driver: Optional[str], gpus: tuple[str, ...]) -> Target:
    return Target(
        platform=platform,
        driver=NvVersion(driver) if driver else None,
        gpus=tuple(parse_gpu(g, k) for g in gpus),
        python=Version(python),
    )


def build_index(folder: Path) -> Path:
    """Stand-in wheels for every recorded PyPI wheel file, with its torch requirement."""
    extensions = load_extensions()
    wheels: list[Path] = []
    out = folder / "wheels"
    for recorded in sorted(RECORDED.glob("*.json")):
        data = json.loads(recorded.read_text(encoding="utf-8"))
        name = data.get("name") or recorded.stem
        ext = extensions.get(name)
        for f in data.get("files", []):
            filename = f["filename"]
            if not filename.endswith(".whl"):
                continue
            _n, version, _b, _tags = parse_wheel_filename(filename)
            requires: list[str] = []
            release = ext.release(Version(str(version))) if ext is not None else None
            if release is not None:
                own = next((w.requires_torch for w in release.files if w.name == filename), None)
                spec = own if own is not None else release.requires_torch
                if spec is not None:
                    requires.append(f"torch{spec}")
            tag = filename[:-4].split("-", 2)[2] if filename.count("-") >= 4 else "py3-none-any"
            tag = "-".join(filename[:-4].split("-")[-3:])
            wheels.append(sw.build_wheel(out, name, str(version), tag=tag, requires=requires))
    return sw.write_index(folder / "srv", wheels, base="simple").parent


@dataclass
class Resolved:
    packages: dict[str, str]
    missing: list[str]
    error: str = ""


def pip_resolve(url: str, names: list[str], platform: str, python: str, scratch: Path) -> Resolved:
    py = python.replace(".", "")
    missing: list[str] = []
    wanted = ["torch", *names]
    for _ in range(len(wanted)):
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--report",
            "-",
            "--quiet",
            "--ignore-installed",
        ]
        cmd += [
            "--only-binary=:all:",
            "--python-version",
            python,
            "--implementation",
            "cp",
            "--abi",
            f"cp{py}",
        ]
        for plat in _PIP_PLATFORMS[platform]:
            cmd += ["--platform", plat]
        cmd += [
            "--index-url",
            f"{url}/simple",
            "--disable-pip-version-check",
            "--target",
            str(scratch),
            *wanted,
        ]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=300, env={"PIP_CONFIG_FILE": "/dev/null"}
        )
        if proc.returncode == 0:
            report = json.loads(proc.stdout)
            got = {i["metadata"]["name"]: i["metadata"]["version"] for i in report["install"]}
            return Resolved(got, missing)
        said = re.findall(
            r"(?:distribution found for|version that satisfies the requirement) ([\w.-]+)", proc.stderr
        )
        failed = next((n for n in wanted if n in said), None)
        if failed is None or failed == "torch":
            return Resolved(
                {}, missing, proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"
            )
        missing.append(failed)
        wanted.remove(failed)
    return Resolved({}, missing, "nothing resolved")


def uv_resolve(uv: str, url: str, names: list[str], platform: str, python: str, cache: Path) -> Resolved:
    missing: list[str] = []
    wanted = ["torch", *names]
    for _ in range(len(wanted)):
        cmd = [uv, "pip", "compile", "-", "--quiet", "--no-header", "--no-annotate", "--only-binary", ":all:"]
        cmd += ["--python-version", python, "--python-platform", _UV_PLATFORMS[platform]]
        cmd += ["--index-url", f"{url}/simple", "--cache-dir", str(cache)]
        proc = subprocess.run(
            cmd, input="\n".join(wanted) + "\n", capture_output=True, text=True, timeout=300
        )
        if proc.returncode == 0:
            got = {}
            for line in proc.stdout.splitlines():
                if "==" in line:
                    n, v = line.strip().split("==", 1)
                    got[n] = v
            return Resolved(got, missing)
        said = set(re.findall(r"[\w.-]+", proc.stderr))
        failed = next((n for n in wanted if n != "torch" and n in said), None)
        if failed is None:
            return Resolved(
                {}, missing, proc.stderr.strip().splitlines()[0] if proc.stderr.strip() else "failed"
            )
        missing.append(failed)
        wanted.remove(failed)
    return Resolved({}, missing, "nothing resolved")


def judge(k: Any, target: Target, got: Resolved) -> str:
    """Whether what an installer resolved runs on the target, by envkit's rules (the reason when not)."""
    if not got.packages:
        return f"no: {got.error}"
    torch = Version(got.packages.get("torch", "0"))
    release = k.release(torch)
    if release is None:
        return f"unknown: torch {torch} is not in envkit's table"
    variant = release.pypi_variant(target.platform) or "cpu"
    problems: list[str] = []
    unknown: list[str] = []
    if variant == "cpu" and target.has_nvidia:
        problems.append(f"torch {torch} from PyPI is a CPU build on {target.platform}")
    else:
        try:
            resolve(k, target, Request(torch=SpecifierSet(f"=={torch}"), cuda=parse_cuda_request(variant)))
        except NoBuildError as exc:
            problems.append(
                f"torch {torch}+{variant}: {exc.rejected[0].reason if exc.rejected else exc.summary}"
            )
    build = TorchBuild(torch, variant, target.python, target.platform, torch_cxx11_abi(torch, variant))
    extensions = load_extensions()
    for name, version in got.packages.items():
        ext = extensions.get(name)
        rel = ext.release(Version(version)) if ext is not None else None
        if ext is None or rel is None or name == "torch":
            continue
        found = match_release(rel, build)
        if found is None:
            accepted = set(platform_tags(target.platform, target.python))
            if any(f.tags & accepted for f in rel.files):
                # PyPI has a wheel the table does not describe (DeepSpeed's win_amd64 wheels)
                unknown.append(f"{name} {version}'s {target.platform} wheel is not in envkit's table")
            else:
                problems.append(why_not(ext, rel, build))
            continue
        miss = [g for g in target.gpus if found.wheels.gpu.known and not found.wheels.gpu.covers(g.cc)]
        if miss:
            problems.append(f"{name} {version} has no kernels for {', '.join(g.label for g in miss)}")
    for name in got.missing:
        if name not in _SDIST_INSTALLS:
            problems.append(f"{name}: {_NO_WHEEL.get(name, 'no wheel on PyPI')}")
    if problems:
        return "no: " + "; ".join(problems)
    return "unknown: " + "; ".join(unknown) if unknown else "yes"


def show(got: Resolved, names: tuple[str, ...]) -> str:
    if not got.packages:
        return "—"
    parts = [f"torch {got.packages.get('torch', '?')}"] + [
        f"{n} {got.packages[n]}" for n in names if n in got.packages
    ]
    return ", ".join(parts) + (f" (no wheel: {', '.join(got.missing)})" if got.missing else "")


def envkit_plan(k: Any, target: Target, names: tuple[str, ...]) -> tuple[str, str]:
    """(what envkit plans, whether it runs: by construction it does, unless it says why not)."""
    try:
        plan = resolve(k, target, Request(extensions=parse_extensions(list(names))))
    except NoBuildError as exc:
        first = exc.summary.splitlines()[-1] if "\n" in exc.summary else exc.summary
        return "no plan (exit 3)", first[:240]
    picks = ", ".join(f"{p.name} {p.version}" for p in plan.extensions)
    return f"torch {plan.candidate}, {picks}", "yes"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-uv", action="store_true", help="leave uv out")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    import shutil

    uv = (
        None
        if args.no_uv
        else (shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv"))
    )
    k = load_knowledge()
    rows = []
    with tempfile.TemporaryDirectory(prefix="envkit-compare-") as tmp:
        root = build_index(Path(tmp))
        with sw.serve(root) as url:
            for tid, platform, python, driver, gpus in TARGETS:
                target = _target(k, platform, python, driver, gpus)
                for names in STACKS:
                    plan, plan_runs = envkit_plan(k, target, names)
                    pip = pip_resolve(url, list(names), platform, python, Path(tmp) / "target")
                    row = {
                        "target": tid,
                        "stack": " + ".join(names),
                        "envkit": plan,
                        "envkit_runs": plan_runs,
                        "pip": show(pip, names),
                        "pip_runs": judge(k, target, pip),
                    }
                    if uv is not None:
                        got = uv_resolve(uv, url, list(names), platform, python, Path(tmp) / "uv-cache")
                        row.update({"uv": show(got, names), "uv_runs": judge(k, target, got)})
                    rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for row in rows:
        print(f"{row['target']:13s} {row['stack']}")
        print(f"  envkit  {row['envkit']}  -> {row['envkit_runs']}")
        print(f"  pip     {row['pip']}  -> {row['pip_runs']}")
        if "uv" in row:
            print(f"  uv      {row['uv']}  -> {row['uv_runs']}")
    runs = {
        who: sum(1 for r in rows if str(r.get(f"{who}_runs", "")).startswith("yes"))
        for who in ("envkit", "pip", "uv")
    }
    print(
        f"\n{len(rows)} target x stack pairs: runs with envkit {runs['envkit']}, plain pip {runs['pip']}"
        + (f", uv {runs['uv']}" if uv is not None else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
