"""Describe this Python environment and its torch install without importing torch.

Runs in the TARGET interpreter (Python >= 3.8, stdlib only, nothing from envkit) and prints one
JSON object between the marker given as argv[1]:  <marker>{...}<marker>
"""

from __future__ import annotations

import json
import os
import platform
import sys
import sysconfig
from typing import Any, Dict, List, Optional, Tuple

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


def distributions() -> List[List[Optional[str]]]:
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8 is not supported by the probes
        return []
    found: List[List[Optional[str]]] = []
    for dist in metadata.distributions():
        try:
            name = dist.metadata["Name"] or ""
        except Exception:
            continue
        norm = normalize(name)
        if norm in INTERESTING or norm.startswith("nvidia-"):
            try:
                location = str(dist.locate_file(""))
            except Exception:
                location = None
            found.append([name, dist.version, location])
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


def main() -> None:
    marker = sys.argv[1] if len(sys.argv) > 1 else "@@"
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
        "distributions": distributions(),
        "conda_packages": conda_packages(sys.prefix),
        "torch_dir": torch_dir,
        "torch_version_py": version_py,
        "torch_error": torch_error,
    }
    sys.stdout.write(marker + json.dumps(info) + marker + "\n")


if __name__ == "__main__":
    main()
