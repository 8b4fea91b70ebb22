"""``envkit create … --channel conda --backend rattler`` end to end, against real local channels
(tests/e2e/conda_channel.py: real .conda / .tar.bz2 packages, repodata.json from rattler's
indexer) served by a real HTTP server on 127.0.0.1 and as file://, the channel names mapped by a
real .condarc. Each test runs envkit as a program (``python -m envkit``), so that its worker, its
signals and its exit codes are the real ones. Marked slow: ~1-2 s per envkit run, and the first
test verifies the new environment with its real torch (~30 s).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

pytest.importorskip("rattler", reason="the rattler backend needs py-rattler (envkit[conda], Python >= 3.10)")
pytest.importorskip(
    "conda_package_handling", reason="the local channels are built with conda-package-handling"
)

from tests.e2e.conda_channel import condarc, serve, standard_channels, torch_site_packages  # noqa: E402

TORCH_CPU = (
    "--template",
    "pt2-minimal",
    "--torch",
    "2.13.0",
    "--cuda",
    "cpu",
    "--no-gpu",
    "--python",
    "3.11",
)
CUDA_121 = ("--cuda", "12.1", "--driver", "535.104.05", "--gpu", "A100", "--python", "3.11")
BIG = 6 * 1024 * 1024  # bytes of a package served slowly (~1.3 MB/s): an install that takes seconds


@pytest.fixture(scope="module")
def channels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if sys.version_info[:2] != (3, 11):
        pytest.skip("the local python package is this interpreter, and the templates ask for 3.11")
    root = tmp_path_factory.mktemp("channels")
    standard_channels(root, slow_package=BIG)
    return root


@pytest.fixture(scope="module")
def http_base(channels: Path) -> Iterator[str]:
    with serve(channels, slow=("bigdata-1.0-0.conda",)) as base:
        yield base


def envkit(
    tmp_path: Path, rc: Path, *args: str, extra_env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "CONDARC": str(rc),
        "HOME": str(tmp_path / "home"),
        "RATTLER_CACHE_DIR": str(tmp_path / "rattler-cache"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        **(extra_env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "envkit", "create", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def meta_records(prefix: Path) -> list[dict[str, str]]:
    return [json.loads(p.read_text()) for p in sorted((prefix / "conda-meta").glob("*.json"))]


def test_create_over_http_lists_the_packages_and_verifies(tmp_path: Path, http_base: str) -> None:
    if torch_site_packages() is None:
        pytest.skip("the verify step needs the test environment's torch")
    rc = condarc(tmp_path / "condarc", http_base)
    prefix = tmp_path / "envs" / "cpu"
    proc = envkit(
        tmp_path,
        rc,
        "--prefix",
        str(prefix),
        "--channel",
        "conda",
        "--backend",
        "rattler",
        *TORCH_CPU,
        "--json",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["backend"] == "rattler" and result["plan"]["channel"] == "conda"
    assert result["plan"]["conda"]["route"] == "conda-forge"
    assert result["conda"]["channels"] == [f"{http_base}/conda-forge"]
    # One conda-meta record per package, and --json lists them (name, version, build, channel).
    records = meta_records(prefix)
    listed = {(p["name"], p["version"], p["build"], p["channel"]) for p in result["packages"]}
    assert listed == {(r["name"], r["version"], r["build"], r["channel"].rstrip("/")) for r in records}
    assert ("pytorch", "2.13.0", "cpu_generic_py311_h0_2", f"{http_base}/conda-forge") in listed
    assert {p["name"] for p in result["packages"]} == {"python", "pytorch", "filelock", "typing_extensions"}
    # A real conda environment: conda's marker file, with a history entry as conda writes one.
    history = (prefix / "conda-meta" / "history").read_text()
    assert history.startswith("==> ") and "# update specs: ['python=3.11', 'pytorch=2.13.0=cpu*']" in history
    # The same verify step as the pip route, in the new environment's own (real) torch.
    checks = {c["id"]: c["status"] for c in result["verify"]["checks"]}
    assert checks["verify.device"] == "pass", result["verify"]
    # envkit doctor sees a conda environment there.
    doctor = subprocess.run(
        [
            sys.executable,
            "-m",
            "envkit",
            "doctor",
            "--python",
            str(prefix),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert doctor.returncode in (0, 1), doctor.stderr[-2000:]
    python_env = json.loads(doctor.stdout)["facts"]["python"]
    assert python_env["kind"] == "conda" and python_env["prefix"] == str(prefix), python_env


def test_create_from_a_file_channel_on_the_pytorch_channel_route(tmp_path: Path, channels: Path) -> None:
    rc = condarc(tmp_path / "condarc", channels.as_uri())
    prefix = tmp_path / "envs" / "cu121"
    proc = envkit(
        tmp_path, rc, "--prefix", str(prefix), "--channel", "conda", *CUDA_121, "--no-verify", "--json"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["backend"] == "rattler"  # auto: no conda, mamba or micromamba on these machines
    assert result["conda"]["virtual_packages"]["__cuda"] == "12.2"
    by_name = {p["name"]: p for p in result["packages"]}
    assert by_name["pytorch"]["build"] == "py311_cuda12.1_cudnn9_0"
    assert by_name["pytorch"]["channel"] == f"{channels.as_uri()}/pytorch"
    assert by_name["pytorch-cuda"]["version"] == "12.1"
    assert by_name["cuda-runtime"]["channel"] == f"{channels.as_uri()}/nvidia"
    assert by_name["python"]["channel"] == f"{channels.as_uri()}/main"  # defaults, from .condarc
    assert {f"{p['name']}-{p['version']}-{p['build']}.json" for p in result["packages"]} == {
        p.name for p in (prefix / "conda-meta").glob("*.json")
    }


def test_a_channel_login_is_sent_but_never_written(tmp_path: Path, channels: Path) -> None:
    """A .condarc channel_alias with user:password: the server refuses requests without it, and the
    password is nowhere else: not in envkit's output, the new environment (conda-meta/*.json record
    the URL each package came from; envkit/ keeps the worker's request) or rattler's caches."""
    secret = "s3cret-pw"
    with serve(channels, login=f"alice:{secret}") as base:
        rc = condarc(tmp_path / "condarc", base.replace("http://", f"http://alice:{secret}@"))
        prefix = tmp_path / "envs" / "login"
        proc = envkit(tmp_path, rc, "--prefix", str(prefix), "--channel", "conda", *TORCH_CPU, "--no-verify")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "http://***@127.0.0.1" in proc.stderr  # the channels line shows where, masked
    leaks = [
        str(p)
        for folder in (prefix, tmp_path / "rattler-cache")
        for p in folder.rglob("*")
        if p.is_file() and secret.encode() in p.read_bytes()
    ]
    assert leaks == [] and secret not in proc.stdout + proc.stderr
    record = json.loads(next((prefix / "conda-meta").glob("pytorch-*.json")).read_text())
    assert record["url"].startswith(f"{base}/conda-forge/noarch/pytorch-2.13.0-")


def test_a_cuda_below_the_packages_need_is_refused_with_the_reason(tmp_path: Path, channels: Path) -> None:
    rc = condarc(tmp_path / "condarc", channels.as_uri())
    prefix = tmp_path / "envs" / "old-driver"
    proc = envkit(
        tmp_path,
        rc,
        "--prefix",
        str(prefix),
        "--channel",
        "conda",
        *CUDA_121,
        "--no-verify",
        extra_env={"CONDA_OVERRIDE_CUDA": "11.8"},
    )
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "cuda-version 12.1 needs __cuda >=12, and the target has __cuda=11.8" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not prefix.exists()


def test_a_channel_without_the_package(tmp_path: Path, channels: Path) -> None:
    rc = condarc(tmp_path / "condarc", channels.as_uri())
    prefix = tmp_path / "envs" / "missing"
    flags = (
        "--template",
        "pt2-minimal",
        "--torch",
        "2.12.1",
        "--cuda",
        "cpu",
        "--no-gpu",
        "--python",
        "3.11",
    )
    proc = envkit(tmp_path, rc, "--prefix", str(prefix), "--channel", "conda", *flags, "--no-verify")
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "no channel has pytorch ==2.12.1 cpu*" in proc.stderr
    assert not prefix.exists()


def test_a_channel_without_a_dependency_names_it(tmp_path: Path, channels: Path) -> None:
    """A mirror that carries part of a channel: pytorch is there, its filelock is not."""
    from tests.e2e.conda_channel import index

    partial = tmp_path / "partial"
    shutil.copytree(channels / "conda-forge", partial / "conda-forge")
    for package in (partial / "conda-forge" / "noarch").glob("filelock-*"):
        package.unlink()
    index(partial / "conda-forge")
    rc = condarc(tmp_path / "condarc", partial.as_uri())
    prefix = tmp_path / "envs" / "partial"
    proc = envkit(tmp_path, rc, "--prefix", str(prefix), "--channel", "conda", *TORCH_CPU, "--no-verify")
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "pytorch 2.13.0 needs filelock *, and no channel has filelock" in proc.stderr
    assert "carry only part of a channel" in proc.stderr
    assert not prefix.exists()


def test_an_unreachable_channel_fails_within_seconds(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    rc = condarc(tmp_path / "condarc", f"http://127.0.0.1:{port}")
    prefix = tmp_path / "envs" / "nowhere"
    start = time.monotonic()
    proc = envkit(tmp_path, rc, "--prefix", str(prefix), "--channel", "conda", *TORCH_CPU, "--no-verify")
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert f"http://127.0.0.1:{port}/conda-forge does not answer" in proc.stderr
    assert time.monotonic() - start < 30
    assert not prefix.exists()


@pytest.mark.parametrize("served", ["http", "file"])
def test_a_corrupt_package_is_refused_and_nothing_is_left(
    tmp_path: Path, channels: Path, served: str
) -> None:
    damaged = tmp_path / "damaged"
    shutil.copytree(channels / "conda-forge", damaged / "conda-forge")
    package = next((damaged / "conda-forge" / "noarch").glob("pytorch-2.13.0-cpu_*.conda"))
    data = bytearray(package.read_bytes())
    data[-40:-20] = b"\0" * 20  # same size, other bytes: its sha256 no longer matches repodata.json
    package.write_bytes(bytes(data))
    prefix = tmp_path / "envs" / "damaged"
    with serve(damaged) as base:
        rc = condarc(tmp_path / "condarc", base if served == "http" else damaged.as_uri())
        proc = envkit(tmp_path, rc, "--prefix", str(prefix), "--channel", "conda", *TORCH_CPU, "--no-verify")
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert "hash mismatch" in proc.stderr and "did not match its checksum" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not prefix.exists()


def _workers(request_file: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "rattler_worker.py" in cmdline and request_file in cmdline:
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_install_leaves_nothing_behind(
    tmp_path: Path, http_base: str, sig: signal.Signals
) -> None:
    rc = condarc(tmp_path / "condarc", http_base)
    prefix = tmp_path / "envs" / "interrupted"
    env = {
        **os.environ,
        "CONDARC": str(rc),
        "HOME": str(tmp_path / "home"),
        "RATTLER_CACHE_DIR": str(tmp_path / "rc"),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "envkit",
            "create",
            "--prefix",
            str(prefix),
            "--channel",
            "conda",
            *CUDA_121,
            "--no-verify",
            "-q",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 60
    # Linking has begun (a package's record is in conda-meta) while bigdata is still downloading.
    while not list((prefix / "conda-meta").glob("*.json")):
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "the install never started linking"
        time.sleep(0.01)
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert not prefix.exists(), list(prefix.rglob("*"))[:10]
    assert not _workers(str(prefix.parent / ".interrupted.envkit-spec")), "the rattler worker outlived envkit"
    assert sorted(p.name for p in prefix.parent.iterdir()) == []  # no staging, no lock, nothing


def test_a_full_disk_fails_cleanly(tmp_path: Path, channels: Path) -> None:
    """The prefix on a 1 MiB tmpfs, in a private mount namespace (unshare: nothing is mounted on the
    host): the big package cannot be written."""
    if (
        shutil.which("unshare") is None
        or subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode != 0
    ):
        pytest.skip("no unprivileged mount namespaces here (unshare -rm)")
    rc = condarc(tmp_path / "condarc", channels.as_uri())
    small = tmp_path / "small"
    small.mkdir()
    script = (
        f"mount -t tmpfs -o size=1m tmpfs {small} && "
        f"{sys.executable} -m envkit create --prefix {small}/env --channel conda "
        + " ".join(CUDA_121)
        + f" --no-verify -q; code=$?; ls -A {small}; exit $code"
    )
    env = {
        **os.environ,
        "CONDARC": str(rc),
        "HOME": str(tmp_path / "home"),
        "RATTLER_CACHE_DIR": str(tmp_path / "rc"),
    }
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert "No space left on device" in proc.stderr
    assert "free space" in proc.stderr  # the hint
    assert proc.stdout.strip() == ""  # the tmpfs is empty again: nothing half-made is left


def test_lock_without_a_conda_binary_reads_back_with_conda_locks_parser(
    tmp_path: Path, http_base: str, channels: Path
) -> None:
    """No conda, mamba or micromamba here: rattler solves each platform and conda-lock's own code
    writes the file, which conda-lock's parser reads back with the channel's own hashes."""
    from tests.unit.specs.test_specs import conda_lock

    parse_conda_lock_file = conda_lock("conda_lock.lockfile").parse_conda_lock_file
    rc = condarc(tmp_path / "condarc", http_base)
    out = tmp_path / "lock"
    out.mkdir()
    env = {
        **os.environ,
        "CONDARC": str(rc),
        "HOME": str(tmp_path / "home"),
        "RATTLER_CACHE_DIR": str(tmp_path / "rc"),
    }
    args = [
        "lock",
        "pt2",
        "--channel",
        "conda",
        *CUDA_121,
        "-o",
        str(out),
        "--lock-platform",
        "linux-64",
        "--lock-platform",
        "linux-aarch64",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "envkit", *args], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lock = parse_conda_lock_file(out / "conda-lock.yml")
    assert lock.metadata.platforms == ["linux-64", "linux-aarch64"]
    assert [c.url for c in lock.metadata.channels] == ["pytorch", "nvidia", "defaults"]
    by = {(p.platform, p.name): p for p in lock.package}
    torch = by[("linux-64", "pytorch")]
    assert (torch.version, torch.url) == (
        "2.5.1",
        f"{http_base}/pytorch/noarch/pytorch-2.5.1-py311_cuda12.1_cudnn9_0.conda",
    )
    repodata = json.loads((channels / "pytorch" / "noarch" / "repodata.json").read_text())
    record = repodata["packages.conda"]["pytorch-2.5.1-py311_cuda12.1_cudnn9_0.conda"]
    assert (torch.hash.md5, torch.hash.sha256) == (record["md5"], record["sha256"])
    assert torch.dependencies["pytorch-cuda"] == "12.1.*" and "main" in torch.categories
    assert ("linux-aarch64", "pytorch-cuda") in by  # __cuda there too: the target driver's
    # A release the channel does not carry (the resolver knows 2.5.0 on the pytorch channel; this
    # copy of it has 2.5.1 only): exit 3, the reason, and the lock file as it was.
    before = (out / "conda-lock.yml").read_bytes()
    proc = subprocess.run(
        [sys.executable, "-m", "envkit", *args, "--torch", "2.5.0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "the conda lock has no answer: no channel has" in proc.stderr and "2.5.0" in proc.stderr
    assert (out / "conda-lock.yml").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["conda-lock.yml"]


def test_a_damaged_package_in_the_cache_is_extracted_again(tmp_path: Path, channels: Path) -> None:
    """rattler validates its package cache in full (envkit asks it to): a cached file whose bytes
    no longer match the package's paths.json is replaced from the archive, not linked."""
    rc = condarc(tmp_path / "condarc", channels.as_uri())
    first = envkit(
        tmp_path, rc, "--prefix", str(tmp_path / "envs" / "a"), "--channel", "conda", *CUDA_121, "--no-verify"
    )
    assert first.returncode == 0, first.stderr[-3000:]
    cached = next(
        (tmp_path / "rattler-cache" / "pkgs").glob("pytorch-cuda-12.1-*/share/pytorch-cuda/VERSION")
    )
    damaged = cached.with_name("VERSION.tmp")
    damaged.write_text("garbage\n")
    damaged.replace(cached)  # a new file: env a's hard link keeps the good one
    second = envkit(
        tmp_path, rc, "--prefix", str(tmp_path / "envs" / "b"), "--channel", "conda", *CUDA_121, "--no-verify"
    )
    assert second.returncode == 0, second.stderr[-3000:]
    assert (tmp_path / "envs" / "b" / "share" / "pytorch-cuda" / "VERSION").read_text() == "12.1\n"


