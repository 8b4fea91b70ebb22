"""Whether NVML's worker could find anything to load: on a machine with no NVIDIA driver and no
``libnvidia-ml.so.1`` where the loader looks, the worker's whole answer is known before it starts.

pynvml loads NVML with ``CDLL("libnvidia-ml.so.1")`` (nvidia-ml-py pynvml.py ``_LoadNvmlLibrary``);
where that fails it raises ``NVML_ERROR_LIBRARY_NOT_FOUND``, "NVML Shared Library Not Found", and the
worker prints that as its record. A Python child that imports pynvml to say so costs ~50 ms of CPU on
every ``envkit doctor`` of a machine without NVIDIA GPUs (scripts/bench_doctor.py). So the worker is
skipped only where nothing could make ``dlopen`` succeed, looked at as glibc's loader looks for a
name without a slash (dlopen(3), ld.so(8); bminor/glibc elf/dl-load.c ``_dl_map_object``): a
preloaded NVML, each ``LD_LIBRARY_PATH`` folder, the ``/etc/ld.so.cache`` entries, glibc's default
folders (with the Debian/Ubuntu multiarch ones), and the interpreter's own ``lib`` folders that its
``DT_RPATH``/``DT_RUNPATH`` name (``$ORIGIN/../lib``: conda, pyenv). Any sign of a driver (``/dev/nvidia*``,
WSL's ``/dev/dxg``, ``/proc/driver/nvidia``, ``/sys/module/nvidia``) runs the worker too, and so
does anything this cannot read or follow (a ``$`` token in ``LD_LIBRARY_PATH``, an unreadable
cache): in doubt, NVML itself is asked. Linux only; elsewhere the worker always runs.

It reads this machine's files, not a System root's: the worker runs here, whatever root the
detectors read.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["LIBRARY_NOT_FOUND", "NVML_SONAME", "nvml_may_load"]

NVML_SONAME: Final = "libnvidia-ml.so.1"
# (error name, message) of the worker's record where CDLL(NVML_SONAME) fails: pynvml's
# NVMLError_LibraryNotFound and its text (pynvml.py NVMLError._errcode_to_string).
LIBRARY_NOT_FOUND: Final = ("LibraryNotFound", "NVML Shared Library Not Found")
LD_CACHE: Final = "/etc/ld.so.cache"
# glibc's built-in folders (slibdir, libdir), the multiarch folders Debian and Ubuntu build into
# their glibc, WSL's driver folder, and the NVIDIA container toolkit's.
_FOLDERS: Final = (
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib/powerpc64le-linux-gnu",
    "/usr/lib/powerpc64le-linux-gnu",
    "/usr/lib/wsl/lib",
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
)
# Device nodes of a loaded driver: /dev/nvidiactl, /dev/nvidia0, …; WSL's GPU paravirtualisation.
_DEVICE: Final = re.compile(r"nvidia|dxg$")
_DRIVER_DIRS: Final = ("/proc/driver/nvidia", "/sys/module/nvidia")


def nvml_may_load(env: Mapping[str, str]) -> bool:
    """False only where no NVIDIA driver is loaded and no ``libnvidia-ml.so.1`` lies where glibc's
    loader would look for it with the environment ``env``; True whenever in doubt."""
    if not sys.platform.startswith("linux"):
        return True
    if "libnvidia-ml" in env.get("LD_PRELOAD", ""):
        return True
    if any(os.path.exists(folder) for folder in _DRIVER_DIRS):
        return True
    try:
        if any(_DEVICE.match(name) for name in os.listdir("/dev")):
            return True
    except OSError:
        return True
    folders = [*_FOLDERS, *_interpreter_libs()]
    for entry in re.split(r"[:;]", env.get("LD_LIBRARY_PATH", "")):
        if "$" in entry:  # $ORIGIN, $LIB, $PLATFORM: expanded by the loader, not followed here
            return True
        folders.append(entry or ".")  # an empty entry is the working folder (ld.so(8))
    if any(os.path.exists(os.path.join(folder, NVML_SONAME)) for folder in folders):
        return True
    return _in_ld_cache()


def _interpreter_libs() -> list[str]:
    """The ``lib`` folders beside this interpreter: where ``$ORIGIN/../lib`` points."""
    exe = os.path.realpath(sys.executable) if sys.executable else ""
    roots = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(exe))}
    return [os.path.join(root, "lib") for root in sorted(roots) if root]


def _in_ld_cache() -> bool:
    # The cache's string table holds each soname NUL-terminated (elf/cache.c); a longer name ending
    # in the same text only runs the worker, as before.
    try:
        with open(LD_CACHE, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return False  # no cache (musl, a minimal image): the loader reads none either
    except OSError:
        return True
    return NVML_SONAME.encode() + b"\0" in data
