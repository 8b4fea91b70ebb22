"""Mirrors: the table loads and a bad row names itself, and probing runs against real HTTP servers on
127.0.0.1: one fast, one slow, one that 404s the variant, one that accepts the connection and never
answers, one that answers with no wheels, one behind basic auth. Nothing here reaches the internet."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Optional

import pytest

import envkit.knowledge._table as kb
from envkit._serial import to_jsonable
from envkit.errors import EXIT_USAGE, InputError
from envkit.knowledge import KnowledgeError
from envkit.knowledge.mirrors import Layout, Mirror, MirrorKind, Region, load_mirrors
from envkit.mirrors.cache import CACHE_SCHEMA
from envkit.mirrors.choose import (
    choose,
    needed_page,
    pip_args,
    probe,
    redact,
    resolve_mirror,
)

SECRET = "s3cret-t0ken"
WHEELS = (
    b"<!DOCTYPE html><html><body><h1>Links for torch</h1>\n"
    # Absolute, percent-encoded links, as download.pytorch.org writes them since the move to R2.
    b'<a href="https://download-r2.pytorch.org/whl/cu121/torch-2.1.0%2Bcu121-cp310-cp310-linux_x86_64.whl'
    b'#sha256=0d4d2a2b">torch-2.1.0+cu121-cp310-cp310-linux_x86_64.whl</a><br/>\n'
    b'<a href="/whl/cu121/torch-2.5.1%2Bcu121-cp311-cp311-linux_x86_64.whl#sha256=1e2f">'
    b"torch-2.5.1+cu121-cp311-cp311-linux_x86_64.whl</a><br/>\n</body></html>\n"
)
FLAT = (
    b"<html><body><pre>"
    b'<a href="torchvision-0.16.0%2Bcu121-cp310-cp310-linux_x86_64.whl">torchvision-0.16.0+cu121-cp310...</a>\n'
    b'<a href="torch-2.1.0%2Bcu121-cp310-cp310-linux_x86_64.whl">torch-2.1.0+cu121-cp310...</a>\n'
    b"</pre></body></html>"
)
NO_WHEELS = b"<!DOCTYPE html><html><body><h1>Links for torch</h1></body></html>"


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # urllib honours proxy variables; requests to 127.0.0.1 must not go through one.
    for var in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


# Servers --------------------------------------------------------------------------------------------


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, pages: dict[str, bytes], *, delay: float = 0, auth: Optional[str] = None) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.pages = pages
        self.delay = delay
        self.auth = auth
        self.redirect: Optional[str] = None
        self.trickle = False
        self.hits: list[str] = []
        self.authorization: list[Optional[str]] = []

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: Server

    def do_GET(self) -> None:
        srv = self.server
        srv.hits.append(self.path)
        srv.authorization.append(self.headers.get("Authorization"))
        if srv.trickle:  # a status line, then header bytes a few a second, never a blank line
            try:
                self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                for _ in range(30):
                    self.wfile.write(b"a")
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass
            return
        if srv.delay:
            time.sleep(srv.delay)
        if srv.auth is not None and self.headers.get("Authorization") != srv.auth:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="index"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if srv.redirect is not None:
            self.send_response(302)
            self.send_header("Location", srv.redirect + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = srv.pages.get(self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def start(pages: Optional[dict[str, bytes]] = None, **kwargs: object) -> Server:
        srv = Server({"/whl/cu121/torch/": WHEELS} if pages is None else pages, **kwargs)  # type: ignore[arg-type]
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def hang() -> Iterator[str]:
    """A port that accepts connections (the kernel completes the handshake) and never answers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def closed_port() -> str:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


TW = MirrorKind.TORCH_WHEELS


def local(name: str, base: str, *, layout: str = "pep503", prefix: str = "/whl") -> Mirror:
    return Mirror(
        name, MirrorKind.TORCH_WHEELS, base + prefix, Layout(layout), ("*",), (), "", Region.GLOBAL, "test"
    )


def with_login(base: str, user: str = "alice", token: str = SECRET) -> str:
    return base.replace("http://", f"http://{user}:{token}@")


