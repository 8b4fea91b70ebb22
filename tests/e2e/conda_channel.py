"""Real conda channels built by the tests: real ``.conda`` and ``.tar.bz2`` packages (made with
conda-package-handling, conda's own packaging library), indexed by rattler's indexer (the
``repodata.json`` conda, mamba and rattler read), served from a folder (``file://``) or by a real
HTTP server on 127.0.0.1. No conda channel is reachable from the test machines.

The set mimics the PyTorch routes with small noarch packages: the ``pytorch`` channel (pytorch
2.5.1 CUDA and CPU builds, ``pytorch-cuda`` 12.1 with the CUDA runtime under it, ``cpuonly``),
``nvidia`` (``cuda-runtime``, and ``cuda-version`` 12.1, which constrains ``__cuda >=12`` as the
real one does: only the CUDA major is checked against the driver), ``defaults``' ``main`` (python
and plain dependencies) and
``conda-forge`` (pytorch 2.13.0 ``cuda129_*`` / ``cpu_*`` builds with ``cuda-version`` pins as the
feedstock's recipe makes them, see knowledge/conda.toml).

``python`` is this machine's own interpreter, packaged: a ``pyvenv.cfg`` and ``bin/python``, a link
to the interpreter running the tests, make the prefix's Python a real one whose ``sys.prefix`` is
the prefix (docs.python.org/3/library/venv.html: a pyvenv.cfg one folder above the executable).
The conda-forge ``pytorch`` 2.13.0 CPU package carries a ``.pth`` file naming the test
environment's site-packages, where the real torch 2.13.0 CPU wheel is installed: the new
environment imports a real torch, so ``envkit create``'s verify runs for real without a
multi-gigabyte package in the channel.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import http.server
import importlib.util
import json
import os
import random
import shutil
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
PYTAG = f"py{sys.version_info[0]}{sys.version_info[1]}"


@dataclass(frozen=True)
class Pkg:
    name: str
    version: str
    build: str = "0"
    depends: tuple[str, ...] = ()
    constrains: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict)  # path in the prefix -> text
    links: dict[str, str] = field(default_factory=dict)  # path in the prefix -> symlink target
    fmt: str = ".conda"
    subdir: str = "noarch"
    # bytes of share/<name>/data: pseudo-random, so the archive is as big (zeros compressed to 1.4 kB,
    # and the "slow" download took no time at all)
    big: int = 0

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.version}-{self.build}{self.fmt}"


def make_package(pkg: Pkg, channel: Path, work: Path) -> Path:
    """Build ``pkg`` into ``channel/<subdir>/`` with conda-package-handling."""
    import conda_package_handling.api as cph

    src = work / f"{pkg.name}-{pkg.version}-{pkg.build}"
    shutil.rmtree(src, ignore_errors=True)
    (src / "info").mkdir(parents=True)
    files = dict(pkg.files) or {f"share/{pkg.name}/VERSION": pkg.version + "\n"}
    paths = []
    for rel, text in files.items():
        target = src / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode()
        target.write_bytes(data)
        paths.append(
            {
                "_path": rel,
                "path_type": "hardlink",
                "sha256": hashlib.sha256(data).hexdigest(),
                "size_in_bytes": len(data),
            }
        )
    if pkg.big:
        rel = f"share/{pkg.name}/data"
        target = src / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        noise = random.Random(pkg.name)
        with target.open("wb") as fh:
            for _ in range(pkg.big // (1 << 20)):
                chunk = noise.randbytes(1 << 20)
                fh.write(chunk)
                digest.update(chunk)
        paths.append(
            {"_path": rel, "path_type": "hardlink", "sha256": digest.hexdigest(), "size_in_bytes": pkg.big}
        )
        files[rel] = ""
    for rel, to in pkg.links.items():
        target = src / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(to)
        paths.append({"_path": rel, "path_type": "softlink"})
    index = {
        "name": pkg.name,
        "version": pkg.version,
        "build": pkg.build,
        "build_number": int(pkg.build.rsplit("_", 1)[-1]) if pkg.build.rsplit("_", 1)[-1].isdigit() else 0,
        "depends": list(pkg.depends),
        "constrains": list(pkg.constrains),
        "subdir": pkg.subdir,
        "timestamp": int(time.time() * 1000),
        "license": "BSD-3-Clause",
    }
    if pkg.subdir == "noarch":
        index["noarch"] = "generic"
    (src / "info" / "index.json").write_text(json.dumps(index), encoding="utf-8")
    (src / "info" / "paths.json").write_text(
        json.dumps({"paths": paths, "paths_version": 1}), encoding="utf-8"
    )
    listed = sorted([*files, *pkg.links])
    (src / "info" / "files").write_text("\n".join(listed) + "\n", encoding="utf-8")
    out = channel / pkg.subdir
    out.mkdir(parents=True, exist_ok=True)
    (channel / "noarch").mkdir(exist_ok=True)
    level = {"compression_level": 1} if pkg.fmt == ".conda" else {}
    cph.create(
        str(src),
        ["info/index.json", "info/paths.json", "info/files", *listed],
        pkg.filename,
        out_folder=str(out),
        **level,
    )
    shutil.rmtree(src)
    return out / pkg.filename


def index(channel: Path) -> None:
    """repodata.json for every subdir, by rattler's indexer (rattler-index)."""
    import rattler.index

    asyncio.run(rattler.index.index_fs(channel, write_zst=False, write_shards=False, force=True))


