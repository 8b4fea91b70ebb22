"""Describe this Python environment and its torch install without importing torch.

Runs in the TARGET interpreter (Python >= 3.8, stdlib only, nothing from envkit) and prints one
JSON object between the marker given as argv[1]:  <marker>{...}<marker>
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
import sysconfig
from typing import Any, Dict, List, Optional, Tuple

from envkit_probe_util import emit, read_args

# Distributions worth reporting: the torch family, the CUDA wheels it bundles, and packages that
# pin or replace parts of it.
INTERESTING = (
    "torch",
    "torchvision",
    "torchaudio",
    "torchtext",
    "torchdata",
    "triton",
    "pytorch-triton",
    "pytorch-triton-rocm",
    "numpy",
    "pynvml",
    "nvidia-ml-py",
    "xformers",
    "flash-attn",
    "deepspeed",
    # the stack above torch envkit knows (envkit/knowledge/extensions): some name no torch in
    # their metadata (torchao, PyG's packages, apex), so they are listed here
    "vllm",
    "bitsandbytes",
    "torchao",
    "apex",
    "torch-scatter",
    "torch-sparse",
    "torch-cluster",
    "pyg-lib",
    "accelerate",
    "lightning",
    "pytorch-lightning",
    "transformers",
)
CONDA_INTERESTING = (
    "pytorch",
    "pytorch-cuda",
    "pytorch-gpu",
    "pytorch-cpu",
    "pytorch-mutex",
    "libtorch",
    "torchvision",
    "torchaudio",
    "cudatoolkit",
    "cuda-version",
    "cuda-runtime",
    "cuda-cudart",
    "cuda-nvcc",
    "cudnn",
    "nccl",
    "triton",
)


def normalize(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _egg_info_version(path: str) -> Optional[str]:
    try:
        with open(os.path.join(path, "PKG-INFO"), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


_REQ_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
# A METADATA file's headers end at the first blank line (core metadata spec); this is far more.
_HEADER_CAP = 256 * 1024


def _names_torch(requirement: str) -> bool:
    match = _REQ_NAME.match(requirement)
    if match is None or normalize(match.group(1)) != "torch":
        return False
    # An extra's requirement ("torch>=2; extra == 'torch'") is not installed with the package.
    marker = requirement.split(";", 1)[1] if ";" in requirement else ""
    return "extra" not in marker


def torch_requirements(path: str) -> List[str]:
    """The distribution's requirements on torch: METADATA's ``Requires-Dist`` headers (core
    metadata spec), or an egg-info's requires.txt before its first ``[extra]`` section. Only the
    headers are read, so a package's long description costs nothing."""
    found: List[str] = []
    try:
        if path.endswith(".dist-info"):
            with open(os.path.join(path, "METADATA"), encoding="utf-8", errors="replace") as fh:
                read = 0
                for line in fh:
                    read += len(line)
                    if not line.strip() or read > _HEADER_CAP:
                        break
                    if line[:14].lower() == "requires-dist:":
                        value = line.split(":", 1)[1].strip()
                        if _names_torch(value):
                            found.append(value)
        else:
            with open(os.path.join(path, "requires.txt"), encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if line.startswith("["):
                        break
                    if _names_torch(line.strip()):
                        found.append(line.strip())
    except OSError:
        pass
    return found


def distributions() -> List[List[Any]]:
    """Every interesting distribution on sys.path, duplicates included, in sys.path order.

    Names and versions come from the metadata folder names (``torch-2.5.1+cu121.dist-info``,
    PEP 376/427), which is what importlib.metadata would read, without importing it. Each row's
    fourth item is its requirements on torch (``torch_requirements``); a distribution outside the
    torch family is interesting when it has one (vllm, xformers: built for one torch release).
    """
    found: List[List[Any]] = []
    seen = set()
    for entry in sys.path:
        location = os.path.abspath(entry or ".")
        if location in seen or not os.path.isdir(location):
            continue
        seen.add(location)
        try:
            names = os.listdir(location)
        except OSError:
            continue
        for folder in names:
            if folder.endswith(".dist-info"):
                stem = folder[: -len(".dist-info")]
            elif folder.endswith(".egg-info"):
                stem = folder[: -len(".egg-info")]
            else:
                continue
            name, _, rest = stem.partition("-")
            norm = normalize(name)
            # CUDA wheels require nothing of torch: not worth opening their metadata.
            path = os.path.join(location, folder)
            requires = [] if norm.startswith("nvidia-") else torch_requirements(path)
            if norm not in INTERESTING and not norm.startswith("nvidia-") and not requires:
                continue
            if folder.endswith(".dist-info"):
                version: Optional[str] = rest
            else:  # name-1.0-py3.8.egg-info, or name.egg-info from `setup.py develop`
                version = rest.split("-py", 1)[0]
                version = version or _egg_info_version(path)
            found.append([norm, version or None, location, requires])
    return found


def conda_packages(prefix: str) -> List[List[Optional[str]]]:
    meta = os.path.join(prefix, "conda-meta")
    if not os.path.isdir(meta):
        return []
    found: List[List[Optional[str]]] = []
    for entry in sorted(os.listdir(meta)):
        if not entry.endswith(".json"):
            continue
        parts = entry[: -len(".json")].rsplit("-", 2)
        if len(parts) != 3 or parts[0] not in CONDA_INTERESTING:
            continue
        channel = None
        try:
            with open(os.path.join(meta, entry)) as fh:
                channel = json.load(fh).get("channel")
        except Exception:
            pass
        found.append([parts[0], parts[1], parts[2], channel])
    return found


def torch_version_py() -> Tuple[Optional[str], Optional[str], Optional[str]]:
    """Locate torch without importing it and return (package dir, version.py text, error)."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("torch")
    except Exception as exc:
        return None, None, "finding torch failed: %s" % (exc,)
    if spec is None or not spec.origin:
        if spec is not None and spec.submodule_search_locations:
            return next(iter(spec.submodule_search_locations)), None, "torch has no __init__.py"
        return None, None, None
    package = os.path.dirname(spec.origin)
    try:
        with open(os.path.join(package, "version.py"), encoding="utf-8") as fh:
            return package, fh.read(), None
    except OSError as exc:
        return package, None, "cannot read torch/version.py: %s" % (exc.strerror or exc,)


def has_module(name: str) -> bool:
    try:
        import importlib.util

        return importlib.util.find_spec(name) is not None
    except Exception:
        return False


def externally_managed() -> bool:
    """PEP 668 (peps.python.org/pep-0668/#marking-an-interpreter-as-using-an-external-package-manager):
    the marker is EXTERNALLY-MANAGED in sysconfig's stdlib folder, and a venv is never managed."""
    if sys.prefix != getattr(sys, "base_prefix", sys.prefix):
        return False
    stdlib = sysconfig.get_paths().get("stdlib") or ""
    return bool(stdlib) and os.path.isfile(os.path.join(stdlib, "EXTERNALLY-MANAGED"))


def main() -> None:
    marker, _config = read_args()
    include = sysconfig.get_paths().get("include") or ""
    libc = platform.libc_ver()
    torch_dir, version_py, torch_error = torch_version_py()
    info: Dict[str, Any] = {
        "executable": sys.executable,
        "version": "%d.%d.%d" % sys.version_info[:3],
        "implementation": platform.python_implementation(),
        "system": platform.system(),
        "machine": platform.machine(),
        "libc": [libc[0], libc[1]],
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "conda": os.path.isdir(os.path.join(sys.prefix, "conda-meta")),
        "include": include,
        "has_python_h": bool(include) and os.path.isfile(os.path.join(include, "Python.h")),
        "has_pip": has_module("pip"),
        "externally_managed": externally_managed(),
        "distributions": distributions(),
        "conda_packages": conda_packages(sys.prefix),
        "torch_dir": torch_dir,
        "torch_version_py": version_py,
        "torch_error": torch_error,
    }
    emit(marker, info)


if __name__ == "__main__":
    main()
