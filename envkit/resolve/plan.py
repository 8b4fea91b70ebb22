"""What the resolver answers and what it is asked: the request (``--torch``, ``--cuda``,
``--channel``), the plan (``envkit.plan/1``) and its pieces.

The plan's JSON form is a published contract (README "envkit resolve"): fields keep their meaning
once published; new ones are added beside them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Optional

from packaging.specifiers import SpecifierSet

from envkit._serial import StrEnum
from envkit.errors import InputError
from envkit.knowledge import variant_cuda
from envkit.knowledge.vendors import rocm_version
from envkit.resolve.available import Available
from envkit.resolve.channels import ChannelIndex
from envkit.resolve.ext_pick import ExtensionPick, ExtensionRequest
from envkit.resolve.target import Target
from envkit.versions import Version, parse_spec

if TYPE_CHECKING:
    from collections.abc import Sequence


def _quoted(requirement: str) -> str:
    return f'"{requirement}"' if any(c in requirement for c in " <>;@*") else requirement


__all__ = [
    "PLAN_SCHEMA",
    "PYTORCH_INDEX",
    "Channel",
    "CondaSpec",
    "CudaKind",
    "CudaRequest",
    "Plan",
    "PlanFlags",
    "Rejection",
    "Request",
    "Route",
    "parse_cuda_request",
    "parse_torch_spec",
]

PLAN_SCHEMA: Final = "envkit.plan/1"
PYTORCH_INDEX: Final = "https://download.pytorch.org/whl"


class CudaKind(StrEnum):
    """What ``--cuda`` asks for."""

    AUTO = "auto"  # the CUDA build the target's driver and GPUs fit, the CPU build without a GPU
    CPU = "cpu"
    EXACT = "exact"  # one variant: cu121, rocm6.2, xpu
    MAJOR = "major"  # any cu12x
    ROCM = "rocm"  # any ROCm variant (--cuda rocm)


class Channel(StrEnum):
    """Where the torch packages come from (``--channel``; the plan's ``channel`` field)."""

    PIP = "pip"
    CONDA = "conda"


class Route(StrEnum):
    """How a build is published: pip wheels, the ``pytorch`` conda channel (torch ≤ 2.5.1) or
    conda-forge. A plan's ``conda.route`` is one of the two conda routes."""

    PIP = "pip"
    PYTORCH_CHANNEL = "pytorch-channel"
    CONDA_FORGE = "conda-forge"


@dataclass(frozen=True)
class CudaRequest:
    """``auto``, ``cpu``, an exact variant (``12.1``, ``cu121``, ``rocm6.2``) or a major."""

    kind: CudaKind
    variant: Optional[str] = None
    major: Optional[int] = None

    def __post_init__(self) -> None:
        # Members are compared with `is`: a plain "cpu" from a caller must become the member, not
        # silently mean something else (a str-valued Enum equals its string but is not it).
        object.__setattr__(self, "kind", CudaKind(self.kind))

    def admits(self, variant: str, target: Target) -> bool:
        if self.kind is CudaKind.AUTO:
            # The GPUs decide: NVIDIA's CUDA builds first (a machine with both gets CUDA), then AMD's
            # ROCm builds, then Intel's XPU build; the CPU build only without a GPU any build uses.
            if target.has_nvidia:
                return variant.startswith("cu")
            if target.has_amd:
                return variant.startswith("rocm")
            if target.has_intel:
                return variant == "xpu"
            return variant == "cpu"
        if self.kind is CudaKind.CPU:
            return variant == "cpu"
        if self.kind is CudaKind.EXACT:
            return variant == self.variant
        if self.kind is CudaKind.ROCM:
            return variant.startswith("rocm")
        cuda = variant_cuda(variant)
        return cuda is not None and cuda.major == self.major

    def __str__(self) -> str:
        if self.kind is CudaKind.EXACT:
            return str(self.variant)
        if self.kind is CudaKind.MAJOR:
            return f"{self.major}"
        return str(self.kind)


def parse_cuda_request(text: str) -> CudaRequest:
    """``--cuda auto | cpu | 12.1 | cu121 | 9.2 | cu92 | 12 | rocm6.2 | rocm | xpu``.

    CUDA 9.x folders have two digits (cu92: torch 1.2-1.7, pytorch/pytorch.github.io
    _get_started/previous-versions.md), so a version's major has one or two digits.
    """
    value = text.strip().lower()
    if value in (CudaKind.AUTO.value, CudaKind.CPU.value, CudaKind.ROCM.value):
        return CudaRequest(CudaKind(value))
    if variant_cuda(value) is not None or re.fullmatch(r"rocm\d+(\.\d+)*", value) or value == "xpu":
        return CudaRequest(CudaKind.EXACT, variant=value)
    match = re.fullmatch(r"([1-9]\d?)\.(\d)", value)
    if match:
        return CudaRequest(CudaKind.EXACT, variant=f"cu{match.group(1)}{match.group(2)}")
    if re.fullmatch(r"\d{2}", value):
        return CudaRequest(CudaKind.MAJOR, major=int(value))
    raise InputError(
        f"--cuda {text!r}: expected auto, cpu, a CUDA version (12.1 or cu121), a major (12), "
        "a ROCm variant (rocm6.2, or rocm for the newest that fits) or xpu"
    )


def parse_torch_spec(text: str) -> SpecifierSet:
    """``--torch 2.5.*`` / ``>=2.4`` / ``2.5.1`` (a bare version means ``==``)."""
    spec = parse_spec(text)
    if spec is None:
        raise InputError(f"--torch {text!r}: not a version specifier like 2.5.*, >=2.4 or 2.5.1")
    return spec


@dataclass(frozen=True, init=False)
class PlanFlags:
    """What the command line says about the target machine and the wanted build, as typed
    (``--driver --gpu --no-gpu --platform --python --env --torch --cuda --channel --with
    --allow-build --nightly --test``); checked when
    a request and a target are made of it (envkit.planning).

    Keyword-only: nine fields, most of them optional strings, where a positional slip would swap
    ``--python`` and ``--platform`` without a word. ``dataclass(kw_only=True)`` needs Python 3.10
    and envkit runs on 3.9, so the ``__init__`` is written out (tests check it names every field).
    """

    driver: Optional[str]
    gpus: tuple[str, ...]
    no_gpu: bool
    platform: Optional[str]
    python: Optional[str]
    env_name: Optional[str]
    torch: Optional[str]
    cuda: str
    channel: str
    extensions: tuple[str, ...]  # --with, as typed
    allow_build: bool
    prerelease: Optional[str]  # --nightly / --test: "nightly", "test"; None: the releases

    def __init__(
        self,
        *,
        driver: Optional[str] = None,
        gpus: Sequence[str] = (),
        no_gpu: bool = False,
        platform: Optional[str] = None,
        python: Optional[str] = None,
        env_name: Optional[str] = None,
        torch: Optional[str] = None,
        cuda: str = "auto",
        channel: str = "pip",
        extensions: Sequence[str] = (),
        allow_build: bool = False,
        prerelease: Optional[str] = None,
    ) -> None:
        # What a frozen dataclass's generated __init__ does: the record is still being built.
        setattr_ = object.__setattr__
        setattr_(self, "driver", driver)
        setattr_(self, "gpus", tuple(gpus))
        setattr_(self, "no_gpu", no_gpu)
        setattr_(self, "platform", platform)
        setattr_(self, "python", python)
        setattr_(self, "env_name", env_name)
        setattr_(self, "torch", torch)
        setattr_(self, "cuda", cuda)
        setattr_(self, "channel", channel)
        setattr_(self, "extensions", tuple(extensions))
        setattr_(self, "allow_build", allow_build)
        setattr_(self, "prerelease", prerelease)


@dataclass(frozen=True)
class Request:
    torch: Optional[SpecifierSet] = None
    cuda: CudaRequest = field(default_factory=lambda: CudaRequest(CudaKind.AUTO))
    channel: Channel = Channel.PIP
    # Only the builds a local source holds (create --wheelhouse / --offline); None: any published one.
    available: Optional[Available] = None
    # --with: extensions that must have a wheel (or, with allow_build, a source build) for the build.
    extensions: tuple[ExtensionRequest, ...] = ()
    allow_build: bool = False
    # --nightly / --test: the channel's builds, read from its index pages, instead of the releases.
    prerelease: Optional[ChannelIndex] = None

    def __post_init__(self) -> None:
        # A plain "conda" must not be taken for pip where the resolver asks `is Channel.CONDA`.
        object.__setattr__(self, "channel", Channel(self.channel))


@dataclass(frozen=True)
class Rejection:
    candidate: str
    reason: str


@dataclass(frozen=True)
class CondaSpec:
    channels: tuple[str, ...]
    dependencies: tuple[str, ...]
    route: Route  # PYTORCH_CHANNEL or CONDA_FORGE
    why: str = ""  # which channel, and why that one (resolve --channel conda says it)


@dataclass(frozen=True)
class Plan:
    torch: Version
    torchvision: Version
    torchaudio: Version
    triton: Optional[Version]
    variant: str
    cuda: Optional[Version]
    python: Optional[Version]
    channel: Channel
    platform: str
    index_url: Optional[str]
    conda: Optional[CondaSpec]
    warnings: tuple[str, ...]
    rejected: tuple[Rejection, ...]
    target: Target
    # What the plan was made among (create --wheelhouse: "the wheelhouse DIR holds torch 2.13.0+cpu").
    notes: tuple[str, ...] = ()
    # The extensions asked for (--with), each with its wheel or build.
    extensions: tuple[ExtensionPick, ...] = ()
    # "nightly" / "test": a build of that channel (--nightly / --test), not a release.
    prerelease: Optional[str] = None
    # The JetPack whose NVIDIA wheels the plan takes (a Jetson: envkit.resolve.jetson); their
    # versions carry no local tag.
    jetpack: Optional[str] = None
    # The companions published beside this torch build: a platform without them (torch 2.5's
    # Windows XPU wheels, knowledge/intel.toml [[companion_gap]]) installs torch alone.
    companions: tuple[str, ...] = ("torchvision", "torchaudio")

    @property
    def candidate(self) -> str:
        return f"{self.torch}+{self.variant}"

    def requirements(self, packages: tuple[str, ...] = ("torch", "torchvision", "torchaudio")) -> list[str]:
        """Pinned pip requirements; torch pinned with its variant so no resolver can swap builds."""
        local = f"+{self.variant}" if self.index_url and not self.platform.startswith("macos") else ""
        if self.jetpack:
            local = ""
        pins = {
            "torch": f"torch=={self.torch}{local}",
            "torchvision": f"torchvision=={self.torchvision}",
            "torchaudio": f"torchaudio=={self.torchaudio}",
        }
        return [pins[p] for p in packages if p in pins and (p == "torch" or p in self.companions)]

    def pip_command(
        self, pip: str = "pip", packages: tuple[str, ...] = ("torch", "torchvision", "torchaudio")
    ) -> str:
        parts = [f"{pip} install", *self.requirements(packages)]
        if self.index_url:
            parts.append(f"--index-url {self.index_url}")
        return " ".join(parts)

    def extension_command(self, pip: str = "pip") -> Optional[str]:
        """The second install step: the extensions, with torch held to the plan by a constraints
        file (``constraints.txt`` holds ``requirements()``'s torch pins), so that pip fails rather
        than replaces torch; builds that import torch get --no-build-isolation."""
        if not self.extensions:
            return None
        steps = []
        for isolated in (True, False):
            picks = [p for p in self.extensions if p.no_build_isolation is not isolated]
            if not picks:
                continue
            parts = [
                f"{pip} install",
                *(_quoted(p.requirement) for p in picks),
                "--constraint constraints.txt",
            ]
            parts += sorted({f"--find-links {p.index}" for p in picks if p.where == "find-links" and p.index})
            parts += sorted({f"--extra-index-url {p.index}" for p in picks if p.where == "index" and p.index})
            if not isolated:
                parts.append("--no-build-isolation")
            steps.append(" ".join(parts))
        return " && ".join(steps)

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
            "companions": list(self.companions),
            "triton": str(self.triton) if self.triton else None,
            "variant": self.variant,
            "cuda": str(self.cuda) if self.cuda else None,
            "python": str(self.python) if self.python else None,
            "channel": self.channel.value,
            "platform": self.platform,
            "index_url": self.index_url,
            "conda": None
            if self.conda is None
            else {
                "channels": list(self.conda.channels),
                "dependencies": list(self.conda.dependencies),
                "route": self.conda.route.value,
                "why": self.conda.why,
            },
            "commands": {
                "pip": self.pip_command(),
                "conda": self.conda_command(),
                "extensions": self.extension_command(),
            },
            "extensions": [p.to_json() for p in self.extensions],
            "warnings": list(self.warnings),
            "rejected": [{"candidate": r.candidate, "reason": r.reason} for r in self.rejected],
            "notes": list(self.notes),
            "prerelease": self.prerelease,
            "jetpack": self.jetpack,
            "gpu_vendor": _gpu_vendor(self.variant),
            "rocm": str(rocm_version(self.variant)) if rocm_version(self.variant) else None,
            "target": {
                "described_by": self.target.described_by,
                "platform": self.target.platform,
                "driver": str(self.target.driver) if self.target.driver else None,
                "gpus": [{"name": g.name, "compute_capability": str(g.cc)} for g in self.target.gpus],
                "python": str(self.target.python) if self.target.python else None,
                "accelerators": [
                    {"vendor": a.vendor, "arch": a.arch, "name": a.name} for a in self.target.accel
                ],
                "amd_driver": self.target.amd_driver,
            },
        }


def _gpu_vendor(variant: str) -> Optional[str]:
    """The GPU vendor a variant is for: "nvidia" (cu*), "amd" (rocm*), "intel" (xpu); None (cpu)."""
    if variant_cuda(variant) is not None:
        return "nvidia"
    if rocm_version(variant) is not None:
        return "amd"
    return "intel" if variant == "xpu" else None
