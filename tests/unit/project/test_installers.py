"""What the projects' own installers make of ``envkit add``'s edits, against a local index on
127.0.0.1 serving a cu126 index (a stand-in torch 2.14.1+cu126 wheel: the real one is 900 MB and
not reachable here) and a PyPI copy (/opt/pypi) for everything else: ``uv lock`` of a ``uv init``
project, and pip (``pip install --dry-run --report``) and ``uv pip compile`` of a requirements.txt.
Both take torch 2.14.1+cu126 from the cu126 index, numpy from PyPI."""

from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.test_bad_input import envkit

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PYPI = Path("/opt/pypi")
H100 = ("--gpu", "H100", "--driver", "550.54.15", "--platform", "linux-x86_64", "--python", "3.11")
STAND_IN = "torch-2.14.1+cu126-cp311-cp311-manylinux_2_28_x86_64.whl"


def _stand_in_wheel(folder: Path) -> Path:
    """A real wheel (zip, METADATA, WHEEL, RECORD with hashes) named as the cu126 build of torch
    2.14.1: what the resolvers read to choose it. It holds an empty ``torch`` package."""
    files = {
        "torch/__init__.py": b"__version__ = '2.14.1+cu126'\n",
        "torch-2.14.1+cu126.dist-info/METADATA": (
            b"Metadata-Version: 2.1\nName: torch\nVersion: 2.14.1+cu126\nRequires-Python: >=3.10\n"
            b"Requires-Dist: filelock\n"
        ),
        "torch-2.14.1+cu126.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: envkit-tests\nRoot-Is-Purelib: false\n"
            b"Tag: cp311-cp311-manylinux_2_28_x86_64\n"
        ),
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("torch-2.14.1+cu126.dist-info/RECORD,,")
    path = folder / STAND_IN
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr("torch-2.14.1+cu126.dist-info/RECORD", "\n".join(record) + "\n")
    return path


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def index(tmp_path: Path) -> Iterator[str]:
    if not (PYPI / "simple" / "numpy").is_dir():
        pytest.skip("the local PyPI copy (/opt/pypi) is not here")
    site = tmp_path / "site"
    torch_page = site / "whl" / "cu126" / "torch"
    torch_page.mkdir(parents=True)
    wheel = _stand_in_wheel(site / "whl" / "cu126")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    link = f'<a href="../{STAND_IN.replace("+", "%2B")}#sha256={digest}">{STAND_IN}</a>'
    (torch_page / "index.html").write_text(f"<html><body>{link}</body></html>\n")
    (site / "simple").symlink_to(PYPI / "simple")
    (site / "files").symlink_to(PYPI / "files")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _uv() -> str:
    return str(Path(sys.executable).parent / "uv")


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.slow
def test_uv_lock_of_an_edited_uv_init_project_takes_the_cu126_build(index: str, tmp_path: Path) -> None:
    project = tmp_path / "app"
    env = {**os.environ, "UV_DEFAULT_INDEX": f"{index}/simple", "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    _run(
        [_uv(), "init", "--app", "--name", "app", "--python", "3.11", "--no-workspace", str(project)],
        tmp_path,
        env,
    )
    # The project resolves for Linux only (the local index has no macOS or Windows torch).
    with (project / "pyproject.toml").open("a", encoding="utf-8") as fh:
        fh.write("\n[tool.uv]\nenvironments = [\"sys_platform == 'linux'\"]\n")
    _run([_uv(), "add", "--frozen", "numpy"], project, env)
    added = envkit("add", "torch", "--project", str(project), *H100, "--mirror", f"torch-wheels={index}/whl")
    assert added.exit_code == 0, added.stderr
    _run([_uv(), "lock"], project, env)
    lock = tomllib.loads((project / "uv.lock").read_text(encoding="utf-8"))
    packages = {p["name"]: p for p in lock["package"]}
    assert packages["torch"]["version"] == "2.14.1+cu126"
    assert packages["torch"]["source"] == {"registry": f"{index}/whl/cu126"}
    assert packages["numpy"]["source"] == {"registry": f"{index}/simple"}


@pytest.mark.slow
def test_pip_and_uv_pip_compile_of_an_edited_requirements_txt(index: str, tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text("# the job's packages\nnumpy\ntorch>=2.4  # the model\n", encoding="utf-8")
    mirrors = ("--mirror", f"torch-wheels={index}/whl", "--mirror", f"pypi={index}/simple")
    added = envkit("add", "torch", "--project", str(tmp_path), *H100, *mirrors)
    assert added.exit_code == 0, added.stderr
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    report = tmp_path / "report.json"
    pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
    _run([*pip, "--report", str(report), "-r", str(path)], tmp_path, env)
    chosen = {i["metadata"]["name"]: i for i in json.loads(report.read_text())["install"]}
    assert chosen["torch"]["metadata"]["version"] == "2.14.1+cu126"
    assert chosen["torch"]["download_info"]["url"].startswith(f"{index}/whl/cu126/")
    assert chosen["numpy"]["download_info"]["url"].startswith(f"{index}/files/")
    compiled = _run(
        [_uv(), "pip", "compile", str(path), "--python-version", "3.11", "--no-header"], tmp_path, env
    )
    assert "torch==2.14.1+cu126" in compiled.stdout
