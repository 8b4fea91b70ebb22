"""Probing web pages side by side under one deadline, with credentials kept out of sight.

Each page is fetched in a daemon thread with a timeout per request, and the whole run has a
deadline: a server that accepts a connection and never answers must not hang envkit, nor keep the
interpreter alive when it exits. pip accepts credentials in index URLs
(``https://user:token@host/…``); they are sent as HTTP basic auth (never on a redirect) and every URL
and message this module returns goes through :func:`envkit.redact.redact`.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import re
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Final, Optional, TypeVar

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envkit import __version__
from envkit.knowledge.mirrors import Auth, split_credentials
from envkit.redact import redact

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "Auth",
    "FetchJob",
    "ProbeResult",
    "bounded_map",
    "fetch",
    "has_wheel",
    "redact",
    "run_jobs",
    "split_credentials",
]

_T = TypeVar("_T")
_R = TypeVar("_R")

# The most of a page read when looking for a wheel. The first matching anchor usually comes early;
# the cap only bounds a huge or endless body.
MAX_BODY: Final = 32 * 1024 * 1024
_CHUNK: Final = 64 * 1024
_HREF_RE: Final = re.compile(rb"""href\s*=\s*["']([^"'#?]+)""", re.IGNORECASE)


@dataclass(frozen=True)
class ProbeResult:
    """One fetched page. ``url`` and ``error`` are redacted."""

    mirror: Optional[str]  # the Mirror's name; None for a plain URL
    url: str
    ok: bool
    status: Optional[int]  # the HTTP status; None when no answer came
    elapsed_s: float
    error: Optional[str] = None  # why it is not ok, in one line
    redirected_to: Optional[str] = None  # the final URL when the server redirected


@dataclass(frozen=True)
class FetchJob:
    """One page to fetch: what to show, what to fetch, and what proves the page serves."""

    name: Optional[str]
    shown: str  # redacted
    fetch: str  # no userinfo
    auth: Optional[Auth]
    package: Optional[str]  # look for a wheel of it; None: the status is enough
    version: Optional[Version]
    missing: str  # what a 404 means


def has_wheel(body: bytes, package: str, version: Optional[Version]) -> bool:
    """Whether an anchor on the page links a wheel of ``package`` (of ``version``, when given)."""
    project = canonicalize_name(package)
    for match in _HREF_RE.finditer(body):
        filename = urllib.parse.unquote(match.group(1).decode("utf-8", "replace")).rsplit("/", 1)[-1]
        parts = filename.split("-")
        if not filename.endswith(".whl") or len(parts) < 5 or canonicalize_name(parts[0]) != project:
            continue
        if version is None:
            return True
        try:
            found = Version(parts[1])
        except InvalidVersion:
            continue
        # 2.5.1 accepts 2.5.1+cu121; 2.5.1+cu121 wants exactly that build.
        if found == version or (not version.local and Version(found.public) == version):
            return True
    return False


def _read_for_wheel(resp: Any, job: FetchJob, start: float, timeout: float) -> bool:
    assert job.package is not None
    buf = bytearray()
    scanned = 0
    while len(buf) < MAX_BODY:
        if time.monotonic() - start > timeout:  # a trickling body: each recv within the timeout
            raise TimeoutError
        chunk = resp.read1(_CHUNK)  # read1: what has arrived, not a full 64 KiB
        if not chunk:
            break
        buf += chunk
        # Overlap the last 4 KiB so an anchor split across chunks is seen whole.
        if has_wheel(bytes(buf[max(0, scanned - 4096) :]), job.package, job.version):
            return True
        scanned = len(buf)
    return False


def _why(exc: BaseException, timeout: float, host: str) -> str:
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        exc = exc.reason
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"timed out after {timeout:.1f} s"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ConnectionResetError):
        return "connection reset by the server"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve {host} (DNS)"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate not trusted: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS error: {exc.reason or exc}"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection without answering"
    if isinstance(exc, http.client.HTTPException):
        return f"bad HTTP answer: {type(exc).__name__} {exc}"
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return f"{type(exc).__name__}: {exc}"


