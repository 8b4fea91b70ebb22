"""The Jetson route: NVIDIA's JetPack wheels, a route of their own beside download.pytorch.org's.

download.pytorch.org's and PyPI's linux-aarch64 CUDA wheels are SBSA (server Arm) builds: their SASS
does not run on a Jetson's Tegra GPU before Thor (torch's DEVICE_REQUIREMENT; envkit.knowledge
TEGRA_SASS), and a ``pip install torch`` from PyPI on an Orin replaces NVIDIA's torch with one that
cannot use the GPU. A Jetson takes the wheels NVIDIA builds for its JetPack (L4T) release
(jetson.toml, SOURCES.md "Jetson"): an index (JetPack 6.1/6.2: pypi.jetson-ai-lab.io/jp6/cu126), a
wheel on developer.download.nvidia.com (JetPack 5.1), or the forum's list (older JetPacks). Thor
(JetPack 7, CUDA 13) runs the SBSA cu130 wheels, so the ordinary resolver plans it.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any, Optional

from envkit.errors import NoBuildError, WayOut
from envkit.knowledge import variant_cuda
from envkit.resolve.plan import Channel, CudaKind, Plan, Request
from envkit.resolve.target import is_jetson, jetson_gpus
from envkit.versions import ComputeCapability, parse_version

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.knowledge import Knowledge, Release
    from envkit.knowledge.vendors import JetPack
    from envkit.resolve.ext_pick import ExtensionPick
    from envkit.resolve.target import Target
    from envkit.versions import Version

__all__ = [
    "is_jetson_target",
    "jetpack_of",
    "jetpack_plan",
    "jetpack_way",
    "jetson_driver_note",
    "with_jetson_way",
]

FORUM = "https://forums.developer.nvidia.com/t/pytorch-for-jetson/72048"
DOCS = "docs.nvidia.com/deeplearning/frameworks/install-pytorch-jetson-platform/"


def jetpack_of(k: Knowledge, target: Target) -> Optional[JetPack]:
    """The JetPack the target runs: by its L4T release (/etc/nv_tegra_release), else by an L4T
    driver number (35.3.1 on JetPack 5), else by a JetPack driver version (540.4.0: JetPack 6)."""
    l4t = target.l4t
    driver = target.driver
    if l4t is None and driver is not None and is_jetson(driver):
        l4t = parse_version(str(driver))
    return k.vendors.jetpack_for(l4t, str(driver) if driver is not None else None)


def is_jetson_target(k: Knowledge, target: Target) -> bool:
    """A Jetson: a Jetson GPU on linux-aarch64, or a JetPack known from the L4T release or driver."""
    if target.platform != "linux-aarch64":
        return False
    return bool(jetson_gpus(k, target)) or jetpack_of(k, target) is not None


def _thor(k: Knowledge, target: Target) -> bool:
    gpus = jetson_gpus(k, target) or target.gpus
    return bool(gpus) and all(g.cc >= ComputeCapability(11, 0) for g in gpus)


def _variant(jp: JetPack) -> str:
    return f"cu{jp.cuda.major}{jp.cuda.minor}"


def jetpack_plan(k: Knowledge, target: Target, request: Request) -> Optional[Plan]:
    """The plan from NVIDIA's JetPack index for a Jetson before Thor; None where this route does not
    answer (not a Jetson, Thor, an unknown JetPack, a JetPack without an index, a request it cannot
    meet: the ordinary resolver then says why nothing fits, and jetpack_way what would)."""
    if not is_jetson_target(k, target) or _thor(k, target):
        return None
    jp = jetpack_of(k, target)
    if jp is None or jp.route != "index" or jp.index is None:
        return None
    cuda = request.cuda
    if request.channel is not Channel.PIP or request.prerelease is not None:
        return None
    if cuda.kind not in (CudaKind.AUTO, CudaKind.EXACT, CudaKind.MAJOR):
        return None
    if cuda.kind is CudaKind.EXACT and cuda.variant != _variant(jp):
        return None
    if cuda.kind is CudaKind.MAJOR and cuda.major != jp.cuda.major:
        return None
    if target.python is not None and target.python != jp.python:
        return None
    wanted = [t for t in jp.torch if request.torch is None or request.torch.contains(t, prereleases=True)]
    releases = [(t, k.release(t)) for t in sorted(wanted, reverse=True)]
    known = [(t, r) for t, r in releases if r is not None]
    if not known:
        return None
    gpus = ", ".join(g.label for g in jetson_gpus(k, target)) or "this Jetson"
    torch, release, picks = _with_extensions(jp, known, target, request, gpus)
    warnings = [
        (
            f"NVIDIA's JetPack {jp.jetpack} wheels ({jp.index}): built for Jetson GPUs with L4T's CUDA "
            f"{jp.cuda}; download.pytorch.org's and PyPI's aarch64 wheels are SBSA builds whose code does "
            f"not run on {gpus}: never `pip install torch` from PyPI here (it replaces NVIDIA's torch)"
        ),
        (
            f"torchvision {release.torchvision} and torchaudio {release.torchaudio} are the versions "
            f"released with torch {torch}; the JetPack index holds its own builds of them"
        ),
    ]
    return Plan(
        torch=torch,
        torchvision=release.torchvision,
        torchaudio=release.torchaudio,
        triton=None,
        variant=_variant(jp),
        cuda=variant_cuda(_variant(jp)),
        python=target.python or jp.python,
        channel=Channel.PIP,
        platform=target.platform,
        index_url=jp.index,
        conda=None,
        warnings=(
            *warnings,
            *(n for pick in picks for n in pick.plan_notes(" against the JetPack torch")),
            *target.assumed,
        ),
        rejected=(),
        target=target,
        jetpack=jp.jetpack,
        extensions=picks,
    )


_Fit = tuple["Version", "Release", tuple["ExtensionPick", ...]]


def _with_extensions(
    jp: JetPack,
    known: Sequence[tuple[Version, Optional[Release]]],
    target: Target,
    request: Request,
    gpus: str,
) -> tuple[Version, Release, tuple[ExtensionPick, ...]]:
    """The newest JetPack torch every ``--with`` extension fits (jetson_ext), with their picks;
    NoBuildError (exit 3) with one paragraph per extension where none does."""
    from envkit.resolve import jetson_ext

    if not request.extensions:
        torch, release = known[0]
        assert release is not None
        return torch, release, ()
    from envkit.resolve.ext_wheels import TorchBuild

    def fits(
        allow_build: bool,
    ) -> tuple[Optional[tuple[Version, Release, tuple[ExtensionPick, ...]]], list[Any]]:
        first: list[tuple[str, str, str]] = []
        for torch, release in known:
            assert release is not None
            build = TorchBuild(torch, _variant(jp), target.python or jp.python, target.platform, True)
            picks, failures = jetson_ext.jetson_picks(
                jp, build, target, request.extensions, allow_build=allow_build
            )
            if not failures:
                return (torch, release, picks), []
            first = first or failures
        return None, first

    found, failures = fits(request.allow_build)
    if found is not None:
        return found
    build_way = ""
    if not request.allow_build:
        built, _ = fits(True)
        if built is not None:
            names = ", ".join(f"{p.name} {p.version}" for p in built[2] if p.build is not None)
            build_way = (
                f"--allow-build (compiles {names} against the JetPack torch {built[0]}: nvcc of "
                f"JetPack's CUDA {jp.cuda}, TORCH_CUDA_ARCH_LIST for the Jetson's GPU)"
            )
    raise NoBuildError(
        jetson_ext.failure_text(f"{gpus} (JetPack {jp.jetpack})", failures, build_way),
        ways_out=jetson_ext.ways_out(failures, build_way),
    )


def jetpack_way(k: Knowledge, target: Target) -> WayOut:
    """What a Jetson runs instead of download.pytorch.org's SBSA wheels, as precisely as the
    JetPack is known."""
    jp = jetpack_of(k, target)
    if jp is None:
        return WayOut("jetson", f"NVIDIA's PyTorch wheels for Jetson (JetPack): {DOCS}")
    versions = ", ".join(str(t) for t in jp.torch)
    what = f"JetPack {jp.jetpack} (CUDA {jp.cuda}, Python {jp.python})"
    if jp.route == "index" and jp.index:
        text = f"{what}: NVIDIA's wheels (torch {versions}) from {jp.index}: {_command(target, jp.python)}"
    elif jp.route == "wheel" and jp.wheel:
        text = f"{what}: NVIDIA's torch wheel: pip install {jp.wheel} (torchvision: build it from source)"
    elif jp.route == "sbsa":
        text = f"{what}: download.pytorch.org's cu130 (SBSA) wheels run on Thor"
    else:
        text = f"{what}: NVIDIA's wheels (torch {versions}) listed on {FORUM}"
    return WayOut("jetson", text, value=jp.jetpack)


def _command(target: Target, python: object) -> str:
    """The resolve command for the JetPack's Python: for a target given by flags, the flags again (on
    another machine a bare command would plan for that machine)."""
    words = ["envkit", "resolve"]
    if target.described_by == "flags":
        words += ["--platform", target.platform]
        words += [w for g in target.gpus[:1] if g.name for w in ("--gpu", g.name)]
        if target.driver is not None:
            words += ["--driver", str(target.driver)]
        elif target.l4t is not None:
            words += ["--driver", str(target.l4t)]
    return " ".join(shlex.quote(w) for w in [*words, "--python", str(python)])


def jetson_driver_note(k: Knowledge, target: Target) -> Optional[str]:
    """driver.support's verdict on a Jetson's driver: the JetPack it is and what it runs."""
    jp = jetpack_of(k, target)
    if jp is None:
        return None
    versions = ", ".join(str(t) for t in jp.torch) or "SBSA cu130 wheels"
    where = jp.index or jp.wheel or (FORUM if jp.route == "forum" else "download.pytorch.org/whl/cu130")
    return f"JetPack {jp.jetpack} (CUDA {jp.cuda}): NVIDIA's JetPack torch ({versions}) from {where}"


def with_jetson_way(ways: tuple[WayOut, ...], k: Knowledge, target: Target) -> tuple[WayOut, ...]:
    """The resolver's ways out with its generic Jetson one replaced by the JetPack's own."""
    return tuple(jetpack_way(k, target) if w.rule == "jetson" else w for w in ways)
