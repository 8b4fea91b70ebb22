"""What an existing spec file asks for: which torch line, installed by whom (conda or pip), from
which channel, which releases that line admits, and which build (cu121, cpu) it selects.

envkit.specs.check judges this against the knowledge base and the target; the reading of the file
itself is envkit.specs.read's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Optional

from envkit.errors import InputError, NoBuildError
from envkit.knowledge import Knowledge, Release, is_variant, variant_cuda
from envkit.resolve import Channel, Request, parse_cuda_request, resolve
from envkit.resolve.target import Target
from envkit.specs.read import Pin, SpecFile
from envkit.versions import Version

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

    from envkit.resolve import Plan

__all__ = ["SpecIntent", "admits", "intent_of", "variant_of_url", "version_of"]

_TORCH_NAMES: Final = ("pytorch", "pytorch-gpu", "pytorch-cpu")
ANACONDA: Final = ("defaults", "main", "anaconda", "pkgs/main")


@dataclass(frozen=True)
class SpecIntent:
    spec: SpecFile
    k: Knowledge
    target: Target  # with the file's Python where the target's is unknown
    torch: Optional[Pin]  # the torch line
    via: Optional[str]  # "conda" | "pip": who installs torch
    channel: Optional[str]  # conda: the channel torch comes from (pytorch, conda-forge, defaults)
    releases: tuple[Release, ...]  # the releases the torch line admits, newest first
    variant: Optional[str]  # the build the file asks for (cu121, cpu, …), where it says
    cuda: Optional[Version]  # that build's CUDA (X.0 with major_only when only the major is named)
    major_only: bool = False

    @property
    def windows(self) -> bool:
        return self.target.platform.startswith("windows")

    def plan(self, *, torch: Optional[SpecifierSet] = None, cuda: str = "auto") -> Optional[Plan]:
        """The resolver's build for the target, installed the way this file installs torch."""
        channel = Channel.CONDA if self.via == "conda" else Channel.PIP
        wanted = [cuda]
        if cuda == "auto" and self.planned_here:
            # A CUDA file judged on a node without an NVIDIA GPU (a login node): the fixes keep the
            # file's CUDA (its minor, else its major) rather than turn it into the CPU build of the
            # node envkit runs on.
            assert self.cuda is not None
            exact = [] if self.major_only else [f"{self.cuda.major}.{self.cuda.minor}"]
            wanted = [*exact, str(self.cuda.major)]
        for asked in wanted:
            try:
                return resolve(self.k, self.target, Request(torch, parse_cuda_request(asked), channel))
            except (NoBuildError, InputError):
                continue
        return None

    @property
    def planned_here(self) -> bool:
        """The file asks for a CUDA build, and the target is this machine, which has no NVIDIA driver
        or GPU (no --driver / --gpu given): what a login node checking its cluster's files sees."""
        t = self.target
        return self.cuda is not None and t.described_by == "this machine" and not t.has_nvidia

    def here_note(self, path: str) -> str:
        """What the checks were made for, and how to make them for the compute nodes."""
        what = f"CUDA {self.cuda.major}.x" if self.major_only and self.cuda else f"CUDA {self.cuda}"
        return (
            f"{path} asks for {what}, and this machine has no NVIDIA driver or GPU: the checks are for "
            "this machine (its platform and Python; the fixes keep the file's CUDA). For the compute "
            f"nodes: envkit spec --check {path} --driver VERSION --gpu MODEL (on one of them, "
            "`nvidia-smi --query-gpu=driver_version,name --format=csv` prints both)"
        )

    def command(self, plan: Plan) -> str:
        return (plan.conda_command() if self.via == "conda" else None) or plan.pip_command()

    def on_pytorch_channel(self) -> list[Release]:
        """The admitted releases the pytorch channel published (≤ 2.5.1, pytorch/pytorch#138506)."""
        last = self.k.conda.pytorch_last_release
        return [r for r in self.releases if r.conda_pytorch_cuda and r.torch <= last]


def version_of(pin: Optional[Pin]) -> Optional[Version]:
    """The version a single ``==X`` / ``==X.*`` line names (``cudatoolkit=12.1`` -> 12.1)."""
    if pin is None or pin.spec is None or len(pin.spec) != 1:
        return None
    (spec,) = pin.spec
    if spec.operator != "==":
        return None
    try:
        return Version(spec.version.rstrip("*").rstrip("."))
    except ValueError:
        return None


