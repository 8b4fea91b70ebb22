"""The loader's view of the installed extensions' compiled files: which torch and CUDA libraries
each .so needs, and which of torch's C++ symbols none of them provides.

An extension built for another torch, or with the other C++ ABI, fails at import with "undefined
symbol: _ZN3c10…"; the same question is asked here without importing anything: glibc's ld.so is
run on the file with torch's lib folder on LD_LIBRARY_PATH (the extension loads after torch, which
has put those libraries in the process) and ``LD_TRACE_LOADED_OBJECTS=1 LD_BIND_NOW=1 LD_WARN=1``,
what ``ldd -r`` does (bminor/glibc elf/rtld.c: the trace mode's relocation pass prints "undefined
symbol: …" for each reference nothing resolves). One bounded child per file, the dynamic loader
of envkit.detect.loader; the files are the distribution's own (its RECORD).
"""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING, Final, Optional

from packaging.utils import canonicalize_name

from envkit.detect.loader import LDSO, parse_list
from envkit.facts import ExtensionBinary

if TYPE_CHECKING:
    from envkit.facts import PythonFacts, TorchFacts
    from envkit.system import System

__all__ = ["extension_binaries"]

TIMEOUT_S: Final = 5.0
FILES_PER_PACKAGE: Final = 4  # its extension modules: flash-attn has one, vllm a few
# The distributions whose .so files link torch (envkit/knowledge/extensions: kind compiled/pinned).
_UNDEFINED_RE: Final = re.compile(r"undefined symbol: (\S+)")
# torch's C++ namespaces as the Itanium ABI mangles them (_ZN3c10…, _ZNK2at…, _ZN5torch…).
_TORCH_SYMBOL_RE: Final = re.compile(r"^_Z\w*?(?:N|K|L|S)?(?:3c10|2at|5torch|6caffe2)")
_TORCH_LIB_RE: Final = re.compile(r"^lib(?:c10|torch|shm)\w*\.so|^libcudart\.so")


def _record_files(site: str, package: str, system: System) -> list[str]:
    """The .so files the distribution's RECORD lists (dist-info folders are named with _)."""
    folder = system.path(site)
    for info in sorted(folder.glob("*.dist-info")) if folder.is_dir() else []:
        name = info.name[: -len(".dist-info")].rsplit("-", 1)[0]
        if canonicalize_name(name) != package:
            continue
        try:
            record = (info / "RECORD").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        files = [line.split(",", 1)[0] for line in record.splitlines()]
        return [posixpath.join(site, f) for f in files if f.endswith(".so") and not f.startswith("..")]
    return []


def _one(system: System, ldso: str, libdir: str, package: str, path: str) -> Optional[ExtensionBinary]:
    env = {
        **system.env,
        "LD_LIBRARY_PATH": ":".join(p for p in (libdir, system.env.get("LD_LIBRARY_PATH", "")) if p),
        "LD_TRACE_LOADED_OBJECTS": "1",
        "LD_BIND_NOW": "1",
        "LD_WARN": "1",
    }
    result = system.run_within([ldso, path], timeout=TIMEOUT_S, env=env)
    if not result.stdout and not result.stderr:
        return None
    listed = parse_list(result.stdout)
    text = f"{result.stdout}\n{result.stderr}"
    undefined = sorted({s for s in _UNDEFINED_RE.findall(text) if _TORCH_SYMBOL_RE.match(s)})
    return ExtensionBinary(
        package=package,
        file=path,
        needed=tuple(s for s, _p in listed if _TORCH_LIB_RE.match(s)),
        not_found=tuple(s for s, p in listed if p is None),
        undefined=tuple(undefined[:8]),
    )


def extension_binaries(
    system: System, torch: TorchFacts, python: Optional[PythonFacts], packages: frozenset[str]
) -> tuple[ExtensionBinary, ...]:
    """The .so files of the installed ``packages`` (known compiled extensions) as the loader sees
    them beside torch; () off Linux, without torch's folder, or without a dynamic loader."""
    platform = python.platform if python is not None else None
    if not torch.location or (platform is not None and not platform.startswith("linux-")):
        return ()
    ldso = LDSO.get((platform or "linux-x86_64").split("-", 1)[1])
    if ldso is None or not system.path(ldso).is_file():
        return ()
    libdir = posixpath.join(torch.location, "lib")
    found: list[ExtensionBinary] = []
    seen: set[str] = set()
    for dist in torch.distributions:
        if dist.name not in packages or dist.name in seen or not dist.location:
            continue
        seen.add(dist.name)
        for path in _record_files(dist.location, dist.name, system)[:FILES_PER_PACKAGE]:
            binary = _one(system, ldso, libdir, dist.name, path)
            if binary is not None:
                found.append(binary)
    return tuple(found)
