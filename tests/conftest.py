"""Shared test seams: stand-in programs (real executables that print recorded output), fake
machine roots, recorded NVML, and a System that ties them together."""

from __future__ import annotations

import json
import shlex
import shutil
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

import envkit.knowledge._table as table
from envkit.detect.nvml import NvmlError, RecordedNvml
from envkit.knowledge import load_knowledge
from envkit.system import System

DATA = Path(__file__).parent / "data"


def write_program(
    folder: Path, name: str, stdout: str = "", *, rc: int = 0, sleep: float = 0, stderr: str = ""
) -> Path:
    """A real executable that prints ``stdout`` (and ``stderr``), sleeps, then exits with ``rc``."""
    folder.mkdir(parents=True, exist_ok=True)
    out_file = folder / f".{name}.stdout"
    err_file = folder / f".{name}.stderr"
    out_file.write_text(stdout, encoding="utf-8")
    err_file.write_text(stderr, encoding="utf-8")
    script = folder / name
    lines = [
        "#!/bin/sh",
        f"cat {shlex.quote(str(out_file))}",
        f"cat {shlex.quote(str(err_file))} >&2",
    ]
    if sleep:
        lines.append(f"sleep {sleep}")
    lines.append(f"exit {rc}")
    script.write_text("\n".join(lines) + "\n", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


def write_file(root: Path, absolute: str, text: str) -> Path:
    path = root / absolute.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def no_nvml() -> RecordedNvml:
    return RecordedNvml({"init_error": "LibraryNotFound"})


def recorded(name: str) -> dict[str, Any]:
    with (DATA / "nvml" / f"{name}.json").open(encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


class MachineBuilder:
    """A fake machine: a root folder, a bin folder on PATH, environment and NVML answers."""

    def __init__(self, base: Path) -> None:
        self.root = base / "root"
        self.bin = base / "bin"
        self.root.mkdir()
        self.bin.mkdir()
        self.env: dict[str, str] = {"PATH": f"{self.bin}:/usr/bin:/bin", "HOME": str(base / "home")}
        self.nvml: Callable[[], Any] = no_nvml

    def program(self, name: str, stdout: str = "", **kwargs: Any) -> Path:
        return write_program(self.bin, name, stdout, **kwargs)

    def file(self, absolute: str, text: str) -> Path:
        return write_file(self.root, absolute, text)

    def nvml_data(self, data: dict[str, Any]) -> None:
        self.nvml = lambda: RecordedNvml(data)

    def system(self, **overrides: Any) -> System:
        return System(env=self.env, root=self.root, nvml=self.nvml, **overrides)


@pytest.fixture
def machine(tmp_path: Path) -> MachineBuilder:
    return MachineBuilder(tmp_path)


@pytest.fixture
def python_exe() -> str:
    return sys.executable


def raise_nvml(name: str) -> Callable[[], Any]:
    def factory() -> Any:
        raise NvmlError(name, "replayed")

    return factory


@pytest.fixture(autouse=True)
def _no_user_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # Crash logs and caches go to a temporary folder, never to the developer's home.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def make_venv(folder: Path) -> Path:
    """A real virtual environment without pip (fast); returns its site-packages folder."""
    import subprocess

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    (site,) = folder.glob("lib/python*/site-packages")
    return site


def add_dist(site: Path, name: str, version: str) -> None:
    """Install the metadata of a distribution (no code) into ``site``."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def add_fake_torch(
    site: Path, version: str, *, cuda: str | None, init: str = "", dist_version: str | None = None
) -> Path:
    """A torch package with a real version.py as the wheels ship it, and optional __init__ code.
    ``dist_version``: the metadata's version where it differs (PyPI's wheels drop the local tag)."""
    add_dist(site, "torch", dist_version or version)
    pkg = site / "torch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(init)
    cuda_text = repr(cuda)
    (pkg / "version.py").write_text(
        "from typing import Optional\n\n"
        "__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'xpu']\n"
        f"__version__ = '{version}'\n"
        "debug = False\n"
        f"cuda: Optional[str] = {cuda_text}\n"
        "git_version = 'a8d6afb511a69687bbb2b7e88a3cf67917e1697e'\n"
        "hip: Optional[str] = None\n"
        "xpu: Optional[str] = None\n"
    )
    return pkg


@pytest.fixture
def data_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the knowledge base's TOML files that load_knowledge() reads instead (edit freely)."""
    for path in table.DATA_DIR.glob("*.toml"):
        shutil.copy(path, tmp_path / path.name)
    monkeypatch.setattr(table, "DATA_DIR", tmp_path)
    load_knowledge.cache_clear()
    yield tmp_path
    load_knowledge.cache_clear()
