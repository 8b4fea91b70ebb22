"""The torch builds a local source actually holds (``create --wheelhouse DIR`` / ``--offline``): the
resolver plans only among them (``Request.available``), so a plan never names a wheel pip cannot find.

A wheel's name says what it is (PEP 427 / the binary distribution format spec,
packaging.python.org/en/latest/specifications/binary-distribution-format/): the version with its
local label (``2.13.0+cpu``, ``2.5.1+cu121``; none on PyPI's own wheels) and its tags (``cp311``,
``manylinux_2_28_x86_64``). It is read with packaging.utils.parse_wheel_filename, never opened.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from envkit.versions import Version

if TYPE_CHECKING:
    from pathlib import Path

    from envkit.knowledge import Release

__all__ = ["Available", "LocalBuild", "read_wheelhouse"]


@dataclass(frozen=True)
class LocalBuild:
    """One torch wheel a local source holds."""

    torch: Version  # the public version, 2.13.0
    variant: Optional[str]  # its local label (cpu, cu121); None: PyPI's own build of the platform
    pythons: tuple[Version, ...]  # the CPython minors its tags name (empty: any, e.g. py3-none)
    platforms: tuple[str, ...]  # envkit platforms its tags name (empty: any)
    file: str

    def variant_on(self, release: Release, platform: str) -> Optional[str]:
        """The build this wheel is on ``platform`` (a wheel without a label is PyPI's default)."""
        return self.variant if self.variant is not None else release.pypi_variant(platform)

    def runs_on(self, platform: str, python: Optional[Version]) -> bool:
        if self.platforms and platform not in self.platforms:
            return False
        return python is None or not self.pythons or python in self.pythons

    def label(self) -> str:
        variant = f"+{self.variant}" if self.variant else ""
        tags = [f"cp{p.major}{p.minor}" for p in self.pythons] + list(self.platforms)
        return f"{self.torch}{variant}" + (f" ({', '.join(tags)})" if tags else "")


@dataclass(frozen=True)
class Available:
    """The restriction: only these builds, found in ``where`` (a wheelhouse folder)."""

    where: str  # "the wheelhouse /opt/wheels"
    builds: tuple[LocalBuild, ...]

    def describe(self) -> str:
        if not self.builds:
            return f"{self.where} holds no torch wheel"
        return f"{self.where} holds torch " + ", ".join(b.label() for b in self.builds)


# A wheel's platform tag to envkit's platforms (PEP 600 manylinux, PEP 656 musllinux, macosx_*,
# win_*: packaging.python.org/en/latest/specifications/platform-compatibility-tags/).
_PLATFORM_TAGS = (
    (re.compile(r"^(many|musl)?linux(_\d+)*_x86_64$"), "linux-x86_64"),
    (re.compile(r"^(many|musl)?linux(_\d+)*_aarch64$"), "linux-aarch64"),
    (re.compile(r"^manylinux\d+_x86_64$"), "linux-x86_64"),
    (re.compile(r"^manylinux\d+_aarch64$"), "linux-aarch64"),
    (re.compile(r"^win_amd64$"), "windows-x86_64"),
    (re.compile(r"^macosx_\d+_\d+_(arm64|universal2)$"), "macos-arm64"),
    (re.compile(r"^macosx_\d+_\d+_(x86_64|universal2|intel)$"), "macos-x86_64"),
)


def _platforms(tag: str) -> set[str]:
    return {plat for pattern, plat in _PLATFORM_TAGS if pattern.match(tag)}


def _build(path: Path) -> Optional[LocalBuild]:
    try:
        name, version, _build_tag, tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename:
        return None
    if name != "torch":
        return None
    pythons: set[Version] = set()
    platforms: set[str] = set()
    for tag in tags:
        match = re.fullmatch(r"cp(\d)(\d+)", tag.interpreter)
        if match:
            pythons.add(Version(f"{match.group(1)}.{match.group(2)}"))
        if tag.platform != "any":
            platforms |= _platforms(tag.platform)
    return LocalBuild(
        torch=Version(version.public),
        variant=version.local or None,
        pythons=tuple(sorted(pythons)),
        platforms=tuple(sorted(platforms)),
        file=path.name,
    )


def read_wheelhouse(folder: Path) -> Available:
    """The torch wheels directly in ``folder`` (pip's --find-links reads one folder, not a tree)."""
    builds = [b for p in sorted(folder.iterdir()) if p.suffix == ".whl" for b in [_build(p)] if b is not None]
    builds.sort(key=lambda b: (b.torch, b.variant or ""), reverse=True)
    return Available(f"the wheelhouse {folder}", tuple(builds))
