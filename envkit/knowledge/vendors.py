"""Knowledge of GPUs besides NVIDIA's and of NVIDIA's Jetson route: amd.toml, intel.toml, jetson.toml.

Read and validated like the rest of the knowledge base (each row cites its source; a bad row names
its file, its position and the field). ``VendorKnowledge`` answers the lookups the detectors, the
resolver and the checks make: a product or gfx target by name, a family by PCI device id, the gfx
list of a ROCm wheel, the user space a ROCm kernel driver was tested with, a JetPack's wheels.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Final, Optional

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from envkit.knowledge._table import Row, read_table, table_rows
from envkit.versions import Version

__all__ = [
    "AmdGpu",
    "IntelDevice",
    "IntelFamily",
    "JetPack",
    "RocmArch",
    "VendorKnowledge",
    "normalize_gfx",
    "read_vendor_knowledge",
    "rocm_version",
]

_GFX_NAME: Final = re.compile(r"^gfx[0-9a-f]{3,5}$")
_DEVICE_ID: Final = re.compile(r"^0x[0-9a-f]{4}$")


def rocm_version(variant: str) -> Optional[Version]:
    """The ROCm release of a wheel variant: rocm6.2.4 -> 6.2.4; None for other variants.

    >>> rocm_version("rocm6.2.4"), rocm_version("cu121")
    (<Version('6.2.4')>, None)
    """
    match = re.fullmatch(r"rocm(\d+(?:\.\d+)*)", variant)
    return Version(match.group(1)) if match else None


def normalize_gfx(text: str) -> Optional[str]:
    """A gfx target as tools print it, in LLVM's spelling. rocm-smi and the amdsmi bindings print
    the stepping in decimal ("gfx9010" for gfx90a: ROCm/rocm_smi_lib#159's MI250X); rocminfo and
    collect_env add feature flags ("gfx90a:sramecc+:xnack-"). None for what is not a gfx target.

    >>> normalize_gfx("gfx9010"), normalize_gfx("GFX942"), normalize_gfx("gfx90a:sramecc+:xnack-")
    ('gfx90a', 'gfx942', 'gfx90a')
    >>> normalize_gfx("gfx18446744073709551615"), normalize_gfx("N/A")
    (None, None)
    """
    value = text.strip().lower().split(":", 1)[0]
    decimal = re.fullmatch(r"gfx([6-9])(\d)(\d{2})", value)
    if decimal and int(decimal.group(3)) > 9:
        # One-digit major, one minor digit, a two-digit decimal stepping: 9,0,10 -> gfx90a.
        step = int(decimal.group(3))
        return f"gfx{decimal.group(1)}{decimal.group(2)}{step:x}" if step <= 15 else None
    return value if _GFX_NAME.match(value) else None


@dataclass(frozen=True)
class AmdGpu:
    model: str
    match: re.Pattern[str]
    gfx: str
    device_ids: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class RocmArch:
    """The gfx targets a range of releases' ROCm wheels carry (PYTORCH_ROCM_ARCH)."""

    torch: Optional[SpecifierSet]  # None: the nightly channel
    variants: tuple[str, ...]
    gfx: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class IntelFamily:
    family: str  # the name torch's XPU AOT list uses: dg2, bmg, pvc, mtl-h, arl-h, lnl-m, ptl
    codename: str
    model: str
    match: re.Pattern[str]
    device_ids: tuple[str, ...]
    first_torch: Version  # the first release whose XPU page lists it as validated
    source: str


@dataclass(frozen=True)
class IntelDevice:
    family: str
    name: str


@dataclass(frozen=True)
class JetPack:
    jetpack: str
    l4t: SpecifierSet
    cuda: Version
    python: Version
    route: str  # "index", "wheel", "sbsa" (download.pytorch.org's aarch64 CUDA wheels), "forum"
    index: Optional[str]
    wheel: Optional[str]
    torch: tuple[Version, ...]
    drivers: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class VendorKnowledge:
    amd_gpus: tuple[AmdGpu, ...] = ()
    rocm_arch: tuple[RocmArch, ...] = ()
    rocm_nightly: tuple[RocmArch, ...] = ()
    kmd: tuple[tuple[Version, tuple[Version, ...], str], ...] = ()
    amdgpu_modules: tuple[tuple[str, Version, str], ...] = ()
    intel_families: tuple[IntelFamily, ...] = ()
    intel_products: tuple[tuple[str, str, str], ...] = ()  # (device id, name, source)
    xpu_requirements: tuple[tuple[SpecifierSet, str, str], ...] = ()
    # (torch range, platform, companions not published beside the XPU torch there, source)
    xpu_companion_gaps: tuple[tuple[SpecifierSet, str, tuple[str, ...], str], ...] = ()
    jetpacks: tuple[JetPack, ...] = ()

    # -- AMD ------------------------------------------------------------------------------------------

    def gfx_targets(self) -> frozenset[str]:
        """Every gfx target a product row or a wheel names."""
        found = {g.gfx for g in self.amd_gpus}
        found.update(t for row in (*self.rocm_arch, *self.rocm_nightly) for t in row.gfx)
        return frozenset(found)

    def amd_named(self, name: str) -> Optional[AmdGpu]:
        return next((g for g in self.amd_gpus if g.match.search(name)), None)

    def amd_by_device(self, device_id: Optional[str]) -> Optional[AmdGpu]:
        wanted = (device_id or "").lower()
        return next((g for g in self.amd_gpus if wanted and wanted in g.device_ids), None)

    def rocm_row(self, torch: Version, variant: str) -> Optional[RocmArch]:
        """The gfx list of torch ``torch``'s ``variant`` wheel; None where envkit has none."""
        public = Version(torch.public)
        for row in self.rocm_arch:
            if variant in row.variants and row.torch is not None and row.torch.contains(public):
                return row
        return None

    def nightly_rocm_row(self) -> Optional[RocmArch]:
        return self.rocm_nightly[0] if self.rocm_nightly else None

    def kmd_rocm(self, driver_version: Optional[str]) -> Optional[Version]:
        """The ROCm release whose kernel driver an amdgpu module version is (DKMS versions only:
        "6.12.12" -> 6.4; a kernel's own version, "6.9.0-rc5+", says nothing)."""
        if not driver_version or not re.fullmatch(r"\d+\.\d+\.\d+", driver_version):
            return None
        major_minor = ".".join(driver_version.split(".")[:2])
        return next((rocm for module, rocm, _ in self.amdgpu_modules if module == major_minor), None)

    def kmd_user_space(self, kmd: Version) -> Optional[tuple[Version, ...]]:
        """The user-space ROCm minors tested on the kernel driver of ROCm ``kmd``."""
        key = Version(f"{kmd.major}.{kmd.minor}")
        return next((users for rocm, users, _ in self.kmd if rocm == key), None)

    # -- Intel ----------------------------------------------------------------------------------------

    def intel_by_device(self, device_id: Optional[str]) -> Optional[IntelDevice]:
        wanted = (device_id or "").lower()
        family = next((f for f in self.intel_families if wanted and wanted in f.device_ids), None)
        if family is None:
            return None
        name = next((n for d, n, _ in self.intel_products if d == wanted), family.model)
        return IntelDevice(family.family, name)

    def intel_named(self, name: str) -> Optional[IntelFamily]:
        return next((f for f in self.intel_families if f.match.search(name)), None)

    def intel_family(self, family: str) -> Optional[IntelFamily]:
        return next((f for f in self.intel_families if f.family == family), None)

    def xpu_requirement(self, torch: Version) -> Optional[str]:
        public = Version(torch.public)
        return next((text for spec, text, _ in self.xpu_requirements if spec.contains(public)), None)

    def xpu_missing_companions(self, torch: Version, platform: str) -> tuple[str, ...]:
        """The companions (torchvision, torchaudio) with no XPU wheels beside ``torch`` on ``platform``."""
        public = Version(torch.public)
        return next(
            (
                names
                for spec, where, names, _ in self.xpu_companion_gaps
                if where == platform and spec.contains(public)
            ),
            (),
        )

    # -- names ----------------------------------------------------------------------------------------

    def nearest_names(self, text: str, extra: tuple[str, ...] = ()) -> list[str]:
        """The known AMD / Intel names (and gfx targets) nearest to ``text``, for an error message:
        "MI300Z" -> MI300X, MI308X, MI300A."""
        shorts: dict[str, str] = {}
        models = [g.model for g in self.amd_gpus] + [f.model for f in self.intel_families]
        models += [name for _, name, _ in self.intel_products] + list(extra)
        for model in models:
            for part in re.split(r"\s*/\s*|,\s*", re.sub(r"\([^)]*\)", "", model)):
                short = re.sub(r"\b(?:AMD|Intel|Instinct|Radeon|Graphics)\b", "", part)
                short = " ".join(short.split())
                if short:
                    shorts.setdefault(short.lower(), short)
        for gfx in self.gfx_targets():
            shorts.setdefault(gfx, gfx)
        wanted = " ".join(re.sub(r"\b(?:AMD|Intel|Instinct|Radeon|Graphics)\b", "", text, flags=re.I).split())
        close = difflib.get_close_matches(wanted.lower(), list(shorts), n=3, cutoff=0.6)
        return [shorts[c] for c in close]

    # -- Jetson ---------------------------------------------------------------------------------------

    def jetpack_for(self, l4t: Optional[Version], driver: Optional[str]) -> Optional[JetPack]:
        """The JetPack of an L4T release, else of a Jetson driver version (540.4.0: JetPack 6.x)."""
        if l4t is not None:
            found = next((j for j in self.jetpacks if j.l4t.contains(l4t)), None)
            if found is not None:
                return found
        if driver:
            return next((j for j in self.jetpacks if driver in j.drivers), None)
        return None


def _pattern(row: Row) -> re.Pattern[str]:
    try:
        return re.compile(row.text("match"), re.IGNORECASE)
    except re.error as exc:
        raise row.fail("match", f"a regular expression ({exc})") from None


def _strings(row: Row, field: str, pattern: Optional[re.Pattern[str]] = None) -> tuple[str, ...]:
    items = row.raw(field, list, True) or []
    if not all(isinstance(i, str) and (pattern is None or pattern.match(i)) for i in items):
        raise row.fail(field, "a list of strings" + (f" like {pattern.pattern}" if pattern else ""))
    return tuple(items)


def _spec(row: Row, field: str) -> SpecifierSet:
    try:
        return SpecifierSet(row.text(field))
    except InvalidSpecifier:
        raise row.fail(field, "a PEP 440 specifier like '>=2.7,<2.8'") from None


def _amd_gpu(row: Row) -> AmdGpu:
    gfx = row.text("gfx")
    if not _GFX_NAME.match(gfx):
        raise row.fail("gfx", "a gfx target like gfx942")
    return AmdGpu(
        row.text("model"), _pattern(row), gfx, _strings(row, "device_ids", _DEVICE_ID), row.source()
    )


def _rocm_arch(row: Row, nightly: bool) -> RocmArch:
    variants = _strings(row, "variants", re.compile(r"^rocm\d+(?:\.\d+)*$"))
    gfx = _strings(row, "gfx", _GFX_NAME)
    if not variants or not gfx:
        raise row.fail("variants" if not variants else "gfx", "a non-empty list")
    return RocmArch(None if nightly else _spec(row, "torch"), variants, gfx, row.source())


def _intel_family(row: Row) -> IntelFamily:
    return IntelFamily(
        family=row.text("family"),
        codename=row.text("codename"),
        model=row.text("model"),
        match=_pattern(row),
        device_ids=_strings(row, "device_ids", _DEVICE_ID),
        first_torch=row.version("first_torch"),
        source=row.source(),
    )


def _jetpack(row: Row) -> JetPack:
    route = row.text("route")
    if route not in ("index", "wheel", "sbsa", "forum"):
        raise row.fail("route", "index, wheel, sbsa or forum")
    jetpack = JetPack(
        jetpack=row.text("jetpack"),
        l4t=_spec(row, "l4t"),
        cuda=row.version("cuda"),
        python=row.version("python"),
        route=route,
        index=row.opt_text("index"),
        wheel=row.opt_text("wheel"),
        torch=row.versions("torch"),
        drivers=_strings(row, "drivers"),
        source=row.source(),
    )
    if (route == "index") != (jetpack.index is not None) or (route == "wheel") != (jetpack.wheel is not None):
        raise row.fail("route", "index with an index URL, wheel with a wheel URL")
    return jetpack


def read_vendor_knowledge() -> VendorKnowledge:
    amd, intel, jetson = read_table("amd"), read_table("intel"), read_table("jetson")
    kmd = tuple(
        (r.version("rocm"), r.versions("user_space"), r.source()) for r in table_rows(amd, "amd.toml", "kmd")
    )
    modules = tuple(
        (r.text("module"), r.version("rocm"), r.source())
        for r in table_rows(amd, "amd.toml", "amdgpu_module")
    )
    families = tuple(_intel_family(r) for r in table_rows(intel, "intel.toml", "family"))
    known_ids = {d for f in families for d in f.device_ids}
    products = []
    for r in table_rows(intel, "intel.toml", "product"):
        device = r.text("device_id")
        if device not in known_ids:
            raise r.fail("device_id", "a device id of one of the [[family]] rows")
        products.append((device, r.text("name"), r.source()))
    return VendorKnowledge(
        amd_gpus=tuple(_amd_gpu(r) for r in table_rows(amd, "amd.toml", "gpu")),
        rocm_arch=tuple(_rocm_arch(r, False) for r in table_rows(amd, "amd.toml", "rocm_arch")),
        rocm_nightly=tuple(_rocm_arch(r, True) for r in table_rows(amd, "amd.toml", "rocm_nightly")),
        kmd=kmd,
        amdgpu_modules=modules,
        intel_families=families,
        intel_products=tuple(products),
        xpu_requirements=tuple(
            (_spec(r, "torch"), r.text("text"), r.source())
            for r in table_rows(intel, "intel.toml", "requirement")
        ),
        xpu_companion_gaps=tuple(_companion_gap(r) for r in table_rows(intel, "intel.toml", "companion_gap")),
        jetpacks=tuple(_jetpack(r) for r in table_rows(jetson, "jetson.toml", "jetpack")),
    )


_COMPANIONS: Final = ("torchvision", "torchaudio")
# envkit.knowledge.PLATFORMS (not imported: envkit.knowledge imports this module).
_PLATFORMS: Final = ("linux-x86_64", "linux-aarch64", "windows-x86_64")


def _companion_gap(row: Row) -> tuple[SpecifierSet, str, tuple[str, ...], str]:
    platform = row.text("platform")
    if platform not in _PLATFORMS:
        raise row.fail("platform", f"one of {', '.join(_PLATFORMS)} (where XPU wheels are built)")
    names = _strings(row, "packages")
    if not names or any(n not in _COMPANIONS for n in names):
        raise row.fail("packages", "torchvision and/or torchaudio")
    return _spec(row, "torch"), platform, names, row.source()