def basic(user: str, token: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{token}".encode()).decode()


# The table ----------------------------------------------------------------------------------------


def test_the_table_loads_and_every_row_cites_its_source() -> None:
    mirrors = {m.name: m for m in load_mirrors()}
    assert {"pytorch", "pytorch-r2", "sjtu", "nju", "aliyun", "pypi", "tuna", "aliyun-pypi", "ustc"} <= set(
        mirrors
    )
    assert {"sjtu-pypi", "bfsu", "huawei", "tencent", "conda-forge", "tuna-conda", "bfsu-conda"} <= set(
        mirrors
    )
    assert "sustech-conda" in mirrors
    for m in mirrors.values():
        # a link a reader can open, or an admission that there is none
        assert "https://" in m.source or m.source.startswith("unverified:"), m.name
        assert m.url.startswith("https://") and not m.url.endswith("/"), m.name
        assert m.caveats, m.name
    assert mirrors["aliyun"].layout == "flat"
    assert "nvidia" not in mirrors["tuna-conda"].channels and "pytorch" in mirrors["tuna-conda"].channels
    assert mirrors["sustech-conda"].channels == ("nvidia",)
    assert "default CUDA build" in mirrors["pypi"].caveats
    assert "getting-started" in mirrors["nju"].caveats
    assert "redirect to TUNA" in mirrors["ustc"].caveats


def test_the_needed_page_follows_each_layout() -> None:
    m = {x.name: x for x in load_mirrors()}
    assert needed_page(m["pytorch"], "cu121") == "https://download.pytorch.org/whl/cu121/torch/"
    assert (
        needed_page(m["nju"], "cu128", "TorchVision")
        == "https://mirrors.nju.edu.cn/pytorch/whl/cu128/torchvision/"
    )
    assert needed_page(m["aliyun"], "cu121") == "https://mirrors.aliyun.com/pytorch-wheels/cu121/"
    assert needed_page(m["tuna"], "cu121") == "https://pypi.tuna.tsinghua.edu.cn/simple/torch/"
    assert (
        needed_page(m["tuna-conda"], "")
        == "https://mirrors.tuna.tsinghua.edu.cn/anaconda/cloud/conda-forge/noarch/repodata.json"
    )
    assert (
        needed_page(m["pytorch"], "nightly/cu128") == "https://download.pytorch.org/whl/nightly/cu128/torch/"
    )
    with pytest.raises(InputError, match="not a wheel variant"):
        needed_page(m["pytorch"], "../cu121")
    assert pip_args(m["pytorch"], "cu121") == ("--index-url", "https://download.pytorch.org/whl/cu121")
    assert pip_args(m["aliyun"], "cu121") == (
        "--find-links",
        "https://mirrors.aliyun.com/pytorch-wheels/cu121/",
    )


@pytest.fixture
def table_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    shutil.copy(kb.DATA_DIR / "mirrors.toml", tmp_path / "mirrors.toml")
    monkeypatch.setattr(kb, "DATA_DIR", tmp_path)
    load_mirrors.cache_clear()
    yield tmp_path / "mirrors.toml"
    load_mirrors.cache_clear()


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'kind = "torch-wheels"',
            'kind = "ftp"',
            r"mirrors.toml: \[\[mirror\]\] #1 \(pytorch\): field 'kind'",
        ),
        (
            'url = "https://mirror.sjtu.edu.cn/pytorch-wheels"',
            'url = "https://u:tok@mirror.sjtu.edu.cn/pytorch-wheels"',
            r"#3 \(sjtu\): field 'url': expected an https URL without credentials",
        ),
        ('layout = "flat"', 'layout = "conda"', r"\(aliyun\): field 'layout'"),
        ('name = "tuna"\nkind = "pypi"', 'name = "tuna"\nkind = "conda"', r"\(tuna\): field 'layout'"),
        ('variants = ["*"]', 'variants = ["cu12.1"]', r"#1 \(pytorch\): field 'variants'"),
        ('name = "nju"', 'name = "sjtu"', "the name 'sjtu' is used twice"),
        ('region = "cn"', 'region = "asia"', r"#3 \(sjtu\): field 'region'"),
        (
            'name = "pytorch"',
            "name = 3",
            r"mirrors.toml: \[\[mirror\]\] #1: field 'name': expected str, got 3",
        ),
    ],
)
def test_a_bad_row_names_itself(table_copy: Path, old: str, new: str, message: str) -> None:
    text = table_copy.read_text(encoding="utf-8")
    assert old in text
    table_copy.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(KnowledgeError, match=message):
        load_mirrors()


