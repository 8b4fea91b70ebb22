"""The knowledge base: torch releases and their wheel variants, compiled GPU architectures, CUDA
toolkit -> driver floors, GPUs, and the conda routes. Data, not code.

The TOML files beside this module are the data (each row cites its source, and the loader refuses
a row whose source a reader could not follow; SOURCES.md says what was confirmed). They are read
once, validated as they are read (a bad row names its file, its position and the field), and
cross-checked: every CUDA variant has driver floors, every variant of a release has one
compiled-architecture row, the PyPI default is a variant of its release.
``scripts/update_knowledge.py`` refreshes the release rows from the PyTorch wheel index.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Final, Optional

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from envkit.knowledge._table import DATA_DIR, KnowledgeError, Row, read_table, single_table, table_rows
from envkit.knowledge.containers import BaseImage, read_images
from envkit.knowledge.vendors import VendorKnowledge, read_vendor_knowledge
from envkit.versions import ComputeCapability, NvVersion, Version

__all__ = [
    "CONDA_SUBDIRS",
    "DATA_DIR",
    "PLATFORMS",
    "VARIANT_PATTERN",
    "ArchRow",
    "BaseImage",
    "CudaFamily",
    "DriverArchRule",
    "DriverFloor",
    "Gpu",
    "Knowledge",
    "KnowledgeError",
    "Release",
    "Row",
    "Toolkit",
    "VendorKnowledge",
    "gpu_name_spellings",
    "is_variant",
    "load_knowledge",
    "read_table",
    "sass_runs",
    "single_table",
    "table_rows",
    "variant_cuda",
]

# macos-x86_64: PyPI has macosx_10_9_x86_64 torch wheels up to 2.2.2 (pypi.org/simple/torch/).
PLATFORMS: Final = ("linux-x86_64", "linux-aarch64", "windows-x86_64", "macos-arm64", "macos-x86_64")
# Platforms whose CUDA variants must have a compiled-architecture row.
CUDA_PLATFORMS: Final = ("linux-x86_64", "linux-aarch64", "windows-x86_64")
# A wheel variant: the folder of the PyTorch index and the local label of its wheels (+cu121); CUDA 9.x
# folders have two digits (cu92: torch 1.2-1.7, pytorch.github.io previous-versions.md).
VARIANT_PATTERN: Final = r"(?:cpu|cu\d{2,3}|rocm\d+(?:\.\d+)*|xpu)"
# envkit platform -> conda subdir (conda's platform names: linux-64, win-64, osx-arm64, …).
CONDA_SUBDIRS: Final = {
    "linux-x86_64": "linux-64",
    "linux-aarch64": "linux-aarch64",
    "windows-x86_64": "win-64",
    "macos-arm64": "osx-arm64",
    "macos-x86_64": "osx-64",
}
_VARIANT_RE: Final = re.compile(f"^{VARIANT_PATTERN}$")


def is_variant(text: str) -> bool:
    """cpu, cu121, rocm6.2, xpu: a name the PyTorch wheel index uses.

    >>> is_variant("cu121"), is_variant("rocm6.2"), is_variant("cuda12")
    (True, True, False)
    """
    return _VARIANT_RE.match(text) is not None


@functools.lru_cache(maxsize=256)  # a few dozen names, asked for each candidate build of every plan
def variant_cuda(variant: str) -> Optional[Version]:
    """The CUDA version of a wheel variant: cu121 -> 12.1, cu118 -> 11.8; None for cpu/rocm.

    >>> variant_cuda("cu130"), variant_cuda("cu92"), variant_cuda("cpu")
    (<Version('13.0')>, <Version('9.2')>, None)
    """
    if re.fullmatch(r"cu\d{2,3}", variant):
        return Version(f"{variant[2:-1]}.{variant[-1]}")
    return None


@dataclass(frozen=True)
class Release:
    torch: Version
    python: tuple[Version, ...]  # CPython minors with wheels
    torchvision: Version
    torchaudio: Version
    triton: Optional[Version]
    pypi_default: str
    variants: dict[str, tuple[str, ...]]  # platform -> wheel index folders
    unlisted: tuple[str, ...]  # variants on the index that pytorch.org does not offer
    conda_pytorch_cuda: tuple[Version, ...]  # pytorch-cuda=X.Y on -c pytorch (empty: not there)
    date: Optional[str]
    source: str
    # Platforms whose wheels cover fewer Python minors than ``python`` (macos-arm64 before 1.12).
    python_platform: dict[str, tuple[Version, ...]] = field(default_factory=dict)
    # What plain ``pip install torch`` gets on linux-aarch64: cpu up to 2.10, a CUDA build from 2.11.
    pypi_default_aarch64: str = "cpu"

    def has(self, platform: str, variant: str) -> bool:
        return variant in self.variants.get(platform, ())

    def python_on(self, platform: str) -> tuple[Version, ...]:
        """The Python minors with wheels on ``platform``."""
        return self.python_platform.get(platform, self.python)

    def pypi_variant(self, platform: str) -> Optional[str]:
        """The build PyPI's own torch wheel is on ``platform`` (None: PyPI has no wheel there); the
        Windows and macOS wheels are CPU builds."""
        if platform not in self.variants:
            return None
        if platform == "linux-x86_64":
            return self.pypi_default
        if platform == "linux-aarch64":
            return self.pypi_default_aarch64
        return "cpu"


# SASS compiled for these integrated (Tegra) GPUs runs on them alone, and desktop SASS does not run
# on them: "Binary compatibility is supported only for the desktop. It is not supported for Tegra.
# Also, the binary compatibility between desktop and Tegra is not supported" (CUDA C Programming
# Guide, "Binary Compatibility"). torch's own table (torch/cuda/__init__.py DEVICE_REQUIREMENT:
# 53 -> {5.3}, 62 -> {6.2}, 72 -> {7.2}, 87 -> {8.7}, 101 -> {10.1, 11.0}; 50/52, 60/61, 70, 80/86,
# 100 exclude the Tegra GPU of their major) says the same; CUDA 13 renamed Thor's sm_101 to sm_110,
# so sm_101 code also runs on 11.0.
TEGRA_SASS: Final[dict[ComputeCapability, frozenset[ComputeCapability]]] = {
    ComputeCapability(5, 3): frozenset({ComputeCapability(5, 3)}),
    ComputeCapability(6, 2): frozenset({ComputeCapability(6, 2)}),
    ComputeCapability(7, 2): frozenset({ComputeCapability(7, 2)}),
    ComputeCapability(8, 7): frozenset({ComputeCapability(8, 7)}),
    ComputeCapability(10, 1): frozenset({ComputeCapability(10, 1), ComputeCapability(11, 0)}),
}
_TEGRA_DEVICES: Final = frozenset(TEGRA_SASS)


def sass_runs(code: ComputeCapability, device: ComputeCapability) -> bool:
    """Whether SASS built for ``code`` runs on a GPU of compute capability ``device``: a desktop
    GPU of the same major and a minor not below it (sm_86 runs on 8.9, not on 9.0), never across
    desktop and Tegra (see TEGRA_SASS).

    >>> cc = ComputeCapability
    >>> sass_runs(cc(8, 6), cc(8, 9)), sass_runs(cc(8, 0), cc(8, 7)), sass_runs(cc(10, 1), cc(11, 0))
    (True, False, True)
    """
    tegra = TEGRA_SASS.get(code)
    if tegra is not None:
        return device in tegra
    return code.major == device.major and code.minor <= device.minor and device not in _TEGRA_DEVICES


@dataclass(frozen=True)
class ArchRow:
    torch: SpecifierSet
    variant: str
    platform: str
    sass: tuple[ComputeCapability, ...]
    ptx: tuple[ComputeCapability, ...]
    source: str

    def covers(self, cc: ComputeCapability) -> bool:
        """Whether code for ``cc`` is in the build: SASS that runs on it (``sass_runs``), or PTX of an
        older-or-equal architecture, JIT-compiled by the driver (CUDA C Programming Guide, "Binary
        Compatibility" / "PTX Compatibility")."""
        return any(sass_runs(s, cc) for s in self.sass) or any(p <= cc for p in self.ptx)

    def names(self) -> list[str]:
        return [c.sm for c in self.sass] + [f"compute_{p.major}{p.minor}" for p in self.ptx]

    def describes(self, torch: Version, variant: str, platform: str) -> bool:
        return self.variant == variant and self.platform == platform and self.torch.contains(torch)


@dataclass(frozen=True)
class Toolkit:
    """A CUDA minor and the driver its toolkit shipped with (NVIDIA's Table 3, GA row), and the real
    architectures its nvcc can emit (``sass``; empty for Table 3's update rows)."""

    cuda: Version
    linux_driver: NvVersion
    windows_driver: Optional[NvVersion]
    source: str
    sass: tuple[ComputeCapability, ...] = ()

    def emits(self, cc: ComputeCapability) -> bool:
        """Whether nvcc of this CUDA can compile SASS for exactly ``cc``."""
        return cc in self.sass

    def sass_range(self) -> Optional[tuple[ComputeCapability, ComputeCapability]]:
        """(lowest, highest) architecture nvcc of this CUDA can emit; None for update rows."""
        return (min(self.sass), max(self.sass)) if self.sass else None


@dataclass(frozen=True)
class CudaFamily:
    """A CUDA major and its minor-version-compatibility driver floor (NVIDIA's Table 2), or, for
    CUDA 10.x and older, ``minor_version_compatibility=False``: each minor needs its own driver."""

    major: int
    linux_min_driver: Optional[NvVersion]
    windows_min_driver: Optional[NvVersion]
    source: str
    minor_version_compatibility: bool = True


@dataclass(frozen=True)
class DriverFloor:
    """What a CUDA version needs of the driver, for one OS.

    ``minimum``: the oldest driver that runs it at all (the family's minor-version-compatibility
    floor, or the toolkit's own driver where the family has none or the toolkit's is lower, as for
    CUDA 11.0). ``toolkit``: the driver the toolkit shipped with; None where Table 3 was not read
    (a CUDA minor newer than the table). Below ``toolkit`` but at or above ``minimum``, it runs
    through minor-version compatibility (no PTX JIT of newer PTX)."""

    cuda: Version
    minimum: NvVersion
    toolkit: Optional[NvVersion]
    minor_version_compatibility: bool
    source: str


@dataclass(frozen=True)
class DriverArchRule:
    """GPUs whose support ends after a driver branch (``last_branch``) or starts at one."""

    what: str
    min_cc: ComputeCapability
    max_cc: ComputeCapability
    last_branch: Optional[int]
    first_branch: Optional[int]
    source: str
    match: Optional[re.Pattern[str]] = None  # only GPUs whose name matches (a product, not an arch)

    def applies(self, cc: ComputeCapability, name: Optional[str] = None) -> bool:
        """Whether the rule is about this GPU. A rule for a named product applies only when the
        GPU's name is given and matches."""
        if not self.min_cc <= cc <= self.max_cc:
            return False
        return self.match is None or (
            name is not None and any(self.match.search(s) for s in gpu_name_spellings(name))
        )


@dataclass(frozen=True)
class Gpu:
    model: str
    match: re.Pattern[str]
    cc: ComputeCapability
    bf16_tflops: Optional[float]
    fp16_tflops: Optional[float]
    memory_bandwidth_gbs: Optional[float]
    source: str


@dataclass(frozen=True)
class CondaRoutes:
    pytorch_last_release: Version
    pytorch_channels: tuple[str, ...]
    pytorch_cuda_versions: tuple[Version, ...]
    cpu_package: str
    forge_channel: str
    forge_gpu_package: str
    forge_cuda_selector: str
    forge_max_cuda: Version
    forge_releases: tuple[Version, ...]
    cudatoolkit_versions: tuple[Version, ...]
    # (torch, conda subdir, the CUDA versions conda-forge built it for there): conda.toml's ``cuda``.
    forge_builds: tuple[tuple[Version, str, tuple[Version, ...]], ...] = ()

    def forge_cuda(self, torch: Version, subdir: str) -> tuple[Version, ...]:
        """The CUDA builds conda-forge has of ``torch`` for ``subdir`` (linux-64, …), oldest first."""
        return next((cudas for t, s, cudas in self.forge_builds if t == torch and s == subdir), ())


@dataclass(frozen=True)
class Knowledge:
    releases: tuple[Release, ...]  # newest first
    arch: tuple[ArchRow, ...]
    toolkits: dict[str, Toolkit]  # "12.1" -> …
    toolkit_updates: tuple[Toolkit, ...]  # Table 3's other rows (12.2, 12.4.1, …), cuda = X.Y.Z
    families: dict[int, CudaFamily]
    driver_rules: tuple[DriverArchRule, ...]
    gpus: tuple[Gpu, ...]
    conda: CondaRoutes
    images: tuple[BaseImage, ...] = ()  # containers.toml: base images for spec --format docker/apptainer
    # amd.toml, intel.toml, jetson.toml: AMD and Intel GPUs and wheels, NVIDIA's Jetson route.
    vendors: VendorKnowledge = field(default_factory=VendorKnowledge)

    # The resolver asks these for each candidate build (a few hundred a plan, ~1,000 plans in the
    # test suite): indexes of the tables, built once per Knowledge (cached_property writes to the
    # instance's __dict__, which a frozen dataclass allows; dataclasses.replace starts afresh).

    @functools.cached_property
    def _releases_by_torch(self) -> dict[Version, Release]:
        by_torch: dict[Version, Release] = {}
        for r in self.releases:
            by_torch.setdefault(r.torch, r)  # the first, as a search of the tuple finds it
        return by_torch

    @functools.cached_property
    def _arch_rows(self) -> dict[tuple[str, str], tuple[ArchRow, ...]]:
        rows: dict[tuple[str, str], list[ArchRow]] = {}
        for row in self.arch:
            rows.setdefault((row.variant, row.platform), []).append(row)
        return {key: tuple(found) for key, found in rows.items()}

    def release(self, version: Version) -> Optional[Release]:
        return self._releases_by_torch.get(Version(version.public))

    def arch_for(
        self, release: Release, variant: str, platform: str, *, or_linux: bool = False
    ) -> Optional[ArchRow]:
        """The compiled architectures of a release's variant on a platform; ``or_linux``: else the
        linux-x86_64 wheel's, the closest list (conda builds, platforms without a row)."""
        for where in (platform, "linux-x86_64") if or_linux else (platform,):
            for row in self._arch_rows.get((variant, where), ()):
                if row.describes(release.torch, variant, where):
                    return row
        return None

    def toolkit(self, cuda: Version) -> Optional[Toolkit]:
        return self.toolkits.get(f"{cuda.major}.{cuda.minor}")

    def family(self, cuda: Version) -> Optional[CudaFamily]:
        return self.families.get(cuda.major)

    @functools.cached_property
    def _floors(self) -> dict[tuple[int, int, bool], Optional[DriverFloor]]:
        return {}

    def driver_floor(self, cuda: Version, *, windows: bool = False) -> Optional[DriverFloor]:
        """What ``cuda`` needs of the driver; None when envkit does not know (no family row, or a
        family without minor-version compatibility and no toolkit row): a check then skips.

        NVIDIA publishes no Windows driver for CUDA 13.x (Table 3 says N/A, the driver is no
        longer bundled); the Linux version of the same branch stands in for it there.
        """
        key = (cuda.major, cuda.minor, windows)
        if key not in self._floors:
            self._floors[key] = self._driver_floor(cuda, windows=windows)
        return self._floors[key]

    def _driver_floor(self, cuda: Version, *, windows: bool) -> Optional[DriverFloor]:
        family, toolkit = self.family(cuda), self.toolkit(cuda)
        if family is None:
            return None
        own = None
        if toolkit is not None:
            own = (toolkit.windows_driver if windows else None) or toolkit.linux_driver
        floor = None
        if family.minor_version_compatibility:
            floor = (family.windows_min_driver if windows else None) or family.linux_min_driver
        if floor is None or (own is not None and own < floor):
            floor = own  # CUDA 10.x and older; CUDA 11.0 GA shipped below the 11.x floor
        if floor is None:
            return None
        sources = [family.source] + ([toolkit.source] if toolkit is not None else [])
        return DriverFloor(
            Version(f"{cuda.major}.{cuda.minor}"),
            floor,
            own,
            family.minor_version_compatibility,
            "; ".join(sources),
        )

    def driver_floors(
        self, cuda: Version, *, windows: bool = False
    ) -> tuple[Optional[NvVersion], Optional[NvVersion]]:
        """(the oldest driver that runs ``cuda``, the toolkit's own driver); (None, None) when
        unknown. See driver_floor, which says which of the two is missing and why."""
        floor = self.driver_floor(cuda, windows=windows)
        return (None, None) if floor is None else (floor.minimum, floor.toolkit)

    def sass_range(self, cuda: Version) -> Optional[tuple[ComputeCapability, ComputeCapability]]:
        """(lowest, highest) architecture nvcc of CUDA ``cuda`` can emit SASS for: the bound on any
        build made with it whose exact arch list is unknown (CUDA 10.2 cannot emit sm_80). None
        when the toolkit is not in the table."""
        toolkit = self.toolkit(cuda)
        return None if toolkit is None else toolkit.sass_range()

    def cuda_for_driver(self, driver: NvVersion, *, windows: bool = False) -> Optional[Version]:
        """The newest CUDA minor a driver runs in full: the newest toolkit of NVIDIA's Table 3 ("CUDA
        Toolkit and Corresponding Driver Versions") whose driver the given one meets. That is the
        version nvidia-smi prints and conda's ``__cuda`` reports ("maximum version of CUDA supported
        by the display driver", docs.conda.io manage-virtual)."""
        floors: dict[Version, NvVersion] = {}
        for tk in (*self.toolkits.values(), *self.toolkit_updates):
            floor = tk.windows_driver if windows else tk.linux_driver
            if floor is not None:
                minor = Version(f"{tk.cuda.major}.{tk.cuda.minor}")
                floors[minor] = min(floor, floors.get(minor, floor))
        fitting = [cuda for cuda, floor in floors.items() if driver >= floor]
        return max(fitting) if fitting else None

    def gpu_named(self, name: str) -> Optional[Gpu]:
        """The first GPU row whose pattern matches an NVML name (or a user's "RTX 5090").

        The name is normalised first (gpu_name_spellings): pasted and typed names carry marks,
        doubled spaces and underscores that nvidia-smi's own spelling has not. None when no row
        matches: the caller says the GPU is unknown; it never guesses."""
        for spelling in gpu_name_spellings(name):
            found = next((g for g in self.gpus if g.match.search(spelling)), None)
            if found is not None:
                return found
        return None


# "GeForce(R) RTX(TM)": marks some tools (Windows' device manager, lspci's database) add.
_GPU_MARKS: Final = re.compile(r"\((?:R|TM|C)\)|[®™©]", re.IGNORECASE)
# "RTX5090", "GTX1080Ti": a family written against its number, as people type it.
_GPU_FAMILY_NUMBER: Final = re.compile(r"\b(RTX|GTX|GT|MX|TITAN)(?=\d)", re.IGNORECASE)


def gpu_name_spellings(name: str) -> tuple[str, ...]:
    """The spellings of a GPU name the table is matched against, nvidia-smi's first.

    nvidia-smi's names ("NVIDIA A10G", "Tesla V100-SXM2-32GB", "NVIDIA GeForce RTX 5070 Laptop
    GPU", "GeForce RTX 3090" from drivers before the NVIDIA prefix) match as they are; a name from
    a paste or a flag may have marks, runs of blanks (a hard-wrapped line joined again), a blank
    after a hyphen (wrapped at "A100-SXM4-"), underscores (Kubernetes labels such as
    NVIDIA_A100-SXM4-80GB) or a family run into its number ("RTX5090")."""
    plain = _GPU_MARKS.sub(" ", name).replace("_", " ")
    plain = re.sub(r"-\s+", "-", " ".join(plain.split()))
    spaced = _GPU_FAMILY_NUMBER.sub(r"\1 ", plain)
    return tuple(dict.fromkeys((name, plain, spaced)))


def _toolkit(row: Row, *, with_sass: bool) -> Toolkit:
    toolkit = Toolkit(
        row.version("cuda"),
        row.version("linux_driver"),
        row.version("windows_driver", True),
        row.source(),
        tuple(sorted(row.ccs("sass"))) if with_sass else (),
    )
    if with_sass and not toolkit.sass:
        raise row.fail("sass", "a non-empty list of compute capabilities")
    return toolkit


def _family(row: Row) -> CudaFamily:
    major = row.integer("major")
    assert major is not None
    mvc = row.boolean("minor_version_compatibility", True)
    family = CudaFamily(
        major,
        row.version("linux_min_driver", optional=not mvc),
        row.version("windows_min_driver", True),
        row.source(),
        mvc,
    )
    if not mvc and (family.linux_min_driver or family.windows_min_driver):
        raise row.fail("linux_min_driver", "no floor where minor_version_compatibility = false")
    return family


def _release(row: Row) -> Release:
    variants_raw = row.raw("variants", dict, False)
    variants: dict[str, tuple[str, ...]] = {}
    for platform, items in variants_raw.items():
        if platform not in PLATFORMS:
            raise row.fail("variants", f"platforms among {', '.join(PLATFORMS)}")
        if not isinstance(items, list) or not all(isinstance(v, str) and is_variant(v) for v in items):
            raise row.fail("variants", f"a list of variant names for {platform}")
        variants[platform] = tuple(items)
    conda = row.data.get("conda") or {}
    conda_row = Row(row.where, "conda", 0, conda)
    unlisted = tuple(row.raw("unlisted", list, True) or ())
    python_platform: dict[str, tuple[Version, ...]] = {}
    by_platform = row.raw("python_platform", dict, True) or {}
    for platform in by_platform:
        if platform not in variants:
            raise row.fail("python_platform", "platforms the release has variants for")
        python_platform[platform] = Row(row.where, "python_platform", 0, by_platform).versions(platform)
    release = Release(
        torch=row.version("torch"),
        python=row.versions("python"),
        torchvision=row.version("torchvision"),
        torchaudio=row.version("torchaudio"),
        triton=row.version("triton", optional=True),
        pypi_default=row.text("pypi_default"),
        variants=variants,
        unlisted=unlisted,
        conda_pytorch_cuda=conda_row.versions("pytorch_cuda"),
        date=row.opt_text("date"),
        source=row.source(),
        python_platform=python_platform,
        pypi_default_aarch64=row.opt_text("pypi_default_aarch64") or "cpu",
    )
    if not release.python:
        raise row.fail("python", "a non-empty list of Python versions")
    if not release.has("linux-x86_64", release.pypi_default):
        raise row.fail("pypi_default", "one of the release's linux-x86_64 variants")
    if "linux-aarch64" in variants and not release.has("linux-aarch64", release.pypi_default_aarch64):
        raise row.fail("pypi_default_aarch64", "one of the release's linux-aarch64 variants")
    for variant in unlisted:
        if not any(variant in v for v in variants.values()):
            raise row.fail("unlisted", "variants the release has")
    return release


def _arch(row: Row) -> ArchRow:
    try:
        spec = SpecifierSet(row.text("torch"))
    except InvalidSpecifier:
        raise row.fail("torch", "a PEP 440 specifier like '>=2.7,<2.8'") from None
    platform = row.text("platform")
    if platform not in PLATFORMS:
        raise row.fail("platform", f"one of {', '.join(PLATFORMS)}")
    return ArchRow(spec, row.text("variant"), platform, row.ccs("sass"), row.ccs("ptx"), row.source())


def _gpu(row: Row) -> Gpu:
    try:
        pattern = re.compile(row.text("match"), re.IGNORECASE)
    except re.error as exc:
        raise row.fail("match", f"a regular expression ({exc})") from None
    return Gpu(
        model=row.text("model"),
        match=pattern,
        cc=row.cc("cc"),
        bf16_tflops=row.number("bf16_tflops"),
        fp16_tflops=row.number("fp16_tflops"),
        memory_bandwidth_gbs=row.number("memory_bandwidth_gbs"),
        source=row.source(),
    )


def _conda(data: dict[str, Any]) -> CondaRoutes:
    channel = single_table(data, "conda.toml", "pytorch_channel")
    forge = single_table(data, "conda.toml", "conda_forge")
    channels = channel.raw("channels", list, False)
    return CondaRoutes(
        pytorch_last_release=channel.version("last_release"),
        pytorch_channels=tuple(str(c) for c in channels),
        pytorch_cuda_versions=channel.versions("pytorch_cuda_versions"),
        cpu_package=channel.text("cpu_package"),
        forge_channel=forge.text("channel"),
        forge_gpu_package=forge.text("gpu_package"),
        forge_cuda_selector=forge.text("cuda_selector"),
        forge_max_cuda=forge.version("max_cuda_version"),
        forge_releases=tuple(
            r.version("torch") for r in table_rows(data, "conda.toml", "conda_forge_release")
        ),
        cudatoolkit_versions=tuple(
            r.version("version") for r in table_rows(data, "conda.toml", "cudatoolkit")
        ),
        forge_builds=tuple(
            build for r in table_rows(data, "conda.toml", "conda_forge_release") for build in _forge_builds(r)
        ),
    )


def _forge_builds(row: Row) -> list[tuple[Version, str, tuple[Version, ...]]]:
    """A conda_forge_release row's ``cuda`` table: subdir -> the CUDA versions built."""
    table = row.raw("cuda", dict, True) or {}
    out = []
    for subdir, versions in table.items():
        if not isinstance(versions, list) or not all(isinstance(v, str) for v in versions):
            raise row.fail("cuda", 'a table of conda subdirs to lists of CUDA versions ("12.9")')
        try:
            out.append((row.version("torch"), str(subdir), tuple(Version(v) for v in versions)))
        except ValueError:
            raise row.fail("cuda", "CUDA versions like 12.9") from None
    return out


def _name_pattern(row: Row) -> Optional[re.Pattern[str]]:
    text = row.opt_text("match")
    if text is None:
        return None
    try:
        return re.compile(text, re.IGNORECASE)
    except re.error as exc:
        raise row.fail("match", f"a regular expression ({exc})") from None


def _driver_rules(data: dict[str, Any]) -> tuple[DriverArchRule, ...]:
    rules = [
        DriverArchRule(
            r.text("what"),
            r.cc("min_cc"),
            r.cc("max_cc"),
            r.integer("last_driver_branch"),
            None,
            r.source(),
            _name_pattern(r),
        )
        for r in table_rows(data, "cuda.toml", "deprecation")
    ]
    rules += [
        DriverArchRule(
            r.text("what"),
            r.cc("min_cc"),
            r.cc("max_cc"),
            None,
            r.integer("min_driver_branch"),
            r.source(),
            _name_pattern(r),
        )
        for r in table_rows(data, "cuda.toml", "arch_min_driver")
    ]
    return tuple(rules)


def _cross_check(k: Knowledge) -> None:
    """Every CUDA variant has driver floors and exactly one architecture row; every toolkit has
    a family."""
    for tk in (*k.toolkits.values(), *k.toolkit_updates):
        if k.family(tk.cuda) is None:
            raise KnowledgeError(f"cuda.toml: CUDA {tk.cuda} has no [[family]] row for CUDA {tk.cuda.major}")
    arch_rows: dict[tuple[str, str], list[ArchRow]] = {}  # (variant, platform) -> rows
    for row in k.arch:
        arch_rows.setdefault((row.variant, row.platform), []).append(row)
    for release in k.releases:
        for platform, variants in release.variants.items():
            for variant in variants:
                cuda = variant_cuda(variant)
                if cuda is None:
                    continue
                where = f"releases.toml: torch {release.torch} {platform} {variant}"
                if k.toolkit(cuda) is None:
                    raise KnowledgeError(f"{where}: cuda.toml has no [[toolkit]] row for CUDA {cuda}")
                if k.family(cuda) is None:
                    raise KnowledgeError(f"{where}: cuda.toml has no [[family]] row for CUDA {cuda.major}")
                if platform not in CUDA_PLATFORMS:
                    continue
                rows = [a for a in arch_rows.get((variant, platform), ()) if a.torch.contains(release.torch)]
                if len(rows) != 1:
                    raise KnowledgeError(f"{where}: arch.toml has {len(rows)} rows for it, expected 1")


@functools.lru_cache(maxsize=1)
def load_knowledge() -> Knowledge:
    """Read and validate the knowledge base (once per process)."""
    releases_data = read_table("releases")
    cuda_data = read_table("cuda")
    releases = sorted(
        (_release(r) for r in table_rows(releases_data, "releases.toml", "release")),
        key=lambda r: r.torch,
        reverse=True,
    )
    toolkits = {}
    for row in table_rows(cuda_data, "cuda.toml", "toolkit"):
        tk = _toolkit(row, with_sass=True)
        toolkits[f"{tk.cuda.major}.{tk.cuda.minor}"] = tk
    families = {f.major: f for f in map(_family, table_rows(cuda_data, "cuda.toml", "family"))}
    knowledge = Knowledge(
        releases=tuple(releases),
        arch=tuple(_arch(r) for r in table_rows(read_table("arch"), "arch.toml", "arch")),
        toolkits=toolkits,
        toolkit_updates=tuple(
            _toolkit(r, with_sass=False) for r in table_rows(cuda_data, "cuda.toml", "toolkit_update")
        ),
        families=families,
        driver_rules=_driver_rules(cuda_data),
        gpus=tuple(_gpu(r) for r in table_rows(read_table("gpus"), "gpus.toml", "gpu")),
        conda=_conda(read_table("conda")),
        images=read_images(),
        vendors=read_vendor_knowledge(),
    )
    _cross_check(knowledge)
    return knowledge
