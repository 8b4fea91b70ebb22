"""--nightly / --test: the channel's pages read over HTTP (tests/data/pytorch-channels served on
127.0.0.1 as a copy of download.pytorch.org/whl), its builds judged by the resolver's rules."""

from __future__ import annotations

import functools
import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from envkit import cli
from envkit.errors import NoBuildError
from envkit.knowledge import load_knowledge
from envkit.mirrors.simple_index import BASE_ENV, parse_simple_page, read_channel
from envkit.resolve.channels import PreChannel, variants_to_read
from envkit.versions import Version
from tests.conftest import DATA

K = load_knowledge()
PAGES = DATA / "pytorch-channels"
runner = CliRunner()


class _Server(http.server.ThreadingHTTPServer):
    request_queue_size = 64  # envkit reads eight pages at once: no SYN is dropped and retried 1 s later


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def index() -> Iterator[str]:
    server = _Server(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(PAGES)))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/whl"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def served(index: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(BASE_ENV, index)
    return index


def resolve_json(*args: str) -> dict[str, Any]:
    result = runner.invoke(cli.app, ["resolve", "--json", *args])
    assert result.exit_code == 0, result.stderr
    plan: dict[str, Any] = json.loads(result.stdout)
    return plan


NVIDIA = ("--gpu", "RTX 5090", "--driver", "580.65.06", "--python", "3.12", "--platform", "linux-x86_64")


def test_the_page_reader() -> None:
    wheels = parse_simple_page((PAGES / "whl/nightly/cpu/torch/index.html").read_text())
    # cp313t / cp314t (free-threaded) builds are left out; the macOS wheel has no local tag.
    assert all("t-" not in w.filename.split("-")[3] for w in wheels)
    mac = [w for w in wheels if "macosx" in w.filename]
    assert mac and all(w.version == Version("2.16.0.dev20260302") for w in mac)
    assert {p for w in mac for _, p in w.installs_on} == {"macos-arm64"}
    linux = next(w for w in wheels if "cp312-cp312-manylinux_2_28_x86_64" in w.filename)
    assert linux.installs_on == ((Version("3.12"), "linux-x86_64"),)
    assert str(linux.version) == "2.16.0.dev20260302+cpu"
    assert parse_simple_page("<html><a href='x.tar.gz'>x.tar.gz</a><a>torch-1-bad.whl</a>") == []


def test_nightly_builds_with_companions_of_the_same_date(index: str) -> None:
    channel = read_channel(K, PreChannel.NIGHTLY, ["cu130", "cu132", "rocm7.2"], base=index)
    builds = {v: r for r in channel.releases for vs in r.variants.values() for v in vs}
    assert set(builds) == {"cu130", "rocm7.2"}  # no nightly/cu132 folder: not on the channel
    cu130 = builds["cu130"]
    # 20260303's torchvision did not build: the newest night with all three is 20260302.
    assert cu130.torch == Version("2.16.0.dev20260302")
    assert cu130.torchvision == Version("0.31.0.dev20260302") and cu130.torchaudio.dev == 20260302
    assert cu130.date == "2026-03-02"
    assert any("2.16.0.dev20260303+cu130 passed over: no torchvision" in n for n in channel.notes)
    assert set(cu130.variants) == {"linux-x86_64", "linux-aarch64", "windows-x86_64"}
    assert cu130.python_on("linux-x86_64") == tuple(Version(f"3.{m}") for m in range(10, 15))
    assert builds["rocm7.2"].variants == {"linux-x86_64": ("rocm7.2",)}


def test_resolve_nightly_for_an_nvidia_gpu(served: str) -> None:
    plan = resolve_json("--nightly", *NVIDIA)
    assert plan["prerelease"] == "nightly"
    assert plan["torch"] == "2.16.0.dev20260302" and plan["torchvision"] == "0.31.0.dev20260302"
    assert plan["index_url"] == f"{served}/nightly/cu130"
    assert "not a release" in plan["warnings"][0]
    assert any("taken to be those of torch 2.15.0's cu130 wheels" in w for w in plan["warnings"])
    assert plan["commands"]["pip"].startswith("pip install torch==2.16.0.dev20260302+cu130 ")
    # --pre is the same channel.
    assert resolve_json("--pre", *NVIDIA)["torch"] == plan["torch"]