def test_a_row_without_a_source_is_refused(table_copy: Path) -> None:
    text = table_copy.read_text(encoding="utf-8")
    start = text.index("source = ", text.index('name = "aliyun"'))
    table_copy.write_text(text[:start] + text[text.index("\n", start) + 1 :], encoding="utf-8")
    with pytest.raises(KnowledgeError, match=r"\(aliyun\): field 'source': expected str, got '<missing>'"):
        load_mirrors()


# Redaction ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("https://user:tok@host/simple/", "https://***@host/simple/"),
        ("https://tok@host:8443/x", "https://***@host:8443/x"),
        ("failed: http://a:b@h/x and https://c:d@i/y", "failed: http://***@h/x and https://***@i/y"),
        ("'https://u:p@ss@host/x', got", "'https://***@host/x', got"),  # an unescaped @ in the token
        ("https://host/no/login/", "https://host/no/login/"),
        ("mail someone@example.com", "mail someone@example.com"),
    ],
)
def test_redact(text: str, shown: str) -> None:
    assert redact(text) == shown


def test_a_mirror_keeps_credentials_out_of_its_fields() -> None:
    m = Mirror(
        "corp", TW, f"https://alice:{SECRET}@pkgs.corp/whl/", Layout.PEP503, ("*",), (), "", Region.CN, "x"
    )
    assert m.url == "https://***@pkgs.corp/whl"
    assert SECRET not in repr(m) and SECRET not in json.dumps(to_jsonable(m))
    assert m.url_with_credentials() == f"https://alice:{SECRET}@pkgs.corp/whl"
    assert pip_args(m, "cu121") == ("--index-url", "https://***@pkgs.corp/whl/cu121")
    assert pip_args(m, "cu121", reveal_credentials=True)[1] == f"https://alice:{SECRET}@pkgs.corp/whl/cu121"


# Probing and choosing against real servers ---------------------------------------------------------


def test_choose_picks_the_fastest_and_says_why_it_skipped_the_others(
    serve: Callable[..., Server], hang: str
) -> None:
    fast, slow = serve(), serve(delay=0.5)
    lacking = serve({"/whl/cu118/torch/": WHEELS})
    empty = serve({"/whl/cu121/torch/": NO_WHEELS})
    mirrors = [
        local("hang", hang),
        local("slow", slow.base),
        local("lacking", lacking.base),
        local("fast", fast.base),
        local("empty", empty.base),
        Mirror(
            "old", TW, fast.base + "/old", Layout.PEP503, ("cu118",), (), "syncs cu118 only", Region.CN, "t"
        ),
    ]
    start = time.monotonic()
    choice = choose(mirrors, "cu121", timeout=1.0)
    took = time.monotonic() - start

    assert took < 4  # the hanging server costs the timeout (1 s), not a wait for it (generous: shared CPUs)
    assert choice.mirror.name == "fast" and choice.how == "probed"
    assert choice.page == f"{fast.base}/whl/cu121/torch/"
    assert choice.elapsed_s is not None and choice.elapsed_s < 1.0  # answered within the timeout
    reasons = {s.mirror: s.reason for s in choice.skipped}
    assert set(reasons) == {"hang", "slow", "lacking", "empty", "old"}
    assert reasons["hang"] == "timed out after 1.0 s"
    assert (
        reasons["lacking"]
        == f"404 Not Found: {lacking.base}/whl/cu121/torch/ — this mirror lacks the cu121 variant"
    )
    assert reasons["empty"] == f"200: {empty.base}/whl/cu121/torch/ serves no torch wheels"
    assert reasons["slow"].startswith("slower: ") and "(chosen: fast, " in reasons["slow"]
    assert reasons["old"] == "not known to carry cu121 (syncs cu118 only)"
    assert fast.base + "/old" not in "".join(fast.hits)  # the table ruled it out: no request
    by_name = {r.mirror: r for r in choice.results}
    assert by_name["lacking"].status == 404 and by_name["hang"].status is None and by_name["fast"].ok


