"""The loader's view of torch's CUDA libraries: which file glibc's ld.so picks for each library in
libtorch_cuda.so's DT_NEEDED chain, and why.

No version number shows it: a CUDA toolkit's lib64 on LD_LIBRARY_PATH, an LD_PRELOAD, an ld.so.cache
entry of a system cuDNN can each give torch another cuBLAS, nvJitLink or NCCL than the one its
nvidia-* wheels bundle, and the import fails with "undefined symbol" or, worse, works and computes
with another library. So the real loader is asked: ``ld.so --list`` (glibc's own ``ldd``, here run
directly so that no ``ldd`` script and no interpreter of the library's choosing is involved) on
libtorch_cuda.so, with this process's LD_LIBRARY_PATH and LD_PRELOAD, and with
libtorch_global_deps.so preloaded as torch/__init__.py's ``_load_global_deps`` loads it first
(RTLD_GLOBAL). It maps the files and resolves every DT_NEEDED as a real import would (DT_RPATH,
LD_LIBRARY_PATH, DT_RUNPATH with $ORIGIN, /etc/ld.so.cache, the default folders, hwcaps subfolders:
bminor/glibc elf/dl-load.c ``_dl_map_object``) but runs no code of theirs. ``LD_DEBUG=files,libs``
makes it say the rest: the object whose DT_NEEDED asked for each library ("needed by"), and the
search under which the file it took was tried ("search path=… (RUNPATH from file …)", "(LD_LIBRARY_PATH)",
"(system search path)", "search cache=/etc/ld.so.cache": elf/dl-load.c ``print_search_path``,
``_dl_map_object``). Where the trace does not say (a preloaded object is mapped by its path, a
trace cut short), the rule follows from where the file lies, in the loader's order. One bounded
child process (envkit._proc), never an import of torch.
"""

from __future__ import annotations

import os
import posixpath
import re
from typing import TYPE_CHECKING, Final, Optional

from envkit.detect.host import lib_family
from envkit.facts import ResolvedLib
from envkit.versions import Version, parse_version

if TYPE_CHECKING:
    from collections.abc import Iterable

    from envkit.facts import PythonFacts, TorchFacts
    from envkit.system import System

__all__ = ["LDSO", "loader_view", "parse_list", "parse_needed_by", "parse_search"]

LOADER_TIMEOUT_S: Final = 5.0
# The dynamic loader of each platform (the PT_INTERP glibc's toolchains write: x86_64 psABI,
# AArch64 ELF ABI, ppc64le ELFv2).
LDSO: Final = {
    "x86_64": "/lib64/ld-linux-x86-64.so.2",
    "aarch64": "/lib/ld-linux-aarch64.so.1",
    "ppc64le": "/lib64/ld64.so.2",
}
# glibc's built-in search folders (sysdeps: slibdir and libdir), and the multiarch ones Debian and
# Ubuntu add; what lies there is the distribution's, found without any variable.
_DEFAULT_DIRS: Final = ("/lib64", "/usr/lib64", "/lib", "/usr/lib")
_LIST_RE: Final = re.compile(r"^\s*(?P<soname>\S+) => (?P<path>\S+|not found)(?: \(0x[0-9a-f]+\))?\s*$")
# A preloaded object (LD_PRELOAD, --preload) is listed by its path alone: "\t/x/libcublas.so.12 (0x7f…)"
_LOADED_RE: Final = re.compile(r"^\s*(?P<path>/\S+) \(0x[0-9a-f]+\)\s*$")
_NEEDED_RE: Final = re.compile(r"file=(?P<soname>\S+) \[\d+\];\s+needed by (?P<by>\S+) \[\d+\]")
# LD_DEBUG=libs: each search's source, then the files tried under it (elf/dl-load.c print_search_path).
_SEARCH_RE: Final = re.compile(
    r"\bsearch path=\S*\s+\((?P<source>RUNPATH|RPATH|LD_LIBRARY_PATH|system search path)"
)
_TRYING_RE: Final = re.compile(r"\btrying file=(?P<path>\S+)")
_SOURCES: Final = {
    "RUNPATH": "RUNPATH",
    "RPATH": "RPATH",
    "LD_LIBRARY_PATH": "LD_LIBRARY_PATH",
    "system search path": "default path",
}
# Below this many seconds left, the view is not taken: the environment's facts come first.
_MIN_LEFT_S: Final = 1.0
# torch's CUDA library, per release: libtorch_cuda.so (1.10 on); 1.8-1.9 split it in two.
_ROOTS: Final = ("libtorch_cuda.so", "libtorch_cuda_cu.so", "libtorch_cuda_cpp.so")
_CUDA_DIR_RE: Final = re.compile(r"/cuda-(\d+\.\d+)/")