def test_the_nightly_way_out_for_a_gfx_target_no_release_carries(served: str) -> None:
    flags = ("--gpu", "gfx1103", "--python", "3.12", "--platform", "linux-x86_64")
    refused = runner.invoke(cli.app, ["resolve", *flags])
    assert refused.exit_code == 3
    assert "envkit resolve --nightly --gpu gfx1103" in refused.stderr
    plan = resolve_json("--nightly", *flags)
    assert plan["variant"] == "rocm7.2" and plan["gpu_vendor"] == "amd"
    assert any("main's PYTORCH_ROCM_ARCH" in w for w in plan["warnings"])


def test_test_channel(served: str) -> None:
    flags = ("--gpu", "H100", "--driver", "580.65.06", "--python", "3.12", "--platform", "linux-aarch64")
    plan = resolve_json("--test", *flags)
    assert plan["prerelease"] == "test" and plan["torch"] == "2.16.0"
    assert plan["index_url"] == f"{served}/test/cu130"
    assert "release candidate" in plan["warnings"][0]


def test_spec_names_the_channel_in_its_regenerate_line(served: str) -> None:
    result = runner.invoke(cli.app, ["spec", "--nightly", "--format", "pip", "--stdout", *NVIDIA])
    assert result.exit_code == 0, result.stderr
    assert "--nightly" in result.stdout.splitlines()[1]
    assert f"--index-url {served}/nightly/cu130" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--nightly", "--test"), "--nightly and --test are two channels"),
        (("--nightly", "--channel", "conda"), "conda has no such channel"),
    ],
)
def test_bad_channel_flags_are_exit_2(served: str, args: tuple[str, ...], message: str) -> None:
    result = runner.invoke(cli.app, ["resolve", *args, *NVIDIA])
    assert result.exit_code == 2 and message in result.stderr


def test_an_unreachable_channel_is_one_line_and_exit_3(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    monkeypatch.setenv(BASE_ENV, f"http://127.0.0.1:{port}/whl")
    result = runner.invoke(cli.app, ["resolve", "--nightly", *NVIDIA])
    assert result.exit_code == 3
    assert result.stderr.startswith("envkit: cannot read the nightly channel")
    assert "Traceback" not in result.stderr


def test_a_server_that_never_answers_is_bounded() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)  # accepts connections, never answers
        base = f"http://127.0.0.1:{listener.getsockname()[1]}/whl"
        start = time.monotonic()
        with pytest.raises(NoBuildError, match="timed out"):
            read_channel(K, PreChannel.NIGHTLY, ["cu130"], base=base, timeout=0.15, total=0.3)
        assert time.monotonic() - start < 5


def test_variants_worth_reading() -> None:
    assert variants_to_read(K, "linux-x86_64", "cu130") == ["cu130"]
    found = variants_to_read(K, "linux-x86_64")
    assert "cpu" in found and any(v.startswith("rocm") for v in found)
    tabled = [v for v in K.releases[0].variants["linux-x86_64"] if v.startswith("cu")]
    newest = max(tabled, key=lambda v: int(v[2:]))
    assert f"cu{int(newest[2:]) + 1}" in found  # a nightly often has the next CUDA first
    assert not any(v.startswith("rocm") for v in variants_to_read(K, "macos-arm64"))


def test_a_channel_without_the_vendors_build_says_so(served: str) -> None:
    # The test channel served here has cu130 only: for an MI300X, `envkit resolve --test` said
    # 'no torch build fits' with no reason at all (the CUDA builds are left out for AMD GPUs).
    result = runner.invoke(
        cli.app, ["resolve", "--test", "--gpu", "MI300X", "--python", "3.12", "--platform", "linux-x86_64"]
    )
    assert result.exit_code == 3
    assert "has no ROCm build for linux-x86_64 (its builds: cu130)" in result.stderr