def test_the_cache_is_reused_until_it_expires(serve: Callable[..., Server], tmp_path: Path) -> None:
    # The mirror passed over lacks the variant (a 404 at once): a slow one cost 0.5 s a probe here,
    # and test_choose_picks_the_fastest_and_says_why_it_skipped_the_others covers "slower".
    fast, lacking = serve({"/whl/cu121/torch/": WHEELS, "/whl/cu118/torch/": WHEELS}), serve({})
    mirrors = [local("lacking", lacking.base), local("fast", fast.base)]
    cache = tmp_path / "cache" / "mirrors.json"

    first = choose(mirrors, "cu121", timeout=1.0, cache_path=cache, max_age_s=3600, now=1000.0)
    hits = len(fast.hits) + len(lacking.hits)
    assert first.how == "probed" and hits == 2
    data = json.loads(cache.read_text(encoding="utf-8"))
    assert data["schema"] == CACHE_SCHEMA
    assert data["choices"]["torch-wheels cu121 torch"]["mirror"] == "fast"
    assert [p.name for p in cache.parent.iterdir()] == ["mirrors.json"]  # no temporary file left

    again = choose(mirrors, "cu121", timeout=1.0, cache_path=cache, max_age_s=3600, now=1000.0 + 3599)
    assert again.how == "cached" and again.mirror == first.mirror and again.page == first.page
    assert [s.mirror for s in again.skipped] == ["lacking"]
    assert len(fast.hits) + len(lacking.hits) == hits  # no request reached a server

    other = choose(mirrors[1:], "cu118", timeout=1.0, cache_path=cache, now=1000.0 + 10)
    assert other.how != "cached"  # another variant: its own entry
    hits = len(fast.hits) + len(lacking.hits)

    expired = choose(mirrors, "cu121", timeout=1.0, cache_path=cache, max_age_s=3600, now=1000.0 + 3601)
    assert expired.how == "probed" and len(fast.hits) + len(lacking.hits) == hits + 2


def test_a_damaged_cache_is_probed_again(serve: Callable[..., Server], tmp_path: Path) -> None:
    fast = serve()
    cache = tmp_path / "mirrors.json"
    cache.write_text("{not json", encoding="utf-8")
    assert choose([local("fast", fast.base)], "cu121", timeout=1.0, cache_path=cache).how == "probed"
    assert json.loads(cache.read_text(encoding="utf-8"))["schema"] == CACHE_SCHEMA


def test_no_mirror_serving_the_variant_is_an_input_error(serve: Callable[..., Server], hang: str) -> None:
    lacking = serve({"/whl/cu118/torch/": WHEELS})
    empty = serve({"/whl/cu121/torch/": NO_WHEELS})
    mirrors = [local("lacking", lacking.base), local("hang", hang), local("empty", empty.base)]
    mirrors.append(local("refused", closed_port()))
    with pytest.raises(InputError) as info:
        choose(mirrors, "cu121", timeout=0.5)
    message = info.value.message
    assert "\n" not in message and info.value.exit_code == EXIT_USAGE
    assert message.startswith("no mirror serves torch wheels for cu121 — lacking: 404 Not Found")
    assert "hang: timed out after 0.5 s" in message
    assert "empty: 200: " in message and "serves no torch wheels" in message
    assert "refused: connection refused" in message
    assert "--mirror" in info.value.hint


