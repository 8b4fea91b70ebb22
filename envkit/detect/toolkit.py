"""CUDA toolkits: every nvcc envkit can find, with its version and every way it was found.

Looked for where builds look (torch.utils.cpp_extension finds CUDA_HOME, then CUDA_PATH, then
nvcc on PATH, then /usr/local/cuda): PATH, CUDA_HOME, CUDA_PATH, /usr/local/cuda*, /opt/cuda, the
active conda env and the inspected interpreter's own bin folder. Wrappers and symlinks that lead to
the same toolkit are merged by what ``nvcc --version`` prints.
"""

from __future__ import annotations

import contextvars
import os
import re
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Final, Optional

from envkit.facts import ToolkitFacts
from envkit.versions import Version, parse_version

if TYPE_CHECKING:
    from envkit._proc import ProcResult
    from envkit.system import System

__all__ = ["detect_toolkits", "nvcc_candidates", "parse_nvcc_version"]

NVCC_TIMEOUT_S: Final = 10.0


def parse_nvcc_version(text: str) -> tuple[Optional[Version], Optional[str]]:
    """Read ``nvcc --version``: the full toolkit version and the build line.

    >>> parse_nvcc_version(
    ...     "Cuda compilation tools, release 13.0, V13.0.88\\n"
    ...     "Build cuda_13.0.r13.0/compiler.36424714_0"
    ... )
    (<Version('13.0.88')>, 'cuda_13.0.r13.0/compiler.36424714_0')
    """
    version: Optional[Version] = None
    full = re.search(r"release\s+[\d.]+,\s*V(\d+\.\d+(?:\.\d+)*)", text)
    if full:
        version = parse_version(full.group(1))
    else:
        short = re.search(r"release\s+(\d+\.\d+)", text)
        version = parse_version(short.group(1)) if short else None
    build = re.search(r"^Build\s+(\S+)", text, re.MULTILINE)
    return version, build.group(1) if build else None


def nvcc_candidates(system: System, python: Optional[str] = None) -> list[tuple[str, str]]:
    """(nvcc path, how it was found) for every place a toolkit may live, PATH first."""
    found: list[tuple[str, str]] = []
    on_path = system.which("nvcc")
    if on_path:
        found.append((on_path, "PATH"))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = system.env.get(var)
        if value:
            found.append((str(system.path(value) / "bin" / "nvcc"), var))
    conda_prefix = system.env.get("CONDA_PREFIX")
    if conda_prefix:
        found.append((str(system.path(conda_prefix) / "bin" / "nvcc"), "conda env"))
    if python:
        found.append((str(system.path(os.path.dirname(python)) / "nvcc"), "python env"))
    local = system.path("/usr/local")
    roots = sorted(local.glob("cuda*"), reverse=True) if local.is_dir() else []
    roots.append(system.path("/opt/cuda"))
    for root in roots:
        found.append((str(root / "bin" / "nvcc"), "/" + str(root.relative_to(system.root))))
    return found


def detect_toolkits(system: System, python: Optional[str] = None) -> tuple[ToolkitFacts, ...]:
    """Run every distinct nvcc once (in parallel) and merge those that are the same toolkit."""
    by_real: dict[str, list[str]] = {}
    first_path: dict[str, str] = {}
    for path, source in nvcc_candidates(system, python):
        if not os.path.isfile(path) or not os.access(path, os.X_OK):
            continue
        real = os.path.realpath(path)
        by_real.setdefault(real, [])
        if source not in by_real[real]:
            by_real[real].append(source)
        first_path.setdefault(real, path)
    if not by_real:
        return ()
    # Each nvcc runs in a copy of this context: it stays in the caller's _proc scope, so it is
    # stopped if the caller gives up on the toolkits.
    context = contextvars.copy_context()

    def version(path: str) -> ProcResult:
        return context.copy().run(system.run_within, [path, "--version"], timeout=NVCC_TIMEOUT_S)

    with ThreadPoolExecutor(max_workers=min(8, len(by_real))) as pool:
        results = dict(zip(by_real, pool.map(version, by_real)))
    merged: dict[object, ToolkitFacts] = {}
    for real, result in results.items():
        toolkit = _toolkit(first_path[real], real, by_real[real], result)
        key: object = (toolkit.version, toolkit.build) if toolkit.version else real
        if key in merged:
            toolkit = _merge(merged[key], toolkit)
        merged[key] = toolkit
    return tuple(merged.values())


def _toolkit(path: str, real: str, sources: list[str], result: ProcResult) -> ToolkitFacts:
    version, build = parse_nvcc_version(result.stdout) if result.ok else (None, None)
    error = None
    if not result.ok:
        error = result.describe()
    elif version is None:
        error = f"`{path} --version` printed no CUDA release line"
    root = os.path.dirname(os.path.dirname(real))
    looks_like_root = os.path.isdir(os.path.join(root, "include")) and os.path.isfile(
        os.path.join(root, "include", "cuda_runtime.h")
    )
    return ToolkitFacts(
        nvcc=path,
        version=version,
        root=root if looks_like_root else None,
        sources=tuple(sources),
        on_path="PATH" in sources,
        build=build,
        error=error,
    )


def _merge(a: ToolkitFacts, b: ToolkitFacts) -> ToolkitFacts:
    first, second = (a, b) if a.on_path or not b.on_path else (b, a)
    return ToolkitFacts(
        nvcc=first.nvcc,
        version=first.version,
        root=first.root or second.root,
        sources=first.sources + tuple(s for s in second.sources if s not in first.sources),
        on_path=a.on_path or b.on_path,
        build=first.build,
        error=first.error,
    )
