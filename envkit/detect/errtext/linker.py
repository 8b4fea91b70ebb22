"""The dynamic loader's failures in an error text, read into LoadFailure facts.

What glibc's ld.so says, and Python and ctypes pass on word for word (bminor/glibc
@04e750e75b73957cf1c791535a3f4319534a52fc):

- elf/dl-lookup.c ``_dl_lookup_symbol_x``: "<object>: undefined symbol: <symbol>" with ", version
  <library>" where the reference is versioned ("libcusparse.so.12: undefined symbol:
  __nvJitLinkAddData_12_1, version libnvJitLink.so.12": that cuSPARSE needs the nvJitLink of
  CUDA ≥ 12.1 and the one loaded is older);
- elf/dl-load.c ``_dl_map_object``: "<name>: cannot open shared object file: No such file or
  directory";
- elf/dl-version.c ``match_symbol``: "<library>: version `GLIBCXX_3.4.30' not found (required by
  <object>)".

cuDNN wraps the second in "Could not load library libcudnn_cnn_infer.so.8. Error: …" (8.x) and
"Unable to load any of {libcudnn_cnn.so.9.1.0, …}" (9.x). Which package a failing file belongs to
is its folder under site-packages (or dist-packages); a bare module file there
(flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so) is named by its module. The symbol says who
should have provided it: a mangled C++ name in namespace c10, at, torch or caffe2 is torch's (an
extension built against another torch), a CUDA library's prefix names that library.
"""

from __future__ import annotations

import posixpath
import re
from typing import Final, Optional

from packaging.utils import canonicalize_name

from envkit.detect.host import lib_family
from envkit.facts import LoadFailure
from envkit.redact import redact
from envkit.versions import Version, parse_version

__all__ = ["find_load_failures", "owner", "python_version_in_paths"]

_FILE: Final = r"[^\s:'\"`()\[\]{}<>,]+?\.(?:so(?:\.[0-9][\w.]*)?|pyd)"
_UNDEFINED_RE: Final = re.compile(
    rf"(?P<file>{_FILE}): undefined symbol: (?P<symbol>[^\s,'\"`]+)(?:, version (?P<version>[^\s'\"`]+))?"
)
# elf/dl-lookup.c check_match: "<object>: symbol <name>, version <library> not defined in file
# <file> with link time reference" (the library found has no such version of the symbol).
_NOT_DEFINED_RE: Final = re.compile(
    rf"(?P<file>{_FILE}): symbol (?P<symbol>[^\s,'\"]+), version (?P<version>\S+) not defined in file "
    r"\S+ with link time reference"
)
_CANNOT_OPEN_RE: Final = re.compile(rf"(?P<file>{_FILE}): cannot open shared object file")
_NOT_FOUND_RE: Final = re.compile(
    rf"(?P<file>{_FILE}): version [`'‘](?P<tag>[^`'’\s]+)['’] not found \(required by (?P<by>[^)\s]+)\)"
)
_CUDNN_9_RE: Final = re.compile(r"Unable to load any of \{(?P<first>lib\w+\.so[\w.]*)")
# site-packages/<top>/… or dist-packages/<top>; conda's and Debian's layouts alike.
_SITE_RE: Final = re.compile(r"(?:site|dist)-packages/(?P<top>[^/\s'\"]+)(?P<rest>/[^\s'\"]*)?")
_MODULE_FILE_RE: Final = re.compile(r"^(?!lib)(?P<module>[A-Za-z_]\w*)\.(?:cpython-\d+\S*|abi3)\.so$")
_PY_PATH_RE: Final = re.compile(r"/python(?P<v>3\.\d{1,2})t?/(?:site|dist)-packages/")
_PY_TAG_RE: Final = re.compile(r"\.cpython-3(?P<minor>\d{1,2})t?-")
# torch's C++ namespaces as the Itanium ABI mangles them (_ZN3c10…, _ZNK2at…, _ZTVN5torch…).
_TORCH_SYMBOL_RE: Final = re.compile(r"^_Z\w*?(?:N|K|L|S)?(?:3c10|2at|5torch|6caffe2)")
# Modules (a site-packages folder or a bare module file) whose distribution has another name.
_MODULE_DIST: Final = {
    "flash_attn_2_cuda": "flash-attn",
    "flash_attn_cuda": "flash-attn",
    "flash_attn": "flash-attn",
    "flash_attn_3": "flash-attn",
    "vllm_flash_attn": "vllm",
    "amp_C": "apex",
    "apex_C": "apex",
    "fused_layer_norm_cuda": "apex",
    "fused_adam_cuda": "apex",
    "syncbn": "apex",
    "causal_conv1d_cuda": "causal-conv1d",
    "selective_scan_cuda": "mamba-ssm",
    "pyg_lib": "pyg-lib",
    "transformer_engine": "transformer-engine",
    "flashinfer": "flashinfer-python",
    "mmcv": "mmcv",
    "_C": "torch",
}
# Symbol prefixes of the CUDA libraries torch loads (each library's public API prefix).
_SYMBOL_FAMILY: Final = (
    ("__nvJitLink", "nvjitlink"),
    ("nvJitLink", "nvjitlink"),
    ("pncclComm", "nccl"),
    ("nccl", "nccl"),
    ("cublasLt", "cublas"),
    ("cublas", "cublas"),
    ("cudnn", "cudnn"),
    ("cusparseLt", "cusparselt"),
    ("cusparse", "cusparse"),
    ("cufft", "cufft"),
    ("curand", "curand"),
    ("cusolver", "cusolver"),
    ("nvrtc", "nvrtc"),
    ("cupti", "cupti"),
    ("__cuda", "cudart"),
    ("cuda", "cudart"),
)
# The family's version encoded in a versioned symbol: __nvJitLinkAddData_12_1 -> 12.1.
_SYMBOL_VERSION_RE: Final = re.compile(r"_(?P<major>\d{2})_(?P<minor>\d{1,2})$")