def test_credentials_are_sent_but_never_shown(serve: Callable[..., Server], tmp_path: Path) -> None:
    locked = serve(auth=basic("alice", SECRET))
    cache = tmp_path / "mirrors.json"
    mirror = local("corp", with_login(locked.base))
    choice = choose([mirror], "cu121", timeout=1.0, cache_path=cache)
    assert choice.mirror.name == "corp" and locked.authorization == [basic("alice", SECRET)]
    assert choice.page == f"http://***@127.0.0.1:{locked.server_address[1]}/whl/cu121/torch/"
    shown = repr(choice) + json.dumps(to_jsonable(choice)) + cache.read_text(encoding="utf-8")
    assert SECRET not in shown and "alice" not in shown
    # The cached choice is the same mirror, credentials and all (they live in the table, not the cache).
    cached = choose([mirror], "cu121", timeout=1.0, cache_path=cache)
    assert cached.how == "cached" and cached.mirror.url_with_credentials() == with_login(locked.base) + "/whl"

    with pytest.raises(InputError) as info:
        choose([local("corp", with_login(locked.base, token="wrong-t0ken"))], "cu121", timeout=1.0)
    assert "401 Unauthorized: http://***@127.0.0.1" in info.value.message
    assert "the credentials were refused" in info.value.message and "wrong-t0ken" not in info.value.message
    (result,) = probe([with_login(locked.base, token="wrong-t0ken") + "/whl/cu121/torch/"], timeout=1.0)
    assert "wrong-t0ken" not in repr(result) and result.status == 401


def test_credentials_do_not_follow_a_redirect(serve: Callable[..., Server]) -> None:
    target = serve()
    front = serve(auth=basic("alice", SECRET))
    front.redirect = target.base
    (result,) = probe([local("front", with_login(front.base))], timeout=1.0, variant="cu121")
    assert result.ok and result.redirected_to == f"{target.base}/whl/cu121/torch/"
    assert front.authorization == [basic("alice", SECRET)] and target.authorization == [None]


def test_the_deadline_bounds_a_server_that_trickles(serve: Callable[..., Server]) -> None:
    trickle = serve()
    trickle.trickle = True  # each byte arrives within the socket timeout; only the deadline stops it
    start = time.monotonic()
    (result,) = probe([local("trickle", trickle.base)], timeout=0.5, total=0.8, variant="cu121")
    assert time.monotonic() - start < 4  # the trickle would go on; the 0.8 s deadline stops it
    assert not result.ok and result.error is not None and result.error.startswith("timed out after 0.8")


def test_probes_run_concurrently(serve: Callable[..., Server]) -> None:
    slow = serve(delay=0.5)
    start = time.monotonic()
    results = probe([local(f"s{i}", slow.base) for i in range(4)], timeout=2.0, variant="cu121")
    # One after another they take 4 x 0.5 s; together, about 0.5 s (the bound leaves room for load).
    assert time.monotonic() - start < 1.9 and all(r.ok for r in results)
    assert [r.mirror for r in results] == ["s0", "s1", "s2", "s3"]


def test_a_version_must_be_listed_when_asked(serve: Callable[..., Server]) -> None:
    fast = serve()
    m = local("fast", fast.base)
    assert probe([m], timeout=1.0, variant="cu121", version="2.5.1")[0].ok
    assert probe([m], timeout=1.0, variant="cu121", version="2.1.0+cu121")[0].ok
    (stale,) = probe([m], timeout=1.0, variant="cu121", version="2.9.0")
    assert stale.error == f"200: {fast.base}/whl/cu121/torch/ serves no torch 2.9.0 wheels"
    assert not probe([m], timeout=1.0, variant="cu121", package="torchvision")[0].ok


def test_a_flat_listing_is_found_with_its_folder(serve: Callable[..., Server]) -> None:
    flat = serve({"/pytorch-wheels/cu121/": FLAT})
    m = local("flatty", flat.base, layout="flat", prefix="/pytorch-wheels")
    (result,) = probe([m], timeout=1.0, variant="cu121")
    assert result.ok and result.url == f"{flat.base}/pytorch-wheels/cu121/"
    assert probe([m], timeout=1.0, variant="cu121", package="torchvision")[0].ok


def test_a_plain_url_needs_only_an_answer(serve: Callable[..., Server]) -> None:
    fast = serve({"/": b"hello"})
    ok, missing, refused = probe([fast.base + "/", fast.base + "/nothing", closed_port()], timeout=1.0)
    assert ok.ok and ok.mirror is None and ok.status == 200
    assert missing.error == f"404 Not Found: {fast.base}/nothing"
    assert refused.error == "connection refused"


