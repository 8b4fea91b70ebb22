"""The stack above torch: flash-attn, xformers, vLLM, bitsandbytes, DeepSpeed, torchao, triton, apex
and PyG's compiled packages. Data, not code: ``extensions/<name>.toml`` beside this module, one file
per project, each row citing the project's own sources (its repository at a tag, its PyPI files).

A project (``[project]``) says what it is: how it meets torch (``kind``), what PyPI holds of it, the
GPUs it supports at all, and what a source build needs. Each ``[[release]]`` says which torch it
requires (its ``Requires-Dist``), and where its prebuilt wheels are (``[[release.wheels]]``): on PyPI
(the files and their sha256 are listed, ``[[release.file]]``), as direct URLs (GitHub release
assets, by the release workflow's file-name scheme), on a find-links page (data.pyg.org) or in a
PEP 503 index (download.pytorch.org/whl/<variant>). A wheel set names the torch releases, torch
variants, Pythons, platforms and C++ ABI it was built for, and the GPU architectures of its kernels.

Matching a wheel to a torch build is envkit.resolve.extensions'; this module reads and validates.
``scripts/update_knowledge.py --extensions`` refreshes the PyPI files and Requires-Dist.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Final, Optional

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from envkit.knowledge._table import DATA_DIR, KnowledgeError, Row, read_table, single_table
from envkit.versions import ComputeCapability, Version, parse_compute_capability

__all__ = [
    "EXTENSIONS_DIR",
    "KINDS",
    "WHERE",
    "BuildNeeds",
    "ExtRelease",
    "Extension",
    "GpuCode",
    "WheelFile",
    "WheelSet",
    "load_extension",
    "load_extensions",
    "torch_cxx11_abi",
]

EXTENSIONS_DIR: Final = DATA_DIR / "extensions"
# How a project meets torch:
#   compiled  its .so links libtorch / libc10: built against one torch (minor), its C++ ABI and CUDA
#   pinned    its wheels pin torch exactly in Requires-Dist (vllm): pip replaces torch to satisfy it
#   ctypes    its kernels are a plain shared library loaded with ctypes (bitsandbytes): no torch ABI
#   jit       installs as Python; its CUDA ops compile on first use (DeepSpeed): needs nvcc at run time
#   pure      Python only, or a compiler of its own (triton)
KINDS: Final = ("compiled", "pinned", "ctypes", "jit", "pure")
# Where a wheel set is published.
# "sdist": a source distribution that installs without compiling anything (DeepSpeed: its ops compile
# at run time), so it needs no --allow-build.
WHERE: Final = ("pypi", "url", "find-links", "index", "sdist")
_BACKENDS: Final = ("cuda", "rocm", "cpu")
_PLATFORMS: Final = ("linux-x86_64", "linux-aarch64", "windows-x86_64", "macos-arm64", "macos-x86_64")
_VARIANT_RE: Final = re.compile(r"^(?:cpu|cu\d{2,3}|cu\d{2}\*|rocm\d+(?:\.\d+)*)$")
_SHA256_RE: Final = re.compile(r"^[0-9a-f]{64}$")
_TEMPLATE_KEYS: Final = frozenset(
    {"version", "torch", "torch_minor", "torch_mm", "variant", "cuda_major", "py", "platform_tag", "abi"}
)


@dataclass(frozen=True)
class GpuCode:
    """The GPU code a wheel carries: SASS per architecture (``exact``: arch-specific ``9.0a``, which
    runs on that architecture alone) and PTX the driver can JIT for newer ones."""

    sass: tuple[ComputeCapability, ...] = ()
    exact: tuple[ComputeCapability, ...] = ()
    ptx: tuple[ComputeCapability, ...] = ()

    @property
    def known(self) -> bool:
        return bool(self.sass or self.exact or self.ptx)

    def covers(self, cc: ComputeCapability) -> bool:
        """SASS of the same major and a minor not above it, exact SASS of ``cc``, or older PTX
        (CUDA C Programming Guide, "Binary Compatibility" and "PTX Compatibility")."""
        return (
            any(s.major == cc.major and s.minor <= cc.minor for s in self.sass)
            or cc in self.exact
            or any(p <= cc for p in self.ptx)
        )

    def names(self) -> list[str]:
        return (
            [c.sm for c in self.sass]
            + [f"{c.sm}a" for c in self.exact]
            + [f"compute_{p.major}{p.minor}" for p in self.ptx]
        )


@dataclass(frozen=True)
class WheelFile:
    """One published file: its name, where it is, and its sha256 where the source publishes one."""

    name: str
    url: str
    sha256: Optional[str] = None
    # This wheel's own Requires-Dist on torch, where it differs from its release's.
    requires_torch: Optional[SpecifierSet] = None

    @functools.cached_property
    def tags(self) -> frozenset[str]:
        """The wheel's tags (``cp311-cp311-manylinux_2_28_x86_64``); empty for an sdist."""
        try:
            _name, _version, _build, tags = parse_wheel_filename(self.name)
        except InvalidWheelFilename:
            return frozenset()
        return frozenset(str(t) for t in tags)


