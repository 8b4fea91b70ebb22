"""Reading download.pytorch.org's nightly and test channels: PEP 503 pages, read when asked.

A channel's page per variant and project (``whl/nightly/cu130/torch/``) lists that project's wheels
as anchors whose text (and the href's last part, percent-encoded) is the wheel's file name
(pytorch/test-infra:s3_management/manage.py@b5a68e760d13, ``to_simple_package_html``). The pages are
read side by side in daemon threads, each request and the whole read under a deadline; a page that
is not there (404) means the channel has no such variant; a host that does not answer ends the read
with one clear error. ``ENVKIT_PYTORCH_INDEX`` points envkit at a copy of download.pytorch.org/whl
(an internal mirror; the tests' server on 127.0.0.1).
"""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Final, Optional

from envkit import __version__
from envkit.errors import NoBuildError, WayOut
from envkit.mirrors.http import bounded_map
from envkit.redact import redact
from envkit.resolve.channels import COMPANIONS, ChannelIndex, IndexWheel, PreChannel, channel_index, wheel_of
from envkit.resolve.plan import PYTORCH_INDEX

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from envkit.knowledge import Knowledge

__all__ = ["BASE_ENV", "index_base", "linked_files", "parse_simple_page", "read_channel"]

BASE_ENV: Final = "ENVKIT_PYTORCH_INDEX"
MAX_BODY: Final = 32 * 1024 * 1024  # a nightly torch page is ~1 MB; the cap bounds an endless one
TIMEOUT_S: Final = 20.0
TOTAL_S: Final = 40.0


def index_base(env: Mapping[str, str]) -> str:
    """download.pytorch.org/whl, or the copy ``ENVKIT_PYTORCH_INDEX`` names."""
    return (env.get(BASE_ENV) or PYTORCH_INDEX).rstrip("/")


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.names: list[str] = []
        self._href: Optional[str] = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, Optional[str]]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href") or ""
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            path = urllib.parse.urlsplit(self._href).path
            from_href = urllib.parse.unquote(path.rsplit("/", 1)[-1])
            text = "".join(self._text).strip()
            self.names.append(from_href if from_href.endswith(".whl") else text)
            self._href = None


def linked_files(body: str) -> list[str]:
    """The file each link of a PEP 503 page names: the href's last part where it is a wheel (percent
    escapes undone), else the link's text (scripts/update_knowledge.py reads pages with it too)."""
    parser = _Anchors()
    parser.feed(body)
    parser.close()
    return parser.names


def parse_simple_page(body: str) -> list[IndexWheel]:
    """The wheels a PEP 503 page links (anything else on it is ignored)."""
    wheels = (wheel_of(name) for name in linked_files(body) if name.endswith(".whl"))
    return [w for w in wheels if w is not None]


@dataclass(frozen=True)
class _Page:
    url: str  # redacted
    status: Optional[int]  # None: no answer
    body: str = ""
    error: str = ""


def _get(url: str, timeout: float) -> _Page:
    shown = redact(url)
    request = urllib.request.Request(  # noqa: S310 - the scheme is checked below: http(s) only
        url, headers={"User-Agent": f"envkit/{__version__} (channel read)", "Accept": "text/html"}
    )
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        return _Page(shown, None, error=f"{shown}: not an http(s) URL")
    start = time.monotonic()
    try:
        with urllib.request.build_opener().open(request, timeout=timeout) as resp:
            chunks, size = [], 0
            while size < MAX_BODY:
                if time.monotonic() - start > timeout:
                    raise TimeoutError
                chunk = resp.read1(64 * 1024)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            return _Page(shown, int(resp.status), b"".join(chunks).decode("utf-8", "replace"))
    except urllib.error.HTTPError as exc:
        exc.close()
        return _Page(shown, exc.code, error=f"{exc.code} {exc.reason}")
    except (OSError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, TimeoutError):
            why = f"timed out after {timeout:.0f} s"
        else:
            why = str(getattr(reason, "strerror", None) or reason) or type(reason).__name__
        return _Page(shown, None, error=redact(why))


def _read_all(urls: Sequence[str], *, timeout: float, total: float, concurrency: int = 8) -> list[_Page]:
    """Every page, ``concurrency`` at a time in daemon threads, within ``total`` seconds."""
    final, _begun = bounded_map(
        _get,
        urls,
        timeout=timeout,
        deadline=time.monotonic() + total,
        concurrency=concurrency,
        on_error=lambda url, exc: _Page(redact(url), None, error=redact(f"read failed: {exc!r}")),
        name="envkit-channel-read",
    )
    return [r or _Page(redact(u), None, error=f"timed out after {total:.0f} s") for u, r in zip(urls, final)]


def read_channel(
    k: Knowledge,
    channel: PreChannel,
    variants: Sequence[str],
    *,
    base: str = PYTORCH_INDEX,
    timeout: float = TIMEOUT_S,
    total: float = TOTAL_S,
) -> ChannelIndex:
    """The channel's newest build of each variant (with companions of the same date), read now.

    Raises NoBuildError (exit 3) when the channel's host does not answer, or has none of the
    variants: a nightly plan cannot be made without its pages."""
    where = f"{base}/{channel.value}"
    jobs = [(v, p, f"{where}/{v}/{p}/") for v in variants for p in COMPANIONS]
    pages = _read_all([url for _, _, url in jobs], timeout=timeout, total=total)
    found: dict[str, dict[str, list[IndexWheel]]] = {}
    failed: list[str] = []
    for (variant, project, _url), page in zip(jobs, pages):
        if page.status == 200:
            found.setdefault(variant, {})[project] = parse_simple_page(page.body)
        elif page.status != 404:
            failed.append(f"{page.url}: {page.error or page.status}")
    if not found:
        release_way = WayOut("channel", f"leave out --{channel.value}: the plan is then a release")
        if failed:
            raise NoBuildError(
                f"cannot read the {channel.value} channel ({redact(where)}/): {failed[0]}",
                ways_out=(release_way,),
            )
        raise NoBuildError(
            f"the {channel.value} channel ({redact(where)}/) has no {' / '.join(variants)} wheels",
            ways_out=(release_way,),
        )
    notes = [f"not read: {f}" for f in failed[:3]]
    return channel_index(k, channel, redact(base), found, notes)
