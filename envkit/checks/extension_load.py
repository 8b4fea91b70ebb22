"""torch.extension_load: a compiled extension (flash-attn, xformers, vllm, torchvision, torchaudio,
apex, bitsandbytes, detectron2, any *.so under site-packages but torch's own) that does not load,
and what it was built for.

The evidence is the loader's words in an error text (envkit.detect.errtext: LoadFailure) and the
extensions' own: a C++ symbol of torch's (c10::, at::, torch::) undefined in the extension's .so
means it was compiled against another torch (the C++ API has no stable ABI across releases); a
missing libcudart.so.11.0 means it was built for CUDA 11; "operator torchvision::nms does not
exist" means torchvision's C++ library did not load beside this torch (pytorch/vision#4226);
xformers says what it was built for ("xFormers was built for: PyTorch 2.1.0+cu121 …").

The fact "<package> failed to load with <symbol>" (Facts.errors.load_failures, package and
provider named) is also what an extension's own pairing checks can use.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final

from envkit.checks._common import fix_lines, headline, join_lines, pip_command
from envkit.checks.cuda_loader import is_torch_side
from envkit.report import CheckResult, Status

if TYPE_CHECKING:
    from envkit.facts import Facts, LoadFailure

__all__ = ["check_extension_load"]

ID: Final = "torch.extension_load"
PYTORCH_INDEX: Final = "https://download.pytorch.org/whl"
# Extensions whose wheels are published per torch CUDA variant on PyTorch's own index
# (xformers README "Installing xFormers"; torchvision/torchaudio with torch itself).
_ON_PYTORCH_INDEX: Final = frozenset({"xformers", "torchvision", "torchaudio"})
# Those that build against the installed torch when pip is told not to isolate the build
# (flash-attn README "Installation": pip install flash-attn --no-build-isolation).
_BUILDS_FROM_SOURCE: Final = frozenset({"flash-attn", "apex", "causal-conv1d", "mamba-ssm", "detectron2"})


def _torch_label(facts: Facts) -> str:
    torch = facts.torch
    return f"torch {torch.version}" if torch.version is not None else "the installed torch"


def _reinstall(facts: Facts, package: str) -> str:
    """The command that puts the release of ``package`` built for the installed torch in place."""
    pip = pip_command(facts)
    torch = facts.torch.version
    if package in ("torchvision", "torchaudio") and torch is not None:
        from envkit.checks.companions import _matching_set
        from envkit.knowledge import load_knowledge

        return _matching_set(facts, load_knowledge().release(torch), [package])
    variant = facts.torch.variant
    if package in _ON_PYTORCH_INDEX and variant and variant.startswith("cu"):
        return f"{pip} install --force-reinstall --no-deps {package} --index-url {PYTORCH_INDEX}/{variant}"
    if package in _BUILDS_FROM_SOURCE:
        return (
            f"{pip} install --force-reinstall --no-cache-dir --no-build-isolation {package}  "
            f"(builds it against {_torch_label(facts)}; it needs nvcc of torch's CUDA major)"
        )
    return (
        f"install the {package} release built for {_torch_label(facts)} (its release notes or index "
        f"name the torch it pins), or rebuild it: {pip} install --force-reinstall --no-cache-dir "
        f"--no-build-isolation {package}"
    )


def _finding(f: LoadFailure, facts: Facts) -> str:
    package = f.package or os.path.basename(f.file)
    torch = facts.torch
    if f.kind == "built_for":
        have = f", not {torch.version}" if torch.version is not None else ""
        return f"{package} was built for torch {f.needs}{have}"
    if f.kind == "cannot_open" and f.provider == "torch":
        return (
            f"a compiled extension needs torch's {os.path.basename(f.file)}, which the loader cannot find: "
            "it was imported before torch, or built against a torch installed elsewhere"
        )
    if f.provider == "torch":
        name = os.path.basename(f.file)
        return (
            f"{package} ({name}) was built for another torch than {_torch_label(facts)}: torch's "
            f"{f.symbol} is not there"
        )
    if f.provider == "libstdc++" or f.provider == "glibc":
        return (
            f"{package} needs {f.symbol or 'a newer C runtime'}, newer than the {f.provider} the loader found"
        )
    if f.kind == "cannot_open" and f.needs is not None and f.provider == "cudart" and torch.cuda is not None:
        return (
            f"{package} was built for CUDA {f.needs.major} (it needs {os.path.basename(f.file)}); torch is a "
            f"CUDA {torch.cuda} build"
        )
    if f.kind == "cannot_open":
        return f"{package} needs {os.path.basename(f.file)}, which the loader cannot find"
    return f"{package} does not load: undefined symbol {f.symbol}"


def check_extension_load(facts: Facts) -> CheckResult:
    failures = [f for f in facts.errors.load_failures if not is_torch_side(f)]
    ops = facts.errors.event("torchvision_ops")
    if not failures and ops is None:
        if not facts.errors.read:
            return CheckResult(
                ID, Status.SKIP, "no error text to read (envkit doctor --error FILE reads one)"
            )
        return CheckResult(ID, Status.SKIP, "the error text shows no compiled extension failing to load")
    findings: list[str] = []
    detail: list[str] = []
    fixes: list[str] = []
    for f in failures:
        findings.append(_finding(f, facts))
        detail.append(f"the loader said: {f.file}: {f.symbol or ''}".rstrip(": "))
        if f.provider in ("libstdc++", "glibc"):
            fixes.append(
                "conda install -c conda-forge libstdcxx-ng (in a conda env), or put a newer libstdc++.so.6 "
                "first: export LD_LIBRARY_PATH=$CONDA_PREFIX/lib:$LD_LIBRARY_PATH"
            )
        elif f.package is not None:
            fixes.append(_reinstall(facts, f.package))
    if ops is not None:
        namespace = (ops.code or "torchvision").split("::", 1)[0]
        findings.append(
            f"{namespace}'s compiled operators did not load ({ops.code or ops.message}): {namespace} was "
            f"built for another torch than {_torch_label(facts)}"
        )
        detail.append(ops.message)
        if namespace in ("torchvision", "torchaudio"):
            fixes.append(_reinstall(facts, namespace))
    detail.append(
        "a compiled extension links torch's C++ library (c10, at::, torch::) and one CUDA runtime; its "
        "binary fits the torch release and CUDA major it was built with only"
    )
    return CheckResult(
        ID,
        Status.FAIL,
        headline(list(dict.fromkeys(findings))),
        detail=join_lines(*dict.fromkeys(detail)),
        fix=fix_lines(fixes) or "reinstall the extension built for the installed torch",
    )