def admits(spec: Optional[SpecifierSet], version: Version) -> bool:
    """Whether a range admits ``version`` as conda numbers it too (11.8 is the package 11.8.0)."""
    return spec is not None and (spec.contains(version) or spec.contains(Version(f"{version}.0")))


def variant_of_url(url: str) -> Optional[str]:
    """``…/whl/cu121`` -> cu121: a torch wheel index names its variant in its last path segment."""
    last = url.rstrip("/").rsplit("/", 1)[-1]
    return last if is_variant(last) else None


def _channel_name(channel: str) -> str:
    bare = channel.rstrip("/")
    return "pkgs/main" if bare.endswith("pkgs/main") else bare.rsplit("/", 1)[-1]


def _torch_channel(spec: SpecFile, torch: Pin) -> Optional[str]:
    """The channel conda takes torch from: its ``channel::`` qualifier, else the first listed channel
    that publishes a ``pytorch`` package (conda's channel priority), else conda's defaults."""
    if torch.name in ("pytorch-gpu", "pytorch-cpu") and torch.channel is None:
        return "conda-forge"  # conda-forge's metapackages
    named = [_channel_name(torch.channel)] if torch.channel else [_channel_name(c) for c in spec.channels]
    if not named:
        return "defaults"
    return next((c for c in named if c in ("pytorch", "conda-forge", *ANACONDA)), None)


def _pip_variant(spec: SpecFile, torch: Pin, release: Optional[Release], platform: str) -> Optional[str]:
    urls = [u for u in (spec.index_url, *spec.extra_index_urls, *spec.find_links) if u]
    variant = torch.local or next((v for v in map(variant_of_url, urls) if v), None)
    if variant is None and release is not None and all(map(_is_pypi, urls)):
        # PyPI itself: the release's default CUDA build on linux-x86_64, CPU builds on Windows and
        # macOS; linux-aarch64 varies by release (releases.toml's pypi_default_aarch64, read from the
        # wheels' metadata on https://pypi.org/project/torch/).
        variant = {"linux-x86_64": release.pypi_default, "linux-aarch64": None}.get(platform, "cpu")
    return variant


def _is_pypi(url: str) -> bool:
    """PyPI's own index, or a PyPI mirror of envkit's table (they carry the same torch builds)."""
    from envkit.knowledge.mirrors import MirrorKind, load_mirrors

    bare = url.rstrip("/")
    return any(m.kind is MirrorKind.PYPI and bare == m.url for m in load_mirrors())


def _conda_build(spec: SpecFile, torch: Pin) -> tuple[Optional[str], Optional[Version], bool]:
    conda = spec.conda
    if "cpuonly" in conda or torch.name == "pytorch-cpu" or (torch.build or "").lstrip("*").startswith("cpu"):
        return "cpu", None, False
    for name in ("pytorch-cuda", "cudatoolkit", "cuda-version"):
        version = version_of(conda.get(name))
        if version is None:
            continue
        if len(version.release) == 1:  # cuda-version=12: the major only
            return None, Version(f"{version.major}.0"), True
        return f"cu{version.major}{version.minor}", Version(f"{version.major}.{version.minor}"), False
    return None, None, False


def intent_of(spec: SpecFile, k: Knowledge, target: Target) -> SpecIntent:
    torch = next((spec.conda[n] for n in _TORCH_NAMES if n in spec.conda), None)
    via: Optional[str] = "conda" if torch is not None else None
    if torch is None and "torch" in spec.pip:
        torch, via = spec.pip["torch"], "pip"
    releases: tuple[Release, ...] = ()
    if torch is not None and torch.spec is not None:
        releases = tuple(r for r in k.releases if torch.spec.contains(r.torch))
    python = version_of(spec.conda.get("python"))
    if target.python is None and python is not None and len(python.release) >= 2:
        target = dataclasses.replace(target, python=Version(f"{python.major}.{python.minor}"))
    channel, variant, cuda, major_only = None, None, None, False
    if torch is not None and via == "conda":
        channel = _torch_channel(spec, torch)
        variant, cuda, major_only = _conda_build(spec, torch)
    elif torch is not None:
        variant = _pip_variant(spec, torch, releases[0] if releases else None, target.platform)
        cuda = variant_cuda(variant) if variant else None
    return SpecIntent(spec, k, target, torch, via, channel, releases, variant, cuda, major_only)
