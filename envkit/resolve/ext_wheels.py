"""Which wheel of an extension release fits one torch build on one target, or why none does.

A torch build is a release and a variant (2.6.0 + cu124) with its C++ ABI; the target adds the
Python and the platform. A wheel set fits when its torch list names the release (``2.6``: any 2.6.x,
``2.6.0``: that one), its CUDA list the variant (``cu12*``: any CUDA 12 build), its ABI list the ABI,
and the Python and platform are among its own (for PyPI, one of the release's files has tags pip
accepts for them, the most specific first, as pip ranks them). The release's ``Requires-Dist`` on
torch must admit the release too: pip enforces it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Optional

from packaging import tags as pep425

from envkit.knowledge.extensions import ExtRelease, WheelSet
from envkit.versions import Version

if TYPE_CHECKING:
    from collections.abc import Callable

    from packaging.specifiers import SpecifierSet

    from envkit.knowledge.extensions import Extension, WheelFile

__all__ = ["TorchBuild", "WheelMatch", "describe_sets", "match_release", "platform_tags"]

# The platform tags pip accepts on each envkit platform, most specific first. glibc is taken to be
# 2.28 or newer on Linux (manylinux_2_28: every torch wheel from 2.7 on needs it).
_GLIBC_MAX: Final = 39
_MACOS: Final = {"macos-arm64": "arm64", "macos-x86_64": "x86_64"}
PLATFORM_TAG: Final = {
    "linux-x86_64": "linux_x86_64",
    "linux-aarch64": "linux_aarch64",
    "windows-x86_64": "win_amd64",
    "macos-arm64": "macosx_11_0_arm64",
    "macos-x86_64": "macosx_10_9_x86_64",
}


@dataclass(frozen=True)
class TorchBuild:
    torch: Version  # the public release, 2.6.0
    variant: str  # cu124, cpu
    python: Optional[Version]  # 3.11; None: not known (any wheel's Python is taken)
    platform: str
    cxx11_abi: bool


@dataclass(frozen=True)
class WheelMatch:
    """A fitting wheel: ``file`` (a PyPI file, with its URL and sha256), else the name and URL its
    wheel set's templates give; ``pin``: the version pip is asked for on a find-links page or index."""

    release: ExtRelease
    wheels: WheelSet
    name: Optional[str]
    url: Optional[str]
    sha256: Optional[str]
    index: Optional[str]  # the find-links page or the PEP 503 index pip is given
    pin: Optional[str]


@functools.lru_cache(maxsize=16)
def platform_tags(platform: str, python: Optional[Version]) -> tuple[str, ...]:
    """The tags pip accepts for CPython ``python`` on ``platform``, most specific first (pip's own
    ranking, packaging.tags); for an unknown Python, those of 3.8 … 3.15 (abi3 and py3 wheels)."""
    if platform.startswith("linux-"):
        arch = platform.split("-", 1)[1]
        plats = [f"manylinux_2_{n}_{arch}" for n in range(_GLIBC_MAX, 16, -1)]
        plats += [f"manylinux2014_{arch}", f"manylinux2010_{arch}", f"manylinux1_{arch}", f"linux_{arch}"]
    elif platform == "windows-x86_64":
        plats = ["win_amd64"]
    else:
        arch = _MACOS.get(platform, "arm64")
        first = 11 if arch == "arm64" else 10
        plats = [f"macosx_{m}_0_{arch}" for m in range(15, first - 1, -1)] + ["macosx_10_9_x86_64"] * (
            arch == "x86_64"
        )
        plats += [f"macosx_{m}_0_universal2" for m in range(15, 10, -1)]
    pythons = [(python.major, python.minor)] if python is not None else [(3, m) for m in range(15, 7, -1)]
    found: list[str] = []
    for version in pythons:
        found += [str(t) for t in pep425.cpython_tags(version, platforms=plats)]
        found += [str(t) for t in pep425.compatible_tags(version, platforms=plats)]
    return tuple(dict.fromkeys(found))


def _torch_ok(wheels: WheelSet, torch: Version) -> bool:
    if wheels.torch_range is not None and not wheels.torch_range.contains(torch, prereleases=True):
        return False
    if not wheels.torch:
        return True
    for entry in wheels.torch:
        if len(entry.release) == 2 and torch.release[:2] == entry.release:
            return True
        if len(entry.release) > 2 and Version(torch.base_version) == entry:
            return True
    return False


def _cuda_ok(wheels: WheelSet, variant: str) -> bool:
    if not wheels.cuda:
        return True
    return any(
        variant == c or (c.endswith("*") and variant.startswith(c[:-1]) and len(variant) == len(c))
        for c in wheels.cuda
    )


def _excluded(wheels: WheelSet, build: TorchBuild) -> bool:
    values = {
        "torch": f"{build.torch.major}.{build.torch.minor}",
        "python": str(build.python) if build.python is not None else "",
        "cuda": build.variant,
        "platform": build.platform,
    }
    return any(all(values.get(k) == v for k, v in rule) for rule in wheels.exclude)


def _admits(spec: Optional[SpecifierSet], torch: Version) -> bool:
    return spec is None or spec.contains(torch, prereleases=True)


def _best_file(release: ExtRelease, build: TorchBuild) -> Optional[WheelFile]:
    accepted = platform_tags(build.platform, build.python)
    rank = {tag: i for i, tag in enumerate(accepted)}
    best: Optional[tuple[int, WheelFile]] = None
    for file in release.files:
        if not file.tags or not _admits(file.requires_torch or release.requires_torch, build.torch):
            continue
        scores = [rank[t] for t in file.tags if t in rank]
        if scores and (best is None or min(scores) < best[0]):
            best = (min(scores), file)
    return best[1] if best else None


