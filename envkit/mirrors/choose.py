"""Package indexes and their mirrors: which ones serve the wheels a plan needs, and which is fastest.

The table and its records are envkit.knowledge.mirrors (``knowledge/mirrors.toml``, each row citing
its source). To prove a mirror, envkit fetches the page an installer would read and finds a wheel
of the package on it: the PEP 503 project page ``{url}/{variant}/torch/``, or for a flat listing the
folder ``{url}/{variant}/``. A 200 alone proves nothing. NJU keeps only the getting-started variants
up to date (ustclug/ustcmirror-images:pytorch/sync.py syncs the releases.json "release" variants),
and SJTU passes what it lacks through to upstream (sjtug/mirror-intel:src/repos.rs, a caching proxy
that redirects misses).

The fetching itself (a timeout per request, one deadline for all, credentials sent as basic auth
and never shown) is envkit.mirrors.http's; a Mirror keeps credentials out of its fields.
"""

from __future__ import annotations

import re
import time
import urllib.parse
from typing import TYPE_CHECKING, Any, Final, Optional, Union

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envkit._serial import to_jsonable
from envkit.errors import InputError, check_url
from envkit.knowledge import is_variant
from envkit.knowledge.mirrors import (
    KINDS,
    LAYOUTS,
    REGIONS,
    Layout,
    Mirror,
    MirrorKind,
    Region,
    load_mirrors,
    split_credentials,
)
from envkit.knowledge.mirrors import VARIANT_FOLDER_RE as _VARIANT_RE
from envkit.mirrors.cache import cache_key, default_cache_path, read_cache, write_cache
from envkit.mirrors.choice import Choice, HowChosen, Skip
from envkit.mirrors.http import FetchJob, ProbeResult, run_jobs
from envkit.redact import redact

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

