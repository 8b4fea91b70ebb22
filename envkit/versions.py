"""Version values: parsed once at the edge, compared as versions everywhere after.

String comparison of versions is a known bug source in this field (light-the-torch #36: "0.9" sorted
above "0.20"), so nothing in envkit compares version strings.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

__all__ = [
    "ComputeCapability",
    "NvVersion",
    "Version",
    "cuda_from_int",
    "parse_compute_capability",
    "parse_spec",
    "parse_version",
]


class NvVersion(Version):
    """A version that prints as NVIDIA wrote it: ``535.104.05`` stays ``535.104.05``.

    PEP 440 normalises ``535.104.05`` to ``535.104.5``; the order is the same, but users search
    release notes for the zero-padded text, so that is what envkit shows and saves.

    >>> NvVersion("535.104.05") > Version("535.86.10"), str(NvVersion("535.104.05"))
    (True, '535.104.05')
    """

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._text = text.strip()

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"<NvVersion('{self._text}')>"


def parse_version(text: str) -> Version | None:
    """Parse ``text`` as a version; ``None`` when it is not one (never raises).

    >>> parse_version("12.1"), parse_version("n/a")
    (<Version('12.1')>, None)
    """
    try:
        return Version(text.strip())
    except (InvalidVersion, TypeError):
        return None


def cuda_from_int(value: int) -> Version:
    """Turn the CUDA driver API's integer form into a version: 12080 -> 12.8.

    >>> cuda_from_int(12080), cuda_from_int(11040)
    (<Version('12.8')>, <Version('11.4')>)
    """
    return Version(f"{value // 1000}.{(value % 1000) // 10}")


class ComputeCapability(NamedTuple):
    """A GPU's CUDA compute capability, e.g. 9.0 for H100/H200 (``sm_90``)."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def sm(self) -> str:
        """The architecture name used in arch lists: ``sm_90``."""
        return f"sm_{self.major}{self.minor}"


_CC_DOTTED = re.compile(r"^\s*(\d+)\.(\d+)\s*$")
_CC_PACKED = re.compile(r"^\s*(?:sm_|compute_)?(\d+?)(\d)[a-z]?\s*$")


def parse_compute_capability(text: str) -> ComputeCapability | None:
    """Parse ``9.0``, ``sm_90``, ``sm_120``, ``sm_90a`` or ``compute_86``; ``None`` otherwise.

    >>> parse_compute_capability("8.6"), parse_compute_capability("sm_120")
    (ComputeCapability(major=8, minor=6), ComputeCapability(major=12, minor=0))
    """
    match = _CC_DOTTED.match(text) or _CC_PACKED.match(text)
    if match is None:
        return None
    return ComputeCapability(int(match.group(1)), int(match.group(2)))


_BARE_VERSION = re.compile(r"^\d+(\.\d+)*(\.\*|\+[\w.]+)?$")


def parse_spec(text: str) -> SpecifierSet | None:
    """A PEP 440 specifier, where a bare version means ``==`` (``2.5.1``, ``2.5.*``, ``2.5.1+cu121``);
    ``None`` when it is neither.

    >>> parse_spec("2.5.*"), parse_spec(">=2.4,<2.6"), parse_spec("two")
    (<SpecifierSet('==2.5.*')>, <SpecifierSet('<2.6,>=2.4')>, None)
    """
    value = text.strip()
    if _BARE_VERSION.match(value):
        value = f"=={value}"
    try:
        return SpecifierSet(value)
    except InvalidSpecifier:
        return None