def _trim(text: str) -> str:
    return redact(text.rstrip(".;:)'\"`"))


def owner(path: str) -> Optional[str]:
    """The distribution a file under site-packages belongs to, normalized; None elsewhere.

    >>> owner("/venv/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so")
    'flash-attn'
    >>> owner("/usr/lib/python3/dist-packages/torch/lib/libtorch_cuda.so"), owner("/usr/lib/libx.so")
    ('torch', None)
    """
    # torch's own loads name "…/torch/lib/../../nvidia/cusparse/lib/…": the file is the nvidia wheel's.
    match = _SITE_RE.search(posixpath.normpath(path))
    if match is None:
        # A bare extension module's file name (flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so,
        # _C.abi3.so), as some tracebacks print it: named by its module. A lib*.so is a library.
        bare = _MODULE_FILE_RE.match(path)
        if bare is None:
            return None
        module = bare.group("module")
        return _MODULE_DIST.get(module) or str(canonicalize_name(module.replace("_", "-")))
    top = match.group("top")
    module = top.split(".", 1)[0]
    if module == "nvidia":
        family = (match.group("rest") or "/").split("/")[1]
        return f"nvidia-{family.replace('_', '-')}" if family else "nvidia"
    return _MODULE_DIST.get(module) or str(canonicalize_name(module.replace("_", "-")))


