"""The nightly and test channels (``--nightly`` / ``--pre``, ``--test``): builds no table holds.

download.pytorch.org publishes, beside the releases, ``whl/nightly/<variant>/`` (a build of main
every day, versioned ``2.16.0.dev20260301``) and ``whl/test/<variant>/`` (the release candidates,
versioned as the release they precede) — pytorch/test-infra:s3_management/manage.py@b5a68e760d13
(PREFIXES "whl/nightly", "whl/test"; each variant folder holds one PEP 503 page per project,
``<prefix>/<variant>/<project>/index.html``; a nightly page keeps the newest 60 versions of each
project, KEEP_THRESHOLD). They change every day, so they are read (envkit.mirrors.simple_index),
never tabled: this module turns the wheels those pages list into Releases the resolver judges by
the same rules as the tabled ones.

What the pages do not say is taken from the knowledge base, and the plan says so: a nightly's
compiled NVIDIA architectures are taken to be those of the newest release's wheel of the same
variant; its ROCm gfx targets are main's PYTORCH_ROCM_ARCH (amd.toml [[rocm_nightly]]).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Optional

from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from envkit._serial import StrEnum
from envkit.knowledge import PLATFORMS, ArchRow, Knowledge, Release, variant_cuda
from envkit.knowledge.vendors import RocmArch
from envkit.versions import Version

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "COMPANIONS",
    "ChannelIndex",
    "IndexWheel",
    "PreChannel",
    "channel_index",
    "variants_to_read",
    "wheel_of",
]

COMPANIONS: Final = ("torch", "torchvision", "torchaudio")


class PreChannel(StrEnum):
    NIGHTLY = "nightly"
    TEST = "test"


@dataclass(frozen=True)
class IndexWheel:
    """One wheel a PEP 503 page links: its project and version, and the (Python, platform) pairs
    its tags install on (None: any Python, any platform)."""

    project: str
    version: Version
    installs_on: tuple[tuple[Optional[Version], Optional[str]], ...]
    filename: str


# Wheel platform tags -> envkit platforms (PEP 600 manylinux_X_Y_arch, the legacy manylinux2014 and
# linux_arch tags download.pytorch.org's older wheels carry, win_amd64, macosx_X_Y_arch).
_PLATFORM_TAGS: Final = (
    (re.compile(r"^(?:many)?linux(?:\d+|_\d+_\d+)?_x86_64$"), "linux-x86_64"),
    (re.compile(r"^(?:many)?linux(?:\d+|_\d+_\d+)?_aarch64$"), "linux-aarch64"),
    (re.compile(r"^win_amd64$"), "windows-x86_64"),
    (re.compile(r"^macosx_\d+_\d+_(?:arm64|universal2)$"), "macos-arm64"),
    (re.compile(r"^macosx_\d+_\d+_(?:x86_64|intel|universal2)$"), "macos-x86_64"),
)


def _platforms(tag: str) -> list[Optional[str]]:
    if tag == "any":
        return [None]
    return [plat for pattern, plat in _PLATFORM_TAGS if pattern.match(tag)]


def wheel_of(filename: str) -> Optional[IndexWheel]:
    """The wheel a file name describes; None for what is no wheel, a free-threaded (``cp313t``)
    build, or a name packaging cannot parse."""
    try:
        name, version, _build, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, ValueError):
        return None
    pairs: set[tuple[Optional[Version], Optional[str]]] = set()
    for tag in tags:
        if tag.abi.endswith("t"):  # cp313t: the free-threaded interpreter, not the one envkit plans for
            continue
        m = re.fullmatch(r"cp3(\d+)", tag.interpreter)
        python = Version(f"3.{m.group(1)}") if m else None
        if python is None and not tag.interpreter.startswith("py3"):
            continue
        pairs.update((python, plat) for plat in _platforms(tag.platform))
    if not pairs:
        return None
    return IndexWheel(canonicalize_name(name), Version(str(version)), tuple(sorted(pairs, key=str)), filename)


@dataclass(frozen=True, eq=False)
class ChannelIndex:
    """What a channel's pages hold, as Releases (one per variant: its newest build with companions
    of the same date) with the architecture rows taken for them. Compared and hashed by identity:
    it is part of the resolver's Request, and one read is one answer."""

    channel: PreChannel
    base: str  # https://download.pytorch.org/whl
    releases: tuple[Release, ...]  # newest first
    arch: tuple[ArchRow, ...] = ()
    rocm: tuple[RocmArch, ...] = ()
    # Per variant: where its architectures were taken from, for the plan's warning.
    taken: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    # knowledge()'s answers: one Knowledge per base one, so that the resolver's memo recognises it.
    _made: dict[int, tuple[Knowledge, Knowledge]] = dataclasses.field(default_factory=dict, repr=False)

    def index_url(self, variant: str) -> str:
        return f"{self.base}/{self.channel.value}/{variant}"

    @property
    def variants(self) -> frozenset[str]:
        return frozenset(v for r in self.releases for vs in r.variants.values() for v in vs)

    def knowledge(self, k: Knowledge) -> Knowledge:
        """The knowledge base with the channel's builds in place of the releases."""
        if k.releases is self.releases:  # already this channel's
            return k
        made = self._made.get(id(k))
        if made is None or made[0] is not k:
            vendors = dataclasses.replace(k.vendors, rocm_arch=self.rocm + k.vendors.rocm_arch)
            view = dataclasses.replace(k, releases=self.releases, arch=self.arch + k.arch, vendors=vendors)
            made = self._made[id(k)] = (k, view)
        return made[1]

    def warnings(self, release: Release, variant: str) -> list[str]:
        """What a plan from this channel says: not a release, what it is, what was taken for granted."""
        if self.channel is PreChannel.NIGHTLY:
            when = f" of {release.date}" if release.date else ""
            out = [
                (
                    f"torch {release.torch} is a nightly build{when} from {self.index_url(variant)}: not a "
                    "release; the channel changes every day (torchvision and torchaudio are of the same day)"
                )
            ]
        else:
            out = [
                (
                    f"torch {release.torch} from {self.index_url(variant)} is a release candidate (the test "
                    "channel), not the release: the release's wheels may differ"
                )
            ]
        out += [why for v, why in self.taken if v == variant]
        return out