def _fill(template: str, release: ExtRelease, entry: Optional[Version], build: TorchBuild) -> str:
    minor = f"{build.torch.major}.{build.torch.minor}"
    torch = str(entry) if entry is not None and len(entry.release) > 2 else f"{minor}.0"
    py = f"{build.python.major}{build.python.minor}" if build.python is not None else ""
    cuda = build.variant[2:-1] if build.variant.startswith("cu") else ""
    return template.format(
        version=release.version,
        torch=torch,
        torch_minor=minor,
        torch_mm=minor.replace(".", ""),
        variant=build.variant,
        cuda_major=cuda,
        py=py,
        platform_tag=PLATFORM_TAG.get(build.platform, ""),
        abi="TRUE" if build.cxx11_abi else "FALSE",
    )


def _entry(wheels: WheelSet, torch: Version) -> Optional[Version]:
    return next((e for e in wheels.torch if _torch_ok(_only(wheels, e), torch)), None)


def _only(wheels: WheelSet, entry: Version) -> WheelSet:
    import dataclasses

    return dataclasses.replace(wheels, torch=(entry,))


def match_set(release: ExtRelease, wheels: WheelSet, build: TorchBuild) -> Optional[WheelMatch]:
    """The wheel of one set for ``build``, or None."""
    if build.platform not in wheels.platforms or not _torch_ok(wheels, build.torch):
        return None
    if not _cuda_ok(wheels, build.variant) or _excluded(wheels, build):
        return None
    if wheels.cxx11_abi and build.cxx11_abi not in wheels.cxx11_abi:
        return None
    if wheels.where == "sdist":
        sdist, python, wants = release.sdist, build.python, release.requires_python
        if sdist is None or (python is not None and wants is not None and not wants.contains(python)):
            return None
        return WheelMatch(release, wheels, sdist.name, sdist.url, sdist.sha256, None, None)
    if wheels.where == "pypi":
        file = _best_file(release, build)
        if file is None:
            return None
        return WheelMatch(release, wheels, file.name, file.url, file.sha256, None, None)
    if build.python is None or build.python not in wheels.python:
        return None
    entry = _entry(wheels, build.torch)
    url = _fill(wheels.url, release, entry, build)
    if wheels.where == "url":
        return WheelMatch(release, wheels, url.rsplit("/", 1)[-1], url, None, None, None)
    filled = _fill(wheels.file, release, entry, build)
    if wheels.where == "find-links":  # the page lists the file; pip is asked for its version
        return WheelMatch(release, wheels, filled, None, None, url, filled.split("-", 2)[1])
    return WheelMatch(release, wheels, None, None, None, url, filled)  # index: ``file`` is the pin


def match_release(release: ExtRelease, build: TorchBuild) -> Optional[WheelMatch]:
    """The release's wheel for ``build``: its Requires-Dist must admit the torch, then the first
    wheel set that fits (PyPI's before the others, as the table lists them)."""
    own = any(f.requires_torch is not None for f in release.files)
    if not own and not _admits(release.requires_torch, build.torch):
        return None
    for wheels in release.wheels:
        if wheels.where != "pypi" and not _admits(release.requires_torch, build.torch):
            continue
        found = match_set(release, wheels, build)
        if found is not None:
            return found
    return None


def _span(values: list[str]) -> str:
    return values[0] if len(values) == 1 else f"{values[0]}–{values[-1]}"


def describe_sets(release: ExtRelease) -> str:
    """What a release's prebuilt wheels cover, in a few words: "torch 2.4–2.8, cu12*, cp39–cp313,
    linux-x86_64"."""
    if not release.wheels:
        return "no prebuilt wheels"
    torches = sorted({t for w in release.wheels for t in w.torch})
    cudas = sorted({c for w in release.wheels for c in w.cuda})
    plats = sorted({p for w in release.wheels for p in w.platforms})
    pythons = sorted({p for w in release.wheels for p in w.python})
    parts = []
    if torches:
        parts.append(f"torch {_span([str(t) for t in torches])}")
    elif release.requires_torch:
        parts.append(f"torch{release.requires_torch}")
    if cudas:
        parts.append(", ".join(cudas))
    if pythons:
        parts.append(_span([f"cp{p.major}{p.minor}" for p in pythons]))
    parts.append(", ".join(plats))
    return "; ".join(parts)


def why_not(ext: Extension, release: ExtRelease, build: TorchBuild) -> str:
    """Why ``release`` has no wheel for ``build``, the first dimension that rules it out."""
    name = f"{ext.name} {release.version}"
    if release.requires_torch is not None and not release.requires_torch.contains(
        build.torch, prereleases=True
    ):
        return f"{name} requires torch{release.requires_torch}"
    if not release.wheels:
        return f"{name} publishes no prebuilt wheel ({ext.pypi} on PyPI)"
    sets = release.wheels
    checks: tuple[tuple[Callable[[WheelSet], bool], str], ...] = (
        (lambda w: build.platform in w.platforms, f"for {build.platform}"),
        (lambda w: _torch_ok(w, build.torch), f"for torch {build.torch.major}.{build.torch.minor}"),
        (lambda w: _cuda_ok(w, build.variant), f"for {build.variant} builds of torch"),
        (lambda w: not w.cxx11_abi or build.cxx11_abi in w.cxx11_abi, "with torch's C++ ABI"),
    )
    for ok, what in checks:
        if not any(ok(w) for w in sets):
            return f"{name} has no wheel {what} ({describe_sets(release)})"
        sets = tuple(w for w in sets if ok(w))
    py = f"Python {build.python}" if build.python is not None else "this Python"
    return f"{name} has no wheel for {py} on {build.platform} ({describe_sets(release)})"
