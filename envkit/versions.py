"""Version values: parsed once at the edge, compared as versions everywhere after.

String comparison of versions is a known bug source in this field (light-the-torch #36: "0.9" sorted
above "0.20"), so nothing in envkit compares version strings.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

__all__ = [
    "MAX_VERSION_CHARS",
    "ComputeCapability",
    "NvVersion",
    "Version",
    "cuda_from_int",
    "parse_compute_capability",
    "parse_spec",
    "parse_version",
    "spec_fits",
]

# The longest version text envkit parses. Real ones are short (``2.5.1+cu121``, ``535.104.05``); a
# version of thousands of digits would reach int()'s limit inside packaging (Python 3.11's
# sys.get_int_max_str_digits(), 4300 digits: a ValueError that is not an InvalidVersion) and is
# never a real version, so anything longer than this is "not a version".
MAX_VERSION_CHARS: Final = 128


def _too_long(text: str) -> InvalidVersion:
    return InvalidVersion(f"{text[:20]!r}...: longer than {MAX_VERSION_CHARS} characters; not a version")


class NvVersion(Version):
    """A version that prints as NVIDIA wrote it: ``535.104.05`` stays ``535.104.05``.

    PEP 440 normalises ``535.104.05`` to ``535.104.5``; the order is the same, but users search
    release notes for the zero-padded text, so that is what envkit shows and saves.

    >>> NvVersion("535.104.05") > Version("535.86.10"), str(NvVersion("535.104.05"))
    (True, '535.104.05')
    """

    def __init__(self, text: str) -> None:
        if len(text) > MAX_VERSION_CHARS:
            raise _too_long(text)
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
    if not isinstance(text, str) or len(text) > MAX_VERSION_CHARS:
        return None
    try:
        return Version(text.strip())
    except ValueError:  # InvalidVersion is one
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
    if len(text) > 16:  # int() of a thousand-digit "capability" would be slow or raise
        return None
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
        spec = SpecifierSet(value)
    except InvalidSpecifier:
        return None
    return spec if spec_fits(spec) else None


def spec_fits(spec: SpecifierSet) -> bool:
    """Whether every version in ``spec`` is short enough to parse (MAX_VERSION_CHARS): packaging
    parses them only when the spec is used, where a ValueError would be a surprise.

    >>> spec_fits(SpecifierSet(">=2.4,<2.6")), spec_fits(SpecifierSet("==" + "1" * 5000))
    (True, False)
    """
    return all(len(s.version) <= MAX_VERSION_CHARS for s in spec)
