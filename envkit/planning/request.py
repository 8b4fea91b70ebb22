"""The request a command plans for: the flags' torch, CUDA, channel and extensions, checked against
what exists (a CUDA NVIDIA released, a variant torch published) and, for --nightly / --test, the
channel's pages read now."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final, Optional

from envkit.errors import InputError
from envkit.knowledge import load_knowledge, variant_cuda
from envkit.resolve import Request, parse_cuda_request, parse_torch_spec
from envkit.resolve.channels import ChannelIndex, PreChannel, variants_to_read
from envkit.resolve.extensions import parse_extensions
from envkit.resolve.plan import Channel, CudaKind, CudaRequest, PlanFlags
from envkit.versions import Version

if TYPE_CHECKING:
    from envkit.resolve.available import Available

__all__ = ["make_request"]


def make_request(flags: PlanFlags, *, available: Optional[Available] = None) -> Request:
    try:
        channel = Channel(flags.channel)
    except ValueError:
        raise InputError(f"--channel {flags.channel!r}: pip or conda") from None
    cuda = parse_cuda_request(flags.cuda)
    prerelease = None
    if flags.prerelease is not None:
        prerelease = _read_channel(flags, channel, cuda)
    if prerelease is None or cuda.kind is not CudaKind.EXACT or cuda.variant not in prerelease.variants:
        _check_cuda_exists(flags.cuda, cuda)
    extensions = parse_extensions(flags.extensions)
    if extensions and channel is Channel.CONDA:
        raise InputError(
            "--with installs extensions with pip: the conda route has no pip step for them",
            hint="use --channel pip (or spec --format conda --pip-in-conda)",
        )
    if flags.allow_build and not extensions:
        raise InputError("--allow-build applies to extensions (--with NAME): give one")
    return Request(
        torch=parse_torch_spec(flags.torch) if flags.torch else None,
        cuda=cuda,
        channel=channel,
        available=available,
        extensions=extensions,
        allow_build=flags.allow_build,
        prerelease=prerelease,
    )


def _read_channel(flags: PlanFlags, channel: Channel, cuda: CudaRequest) -> ChannelIndex:
    """--nightly / --test: the channel's pages, read now (they change every day)."""
    import os

    from envkit.mirrors.simple_index import index_base, read_channel

    try:
        chosen = PreChannel(flags.prerelease)
    except ValueError:
        raise InputError(f"{flags.prerelease!r}: the channels are nightly and test") from None
    if channel is Channel.CONDA:
        raise InputError(
            f"--{chosen.value} builds are pip wheels (download.pytorch.org/whl/{chosen.value}); "
            "conda has no such channel any more",
            hint="use --channel pip, or spec --format conda --pip-in-conda",
        )
    k = load_knowledge()
    exact = str(cuda.variant) if cuda.kind is CudaKind.EXACT else "cpu" if cuda.kind is CudaKind.CPU else None
    variants = variants_to_read(k, flags.platform, exact)
    base = index_base(os.environ)
    # One read per run (lock plans each platform with its own request), fresh after ten minutes.
    key = (chosen, base, tuple(variants), int(time.monotonic() // CHANNEL_FRESH_S))
    if key not in _CHANNEL_READS:
        _CHANNEL_READS.clear()
        _CHANNEL_READS[key] = read_channel(k, chosen, variants, base=base)
    return _CHANNEL_READS[key]


CHANNEL_FRESH_S: Final = 600.0
_CHANNEL_READS: dict[tuple[PreChannel, str, tuple[str, ...], int], ChannelIndex] = {}


def _check_cuda_exists(text: str, cuda: CudaRequest) -> None:
    """``--cuda 99.9`` names no CUDA that exists: an input error, not "no build". The knowledge
    base holds every CUDA toolkit NVIDIA released from 9.0 on (NVIDIA's Table 3), and every
    variant torch published."""
    k = load_knowledge()
    known = sorted({tk.cuda for tk in k.toolkits.values()})
    if cuda.kind is CudaKind.MAJOR and cuda.major not in k.families:
        majors = ", ".join(str(m) for m in sorted(k.families))
        newer = cuda.major is not None and cuda.major > max(k.families)
        what = "there is no CUDA" if newer else "no torch build envkit knows is for CUDA"
        raise InputError(f"--cuda {text!r}: {what} {cuda.major} (CUDA majors envkit knows: {majors})")
    if cuda.kind is CudaKind.EXACT and not str(cuda.variant).startswith("cu"):
        _check_variant_published(text, str(cuda.variant))
        return
    if cuda.kind is not CudaKind.EXACT:
        return
    version = variant_cuda(str(cuda.variant))
    published = any(cuda.variant in vs for r in k.releases for vs in r.variants.values())
    if version is None or published or k.toolkit(version) is not None:
        return
    span = f"{known[0]} … {known[-1]}"
    raise InputError(
        f"--cuda {text!r}: no CUDA {version} exists (the CUDA toolkits envkit knows: {span})",
        hint="give a released CUDA version, e.g. --cuda 12.8, a major (--cuda 12), or --cuda auto",
    )


def _check_variant_published(text: str, variant: str) -> None:
    """``--cuda rocm9.9`` names no wheel folder any release has: an input error naming those that
    exist (the ROCm variants of the knowledge base, each a download.pytorch.org/whl folder)."""
    k = load_knowledge()
    published = {v for r in k.releases for vs in r.variants.values() for v in vs}
    if variant in published:
        return
    rocm = sorted((v for v in published if v.startswith("rocm")), key=lambda v: Version(v[4:]))
    raise InputError(
        f"--cuda {text!r}: no torch release has {variant} wheels (ROCm variants envkit knows: "
        f"{', '.join(rocm[-6:])}, …)",
        hint="give a published variant, e.g. --cuda rocm6.4, or --cuda rocm for the newest that fits",
    )