# --mirror NAME | auto | URL ------------------------------------------------------------------------


def test_resolve_a_name_from_the_table() -> None:
    choice = resolve_mirror("sjtu", "cu121")
    assert choice.how == "named" and choice.mirror.region == "cn"
    assert choice.page == "https://mirror.sjtu.edu.cn/pytorch-wheels/cu121/torch/"
    with pytest.raises(
        InputError, match=r"'nowhere': unknown; give auto, a URL, or one of pytorch, pytorch-r2, sjtu"
    ):
        resolve_mirror("nowhere", "cu121")
    with pytest.raises(
        InputError, match=r"--mirror tuna: a pypi mirror; give a torch-wheels one: pytorch,"
    ) as info:
        resolve_mirror("tuna", "cu121")
    assert "only the default CUDA build" in info.value.hint
    assert (
        resolve_mirror("tuna", "cu121", kind="pypi").page == "https://pypi.tuna.tsinghua.edu.cn/simple/torch/"
    )


def test_resolve_a_url_as_given() -> None:
    base = resolve_mirror("https://pkgs.corp/whl/", "cu121")
    assert base.how == "url" and base.page == "https://pkgs.corp/whl/cu121/torch/"
    index = resolve_mirror(f"https://bob:{SECRET}@pkgs.corp/whl/cu121", "cu121")
    assert index.page == "https://***@pkgs.corp/whl/cu121/torch/" and SECRET not in repr(index)
    assert pip_args(index.mirror, "cu121", reveal_credentials=True) == (
        "--index-url",
        f"https://bob:{SECRET}@pkgs.corp/whl/cu121",
    )
    with pytest.raises(InputError, match=r"this is the cu118 index, but the plan needs cu121"):
        resolve_mirror(f"https://bob:{SECRET}@pkgs.corp/whl/cu118", "cu121")
    with pytest.raises(InputError, match="not an http"):
        resolve_mirror("ftp://pkgs.corp/whl", "cu121")


def test_resolve_auto_probes_the_candidates(serve: Callable[..., Server], tmp_path: Path) -> None:
    fast = serve()
    mirrors = [
        local("fast", fast.base),
        Mirror("p", MirrorKind.PYPI, fast.base + "/simple", Layout.PEP503, (), (), "", Region.GLOBAL, "t"),
    ]
    choice = resolve_mirror("auto", "cu121", mirrors=mirrors, timeout=1.0, cache_path=tmp_path / "m.json")
    assert choice.how == "probed" and choice.mirror.name == "fast" and len(choice.results) == 1


def test_a_query_token_is_kept_for_the_installer_and_hidden_everywhere_else(
    serve: Callable[..., Server],
) -> None:
    """Some private indexes take a token in the query (``?token=…``): the installer gets it, the
    fields, the probe results and every --json output show ``token=***``."""
    from envkit.render.jsonout import dumps

    srv = serve()
    mirror = local("corp", f"{srv.base}/whl?token={SECRET}", prefix="")
    assert mirror.url == f"{srv.base}/whl?token=***"
    assert mirror.url_with_credentials() == f"{srv.base}/whl?token={SECRET}"
    (result,) = probe([f"{srv.base}/whl/cu121/torch/?token={SECRET}"], timeout=1.0)
    shown = repr(mirror) + repr(result) + dumps(to_jsonable(mirror)) + dumps(to_jsonable(result))
    assert SECRET not in shown and "token=***" in shown
    assert srv.hits == [f"/whl/cu121/torch/?token={SECRET}"]  # the server did get it


def test_the_table_reads_its_closed_sets_as_members_and_writes_them_as_strings() -> None:
    mirrors = {m.name: m for m in load_mirrors()}
    assert mirrors["aliyun"].layout is Layout.FLAT and mirrors["tuna"].kind is MirrorKind.PYPI
    row = json.loads(json.dumps(to_jsonable(mirrors["aliyun"])))
    assert (row["kind"], row["layout"]) == ("torch-wheels", "flat")
    assert type(to_jsonable(mirrors["aliyun"])["kind"]) is str  # envkit.mirrors/1 holds plain strings
