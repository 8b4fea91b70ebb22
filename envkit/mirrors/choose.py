"""Package indexes and their mirrors: which ones serve the wheels a plan needs, and which is fastest.

The table is ``knowledge/mirrors.toml`` (compat-data §5). To prove a mirror, envkit fetches the page an
installer would read and finds a wheel of the package on it: the PEP 503 project page
``{url}/{variant}/torch/``, or for a flat listing the folder ``{url}/{variant}/``. A 200 alone proves
nothing. NJU keeps only the getting-started variants up to date, and SJTU passes what it lacks through
to upstream (compat-data §5c).

The fetching itself (a timeout per request, one deadline for all, credentials sent as basic auth
and never shown) is envkit.mirrors.http's; a Mirror keeps credentials out of its fields.
"""

from __future__ import annotations

import functools
import re
import time
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Optional, Union

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envkit._serial import to_jsonable
from envkit.errors import InputError
from envkit.knowledge import VARIANT_PATTERN, KnowledgeError, Row, is_variant, read_table, table_rows
from envkit.mirrors.cache import cache_key, default_cache_path, read_cache, write_cache
from envkit.mirrors.http import Auth, FetchJob, ProbeResult, run_jobs, split_credentials
from envkit.redact import redact

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

__all__ = [
    "Choice",
    "Mirror",
    "ProbeResult",
    "Skip",
    "choose",
    "default_cache_path",
    "load_mirrors",
    "mirror_table",
    "needed_page",
    "pip_args",
    "probe",
    "redact",
    "resolve_mirror",
]

KINDS: Final = ("torch-wheels", "pypi", "conda")
LAYOUTS: Final = ("pep503", "flat", "conda")
REGIONS: Final = ("global", "cn")
DEFAULT_TIMEOUT_S: Final = 2.0
DEFAULT_MAX_AGE_S: Final = 24 * 3600.0
MIRRORS_SCHEMA: Final = "envkit.mirrors/1"
_NAME_RE: Final = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_PACKAGE_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# The folders of download.pytorch.org/whl (compat-data §5c): cpu, cuXYZ, rocmX.Y, xpu, also under
# nightly/ and test/.
_VARIANT_RE: Final = re.compile(rf"^(?:(?:nightly|test)/)?{VARIANT_PATTERN}$")  # nightly/cu128 too


@dataclass(frozen=True)
class Mirror:
    """One index or channel host. ``url`` never holds credentials: a given ``user:token@`` is kept
    outside the fields (so reprs, JSON and caches cannot leak it), and the field shows ``***@``."""

    name: str
    kind: str  # one of KINDS
    url: str  # base URL without a trailing slash; see mirrors.toml for how each kind extends it
    layout: str  # one of LAYOUTS
    variants: tuple[str, ...]  # torch-wheels: folders known to be carried, ("*",) = all
    channels: tuple[str, ...]  # conda: the channels mirrored
    caveats: str
    region: str
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
        return self.kind != "torch-wheels" or "*" in self.variants or variant in self.variants

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


@dataclass(frozen=True)
class Skip:
    """A candidate that was not chosen, and why."""

    mirror: str
    url: str
    reason: str


@dataclass(frozen=True)
class Choice:
    """The mirror to install from. ``how``: "named" (--mirror NAME), "url" (--mirror URL), "probed"
    (auto, fastest that serves the page) or "cached" (auto, an earlier probe still fresh)."""

    mirror: Mirror
    variant: str
    how: str
    page: str  # the page that proves it (redacted)
    elapsed_s: Optional[float] = None  # how long that page took, when probed
    checked_at: Optional[float] = None  # time.time() of the probe
    skipped: tuple[Skip, ...] = ()
    results: tuple[ProbeResult, ...] = ()  # this call's probes (none when named or cached)


# The table ---------------------------------------------------------------------------------------