def _provider(symbol: Optional[str], library: Optional[str]) -> tuple[Optional[str], Optional[Version]]:
    """Who should provide the symbol or library, and the version the name implies."""
    if library:
        if library.startswith(("GLIBCXX_", "CXXABI_")):
            return "libstdc++", parse_version(library.split("_", 1)[1])
        if library.startswith("GLIBC_"):
            return "glibc", parse_version(library.split("_", 1)[1])
        family = lib_family(library.rsplit("/", 1)[-1])
        if family is not None:
            need = parse_version(family[1]) if family[1] else None
            provider, version = family[0], need
            if symbol:
                encoded = _SYMBOL_VERSION_RE.search(symbol)
                if encoded and provider == "nvjitlink":
                    version = Version(f"{int(encoded.group('major'))}.{int(encoded.group('minor'))}")
            return provider, version
        if re.match(r"lib(?:torch|c10|shm)\w*\.so", library.rsplit("/", 1)[-1]):
            return "torch", None
    if symbol:
        if _TORCH_SYMBOL_RE.match(symbol):
            return "torch", None
        for prefix, family_name in _SYMBOL_FAMILY:
            if symbol.startswith(prefix):
                encoded = _SYMBOL_VERSION_RE.search(symbol) if family_name == "nvjitlink" else None
                need = (
                    Version(f"{int(encoded.group('major'))}.{int(encoded.group('minor'))}")
                    if encoded
                    else None
                )
                return family_name, need
    return None, None


def find_load_failures(text: str) -> tuple[LoadFailure, ...]:
    """Every loader failure in ``text`` (a blob: whitespace collapsed), each once, in order."""
    found: dict[tuple[str, str, Optional[str]], LoadFailure] = {}
    # glibc's two wordings of a symbol the loader could not bind: "undefined symbol: S, version V"
    # and "symbol S version V not defined in file F with link time reference".
    for marker, pattern in (
        ("undefined symbol", _UNDEFINED_RE),
        ("with link time reference", _NOT_DEFINED_RE),
    ):
        if marker not in text:
            continue
        for m in pattern.finditer(text):
            symbol = _trim(m.group("symbol"))
            version = _trim(m.group("version")) if m.group("version") else None
            provider, needs = _provider(symbol, version)
            failure = LoadFailure(
                "undefined_symbol",
                _trim(m.group("file")),
                symbol=symbol,
                library=version,
                package=owner(m.group("file")),
                provider=provider,
                needs=needs,
            )
            found.setdefault((failure.kind, failure.file, symbol), failure)
    if "cannot open shared object" in text:
        for m in _CANNOT_OPEN_RE.finditer(text):
            name = m.group("file")
            provider, needs = _provider(None, name)
            # The importing module the traceback names before the message, when it is an extension.
            failure = LoadFailure(
                "cannot_open", name, package=_importer(text, m.start()), provider=provider, needs=needs
            )
            found.setdefault((failure.kind, name, None), failure)
    if "not found" in text:
        for m in _NOT_FOUND_RE.finditer(text):
            tag = m.group("tag")
            provider, needs = _provider(None, tag)
            failure = LoadFailure(
                "version_not_found",
                _trim(m.group("by")),
                symbol=tag,
                library=m.group("file"),
                package=owner(m.group("by")),
                provider=provider,
                needs=needs,
            )
            found.setdefault((failure.kind, failure.file, tag), failure)
    if "Unable to load any of" in text:
        for m in _CUDNN_9_RE.finditer(text):
            name = m.group("first")
            provider, needs = _provider(None, name)
            found.setdefault(("cannot_open", name, None), LoadFailure("cannot_open", name, provider=provider))
    return tuple(found.values())


def _importer(text: str, end: int) -> Optional[str]:
    """The package of the last site-packages frame before ``end`` (within the traceback above the
    message): the module whose import needed the missing file."""
    window = text[max(0, end - 3000) : end]
    frames = [owner(m.group(0)) for m in _SITE_RE.finditer(window)]
    named = [f for f in frames if f is not None]
    return named[-1] if named else None


def python_version_in_paths(text: str) -> Optional[Version]:
    """The Python version the text's site-packages paths or extension tags name (the most frequent
    one; a traceback through two interpreters is rare and the first wins a tie)."""
    counts: dict[str, int] = {}
    for m in _PY_PATH_RE.finditer(text):
        counts[m.group("v")] = counts.get(m.group("v"), 0) + 1
    for m in _PY_TAG_RE.finditer(text):
        key = f"3.{m.group('minor')}"
        counts[key] = counts.get(key, 0) + 1
    if not counts:
        return None
    return parse_version(max(counts, key=lambda k: counts[k]))
