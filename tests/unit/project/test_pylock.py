"""Hashed pip locks: ``envkit lock --channel pip`` resolved by uv against a local index on
127.0.0.1 (the CPU torch 2.13.0 wheel of the test wheelhouse, its dependencies from the local
PyPI copy), read back with tomllib; ``create --from-lock`` installs exactly that, and a lock whose
hash does not match what the index serves fails (exit 4) with nothing left behind."""

from __future__ import annotations

import functools
import hashlib
import http.server
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from envkit.create.pylock import lock_platforms, plan_of_lock
from envkit.errors import InputError
from tests.unit.test_bad_input import assert_input_error, envkit

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

WHEELS = Path("/opt/wheels")
PYPI = Path("/opt/pypi")
TORCH = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
# torch 2.13.0's dependencies as the local PyPI copy has them (what uv resolved there).
DEPENDENCIES = (
    "filelock",
    "fsspec",
    "jinja2",
    "markupsafe",
    "mpmath",
    "networkx",
    "setuptools",
    "sympy",
    "typing_extensions",
)
ZEROS = "0" * 64


def _site(root: Path) -> Path:
    """An index site: /whl/cpu/torch/ (the torch wheel, its sha256 in the link, as
    download.pytorch.org gives it) and /simple/ (the local PyPI copy's pages and files)."""
    (root / "whl" / "cpu" / "torch").mkdir(parents=True)
    (root / "simple").symlink_to(PYPI / "simple")
    (root / "files").symlink_to(PYPI / "files")
    (root / "wheels").symlink_to(WHEELS)
    digest = _sha256(WHEELS / TORCH)
    link = f'<a href="../../../wheels/{TORCH.replace("+", "%2B")}#sha256={digest}">{TORCH}</a>'
    (root / "whl" / "cpu" / "torch" / "index.html").write_text(f"<html><body>{link}</body></html>\n")
    return root


@functools.cache
def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@pytest.fixture
def index(tmp_path: Path) -> Iterator[str]:
    if not (WHEELS / TORCH).is_file() or not (PYPI / "simple" / "filelock").is_dir():
        pytest.skip("the local wheelhouse (/opt/wheels) or PyPI copy (/opt/pypi) is not here")
    site = _site(tmp_path / "site")
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


PLAN = ("pt2-minimal", "--channel", "pip", "--cuda", "cpu", "--torch", "2.13.0", "--python", "3.11")


def _lock(index: str, out: Path, *more: str) -> object:
    mirrors = ("--mirror", f"torch-wheels={index}/whl", "--mirror", f"pypi={index}/simple")
    return envkit("lock", *PLAN, "--lock-platform", "linux-x86_64", *mirrors, "-o", str(out), *more)


@pytest.mark.slow
def test_pip_lock_hashes_every_file_and_create_installs_exactly_it(index: str, tmp_path: Path) -> None:
    out = tmp_path / "lock"
    result = _lock(index, out)
    assert result.exit_code == 0, result.stderr  # type: ignore[attr-defined]

    pylock = tomllib.loads((out / "pylock.toml").read_text(encoding="utf-8"))
    assert pylock["lock-version"] == "1.0"
    packages = {p["name"]: p for p in pylock["packages"]}
    assert packages["torch"]["version"] == "2.13.0+cpu"
    assert packages["torch"]["wheels"][0]["hashes"]["sha256"] == _sha256(WHEELS / TORCH)
    assert {n.replace("_", "-") for n in DEPENDENCIES} <= set(packages)
    assert all(w["hashes"]["sha256"] for p in pylock["packages"] for w in p["wheels"])
    plan = pylock["tool"]["envkit"]["plan"]
    assert (plan["torch"], plan["variant"], plan["platform"]) == ("2.13.0", "cpu", "linux-x86_64")

    requirements = (out / "requirements.txt").read_text(encoding="utf-8")
    pins = re.findall(
        r"^([A-Za-z0-9_.-]+)==\S+ \\\n((?:\s+--hash=sha256:[0-9a-f]{64}(?: \\)?\n)+)", requirements, re.M
    )
    assert {p for p, _ in pins} == set(packages), requirements
    assert (
        f"--extra-index-url {index}/whl/cpu" in requirements
        and plan_of_lock(str(out / "requirements.txt"))["variant"] == "cpu"
    )

    envs = tmp_path / "envs"
    made = envkit(
        "create",
        "--prefix",
        str(envs / "locked"),
        "--from-lock",
        str(out / "pylock.toml"),
        "--backend",
        "uv",
        "--no-verify",
        "-q",
    )
    assert made.exit_code == 0, made.stderr  # type: ignore[attr-defined]
    site = next((envs / "locked" / "lib").glob("python3.*/site-packages"))
    assert (site / "torch-2.13.0+cpu.dist-info").is_dir()
    assert (envs / "locked" / "envkit" / "pylock.toml").read_text(encoding="utf-8") == (
        out / "pylock.toml"
    ).read_text(encoding="utf-8")

    for name in ("pylock.toml", "requirements.txt"):  # a hash the index does not serve
        text = (out / name).read_text(encoding="utf-8")
        digest = packages["filelock"]["wheels"][0]["hashes"]["sha256"]
        bad = tmp_path / f"bad-{name}"
        bad.write_text(text.replace(digest, ZEROS), encoding="utf-8")
        failed = envkit(
            "create",
            "--prefix",
            str(envs / "bad"),
            "--from-lock",
            str(bad),
            "--backend",
            "uv",
            "--no-verify",
            "-q",
        )
        assert failed.exit_code == 4, failed.stderr  # type: ignore[attr-defined]
        assert "mismatch" in failed.stderr.lower()  # type: ignore[attr-defined]
        assert not (envs / "bad").exists() and sorted(p.name for p in envs.iterdir()) == ["locked"]