def _mirror(row: Row) -> Mirror:
    name = row.text("name")
    row.where += f" ({name})"
    if not _NAME_RE.match(name):
        raise row.fail("name", "a short lower-case id like 'sjtu'")
    kind = row.text("kind")
    if kind not in KINDS:
        raise row.fail("kind", f"one of {', '.join(KINDS)}")
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
    layout = row.text("layout")
    if (
        layout not in LAYOUTS
        or (layout == "conda") != (kind == "conda")
        or (kind == "pypi" and layout != "pep503")
    ):
        raise row.fail("layout", "pep503 or flat for torch-wheels, pep503 for pypi, conda for conda")
    variants = row.raw("variants", list, False)
    if not all(isinstance(v, str) and (v == "*" or _VARIANT_RE.match(v)) for v in variants) or (
        bool(variants) != (kind == "torch-wheels")
    ):
        raise row.fail("variants", 'variant folders or ["*"] for torch-wheels, [] otherwise')
    channels = row.raw("channels", list, False)
    if not all(isinstance(c, str) and c for c in channels) or bool(channels) != (kind == "conda"):
        raise row.fail("channels", "channel names for conda, [] otherwise")
    region = row.text("region")
    if region not in REGIONS:
        raise row.fail("region", f"one of {', '.join(REGIONS)}")
    source = row.text("source")
    if not source.strip():
        raise row.fail("source", "where the row comes from")
    return Mirror(
        name, kind, url, layout, tuple(variants), tuple(channels), row.text("caveats"), region, source
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


def _check_variant(variant: str) -> str:
    if not _VARIANT_RE.match(variant):
        raise InputError(f"{variant!r}: not a wheel variant folder like cu121, cpu, rocm6.2 or xpu")
    return variant


def needed_page(
    mirror: Mirror, variant: str, package: str = "torch", *, channel: Optional[str] = None
) -> str:
    """The URL that proves ``mirror`` serves what the plan needs (redacted: ``***@`` for credentials).

    torch-wheels, PEP 503: ``{url}/{variant}/{package}/``; flat: ``{url}/{variant}/``. PyPI:
    ``{url}/{package}/`` (PyPI has no variant folders). conda: ``{url}/{channel}/noarch/repodata.json``,
    the file every channel serves (``channel`` defaults to conda-forge where mirrored).
    """
    if not _PACKAGE_RE.match(package):
        raise InputError(f"{package!r}: not a package name")
    project = canonicalize_name(package)  # PEP 503 normalises project page names
    if mirror.kind == "conda":
        ch = channel or ("conda-forge" if "conda-forge" in mirror.channels else mirror.channels[0])
        return f"{mirror.url}/{ch}/noarch/repodata.json"
    if mirror.kind == "pypi":
        return f"{mirror.url}/{project}/"
    _check_variant(variant)
    return f"{mirror.url}/{variant}/" if mirror.layout == "flat" else f"{mirror.url}/{variant}/{project}/"


def pip_args(mirror: Mirror, variant: str, *, reveal_credentials: bool = False) -> tuple[str, ...]:
    """pip's options for installing from ``mirror``. A PEP 503 index replaces PyPI (``--index-url``:
    with --extra-index-url pip may pick PyPI's default build, compat-data §5c). A flat listing is
    ``--find-links``: pin the local version (``==2.5.1+cu121``) so that pip takes the mirror's build.
    Credentials stay ``***`` unless ``reveal_credentials`` (for the installer's argv only)."""
    base = mirror.url_with_credentials() if reveal_credentials else mirror.url
    if mirror.kind == "conda":
        raise InputError(f"{mirror.name} is a conda channel mirror: it goes in .condarc, not pip's options")
    if mirror.kind == "pypi":
        return ("--index-url", base)
    _check_variant(variant)
    return (
        ("--find-links", f"{base}/{variant}/")
        if mirror.layout == "flat"
        else ("--index-url", f"{base}/{variant}")
    )


# Probing -----------------------------------------------------------------------------------------


def _job(
    target: Union[str, Mirror], variant: Optional[str], package: str, version: Optional[Version]
) -> FetchJob:
    if isinstance(target, str):
        fetch, auth = split_credentials(target)
        return FetchJob(None, redact(target), fetch, auth, None, None, "")
    if target.kind != "conda" and target.kind != "pypi" and variant is None:
        raise InputError(f"probing {target.name} needs a wheel variant (cu121, cpu, …)")
    shown = needed_page(target, variant or "", package)
    fetch, _ = split_credentials(shown)
    missing = {
        "torch-wheels": f"this mirror lacks the {variant} variant",
        "pypi": f"this index lacks the {package} project",
        "conda": "this mirror lacks the channel",
    }[target.kind]
    wanted = None if target.kind == "conda" else package
    return FetchJob(target.name, shown, fetch, getattr(target, "_auth", None), wanted, version, missing)


def probe(
    targets: Sequence[Union[str, Mirror]],
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    concurrency: int = 16,
    variant: Optional[str] = None,
    package: str = "torch",
    version: Optional[str] = None,
    total: Optional[float] = None,
) -> list[ProbeResult]:
    """Fetch each target's page concurrently; one result per target, in order.

    A Mirror is checked on ``needed_page(mirror, variant, package)``, and the page must link a wheel
    of ``package`` (of ``version``, when given). A plain URL is fetched as given: any 2xx is ok.
    Each request may take ``timeout`` seconds. The whole call returns within ``total``
    (default 2 x timeout), even when a server trickles its answer byte by byte. What is still
    running then is abandoned in its daemon thread and reported as timed out.
    """
    if timeout <= 0 or concurrency < 1:
        raise InputError(
            f"mirror probe: timeout {timeout:g} s / concurrency {concurrency}: give positive values"
        )
    try:
        wanted = None if version is None else Version(version)
    except InvalidVersion:
        raise InputError(f"{version!r}: not a version like 2.5.1 or 2.5.1+cu121") from None
    jobs = [_job(t, variant, package, wanted) for t in targets]
    return run_jobs(jobs, timeout=timeout, concurrency=concurrency, total=total)


def mirror_table(
    *,
    kind: Optional[str] = None,
    probing: bool = False,
    variant: str = "cpu",
    timeout: float = DEFAULT_TIMEOUT_S,
) -> dict[str, Any]:
    """``envkit mirrors``: the table (``envkit.mirrors/1``), with probe results when asked."""
    if kind is not None and kind not in KINDS:
        raise InputError(f"--kind {kind!r}: one of {', '.join(KINDS)}")
    variant = _check_variant(variant)
    mirrors = [m for m in load_mirrors() if kind is None or m.kind == kind]
    rows: list[dict[str, Any]] = [to_jsonable(m) for m in mirrors]
    if probing:
        results = probe(mirrors, timeout=timeout, variant=variant)
        for row, result in zip(rows, results):
            row["probe"] = to_jsonable(result)
    return {"schema": MIRRORS_SCHEMA, "variant": variant if probing else None, "mirrors": rows}


# Choosing ----------------------------------------------------------------------------------------


def _cached(
    entry: object, mirrors: Sequence[Mirror], variant: str, when: float, max_age_s: float
) -> Optional[Choice]:
    if not isinstance(entry, dict):
        return None
    t, name, url, page = entry.get("time"), entry.get("mirror"), entry.get("url"), entry.get("page")
    if not isinstance(t, (int, float)) or not 0 <= when - t <= max_age_s or not isinstance(page, str):
        return None
    mirror = next((m for m in mirrors if m.name == name and m.url == url), None)
    if mirror is None:  # the candidates changed since
        return None
    skipped = entry.get("skipped")
    skips = tuple(
        Skip(str(s.get("mirror")), str(s.get("url")), str(s.get("reason")))
        for s in (skipped if isinstance(skipped, list) else [])
        if isinstance(s, dict)
    )
    elapsed = entry.get("elapsed_s")
    return Choice(
        mirror,
        variant,
        "cached",
        page,
        float(elapsed) if isinstance(elapsed, (int, float)) else None,
        float(t),
        skips,
    )


def choose(
    mirrors: Sequence[Mirror],
    variant: str,
    *,
    package: str = "torch",
    version: Optional[str] = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    concurrency: int = 16,
    cache_path: Optional[Path] = None,
    max_age_s: float = DEFAULT_MAX_AGE_S,
    now: Optional[float] = None,
) -> Choice:
    """The fastest of ``mirrors`` whose page for ``variant`` links a ``package`` wheel.

    Mirrors the table says lack the variant are skipped unprobed; the rest are probed at once. A choice
    younger than ``max_age_s`` in ``cache_path`` is reused without a request. Raises InputError, listing
    every mirror tried and why it failed, when none serves the page.
    """
    if mirrors and mirrors[0].kind == "torch-wheels":
        _check_variant(variant)
    when = time.time() if now is None else now
    key = cache_key(mirrors, variant, package, version)
    if cache_path is not None:
        hit = _cached(read_cache(cache_path).get(key), mirrors, variant, when, max_age_s)
        if hit is not None:
            return hit
    candidates = [m for m in mirrors if m.carries(variant)]
    results = probe(
        candidates,
        timeout=timeout,
        concurrency=concurrency,
        variant=variant,
        package=package,
        version=version,
    )
    probed = dict(zip(map(id, candidates), results))

    def detour(r: ProbeResult) -> bool:
        # A mirror that redirects to another host only passes the request on: prefer one that serves it.
        return r.redirected_to is not None and _host(r.redirected_to) != _host(r.url)

    serving = sorted((r for r in results if r.ok), key=lambda r: (detour(r), r.elapsed_s))
    reasons = []  # (mirror, url, reason) for every mirror not chosen, in the caller's order
    for m in mirrors:
        r = probed.get(id(m))
        if r is None:
            reasons.append(
                (m, needed_page(m, variant, package), f"not known to carry {variant} ({m.caveats})")
            )
        elif serving and r is not serving[0]:
            best = serving[0]
            why = r.error or (
                f"redirects to {r.redirected_to}"
                if detour(r)
                else f"slower: {r.elapsed_s:.2f} s (chosen: {best.mirror}, {best.elapsed_s:.2f} s)"
            )
            reasons.append((m, r.url, why))
        elif not serving:
            reasons.append((m, r.url, r.error or "failed"))
    if not serving:
        what = package + (f" {version}" if version else "") + f" wheels for {variant}"
        tried = "; ".join(f"{m.name}: {why}" for m, _, why in reasons) or "no candidates"
        raise InputError(
            redact(f"no mirror serves {what} — {tried}"),
            hint="check the network or proxy (HTTPS_PROXY), allow a longer timeout, "
            "or name an index: --mirror pytorch, or --mirror URL",
        )
    won = serving[0]
    chosen = next(m for m in candidates if probed[id(m)] is won)
    skipped = tuple(Skip(m.name, redact(url), redact(why)) for m, url, why in reasons)
    choice = Choice(chosen, variant, "probed", won.url, won.elapsed_s, when, skipped, tuple(results))
    if cache_path is not None:
        write_cache(cache_path, key, choice, when, max_age_s)
    return choice


def _host(url: str) -> Optional[str]:
    return urllib.parse.urlsplit(url).hostname


def _url_mirror(spec: str, variant: str, kind: str) -> tuple[Mirror, str]:
    parts = urllib.parse.urlsplit(spec)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"--mirror {redact(spec)!r}: not an http(s) URL")
    base = spec.rstrip("/")
    if kind == "torch-wheels":
        last = base.rsplit("/", 1)[-1]
        if is_variant(last):  # an index URL as pip takes it: …/whl/cu121
            if last != variant:
                raise InputError(
                    f"--mirror {redact(spec)}: this is the {last} index, but the plan needs {variant}"
                )
            base = base.rsplit("/", 1)[0]
            if base.endswith(("/nightly", "/test")) and "/" in variant:  # …/whl/nightly/cu128
                base = base.rsplit("/", 1)[0]
    layout = {"torch-wheels": "pep503", "pypi": "pep503", "conda": "conda"}[kind]
    channels = ("conda-forge",) if kind == "conda" else ()
    variants = ("*",) if kind == "torch-wheels" else ()
    m = Mirror(
        "url", kind, base, layout, variants, channels, "given on the command line", "global", "--mirror URL"
    )
    return m, needed_page(m, variant, "torch")