@dataclass(frozen=True)
class WheelSet:
    """Prebuilt wheels of one release built alike. ``torch``: the releases they were built against
    (``2.8``: any 2.8.x, ``2.6.0``: exactly that one; empty: any torch the release's Requires-Dist
    admits); ``cuda``: the torch builds they run with (``cu12*``: any CUDA 12 build, ``cu126``,
    ``cpu``; empty: any); ``cxx11_abi``: the ``_GLIBCXX_USE_CXX11_ABI`` values built (empty: not
    relevant). ``url`` and ``file`` are templates for the kinds that are not PyPI."""

    where: str
    torch: tuple[Version, ...]
    cuda: tuple[str, ...]
    python: tuple[Version, ...]
    platforms: tuple[str, ...]
    cxx11_abi: tuple[bool, ...]
    exclude: tuple[tuple[tuple[str, str], ...], ...]
    url: str
    file: str
    gpu: GpuCode
    source: str
    # The torch releases its kernels load with, where that is a range and not its Requires-Dist
    # (torchao 0.17: the stable ABI of torch >= 2.11, a check in its __init__.py).
    torch_range: Optional[SpecifierSet] = None


@dataclass(frozen=True)
class ExtRelease:
    version: Version
    date: Optional[str]
    requires_torch: Optional[SpecifierSet]  # its Requires-Dist on torch; None: it names no torch
    requires_python: Optional[SpecifierSet]
    wheels: tuple[WheelSet, ...]
    files: tuple[WheelFile, ...]  # PyPI's files of the release (wheels and sdist)
    source: str

    @property
    def sdist(self) -> Optional[WheelFile]:
        return next((f for f in self.files if f.name.endswith((".tar.gz", ".zip"))), None)


@dataclass(frozen=True)
class BuildNeeds:
    """What a source build of the project needs, from its README and setup.py."""

    requirement: str  # what pip is given: "flash-attn=={version}", "apex @ git+…@{tag}"
    no_build_isolation: bool  # its build imports the installed torch
    nvcc: Optional[SpecifierSet]  # the nvcc releases it builds with
    nvcc_major_of_torch: bool  # nvcc must have torch's CUDA major (torch.utils.cpp_extension checks it)
    nvcc_same_minor: bool  # … and its minor too (apex's setup.py refuses any other)
    arch_env: Optional[str]  # the variable that names the GPU architectures to build for
    arch_packed: bool  # it takes "80;90" (flash-attn), not TORCH_CUDA_ARCH_LIST's "8.0;9.0"
    compiler: str
    time: str  # a realistic build time, as the project states it
    requires: tuple[str, ...]  # packages that must be in the environment before a no-isolation build
    env: tuple[tuple[str, str], ...]  # variables the build is given
    config_settings: tuple[str, ...]  # pip --config-settings values (apex's --cpp_ext --cuda_ext)
    source: str
    # The torch builds a source build works with ("cuda", "rocm", "cpu"); empty: any. flash-attn
    # compiles CUDA or HIP kernels only: against a CPU torch (macOS, --no-gpu) its setup.py fails.
    backends: tuple[str, ...] = ()

    def builds_for(self, variant: str) -> bool:
        """Whether a source build works against a torch build of ``variant`` (cu126, rocm6.2, cpu)."""
        backend = "cuda" if variant.startswith("cu") else "rocm" if variant.startswith("rocm") else "cpu"
        return not self.backends or backend in self.backends