def parse_list(text: str) -> list[tuple[str, Optional[str]]]:
    """(soname, path or None when not found) from ``ld.so --list`` / ``ldd`` output.

    >>> parse_list("\\tlibcublas.so.12 => /x/libcublas.so.12 (0x00007f)\\n\\tlibnccl.so.2 => not found\\n")
    [('libcublas.so.12', '/x/libcublas.so.12'), ('libnccl.so.2', None)]
    """
    found: list[tuple[str, Optional[str]]] = []
    for line in text.splitlines():
        match = _LIST_RE.match(line)
        if match is not None:
            path = match.group("path")
            found.append((match.group("soname"), None if path == "not found" else path))
            continue
        loaded = _LOADED_RE.match(line)
        if loaded is not None:  # a preloaded object: it answers every DT_NEEDED of its soname
            found.append((posixpath.basename(loaded.group("path")), loaded.group("path")))
    return found


def parse_needed_by(text: str) -> dict[str, str]:
    """soname -> the object whose DT_NEEDED first asked for it, from ``LD_DEBUG=files``."""
    needed: dict[str, str] = {}
    for match in _NEEDED_RE.finditer(text):
        needed.setdefault(match.group("soname"), match.group("by"))
    return needed


def parse_search(text: str) -> dict[str, str]:
    """Normalized file path -> the rule under which ld.so tried it, from ``LD_DEBUG=libs``: the
    last try of a search is the file it took ("RUNPATH", "RPATH", "LD_LIBRARY_PATH",
    "ld.so.cache", "default path")."""
    tried: dict[str, str] = {}
    source = ""
    for line in text.splitlines():
        if "find library=" in line:
            source = ""
        elif "search cache=" in line:
            source = "ld.so.cache"
        else:
            search = _SEARCH_RE.search(line)
            if search is not None:
                source = _SOURCES[search.group("source")]
                continue
            trying = _TRYING_RE.search(line)
            if trying is not None and source:
                tried[posixpath.normpath(trying.group("path"))] = source
    return tried


def _dirs(value: str) -> list[str]:
    return [posixpath.normpath(d) for d in value.replace(";", ":").split(":") if d]