def resolve_mirror(
    spec: str,
    variant: str,
    *,
    kind: str = "torch-wheels",
    mirrors: Optional[Sequence[Mirror]] = None,
    package: str = "torch",
    version: Optional[str] = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    cache_path: Optional[Path] = None,
    max_age_s: float = DEFAULT_MAX_AGE_S,
    now: Optional[float] = None,
) -> Choice:
    """``--mirror`` as given: a NAME from the table, ``auto`` (probe and choose), or a URL used
    as given. A torch-wheels URL is either a base (``https://host/whl``, the variant folder is
    appended) or one variant's index (``…/whl/cu121``, which must be the plan's variant). ``mirrors``
    replaces the table (tests, a site's own list). Raises InputError for an unknown or unfit NAME."""
    spec = spec.strip()
    if kind not in KINDS:
        raise InputError(f"mirror kind {kind!r}: one of {', '.join(KINDS)}")
    if kind == "torch-wheels":
        _check_variant(variant)
    if "://" in spec:
        mirror, page = _url_mirror(spec, variant, kind)
        return Choice(mirror, variant, "url", page)
    table = tuple(load_mirrors() if mirrors is None else mirrors)
    fitting = [m for m in table if m.kind == kind]
    if spec == "auto":
        return choose(
            fitting,
            variant,
            package=package,
            version=version,
            timeout=timeout,
            cache_path=cache_path,
            max_age_s=max_age_s,
            now=now,
        )
    found = next((m for m in table if m.name == spec), None)
    names = ", ".join(m.name for m in fitting)
    if found is None:
        raise InputError(f"--mirror {spec!r}: unknown; give auto, a URL, or one of {names}")
    if found.kind != kind:
        raise InputError(
            f"--mirror {spec}: a {found.kind} mirror; give a {kind} one: {names}", hint=found.caveats
        )
    if not found.carries(variant):
        raise InputError(f"--mirror {spec}: not known to carry {variant} ({found.caveats})")
    return Choice(found, variant, "named", needed_page(found, variant, package))