@dataclass(frozen=True)
class Extension:
    name: str  # the distribution's name, PEP 503-normalized
    module: str  # what `import` takes
    kind: str
    pypi: str  # "wheels", "sdist", "none", or "other": the PyPI name is another project's
    min_cc: Optional[ComputeCapability]  # the oldest GPU it supports at all
    kernel: Optional[str]  # the verify probe's smoke kernel for it
    build: Optional[BuildNeeds]
    homepage: str
    notes: tuple[str, ...]
    source: str
    releases: tuple[ExtRelease, ...] = field(default=())  # newest first

    def release(self, version: Version) -> Optional[ExtRelease]:
        return next((r for r in self.releases if r.version == version), None)


@dataclass(frozen=True)
class TorchAbi:
    """Which torch pip wheels are built with the C++11 ABI (``_GLIBCXX_USE_CXX11_ABI=1``): all from
    ``pip_since`` on, and ``also`` these (minor, variant) pairs before it."""

    pip_since: Version
    also: tuple[tuple[Version, str], ...]
    source: str


def torch_cxx11_abi(torch: Version, variant: str, *, conda: bool = False) -> bool:
    """The ``_GLIBCXX_USE_CXX11_ABI`` of an official torch build (extensions/_torch.toml): pip wheels
    from ``pip_since`` on and the ``also`` builds; conda-forge's always."""
    abi = _torch_abi()
    minor = Version(f"{torch.major}.{torch.minor}")
    return conda or Version(torch.base_version) >= abi.pip_since or (minor, variant) in abi.also


@functools.lru_cache(maxsize=1)
def _torch_abi() -> TorchAbi:
    row = single_table(read_table("extensions/_torch"), "extensions/_torch.toml", "cxx11_abi")
    also = []
    for item in _strings(row, "also"):
        minor, _, variant = item.partition("+")
        try:
            also.append((Version(minor), variant))
        except ValueError:
            raise row.fail("also", 'a list like ["2.6+cu126"]') from None
    return TorchAbi(row.version("pip_since"), tuple(also), row.source())


def _ccs(row: Row, field_name: str) -> tuple[tuple[ComputeCapability, ...], tuple[ComputeCapability, ...]]:
    """(plain, arch-specific) compute capabilities of a list like ["8.0", "9.0a"]."""
    items = row.raw(field_name, list, True) or []
    plain: list[ComputeCapability] = []
    exact: list[ComputeCapability] = []
    for item in items:
        cc = parse_compute_capability(item.rstrip("af")) if isinstance(item, str) else None
        if cc is None:
            raise row.fail(field_name, 'a list of compute capabilities like "8.0" or "9.0a"')
        (exact if item.endswith(("a", "f")) else plain).append(cc)
    return tuple(plain), tuple(exact)


def _strings(row: Row, field_name: str) -> tuple[str, ...]:
    items = row.raw(field_name, list, True) or []
    if not all(isinstance(i, str) and i for i in items):
        raise row.fail(field_name, "a list of strings")
    return tuple(items)


def _spec(row: Row, field_name: str) -> Optional[SpecifierSet]:
    text = row.opt_text(field_name)
    if text is None:
        return None
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        raise row.fail(field_name, "a PEP 440 specifier like '==2.6.0' or '>=2.4,<3'") from None


def _template(row: Row, field_name: str) -> str:
    text = row.opt_text(field_name) or ""
    keys = set(re.findall(r"\{(\w+)\}", text))
    if keys - _TEMPLATE_KEYS:
        raise row.fail(field_name, f"a template with keys among {', '.join(sorted(_TEMPLATE_KEYS))}")
    return text