def variants_to_read(
    k: Knowledge, platform: Optional[str], exact: Optional[str] = None, *, releases: int = 2
) -> list[str]:
    """The variant folders worth reading: ``exact`` alone when --cuda names one; else the newest
    releases' variants (on ``platform``, else anywhere), main's ROCm variants, the next two CUDA
    minors after the newest CUDA variant (a nightly often has one no release has), and cpu."""
    if exact:
        return [exact]
    found: dict[str, None] = {}
    for release in k.releases[:releases]:
        for plat, variants in release.variants.items():
            if platform is None or plat == platform:
                found.update(dict.fromkeys(variants))
    nightly = k.vendors.nightly_rocm_row()
    if nightly is not None and platform in (None, "linux-x86_64"):
        found.update(dict.fromkeys(nightly.variants))
    cudas = sorted((c, v) for v in found if (c := variant_cuda(v)) is not None)
    if cudas:
        newest = cudas[-1][0]
        for step in (1, 2):
            found[f"cu{newest.major}{newest.minor + step}"] = None
    found["cpu"] = None
    return list(found)


def _by_version(wheels: Iterable[IndexWheel]) -> dict[Version, set[tuple[Optional[Version], Optional[str]]]]:
    out: dict[Version, set[tuple[Optional[Version], Optional[str]]]] = {}
    for w in wheels:
        out.setdefault(Version(w.version.public), set()).update(w.installs_on)
    return out


def _on(pairs: set[tuple[Optional[Version], Optional[str]]], platform: str) -> set[Optional[Version]]:
    return {py for py, plat in pairs if plat in (platform, None)}


def _companion(
    channel: PreChannel,
    torch: Version,
    versions: Mapping[Version, set[tuple[Optional[Version], Optional[str]]]],
) -> Optional[Version]:
    """The companion build of ``torch``: of the same date on the nightly channel (each night builds
    all three from main); on the test channel, its newest candidate."""
    if channel is PreChannel.NIGHTLY:
        same = [v for v in versions if v.dev is not None and v.dev == torch.dev]
        return max(same) if same else None
    return max(versions) if versions else None