def fetch(job: FetchJob, timeout: float) -> ProbeResult:
    start = time.monotonic()

    def done(ok: bool, status: Optional[int], error: Optional[str] = None, final: str = "") -> ProbeResult:
        moved = redact(final) if final and final != job.fetch else None
        err = None if error is None else redact(error)
        return ProbeResult(job.name, job.shown, ok, status, time.monotonic() - start, err, moved)

    request = urllib.request.Request(  # noqa: S310 - the scheme is checked: http(s) only
        job.fetch, headers={"User-Agent": f"envkit/{__version__} (mirror probe)", "Accept": "text/html"}
    )
    if urllib.parse.urlsplit(job.fetch).scheme not in ("http", "https"):
        return done(False, None, f"{job.shown}: not an http(s) URL")
    if job.auth is not None:
        token = base64.b64encode(f"{job.auth[0]}:{job.auth[1]}".encode()).decode("ascii")
        # Unredirected: urllib copies ordinary headers to a redirect's target, even another host.
        request.add_unredirected_header("Authorization", f"Basic {token}")
    host = urllib.parse.urlsplit(job.fetch).hostname or "?"
    try:
        # The default opener honours HTTP(S)_PROXY / NO_PROXY, as pip does.
        with urllib.request.build_opener().open(request, timeout=timeout) as resp:
            status, final = int(resp.status), str(resp.geturl())
            if job.package is None or _read_for_wheel(resp, job, start, timeout):
                return done(True, status, final=final)
            wanted = job.package + (f" {job.version}" if job.version else "")
            return done(False, status, f"{status}: {job.shown} serves no {wanted} wheels", final)
    except urllib.error.HTTPError as exc:
        with contextlib.closing(exc):
            if exc.code == 404 and job.missing:
                why = f"— {job.missing}"
            elif exc.code in (401, 403):
                why = (
                    "— the credentials were refused"
                    if job.auth
                    else "— it needs credentials or blocks this path"
                )
            else:
                why = ""
            return done(False, exc.code, f"{exc.code} {exc.reason}: {job.shown} {why}".rstrip())
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return done(False, None, _why(exc, timeout, host))


def bounded_map(
    work: Callable[[_T, float], _R],
    items: Sequence[_T],
    *,
    timeout: float,
    deadline: float,
    concurrency: int,
    on_error: Callable[[_T, Exception], _R],
    name: str,
) -> tuple[list[Optional[_R]], list[Optional[float]]]:
    """``work(item, seconds)`` for every item, ``concurrency`` at a time in daemon threads, until
    ``deadline`` (a time.monotonic() value): the results in the items' order (None for one not done
    by then) and when each began (None: never begun). A thread still reading at the deadline is
    left behind, never waited for: a server that trickles its answer byte by byte cannot hold envkit
    past its deadline. An exception is its item's result (``on_error``), never a dead thread."""
    results: list[Optional[_R]] = [None] * len(items)
    started: list[Optional[float]] = [None] * len(items)
    queue = iter(range(len(items)))
    cond = threading.Condition()

    def worker() -> None:
        while True:
            with cond:
                i = next(queue, None)
                now = time.monotonic()
                if i is None or now >= deadline:
                    return
                started[i] = now
            try:
                result = work(items[i], min(timeout, max(0.1, deadline - now)))
            except Exception as exc:  # noqa: BLE001 - a failure is the item's result
                result = on_error(items[i], exc)
            with cond:
                results[i] = result
                cond.notify_all()

    for n in range(min(concurrency, len(items))):
        threading.Thread(target=worker, name=f"{name}-{n}", daemon=True).start()
    with cond:
        while any(r is None for r in results) and (left := deadline - time.monotonic()) > 0:
            cond.wait(left)
        return list(results), list(started)


def run_jobs(
    jobs: Sequence[FetchJob], *, timeout: float, concurrency: int = 16, total: Optional[float] = None
) -> list[ProbeResult]:
    """Fetch every job in daemon threads; one result per job, in order, within ``total`` seconds
    (default 2 x timeout) even when a server trickles its answer byte by byte."""
    budget = 2 * timeout if total is None else total
    final, begun = bounded_map(
        fetch,
        jobs,
        timeout=timeout,
        deadline=time.monotonic() + budget,
        concurrency=concurrency,
        on_error=lambda job, exc: ProbeResult(
            job.name, job.shown, False, None, 0.0, redact(f"probe failed: {exc!r}")
        ),
        name="envkit-mirror-probe",
    )
    now = time.monotonic()
    out = []
    for job, result, t0 in zip(jobs, final, begun):
        if result is None:
            why = (
                f"timed out after {now - t0:.1f} s"
                if t0 is not None
                else f"not probed: the {budget:.1f} s deadline came first"
            )
            result = ProbeResult(job.name, job.shown, False, None, 0.0 if t0 is None else now - t0, why)
        out.append(result)
    return out