__all__ = [
    "KINDS",
    "LAYOUTS",
    "REGIONS",
    "Choice",
    "HowChosen",
    "Mirror",
    "MirrorKind",
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

DEFAULT_TIMEOUT_S: Final = 2.0
DEFAULT_MAX_AGE_S: Final = 24 * 3600.0
MIRRORS_SCHEMA: Final = "envkit.mirrors/1"
_PACKAGE_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


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
    if mirror.kind is MirrorKind.CONDA:
        ch = channel or ("conda-forge" if "conda-forge" in mirror.channels else mirror.channels[0])
        return f"{mirror.url}/{ch}/noarch/repodata.json"
    if mirror.kind is MirrorKind.PYPI:
        return f"{mirror.url}/{project}/"
    _check_variant(variant)
    if mirror.layout is Layout.FLAT:
        return f"{mirror.url}/{variant}/"
    return f"{mirror.url}/{variant}/{project}/"


def pip_args(mirror: Mirror, variant: str, *, reveal_credentials: bool = False) -> tuple[str, ...]:
    """pip's options for installing from ``mirror``. A PEP 503 index replaces PyPI (``--index-url``:
    pip ranks every index alike, https://github.com/pypa/pip/issues/8606, so with --extra-index-url
    it may pick PyPI's default build). A flat listing is ``--find-links``: pin the local version
    (``==2.5.1+cu121``) so that pip takes the mirror's build.
    Credentials stay ``***`` unless ``reveal_credentials`` (for the installer's argv only)."""
    base = mirror.url_with_credentials() if reveal_credentials else mirror.url
    if mirror.kind is MirrorKind.CONDA:
        raise InputError(f"{mirror.name} is a conda channel mirror: it goes in .condarc, not pip's options")
    if mirror.kind is MirrorKind.PYPI:
        return ("--index-url", base)
    _check_variant(variant)
    return (
        ("--find-links", f"{base}/{variant}/")
        if mirror.layout is Layout.FLAT
        else ("--index-url", f"{base}/{variant}")
    )


# Probing -----------------------------------------------------------------------------------------


def _job(
    target: Union[str, Mirror], variant: Optional[str], package: str, version: Optional[Version]
) -> FetchJob:
    if isinstance(target, str):
        fetch, auth = split_credentials(target)
        return FetchJob(None, redact(target), fetch, auth, None, None, "")
    if target.kind is MirrorKind.TORCH_WHEELS and variant is None:
        raise InputError(f"probing {target.name} needs a wheel variant (cu121, cpu, …)")
    shown = needed_page(target, variant or "", package)
    fetch, _ = split_credentials(shown)
    missing = {
        MirrorKind.TORCH_WHEELS: f"this mirror lacks the {variant} variant",
        MirrorKind.PYPI: f"this index lacks the {package} project",
        MirrorKind.CONDA: "this mirror lacks the channel",
    }[target.kind]
    wanted = None if target.kind is MirrorKind.CONDA else package
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
    wanted = None if kind is None else _parse_kind(kind, "--kind")
    variant = _check_variant(variant)
    mirrors = [m for m in load_mirrors() if wanted is None or m.kind is wanted]
    rows: list[dict[str, Any]] = [to_jsonable(m) for m in mirrors]
    table: dict[str, Any] = {
        "schema": MIRRORS_SCHEMA,
        "variant": variant if probing else None,
        "mirrors": rows,
    }
    if probing:
        from envkit.mirrors.verdict import probe_verdict

        # --timeout bounds the whole probe, as it bounds every command's run (the mirrors are
        # fetched side by side: each request may take as long as the whole).
        results = probe(mirrors, timeout=timeout, variant=variant, total=timeout)
        for row, result in zip(rows, results):
            row["probe"] = to_jsonable(result)
        table["verdict"] = probe_verdict(rows, variant).to_json()
    return table


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
        HowChosen.CACHED,
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
    if mirrors and mirrors[0].kind is MirrorKind.TORCH_WHEELS:
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
    choice = Choice(chosen, variant, HowChosen.PROBED, won.url, won.elapsed_s, when, skipped, tuple(results))
    if cache_path is not None:
        write_cache(cache_path, key, choice, when, max_age_s)
    return choice


def _host(url: str) -> Optional[str]:
    return urllib.parse.urlsplit(url).hostname


def _url_mirror(spec: str, variant: str, kind: MirrorKind) -> tuple[Mirror, str]:
    check_url(spec, "--mirror")  # a newline would add an index line of its own to requirements.txt
    base = spec.rstrip("/")
    if kind is MirrorKind.TORCH_WHEELS:
        last = base.rsplit("/", 1)[-1]
        if is_variant(last):  # an index URL as pip takes it: …/whl/cu121
            if last != variant:
                raise InputError(
                    f"--mirror {redact(spec)}: this is the {last} index, but the plan needs {variant}"
                )
            base = base.rsplit("/", 1)[0]
            if base.endswith(("/nightly", "/test")) and "/" in variant:  # …/whl/nightly/cu128
                base = base.rsplit("/", 1)[0]
    layout = Layout.CONDA if kind is MirrorKind.CONDA else Layout.PEP503
    channels = ("conda-forge",) if kind is MirrorKind.CONDA else ()
    variants = ("*",) if kind is MirrorKind.TORCH_WHEELS else ()
    m = Mirror(
        "url",
        kind,
        base,
        layout,
        variants,
        channels,
        "given on the command line",
        Region.GLOBAL,
        "--mirror URL",
    )
    return m, needed_page(m, variant, "torch")


def _parse_kind(text: str, what: str) -> MirrorKind:
    try:
        return MirrorKind(text)
    except ValueError:
        raise InputError(f"{what} {text!r}: one of {', '.join(KINDS)}") from None


def resolve_mirror(
    spec: str,
    variant: str,
    *,
    kind: str = MirrorKind.TORCH_WHEELS,
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
    wanted = _parse_kind(kind, "mirror kind")
    if wanted is MirrorKind.TORCH_WHEELS:
        _check_variant(variant)
    if "://" in spec:
        mirror, page = _url_mirror(spec, variant, wanted)
        return Choice(mirror, variant, HowChosen.URL, page)
    table = tuple(load_mirrors() if mirrors is None else mirrors)
    fitting = [m for m in table if m.kind is wanted]
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
    if found.kind is not wanted:
        raise InputError(
            f"--mirror {spec}: a {found.kind} mirror; give a {wanted} one: {names}", hint=found.caveats
        )
    if not found.carries(variant):
        raise InputError(f"--mirror {spec}: not known to carry {variant} ({found.caveats})")
    return Choice(found, variant, HowChosen.NAMED, needed_page(found, variant, package))
