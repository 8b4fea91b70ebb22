"""What the resolver answers and what it is asked: the request (``--torch``, ``--cuda``,
``--channel``), the plan (``envkit.plan/1``) and its pieces.

The plan's JSON form is a published contract (README "envkit resolve"): fields keep their meaning
once published; new ones are added beside them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final, Optional

from packaging.specifiers import SpecifierSet

from envkit.errors import InputError
from envkit.knowledge import variant_cuda
from envkit.resolve.target import Target
from envkit.versions import Version, parse_spec

__all__ = [
    "PLAN_SCHEMA",
    "PYTORCH_INDEX",
    "CondaSpec",
    "CudaRequest",
    "Plan",
    "Rejection",
    "Request",
    "parse_cuda_request",
    "parse_torch_spec",
]

PLAN_SCHEMA: Final = "envkit.plan/1"
PYTORCH_INDEX: Final = "https://download.pytorch.org/whl"


@dataclass(frozen=True)
class CudaRequest:
    """``auto``, ``cpu``, an exact variant (``12.1``, ``cu121``, ``rocm6.2``) or a major."""

    kind: str  # "auto" | "cpu" | "exact" | "major"
    variant: Optional[str] = None
    major: Optional[int] = None

    def admits(self, variant: str, target: Target) -> bool:
        if self.kind == "auto":
            if variant.startswith("rocm") or variant == "xpu":
                return False
            return variant.startswith("cu") if target.has_nvidia else variant == "cpu"
        if self.kind == "cpu":
            return variant == "cpu"
        if self.kind == "exact":
            return variant == self.variant
        cuda = variant_cuda(variant)
        return cuda is not None and cuda.major == self.major

    def __str__(self) -> str:
        if self.kind == "exact":
            return str(self.variant)
        if self.kind == "major":
            return f"{self.major}"
        return self.kind


def parse_cuda_request(text: str) -> CudaRequest:
    """``--cuda auto | cpu | 12.1 | cu121 | 12 | rocm6.2``."""
    value = text.strip().lower()
    if value in ("auto", "cpu"):
        return CudaRequest(value)
    if re.fullmatch(r"cu\d{3}", value) or re.fullmatch(r"rocm\d+(\.\d+)*", value):
        return CudaRequest("exact", variant=value)
    match = re.fullmatch(r"(\d{2})\.(\d)", value)
    if match:
        return CudaRequest("exact", variant=f"cu{match.group(1)}{match.group(2)}")
    if re.fullmatch(r"\d{2}", value):
        return CudaRequest("major", major=int(value))
    raise InputError(
        f"--cuda {text!r}: expected auto, cpu, a CUDA version (12.1 or cu121), a major (12) "
        "or a ROCm variant (rocm6.2)"
    )


def parse_torch_spec(text: str) -> SpecifierSet:
    """``--torch 2.5.*`` / ``>=2.4`` / ``2.5.1`` (a bare version means ``==``)."""
    spec = parse_spec(text)
    if spec is None:
        raise InputError(f"--torch {text!r}: not a version specifier like 2.5.*, >=2.4 or 2.5.1")
    return spec


@dataclass(frozen=True)
class Request:
    torch: Optional[SpecifierSet] = None
    cuda: CudaRequest = field(default_factory=lambda: CudaRequest("auto"))
    channel: str = "pip"  # "pip" | "conda"


@dataclass(frozen=True)
class Rejection:
    candidate: str
    reason: str


@dataclass(frozen=True)
class CondaSpec:
    channels: tuple[str, ...]
    dependencies: tuple[str, ...]
    route: str  # "pytorch-channel" | "conda-forge"


@dataclass(frozen=True)
class Plan:
    torch: Version
    torchvision: Version
    torchaudio: Version
    triton: Optional[Version]
    variant: str
    cuda: Optional[Version]
    python: Optional[Version]
    channel: str
    platform: str
    index_url: Optional[str]
    conda: Optional[CondaSpec]
    warnings: tuple[str, ...]
    rejected: tuple[Rejection, ...]
    target: Target

    @property
    def candidate(self) -> str:
        return f"{self.torch}+{self.variant}"

    def requirements(self, packages: tuple[str, ...] = ("torch", "torchvision", "torchaudio")) -> list[str]:
        """Pinned pip requirements; torch pinned with its variant so no resolver can swap builds."""
        local = f"+{self.variant}" if self.index_url and not self.platform.startswith("macos") else ""
        pins = {
            "torch": f"torch=={self.torch}{local}",
            "torchvision": f"torchvision=={self.torchvision}",
            "torchaudio": f"torchaudio=={self.torchaudio}",
        }
        return [pins[p] for p in packages if p in pins]

    def pip_command(
        self, pip: str = "pip", packages: tuple[str, ...] = ("torch", "torchvision", "torchaudio")
    ) -> str:
        parts = [f"{pip} install", *self.requirements(packages)]
        if self.index_url:
            parts.append(f"--index-url {self.index_url}")
        return " ".join(parts)

    def conda_command(self, tool: str = "conda") -> Optional[str]:
        if self.conda is None:
            return None
        channels = " ".join(f"-c {c}" for c in self.conda.channels)
        deps = " ".join(f'"{d}"' if any(ch in d for ch in "<>*|") else d for d in self.conda.dependencies)
        return f"{tool} install {deps} {channels} --override-channels"

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": PLAN_SCHEMA,
            "torch": str(self.torch),
            "torchvision": str(self.torchvision),
            "torchaudio": str(self.torchaudio),
            "triton": str(self.triton) if self.triton else None,
            "variant": self.variant,
            "cuda": str(self.cuda) if self.cuda else None,
            "python": str(self.python) if self.python else None,
            "channel": self.channel,
            "platform": self.platform,
            "index_url": self.index_url,
            "conda": None
            if self.conda is None
            else {
                "channels": list(self.conda.channels),
                "dependencies": list(self.conda.dependencies),
                "route": self.conda.route,
            },
            "commands": {"pip": self.pip_command(), "conda": self.conda_command()},
            "warnings": list(self.warnings),
            "rejected": [{"candidate": r.candidate, "reason": r.reason} for r in self.rejected],
            "target": {
                "described_by": self.target.described_by,
                "platform": self.target.platform,
                "driver": str(self.target.driver) if self.target.driver else None,
                "gpus": [{"name": g.name, "compute_capability": str(g.cc)} for g in self.target.gpus],
                "python": str(self.target.python) if self.target.python else None,
            },
        }
