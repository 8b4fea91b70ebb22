#!/usr/bin/env python3
"""The CUDA builds of conda-forge's pytorch, per release and subdir, read from the feedstock's own
build matrix: every commit of main's and the release branches' first-parent history (what their
CI built and uploaded) whose recipe/meta.yaml sets a release's version (the
rows of ``[[conda_forge_release]]`` in envkit/knowledge/conda.toml cite one of them), and the
``.ci_support/*.yaml`` files of each, one per build, naming its ``target_platform`` and
``cuda_compiler_version`` ("None" for the CPU build). A release's builds are the union over its
commits (some releases were built for Windows on a branch of their own). Prints the ``cuda``
tables to paste.

    git clone https://github.com/conda-forge/pytorch-cpu-feedstock
    python scripts/update_conda_forge.py pytorch-cpu-feedstock [--rows envkit/knowledge/conda.toml]

The build string of a CUDA build is ``cuda{XY}_{blas}_py{PY}_h{hash}_{n}`` with XY the compiler's
version without its dot (recipe/meta.yaml, ``build.string`` of the pytorch output), and its run
requirements carry ``cuda-version >=X.Y,<X+1`` from the CUDA compiler's run_exports, so a
``cuda-version=X.Y`` pin chooses that build.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def builds(repo: Path, commit: str) -> dict[str, list[str]]:
    """subdir -> the CUDA versions built at ``commit`` (sorted; the CPU build is left out)."""
    found: dict[str, set[str]] = {}
    for name in git(repo, "ls-tree", "--name-only", commit, ".ci_support/").split():
        if not name.endswith(".yaml") or "/migrations/" in name:
            continue
        try:
            data = yaml.safe_load(git(repo, "show", f"{commit}:{name}")) or {}
        except yaml.YAMLError:  # a commit in the middle of a merge (conflict markers): not a build
            continue
        platform = (data.get("target_platform") or [None])[0]
        cuda = str((data.get("cuda_compiler_version") or ["None"])[0])
        if platform is None:  # older layouts: the file name says it (linux_64_…, win_64_…)
            match = re.match(
                r"\.ci_support/(linux_64|linux_aarch64|linux_ppc64le|osx_64|osx_arm64|win_64)", name
            )
            platform = match.group(1).replace("_", "-", 1) if match else None
        if platform and cuda not in ("None", "none", ""):
            found.setdefault(platform, set()).add(cuda)
    return {p: sorted(v, key=lambda s: tuple(int(x) for x in s.split("."))) for p, v in sorted(found.items())}


# What decides a build: the version (recipe) and the build matrix (re-rendered .ci_support files).
_BUILD_FILES = ("recipe/meta.yaml", ".ci_support")


def versions_by_commit(repo: Path) -> dict[str, list[str]]:
    """release -> the commits whose recipe/meta.yaml sets that version, oldest first, on main and
    the release branches (vX.Y.x) the feedstock builds from, and only their first-parent history:
    the commits CI built and uploaded from those branches. A merged pull request's own commits are
    reachable from main too, but were only ever built in the pull request's CI (pull request #448
    bumped to 2.9.0, then to 2.9.1 before it was merged: conda-forge never published 2.9.0)."""
    found: dict[str, list[str]] = {}
    branches = [
        b
        for b in git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/").split()
        if re.search(r"/(main|master|v\d+\.\d+\.x)$", b)
    ]
    for branch in branches:
        log = git(repo, "log", "--first-parent", "--reverse", "--format=%H", branch, "--", *_BUILD_FILES)
        for commit in log.split():
            try:
                recipe = git(repo, "show", f"{commit}:recipe/meta.yaml")
            except subprocess.CalledProcessError:
                continue
            match = re.search(r'set version = "([^"]+)"', recipe)
            commits = found.setdefault(match.group(1), []) if match and "rc" not in match.group(1) else None
            if commits is not None and commit not in commits:
                commits.append(commit)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("feedstock", type=Path)
    parser.add_argument(
        "--rows", type=Path, default=Path(__file__).parents[1] / "envkit" / "knowledge" / "conda.toml"
    )
    args = parser.parse_args()
    rows = tomllib.loads(args.rows.read_text(encoding="utf-8"))["conda_forge_release"]
    commits = versions_by_commit(args.feedstock)
    for row in rows:
        union: dict[str, set[str]] = {}
        for commit in commits.get(row["torch"], []):
            for platform, cudas in builds(args.feedstock, commit).items():
                union.setdefault(platform, set()).update(cudas)
        key = lambda v: tuple(int(x) for x in v.split("."))  # noqa: E731
        table = ", ".join(
            f'"{p}" = [{", ".join(chr(34) + v + chr(34) for v in sorted(vs, key=key))}]'
            for p, vs in sorted(union.items())
        )
        built = commits.get(row["torch"], [])
        first = f", first at {built[0][:8]}" if built else ": never built on main or a release branch"
        print(f'torch = "{row["torch"]}"  # {len(built)} commits{first}')
        print(f"cuda = {{ {table} }}\n")


if __name__ == "__main__":
    main()