def torch_site_packages() -> Optional[str]:
    """The site-packages folder holding the test environment's real torch (None: no torch)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(Path(next(iter(spec.submodule_search_locations))).parent)


def python_package(build: str = "0_envkit") -> Pkg:
    """This machine's interpreter as a conda package (see the module's docstring)."""
    base = Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    cfg = f"home = {base.parent}\ninclude-system-site-packages = false\nversion = {sys.version.split()[0]}\n"
    return Pkg(
        "python",
        sys.version.split()[0],
        build,
        files={"pyvenv.cfg": cfg, f"lib/python{PY}/site-packages/README": "site-packages\n"},
        links={"bin/python": str(base), "bin/python3": "python", f"bin/python{PY}": "python"},
    )


def standard_channels(root: Path, *, slow_package: int = 0) -> dict[str, Path]:
    """pytorch, nvidia, main (defaults) and conda-forge under ``root``, built and indexed.
    ``slow_package``: bytes of a package ``bigdata`` that pytorch 2.5.1 CUDA depends on (slow to
    link, for interruption tests)."""
    work = root / ".build"
    torch_pth = torch_site_packages()
    py_dep = f"python >={PY},<{PY}.999"
    pth = (
        {f"lib/python{PY}/site-packages/envkit-test-torch.pth": (torch_pth or "") + "\n"} if torch_pth else {}
    )
    channels: dict[str, list[Pkg]] = {
        "pytorch": [
            Pkg(
                "pytorch",
                "2.5.1",
                f"{PYTAG}_cuda12.1_cudnn9_0",
                (
                    py_dep,
                    "pytorch-cuda 12.1.*",
                    "filelock",
                    "typing-extensions",
                    *(["bigdata"] if slow_package else []),
                ),
            ),
            Pkg(
                "pytorch",
                "2.5.1",
                f"{PYTAG}_cpu_0",
                (py_dep, "cpuonly", "filelock", "typing-extensions"),
                fmt=".tar.bz2",
            ),
            # pytorch/builder release/2.5:conda/pytorch-cuda/meta.yaml: the CUDA libraries of 12.1,
            # no __cuda; the nvidia channel's cuda-version under them constrains __cuda >=12.
            Pkg("pytorch-cuda", "12.1", "ha16c6d3_6", ("cuda-runtime >=12.1,<12.2",)),
            Pkg("cpuonly", "2.0", "0"),
            Pkg("torchvision", "0.20.1", f"{PYTAG}_cu121", (py_dep, "pytorch 2.5.1")),
            Pkg("torchaudio", "2.5.1", f"{PYTAG}_cu121", (py_dep, "pytorch 2.5.1")),
            *([Pkg("bigdata", "1.0", "0", big=slow_package)] if slow_package else []),
        ],
        "nvidia": [
            Pkg("cuda-runtime", "12.1.0", "0", ("cuda-version >=12.1,<12.2",)),
            Pkg("cuda-version", "12.1", "3", constrains=("__cuda >=12",)),
        ],
        "main": [
            python_package(),
            Pkg("filelock", "3.13.1", "0"),
            Pkg("typing-extensions", "4.11.0", "0", fmt=".tar.bz2"),
        ],
        "conda-forge": [
            python_package("0_envkit_cf"),
            # The feedstock's build strings and pins (recipe/meta.yaml: cuda{ver}_{blas}_py{XY}_h…,
            # __cuda for CUDA builds, cuda-version through the CUDA compiler's run_exports).
            Pkg(
                "pytorch",
                "2.13.0",
                f"cpu_generic_{PYTAG}_h0_2",
                (py_dep, "filelock", "typing_extensions"),
                files=pth or {},
            ),
            Pkg(
                "pytorch",
                "2.13.0",
                f"cuda129_generic_{PYTAG}_h0_202",
                (py_dep, "cuda-version >=12.9,<13", "__cuda", "filelock", "typing_extensions"),
            ),
            Pkg(
                "pytorch",
                "2.13.0",
                f"cuda130_generic_{PYTAG}_h0_202",
                (py_dep, "cuda-version >=13.0,<14", "__cuda", "filelock", "typing_extensions"),
            ),
            Pkg("cuda-version", "12.9", "3", constrains=("__cuda >=12",)),
            Pkg("cuda-version", "13.0", "3", constrains=("__cuda >=13",)),
            Pkg("torchvision", "0.28.0", f"cpu_{PYTAG}_h0_0", (py_dep, "pytorch 2.13.0")),
            Pkg("torchaudio", "2.11.0", f"cpu_{PYTAG}_h0_0", (py_dep, "pytorch")),
            Pkg("filelock", "3.16.1", "pyhd8ed1ab_0"),
            Pkg("typing_extensions", "4.12.2", "pyha770c72_0", fmt=".tar.bz2"),
        ],
    }
    made = {}
    for name, packages in channels.items():
        channel = root / name
        for pkg in packages:
            make_package(pkg, channel, work)
        (channel / "linux-64").mkdir(exist_ok=True)
        index(channel)
        made[name] = channel
    shutil.rmtree(work, ignore_errors=True)
    return made


class _Quiet(http.server.SimpleHTTPRequestHandler):
    slow: Sequence[str] = ()  # file names served at ~1 MiB/s
    seen: list[str] = []  # noqa: RUF012 (one server per class copy)
    login: Optional[str] = None  # the Authorization header every request must carry

    def log_message(self, format: str, *args: object) -> None:
        pass

    def send_head(self):  # type: ignore[no-untyped-def]
        if self.login is not None and self.headers.get("Authorization") != self.login:
            self.send_error(401)
            return None
        return super().send_head()

    def copyfile(self, source, outputfile) -> None:  # type: ignore[no-untyped-def]
        self.seen.append(self.path)
        if any(self.path.endswith(name) for name in self.slow):
            while chunk := source.read(1 << 16):
                outputfile.write(chunk)
                time.sleep(0.05)
            return
        super().copyfile(source, outputfile)


@contextmanager
def serve(root: Path, *, slow: Sequence[str] = (), login: Optional[str] = None) -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 serving ``root``; yields its base URL. ``login``
    ("user:password"): every request without that Basic login is answered 401."""
    header = "Basic " + base64.b64encode(login.encode()).decode() if login else None
    handler = type("Handler", (_Quiet,), {"slow": tuple(slow), "seen": [], "login": header})

    def make(*args: object, **kwargs: object) -> http.server.SimpleHTTPRequestHandler:
        return handler(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make)  # type: ignore[arg-type]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def condarc(
    path: Path, alias: str, *, defaults: Optional[str] = None, custom: Optional[dict[str, str]] = None
) -> Path:
    """A .condarc pointing conda's channel names at the local channels."""
    lines = [f"channel_alias: {alias}"]
    lines.append("default_channels:")
    lines.append(f"  - {defaults or alias.rstrip('/') + '/main'}")
    if custom:
        lines.append("custom_channels:")
        lines += [f"  {name}: {url}" for name, url in custom.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