def test_lock_writes_through_a_link_and_into_a_fifo(tmp_path: Path, http_base: str) -> None:
    """conda-lock.yml as a link to a shared file, and as a FIFO a reader waits on: the lock goes where
    the link points (the link stays) and into the FIFO (it stays one). A plain rename over the target
    deleted the link and put a regular file where the FIFO was, its reader left waiting (issue 20's
    rule for every file envkit writes)."""
    import stat
    import threading

    rc = condarc(tmp_path / "condarc", http_base)
    env = {
        **os.environ,
        "CONDARC": str(rc),
        "HOME": str(tmp_path / "home"),
        "RATTLER_CACHE_DIR": str(tmp_path / "rc"),
    }
    args = ["lock", "pt2", "--channel", "conda", *CUDA_121, "--lock-platform", "linux-64", "-q"]
    (tmp_path / "shared.yml").write_text("old\n", encoding="utf-8")
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "conda-lock.yml").symlink_to("../shared.yml")
    fifo = tmp_path / "fifo" / "conda-lock.yml"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as fh:
            got.append(fh.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    for out in (tmp_path / "linked", fifo.parent):
        proc = subprocess.run(
            [sys.executable, "-m", "envkit", *args, "-o", str(out)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    reader.join(timeout=30)
    if reader.is_alive():  # nothing reached the FIFO: let the reader go
        with open(fifo, "wb"):
            pass
    assert (tmp_path / "linked" / "conda-lock.yml").is_symlink()
    assert (
        (tmp_path / "shared.yml")
        .read_text(encoding="utf-8")
        .startswith("# This lock file was generated by conda-lock")
    )
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert got and got[0].startswith(b"# This lock file was generated by conda-lock"), got
