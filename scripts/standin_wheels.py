"""Stand-in wheels with real names, versions and Requires-Dist, a compiled stand-in extension linked
against the installed torch, and a PEP 503 index on 127.0.0.1 that serves them.

For the tests (tests/integration/test_extensions_e2e.py) and scripts/compare_extensions.py: what pip
and uv decide depends on names, versions, tags and Requires-Dist only, so a wheel of a few hundred
bytes with the real metadata makes them decide as they would for the real one.

A wheel is a zip with ``<name>-<version>.dist-info/{METADATA,WHEEL,RECORD}`` (the binary
distribution format spec, packaging.python.org/en/latest/specifications/binary-distribution-format/).
The index is the simple repository API's HTML form (PEP 503): ``/<root>/<project>/`` lists the
files, each link with ``#sha256=`` (PEP 503's hash fragment).
"""

from __future__ import annotations

import base64
import hashlib
import html
import http.server
import os
import subprocess
import sysconfig
import threading
import zipfile
from contextlib import contextmanager
from typing import TYPE_CHECKING, Optional

from packaging.utils import canonicalize_name

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

__all__ = ["build_wheel", "compiled_module", "serve", "write_index"]


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(
    dest: Path,
    name: str,
    version: str,
    *,
    tag: str = "py3-none-any",
    requires: Sequence[str] = (),
    files: Optional[dict[str, bytes]] = None,
    purelib: bool = True,
) -> Path:
    """A wheel named as pip expects (``flash_attn-2.8.3-py3-none-any.whl``) holding ``files`` (a
    package of that module name with a ``__version__`` when none is given)."""
    dist = name.replace("-", "_")
    module = dist.lower()
    files = (
        dict(files)
        if files is not None
        else {f"{module}/__init__.py": f"__version__ = {version!r}\n".encode()}
    )
    info = f"{dist}-{version}.dist-info"
    metadata = (
        "\n".join(
            ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
            + [f"Requires-Dist: {r}" for r in requires]
        ).encode()
        + b"\n"
    )
    wheel_meta = (
        "\n".join(
            [
                "Wheel-Version: 1.0",
                "Generator: envkit-standin",
                f"Root-Is-Purelib: {str(purelib).lower()}",
                f"Tag: {tag}",
            ]
        ).encode()
        + b"\n"
    )
    entries = {**files, f"{info}/METADATA": metadata, f"{info}/WHEEL": wheel_meta}
    record = [_record_line(p, d) for p, d in entries.items()] + [f"{info}/RECORD,,"]
    entries[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for arcname, data in entries.items():
            zf.writestr(arcname, data)
    return path


_EXTENSION_CPP = r"""
#include <Python.h>
#include <c10/core/Device.h>
#include <string>

// A stand-in compiled extension: it calls into libc10 (c10::Device::str), so it loads only beside
// a torch whose libc10 exports that symbol with this C++ ABI.
static PyObject* device_name(PyObject*, PyObject*) {
  c10::Device device(c10::DeviceType::CPU);
  std::string text = device.str();
  return PyUnicode_FromString(text.c_str());
}

static PyMethodDef methods[] = {{"device_name", device_name, METH_NOARGS, "c10::Device(CPU).str()"},
                                {nullptr, nullptr, 0, nullptr}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "MODULE", nullptr, -1, methods};
PyMODINIT_FUNC PyInit_MODULE(void) { return PyModule_Create(&module); }
"""


def compiled_module(torch_dir: Path, out_dir: Path, module: str, *, cxx11_abi: bool = True) -> Path:
    """Compile a CPython extension module ``module`` that links libc10 of the torch at ``torch_dir``
    (its headers and lib/). With the other ``cxx11_abi`` than that torch's, it refers to a c10
    symbol that torch does not export and fails to load ("undefined symbol")."""
    out_dir.mkdir(parents=True, exist_ok=True)
    source = out_dir / f"{module}.cpp"
    source.write_text(_EXTENSION_CPP.replace("MODULE", module), encoding="utf-8")
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    target = out_dir / f"{module}{suffix}"
    command = [
        os.environ.get("CXX", "g++"),
        "-shared",
        "-fPIC",
        "-O0",
        "-std=c++17",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(cxx11_abi)}",
        f"-I{sysconfig.get_paths()['include']}",
        f"-I{torch_dir / 'include'}",
        str(source),
        f"-L{torch_dir / 'lib'}",
        "-lc10",
        "-o",
        str(target),
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    return target


def write_index(root: Path, wheels: Sequence[Path], base: str = "simple") -> Path:
    """PEP 503 pages under ``root/base/<project>/index.html`` for ``wheels`` (copied beside them)."""
    by_project: dict[str, list[Path]] = {}
    for wheel in wheels:
        by_project.setdefault(canonicalize_name(wheel.name.split("-", 1)[0]), []).append(wheel)
    for project, files in by_project.items():
        folder = root / base / project
        folder.mkdir(parents=True, exist_ok=True)
        links = []
        for wheel in files:
            data = wheel.read_bytes()
            (folder / wheel.name).write_bytes(data)
            digest = hashlib.sha256(data).hexdigest()
            links.append(f'<a href="{html.escape(wheel.name)}#sha256={digest}">{html.escape(wheel.name)}</a>')
        (folder / "index.html").write_text(
            "<!DOCTYPE html><html><body>\n" + "<br/>\n".join(links) + "\n</body></html>\n", encoding="utf-8"
        )
    return root / base


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve ``root`` on 127.0.0.1 (a free port) while the block runs; yields the base URL."""
    handler = lambda *a, **k: _Quiet(*a, directory=str(root), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
