"""Where the rattler worker's channels are, and how it reaches them: their URLs without the
credentials (for what it says and writes), a channel's ``user:password@`` as an Authorization
header for the requests under its URL, and a quick probe that a channel answers.

Standard library only: the worker (rattler_worker.py, run by path in a child process) imports it as
its neighbour, by this name, which nothing else on sys.path has.
"""

from __future__ import annotations

import base64
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Optional

__all__ = ["REACH_TIMEOUT_S", "Failure", "Login", "bare", "login_headers", "masked", "probe", "split_logins"]

REACH_TIMEOUT_S = 10.0


class Failure(Exception):
    """What went wrong, by kind (the worker's error kinds), for the worker's answer."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.platform: Optional[str] = None  # the platform a lock's solve failed for


def masked(url: str) -> str:
    """``url`` without its credentials, for messages (the parent redacts again)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    path = parts.path
    if path.startswith("/t/"):  # an anaconda.org token: /t/<token>/channel
        path = "/t/***/" + path[3:].partition("/")[2]
    return urllib.parse.urlunsplit(
        parts._replace(netloc=("***@" if "@" in parts.netloc else "") + host, path=path)
    )


def bare(url: str) -> str:
    """``url`` without its credentials (a user:password, an anaconda.org /t/TOKEN/), for a lock file."""
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    path = parts.path
    if path.startswith("/t/"):
        path = "/" + path[3:].partition("/")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=host, path=path))


# (host, path prefix, Authorization header): a channel's login, for the requests under its URL.
Login = tuple[str, str, str]


def split_logins(channels: list[str]) -> tuple[list[str], list[Login]]:
    """The channels without their ``user:password@``, and those logins as Basic headers."""
    out, logins = [], []
    for url in channels:
        parts = urllib.parse.urlsplit(url)
        userinfo, at, host = parts.netloc.rpartition("@")
        if not at or parts.scheme not in ("http", "https"):
            out.append(url)
            continue
        user, _, password = userinfo.partition(":")
        token = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
        header = "Basic " + base64.b64encode(token.encode()).decode()
        logins.append(((parts.hostname or "").lower(), parts.path.rstrip("/") + "/", header))
        out.append(urllib.parse.urlunsplit(parts._replace(netloc=host)))
    return out, logins


def login_headers(logins: list[Login], host: str, path: str) -> Optional[dict[str, str]]:
    """The Authorization header for a request to ``host`` and ``path``; None where no channel's
    login covers it (a redirect to another host gets none)."""
    for name, prefix, header in logins:
        if host.lower() == name and (path.rstrip("/") + "/").startswith(prefix):
            return {"Authorization": header}
    return None


def probe(url: str, logins: list[Login], timeout: float = REACH_TIMEOUT_S) -> None:
    """Fail fast (Failure) when a channel does not answer or is no conda channel, rather than
    let the downloader retry for minutes. Every channel has a noarch subdir (CEP 15 / conda's
    repodata layout), so ``noarch/repodata.json`` is what is asked for (its first byte)."""
    target = url.rstrip("/") + "/noarch/repodata.json"
    parts = urllib.parse.urlsplit(target)
    if parts.scheme == "file":
        path = urllib.request.url2pathname(parts.path)
        if not os.path.isfile(path):
            raise Failure("channel", f"{masked(url)} is no conda channel: {path} does not exist")
        return
    if parts.scheme not in ("http", "https"):
        return  # s3://, oci://: rattler's own middleware handles them
    headers = {"Range": "bytes=0-0", "User-Agent": "envkit"}
    headers.update(login_headers(logins, parts.hostname or "", parts.path) or {})
    # http(s) only: the scheme was checked above.
    request = urllib.request.Request(target, headers=headers)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            response.read(1)
    except urllib.error.HTTPError as exc:
        what = "refuses the request (credentials?)" if exc.code in (401, 403) else f"answers HTTP {exc.code}"
        raise Failure(
            "channel", f"{masked(url)} {what} for noarch/repodata.json: is it a conda channel?"
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Failure(
            "unreachable", f"{masked(url)} does not answer within {timeout:.0f} s ({reason})"
        ) from None