def _release(
    channel: PreChannel, base: str, variant: str, pages: Mapping[str, Sequence[IndexWheel]]
) -> tuple[Optional[Release], list[str]]:
    """The newest torch on the variant's page whose companions have wheels beside it, and what was
    passed over on the way (a night whose torchvision did not build); or why none."""
    torches = _by_version(pages.get("torch", ()))
    others = {p: _by_version(pages.get(p, ())) for p in COMPANIONS[1:]}
    if not torches:
        return None, [f"{base}/{channel.value}/{variant}/torch/ lists no torch wheel"]
    skipped: list[str] = []
    for torch in sorted(torches, reverse=True):
        picked = {p: _companion(channel, torch, others[p]) for p in COMPANIONS[1:]}
        lacking = [p for p, v in picked.items() if v is None]
        if lacking:
            if len(skipped) < 3:
                skipped.append(f"torch {torch}+{variant} passed over: no {' or '.join(lacking)} of its date")
            continue
        per_platform: dict[str, tuple[Version, ...]] = {}
        for plat in PLATFORMS:
            pythons = _on(torches[torch], plat)
            for p, v in picked.items():
                assert v is not None
                theirs = _on(others[p][v], plat)
                if None not in theirs:  # a py3-none wheel installs beside any Python
                    pythons &= theirs
            real = sorted(py for py in pythons if py is not None)
            if real:
                per_platform[plat] = tuple(real)
        if not per_platform:
            continue
        vision, audio = picked["torchvision"], picked["torchaudio"]
        assert vision is not None
        assert audio is not None
        date = str(torch.dev) if torch.dev is not None else None
        release = Release(
            torch=torch,
            python=tuple(sorted({py for pys in per_platform.values() for py in pys})),
            torchvision=vision,
            torchaudio=audio,
            triton=None,  # torch's own requirement pulls pytorch-triton from the same index
            pypi_default="",
            variants=dict.fromkeys(per_platform, (variant,)),
            unlisted=(),
            conda_pytorch_cuda=(),
            date=f"{date[:4]}-{date[4:6]}-{date[6:]}" if date and len(date) == 8 else date,
            source=f"{base}/{channel.value}/{variant}/ (read by envkit)",
            python_platform=per_platform,
            pypi_default_aarch64="",
        )
        return release, skipped
    return None, [
        f"{channel.value} {variant}: no torch build on {base}/{channel.value}/{variant}/ has "
        + ("torchvision and torchaudio of the same date" if channel is PreChannel.NIGHTLY else "companions")
    ]


def _arch_rows(k: Knowledge, release: Release, variant: str) -> tuple[list[ArchRow], Optional[str]]:
    """A CUDA build's architectures, taken from the newest tabled release's wheel of the variant."""
    rows: list[ArchRow] = []
    origin = None
    for plat in release.variants:
        for tabled in k.releases:
            row = k.arch_for(tabled, variant, plat)
            if row is not None:
                rows.append(dataclasses.replace(row, torch=SpecifierSet(f"=={release.torch}")))
                origin = origin or str(tabled.torch)
                break
    if origin is None:
        return [], None
    why = (
        f"the {variant} build's GPU architectures are taken to be those of torch {origin}'s {variant} "
        "wheels (the channel's own list is not in envkit's tables)"
    )
    return rows, why


def _rocm_row(k: Knowledge, release: Release, variant: str) -> tuple[Optional[RocmArch], Optional[str]]:
    nightly = k.vendors.nightly_rocm_row()
    pin = SpecifierSet(f"=={release.torch}")
    if nightly is not None and variant in nightly.variants:
        why = f"the {variant} build's gfx targets are taken to be main's PYTORCH_ROCM_ARCH ({nightly.source})"
        return dataclasses.replace(nightly, torch=pin), why
    for tabled in k.releases:
        row = k.vendors.rocm_row(tabled.torch, variant)
        if row is not None:
            why = (
                f"the {variant} build's gfx targets are taken to be torch {tabled.torch}'s {variant} wheels'"
            )
            return dataclasses.replace(row, torch=pin), why
    return None, None


def channel_index(
    k: Knowledge,
    channel: PreChannel,
    base: str,
    pages: Mapping[str, Mapping[str, Sequence[IndexWheel]]],
    notes: Sequence[str] = (),
) -> ChannelIndex:
    """The channel's builds from its pages: ``pages[variant][project]``, the wheels each lists (a
    variant without a torch page is not on the channel)."""
    releases: list[Release] = []
    arch: list[ArchRow] = []
    rocm: list[RocmArch] = []
    taken: list[tuple[str, str]] = []
    said = list(notes)
    for variant, projects in pages.items():
        release, why = _release(channel, base, variant, projects)
        if release is None:
            if projects.get("torch"):
                said += why
            continue
        said += why
        releases.append(release)
        if variant_cuda(variant) is not None:
            rows, origin = _arch_rows(k, release, variant)
            arch += rows
        elif variant.startswith("rocm"):
            row, origin = _rocm_row(k, release, variant)
            if row is not None:
                rocm.append(row)
        else:
            origin = None
        if origin:
            taken.append((variant, origin))
    newest_first = tuple(sorted(releases, key=lambda r: r.torch, reverse=True))
    return ChannelIndex(channel, base, newest_first, tuple(arch), tuple(rocm), tuple(taken), tuple(said))