def _under(path: str, folders: Iterable[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def _in_dir(path: str, folders: Iterable[str]) -> bool:
    """Whether ``path`` lies in one of ``folders`` itself or in its glibc-hwcaps / tls subfolders,
    which the loader tries first within each folder."""
    parent = posixpath.dirname(path)
    for folder in folders:
        inside = parent.startswith(folder + "/") and "/glibc-hwcaps/" in parent[len(folder) :]
        if parent == folder or inside:
            return True
    return False


def _version(family_version: Optional[str], path: str, real: str) -> Optional[Version]:
    """The library's version: the real file's name (libcublas.so.12.1.3.1), else a toolkit folder's
    (/usr/local/cuda-12.2/), else the soname's major."""
    real_family = lib_family(posixpath.basename(real))
    if real_family is not None and real_family[1] and len(real_family[1]) > len(family_version or ""):
        return parse_version(real_family[1])
    folder = _CUDA_DIR_RE.search(path + "/")
    if folder is not None:
        return parse_version(folder.group(1))
    return parse_version(family_version) if family_version else None


def _via(path: str, real: str, *, preload: list[str], ld_dirs: list[str], own: list[str]) -> str:
    """Which rule found ``path`` where the trace does not say, in the loader's order (elf/rtld.c's
    preloads, then elf/dl-load.c)."""
    if path in preload or real in preload:
        return "LD_PRELOAD"
    if _in_dir(path, ld_dirs):
        return "LD_LIBRARY_PATH"
    if _under(path, own) or _under(real, own):
        return "RUNPATH"
    if _in_dir(path, _DEFAULT_DIRS) or re.match(r"^/(?:usr/)?lib/[\w-]+-linux-gnu\w*/", path):
        return "default path"
    return "RUNPATH"  # a DT_RUNPATH / DT_RPATH of another library (a toolkit's $ORIGIN)


def _own_folders(torch: TorchFacts, python: Optional[PythonFacts]) -> list[str]:
    """Where the build's own libraries lie: torch's site-packages (torch/lib, the nvidia-* wheels)
    and the environment's prefix (a conda env's lib/)."""
    own = []
    if torch.location:
        own.append(posixpath.dirname(posixpath.normpath(torch.location)))
    if python is not None and python.prefix:
        own.append(posixpath.normpath(python.prefix))
    return [os.path.realpath(f) for f in own] + own


def loader_view(
    system: System, torch: TorchFacts, python: Optional[PythonFacts]
) -> tuple[tuple[ResolvedLib, ...], tuple[str, ...]]:
    """torch's CUDA libraries as ld.so resolves them here, and notes on what could not be asked.
    Nothing for a build without CUDA, off Linux, or without its libtorch_cuda."""
    if torch.cuda is None or not torch.location:
        return (), ()
    platform = python.platform if python is not None else None
    if platform is not None and not platform.startswith("linux-"):
        return (), ()
    arch = (platform or "linux-x86_64").split("-", 1)[1]
    ldso = LDSO.get(arch)
    libdir = posixpath.join(torch.location, "lib")
    roots = (posixpath.join(libdir, r) for r in _ROOTS)
    root = next((r for r in roots if system.path(r).is_file()), None)
    if ldso is None or not system.path(ldso).is_file():
        return (), (f"the loader's view not taken: no dynamic loader at {ldso or arch}",)
    if root is None:
        return (), (f"the loader's view not taken: no libtorch_cuda in {libdir}",)
    argv = [ldso]
    global_deps = posixpath.join(libdir, "libtorch_global_deps.so")
    if system.path(global_deps).is_file():
        argv += ["--preload", global_deps]  # torch/__init__.py loads it first (_load_global_deps)
    argv += ["--list", root]
    left = system.remaining()
    if left is not None and left < _MIN_LEFT_S:
        return (), ("the loader's view not taken: too little time left",)
    env = {**system.env, "LD_DEBUG": "files,libs"}
    wanted = LOADER_TIMEOUT_S if left is None else min(LOADER_TIMEOUT_S, left / 2)
    result = system.run_within(argv, timeout=wanted, env=env)
    if not result.ok and not result.stdout:
        return (), (f"the loader's view not taken: {result.describe()}",)
    needed_by = parse_needed_by(result.stderr)
    ld_dirs = _dirs(system.env.get("LD_LIBRARY_PATH", ""))
    preload = [posixpath.normpath(p) for p in re.split(r"[:\s]+", system.env.get("LD_PRELOAD", "")) if p]
    own = _own_folders(torch, python)
    searched = parse_search(result.stderr)
    libs = []
    for soname, path in parse_list(result.stdout):
        family = lib_family(soname)
        if family is None or family[0] == "cuda":
            continue  # not a CUDA library of torch's (libcuda is the driver's, judged elsewhere)
        requester = posixpath.basename(needed_by.get(soname) or needed_by.get(path or "", root))
        if path is None:
            libs.append(ResolvedLib(soname, requester, None, "not found", family[0], None, None))
            continue
        real = os.path.realpath(path)  # the loader ran on this machine's files
        libs.append(
            ResolvedLib(
                soname,
                requester,
                path,
                searched.get(posixpath.normpath(path))
                or _via(path, real, preload=preload, ld_dirs=ld_dirs, own=own),
                family[0],
                _version(family[1], path, real),
                _under(path, own) or _under(real, own),
            )
        )
    return tuple(libs), ()