def _wheel_set(row: Row) -> WheelSet:
    where = row.text("where")
    if where not in WHERE:
        raise row.fail("where", " or ".join(WHERE))
    cuda = _strings(row, "cuda")
    if not all(_VARIANT_RE.match(c) for c in cuda):
        raise row.fail("cuda", 'torch variants like "cu126", "cu12*", "cpu"')
    platforms = _strings(row, "platforms")
    if not platforms or any(p not in _PLATFORMS for p in platforms):
        raise row.fail("platforms", f"a non-empty list among {', '.join(_PLATFORMS)}")
    abi = row.raw("cxx11_abi", list, True) or []
    if not all(isinstance(a, bool) for a in abi):
        raise row.fail("cxx11_abi", "a list of true / false")
    excludes = []
    for item in row.raw("exclude", list, True) or []:
        if not isinstance(item, dict) or not item or not all(isinstance(v, str) for v in item.values()):
            raise row.fail("exclude", 'a list of tables like {torch = "2.4", python = "3.13"}')
        excludes.append(tuple(sorted(item.items())))
    sass, exact = _ccs(row, "sass")
    ptx, _ = _ccs(row, "ptx")
    wheel_set = WheelSet(
        where=where,
        torch=row.versions("torch"),
        cuda=cuda,
        python=row.versions("python"),
        platforms=platforms,
        cxx11_abi=tuple(abi),
        exclude=tuple(excludes),
        url=_template(row, "url"),
        file=_template(row, "file"),
        gpu=GpuCode(sass, exact, ptx),
        source=row.source(),
        torch_range=_spec(row, "torch_range"),
    )
    if where not in ("pypi", "sdist") and not (wheel_set.url and wheel_set.python):
        raise row.fail("url", f"a URL template and a python list for where = {where!r}")
    if where in ("find-links", "index") and not wheel_set.file:
        raise row.fail("file", "the file-name template of the wheels on that page")
    return wheel_set


def _file(row: Row) -> WheelFile:
    sha = row.opt_text("sha256")
    if sha is not None and not _SHA256_RE.match(sha):
        raise row.fail("sha256", "64 lowercase hex digits")
    name, url = row.text("name"), row.text("url")
    if not url.startswith("https://") or not url.endswith(name):
        raise row.fail("url", f"an https URL ending in the file's name {name!r}")
    return WheelFile(name, url, sha, _spec(row, "requires_torch"))


def _for(file: WheelFile, platform: str) -> bool:
    """Whether a wheel's platform tags are for ``platform`` (py3-none-any is for every one)."""
    plats = {t.rsplit("-", 1)[-1] for t in file.tags}
    os_, _, arch = platform.partition("-")
    if "any" in plats:
        return True
    if os_ == "linux":
        return any("linux" in p and p.endswith(arch) for p in plats)
    if os_ == "windows":
        return "win_amd64" in plats
    macs = ("arm64",) if arch == "arm64" else ("x86_64", "intel")
    return any(p.startswith("macosx") and p.endswith((*macs, "universal2")) for p in plats)


def _release(file: str, index: int, data: Any) -> ExtRelease:
    row = Row(file, "release", index, data)
    row.where = f"{file}: [[release]] #{index + 1} ({data.get('version') if isinstance(data, dict) else ''})"
    wheels = [
        _wheel_set(Row(row.where, "wheels", i, w)) for i, w in enumerate(row.raw("wheels", list, True) or [])
    ]
    files = [_file(Row(row.where, "file", i, f)) for i, f in enumerate(row.raw("file", list, True) or [])]
    release = ExtRelease(
        version=row.version("version"),
        date=row.opt_text("date"),
        requires_torch=_spec(row, "requires_torch"),
        requires_python=_spec(row, "requires_python"),
        wheels=tuple(wheels),
        files=tuple(files),
        source=row.source(),
    )
    if any(w.where == "pypi" for w in wheels) and not any(f.tags for f in files):
        raise row.fail("file", "the PyPI wheel files of a release with a where = 'pypi' wheel set")
    for w in wheels:  # a PyPI set claims only the platforms its release's files are for
        missing = [p for p in w.platforms if w.where == "pypi" and not any(_for(f, p) for f in files)]
        if missing:
            raise row.fail("wheels", f"platforms its PyPI files are for ({', '.join(missing)}: none)")
    if any(w.where == "sdist" for w in wheels) and release.sdist is None:
        raise row.fail("file", "the PyPI sdist of a release with a where = 'sdist' wheel set")
    return release