@pytest.mark.slow
def test_pip_lock_offline_from_a_wheelhouse(tmp_path: Path) -> None:
    if not (WHEELS / TORCH).is_file():
        pytest.skip("the local wheelhouse (/opt/wheels) is not here")
    house = tmp_path / "wheels"
    house.mkdir()
    (house / TORCH).symlink_to(WHEELS / TORCH)
    for page in DEPENDENCIES:
        folder = PYPI / "simple" / page.replace("_", "-")
        for name in re.findall(r'href="\.\./\.\./files/([^"#]+)', (folder / "index.html").read_text()):
            if name.endswith(".whl") and ("cp311" in name or "py3-none" in name):
                (house / name).symlink_to(PYPI / "files" / name)
    out = tmp_path / "lock"
    result = envkit(
        "lock",
        *PLAN,
        "--lock-platform",
        "linux-64",
        "--wheelhouse",
        str(house),
        "--offline",
        "--format",
        "requirements",
        "-o",
        str(out),
    )
    assert result.exit_code == 0, result.stderr  # type: ignore[attr-defined]
    assert sorted(p.name for p in out.iterdir()) == ["requirements.txt"]
    text = (out / "requirements.txt").read_text(encoding="utf-8")
    assert f"--hash=sha256:{_sha256(WHEELS / TORCH)}" in text and "--index-url" not in text


def test_lock_platforms_take_envkit_platforms_and_conda_subdirs() -> None:
    assert lock_platforms(["linux-64", "osx-arm64", "linux-x86_64"]) == ("linux-x86_64", "macos-arm64")
    with pytest.raises(InputError, match="linux-128"):
        lock_platforms(["linux-128"])


def test_a_lock_envkit_did_not_make_is_exit_2(tmp_path: Path) -> None:
    plain = tmp_path / "requirements.txt"
    plain.write_text("torch==2.13.0\n", encoding="utf-8")
    assert_input_error(envkit("create", "x", "--from-lock", str(plain), "--dry-run"), "not a hashed lock")
    hashed = tmp_path / "other.txt"
    hashed.write_text(f"torch==2.13.0 --hash=sha256:{ZEROS}\n", encoding="utf-8")
    assert_input_error(
        envkit("create", "x", "--from-lock", str(hashed), "--dry-run"), "records no envkit plan"
    )
    toml = tmp_path / "pylock.toml"
    toml.write_text('lock-version = "1.0"\n', encoding="utf-8")
    assert_input_error(envkit("create", "x", "--from-lock", str(toml), "--dry-run"), "not a pylock.toml")


def test_pip_lock_bad_formats_and_offline_without_wheelhouse_are_exit_2(tmp_path: Path) -> None:
    assert_input_error(envkit("lock", *PLAN, "--format", "poetry", "-o", str(tmp_path)), "--format")
    assert_input_error(envkit("lock", *PLAN, "--offline", "-o", str(tmp_path)), "--offline")


def test_a_lock_for_another_platform_is_exit_2_before_anything_is_made(tmp_path: Path) -> None:
    """A lock's wheels are its platform's: a windows-x86_64 lock on this Linux machine went to the
    installer, which failed on the first hash or missing wheel (exit 4, a uv error about hashes).
    Now it is one line naming both platforms, and the command that locks for this one."""
    import json

    record = {"torch": "2.13.0", "variant": "cpu", "platform": "windows-x86_64", "python": "3.11"}
    record["command"] = "envkit lock pt2 --channel pip --lock-platform windows-x86_64"
    lock = tmp_path / "requirements.txt"
    lock.write_text(
        f"# envkit-plan: {json.dumps(record)}\nfilelock==4.0.8 \\\n    --hash=sha256:{ZEROS}\n",
        encoding="utf-8",
    )
    prefix = tmp_path / "env"
    result = envkit("create", "x", "--prefix", str(prefix), "--from-lock", str(lock), "--dry-run")
    assert_input_error(result, "a lock for windows-x86_64, and this machine is linux-")
    assert "--lock-platform linux-" in result.stderr and "windows-x86_64 --lock" not in result.stderr
    assert not prefix.exists()


def test_lock_never_replaces_a_requirements_txt_envkit_did_not_write(tmp_path: Path) -> None:
    """`envkit lock --channel pip` in a project folder (-o . by default) replaced the project's own
    requirements.txt with the lock, silently (exit 0); envkit spec refuses that. Now it is exit 2
    before uv runs, the file untouched; --force replaces it."""
    own = tmp_path / "requirements.txt"
    own.write_text("# the job's packages\nnumpy\ntorch\n", encoding="utf-8")
    result = envkit("lock", *PLAN, "--lock-platform", "linux-x86_64", "-o", str(tmp_path))
    assert_input_error(result, "requirements.txt exists and was not written by envkit")
    assert own.read_text(encoding="utf-8") == "# the job's packages\nnumpy\ntorch\n"
    assert not (tmp_path / "pylock.toml").exists()
