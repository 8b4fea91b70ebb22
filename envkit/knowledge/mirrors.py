"""The mirror table, ``mirrors.toml``: package indexes and channel hosts, what each carries and its
caveats (each row cites its source). Data only: fetching and choosing are envkit.mirrors'.

A Mirror keeps credentials out of its fields: a ``user:token@`` in its URL is held aside (so reprs,
JSON and caches cannot leak it), and the ``url`` field shows ``***@``.
"""

from __future__ import annotations

import functools
import re
import urllib.parse
from dataclasses import dataclass
from typing import Final, Optional

from envkit._serial import StrEnum
from envkit.knowledge import VARIANT_PATTERN
from envkit.knowledge._table import KnowledgeError, Row, read_table, table_rows
from envkit.redact import redact

__all__ = [
    "KINDS",
    "LAYOUTS",
    "REGIONS",
    "VARIANT_FOLDER_RE",
    "Auth",
    "Layout",
    "Mirror",
    "MirrorKind",
    "Region",
    "load_mirrors",
    "split_credentials",
]


class MirrorKind(StrEnum):
    """What a mirror serves; mirrors.toml's ``kind``."""

    TORCH_WHEELS = "torch-wheels"  # download.pytorch.org/whl's variant folders (cu121/, cpu/, …)
    PYPI = "pypi"  # a PyPI index (its torch is the default CUDA build only)
    CONDA = "conda"  # conda channels


class Layout(StrEnum):
    """How the index is laid out; mirrors.toml's ``layout``."""

    PEP503 = "pep503"  # a project page per package (the simple repository API)
    FLAT = "flat"  # one folder of wheel links: pip's --find-links
    CONDA = "conda"  # {channel}/{subdir}/repodata.json


class Region(StrEnum):
    GLOBAL = "global"
    CN = "cn"


KINDS: Final = tuple(k.value for k in MirrorKind)
LAYOUTS: Final = tuple(x.value for x in Layout)
REGIONS: Final = tuple(r.value for r in Region)
_NAME_RE: Final = re.compile(r"^[a-z0-9][a-z0-9-]*$")
# The folders of download.pytorch.org/whl: cpu, cuXYZ, rocmX.Y, xpu, also under nightly/ and test/
# (pytorch/test-infra:s3_management/manage.py@61a77570f454, the PEP 503 pages it writes per folder).
VARIANT_FOLDER_RE: Final = re.compile(rf"^(?:(?:nightly|test)/)?{VARIANT_PATTERN}$")  # nightly/cu128 too

Auth = tuple[str, str]


def split_credentials(url: str) -> tuple[str, Optional[Auth]]:
    """``https://u:p@host/x`` -> (``https://host/x``, ("u", "p")); "***" (already redacted) is no login."""
    parts = urllib.parse.urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if not at:
        return url, None
    bare = urllib.parse.urlunsplit(parts._replace(netloc=hostport))
    if userinfo == "***":
        return bare, None
    user, _, password = userinfo.partition(":")
    return bare, (urllib.parse.unquote(user), urllib.parse.unquote(password))


@dataclass(frozen=True)
class Mirror:
    """One index or channel host. ``url`` never holds credentials: a given ``user:token@`` is kept
    outside the fields (so reprs, JSON and caches cannot leak it), and the field shows ``***@``."""

    name: str
    kind: MirrorKind
    url: str  # base URL without a trailing slash; see mirrors.toml for how each kind extends it
    layout: Layout
    variants: tuple[str, ...]  # torch-wheels: folders known to be carried, ("*",) = all
    channels: tuple[str, ...]  # conda: the channels mirrored
    caveats: str
    region: Region
    source: str

    def __post_init__(self) -> None:
        bare, auth = split_credentials(self.url)
        object.__setattr__(self, "url", redact(self.url).rstrip("/"))
        # Not a dataclass field on purpose: dataclasses.fields(), repr() and envkit._serial skip it.
        object.__setattr__(self, "_auth", auth)
        object.__setattr__(self, "_bare", bare.rstrip("/"))

    def carries(self, variant: str) -> bool:
        """Whether the table says this mirror has the variant folder (only torch-wheels mirrors
        are organised by variant; PyPI holds just the default CUDA build)."""
        return self.kind is not MirrorKind.TORCH_WHEELS or "*" in self.variants or variant in self.variants

    def url_with_credentials(self) -> str:
        """The base URL an installer needs, credentials included: pass it to a child process only,
        never to a screen, a log or a file."""
        auth: Optional[Auth] = getattr(self, "_auth", None)
        bare: str = getattr(self, "_bare", self.url)
        if auth is None:
            return bare
        parts = urllib.parse.urlsplit(bare)
        login = urllib.parse.quote(auth[0], safe="") + (
            ":" + urllib.parse.quote(auth[1], safe="") if auth[1] else ""
        )
        return urllib.parse.urlunsplit(parts._replace(netloc=f"{login}@{parts.netloc}"))


def _mirror(row: Row) -> Mirror:
    name = row.text("name")  # Row's label already names the row by it
    if not _NAME_RE.match(name):
        raise row.fail("name", "a short lower-case id like 'sjtu'")
    kind_text = row.text("kind")
    if kind_text not in KINDS:
        raise row.fail("kind", f"one of {', '.join(KINDS)}")
    kind = MirrorKind(kind_text)
    url = row.text("url")
    parts = urllib.parse.urlsplit(url)
    if (
        parts.scheme != "https"
        or not parts.hostname
        or "@" in parts.netloc
        or parts.query
        or url.endswith("/")
    ):
        raise row.fail("url", "an https URL without credentials, query or trailing slash")
    layout_text = row.text("layout")
    layout = Layout(layout_text) if layout_text in LAYOUTS else None
    if (
        layout is None
        or (layout is Layout.CONDA) != (kind is MirrorKind.CONDA)
        or (kind is MirrorKind.PYPI and layout is not Layout.PEP503)
    ):
        raise row.fail("layout", "pep503 or flat for torch-wheels, pep503 for pypi, conda for conda")
    variants = row.raw("variants", list, False)
    if not all(isinstance(v, str) and (v == "*" or VARIANT_FOLDER_RE.match(v)) for v in variants) or (
        bool(variants) != (kind is MirrorKind.TORCH_WHEELS)
    ):
        raise row.fail("variants", 'variant folders or ["*"] for torch-wheels, [] otherwise')
    channels = row.raw("channels", list, False)
    if not all(isinstance(c, str) and c for c in channels) or bool(channels) != (kind is MirrorKind.CONDA):
        raise row.fail("channels", "channel names for conda, [] otherwise")
    region = row.text("region")
    if region not in REGIONS:
        raise row.fail("region", f"one of {', '.join(REGIONS)}")
    return Mirror(
        name,
        kind,
        url,
        layout,
        tuple(variants),
        tuple(channels),
        row.text("caveats"),
        Region(region),
        row.source(),
    )


@functools.lru_cache(maxsize=1)
def load_mirrors() -> tuple[Mirror, ...]:
    """Read and validate mirrors.toml (once per process); a bad row raises KnowledgeError naming it."""
    mirrors = tuple(_mirror(r) for r in table_rows(read_table("mirrors"), "mirrors.toml", "mirror"))
    seen: set[str] = set()
    for m in mirrors:
        if m.name in seen:
            raise KnowledgeError(f"mirrors.toml: the name {m.name!r} is used twice")
        seen.add(m.name)
    if not mirrors:
        raise KnowledgeError("mirrors.toml: no [[mirror]] rows")
    return mirrors