def _build(row: Row) -> BuildNeeds:
    env = row.raw("env", dict, True) or {}
    if not all(isinstance(v, str) for v in env.values()):
        raise row.fail("env", "a table of strings")
    backends = _strings(row, "backends")
    if any(b not in _BACKENDS for b in backends):
        raise row.fail("backends", f"a list among {', '.join(_BACKENDS)}")
    return BuildNeeds(
        requirement=row.text("requirement"),
        no_build_isolation=row.boolean("no_build_isolation", False),
        nvcc=_spec(row, "nvcc"),
        nvcc_major_of_torch=row.boolean("nvcc_major_of_torch", True),
        nvcc_same_minor=row.boolean("nvcc_same_minor", False),
        arch_env=row.opt_text("arch_env"),
        arch_packed=row.boolean("arch_packed", False),
        compiler=row.text("compiler"),
        time=row.text("time"),
        requires=_strings(row, "requires"),
        env=tuple(sorted(env.items())),
        config_settings=_strings(row, "config_settings"),
        source=row.source(),
        backends=backends,
    )


def _extension(stem: str) -> Extension:
    file = f"extensions/{stem}.toml"
    data = read_table(f"extensions/{stem}")
    project = single_table(data, file, "project")
    name = project.text("name")
    if canonicalize_name(name) != name or name != stem:
        raise project.fail("name", f"the file's name {stem!r}, PEP 503-normalized")
    kind = project.text("kind")
    if kind not in KINDS:
        raise project.fail("kind", " or ".join(KINDS))
    pypi = project.text("pypi")
    if pypi not in ("wheels", "sdist", "none", "other"):
        raise project.fail("pypi", "wheels, sdist, none or other")
    build_data = project.data.get("build")
    build = _build(Row(file, "project.build", 0, build_data)) if build_data is not None else None
    min_cc = project.opt_text("min_cc")
    releases = [_release(file, i, r) for i, r in enumerate(data.get("release", []))]
    ordered = tuple(sorted(releases, key=lambda r: r.version, reverse=True))
    if len({r.version for r in ordered}) != len(ordered):
        raise KnowledgeError(f"{file}: a release is listed twice")
    extension = Extension(
        name=name,
        module=project.text("module"),
        kind=kind,
        pypi=pypi,
        min_cc=project.cc("min_cc") if min_cc is not None else None,
        kernel=project.opt_text("kernel"),
        build=build,
        homepage=project.text("homepage"),
        notes=_strings(project, "notes"),
        source=project.source(),
        releases=ordered,
    )
    if not ordered:
        raise KnowledgeError(f"{file}: no [[release]] rows")
    return extension


@functools.cache
def load_extension(name: str) -> Optional[Extension]:
    """One extension by its (PEP 503) distribution name, reading its file alone; None when envkit
    knows no extension by that name. doctor asks this for the installed distributions only: the
    whole table costs ~25 files of TOML (load_extensions) where a machine has one or two of them."""
    if load_extensions.cache_info().currsize:  # already read whole: no second parse
        return load_extensions().get(name)
    if (
        name.startswith("_")
        or canonicalize_name(name) != name
        or not (EXTENSIONS_DIR / f"{name}.toml").is_file()
    ):
        return None
    return _extension(name)


@functools.lru_cache(maxsize=1)
def load_extensions() -> dict[str, Extension]:
    """Every extension the knowledge base describes, by distribution name (read once per process,
    validated as it is read: a bad row names its file, position and field)."""
    stems = sorted(p.stem for p in EXTENSIONS_DIR.glob("*.toml") if not p.stem.startswith("_"))
    found = {stem: _extension(stem) for stem in stems}
    _torch_abi()  # validated with the rest
    return found
