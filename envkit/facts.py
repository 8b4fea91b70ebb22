"""Facts: everything detected about a machine, nothing judged.

Plain frozen records that serialize to JSON and back (``envkit doctor --json`` writes them under
``facts``; ``envkit doctor --from`` reads them), so one machine's facts can be diagnosed, diffed
and aggregated on another. "Not present" is ``None``; why it is absent goes into ``notes``.

Field hints use ``Optional[...]``: they are evaluated at run time (envkit._serial) on Python 3.9.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Final, Optional

from packaging.utils import canonicalize_name

from envkit._serial import StrEnum, from_jsonable, to_jsonable
from envkit.versions import ComputeCapability, NvVersion, Version


@dataclass(frozen=True)
class HostFacts:
    """The operating system side: kernel, PCI devices, /dev/shm, network, relevant variables."""

    hostname: Optional[str] = None
    os: Optional[str] = None
    kernel: Optional[str] = None
    arch: Optional[str] = None
    wsl: bool = False
    # PCI addresses of NVIDIA display / 3D controllers, whether or not a driver claims them.
    nvidia_pci_devices: tuple[str, ...] = ()
    # Whether the nvidia kernel module is loaded (/sys/module/nvidia); None when unknown.
    nvidia_module_loaded: Optional[bool] = None
    shm_bytes: Optional[int] = None
    interfaces: tuple[NetInterface, ...] = ()
    # CUDA_*, NCCL_*, TORCH_*, GLOO_*, LD_* … as set for the inspected process.
    env: dict[str, str] = field(default_factory=dict)
    # CUDA libraries found outside the torch wheel: LD_LIBRARY_PATH, LD_PRELOAD, ld.so.cache.
    cuda_libs: tuple[SharedLib, ...] = ()
    # The C compiler triton and inductor call to build their launchers: $CC, else gcc, else clang
    # on PATH (triton-lang/triton python/triton/runtime/build.py); "": none there; None: not read.
    c_compiler: Optional[str] = None
    notes: tuple[str, ...] = ()
    # Fields above that were not gathered (their reader hung or failed): their None / empty value
    # means "unknown", not "absent", and checks that need them skip.
    unanswered: tuple[str, ...] = ()
    # A Jetson's Linux for Tegra release (/etc/nv_tegra_release: "R36 (release), REVISION: 4.3"
    # -> "36.4.3"); None elsewhere (envkit.detect.jetson).
    l4t_release: Optional[str] = None


@dataclass(frozen=True)
class NetInterface:
    name: str
    up: bool


@dataclass(frozen=True)
class SharedLib:
    """A CUDA library file the dynamic loader sees, e.g. libcudnn.so.8.9.2 on LD_LIBRARY_PATH."""

    path: str
    family: str  # "cudnn", "nccl", "cublas", "cudart", …
    version: Optional[Version]  # from the file name: libcudnn.so.8.9.2 -> 8.9.2, libnccl.so.2 -> 2
    source: str  # "LD_LIBRARY_PATH", "LD_PRELOAD", "ld.so.cache"


@dataclass(frozen=True)
class DriverFacts:
    """The NVIDIA driver, from the first source that answered."""

    version: Optional[NvVersion] = None
    # The newest CUDA the driver supports (nvidia-smi's "CUDA Version"), e.g. 12.8.
    cuda_version: Optional[Version] = None
    # "nvml", "/proc/driver/nvidia/version", "/sys/module/nvidia/version", "nvidia-smi" or None.
    source: Optional[str] = None
    # The kernel module line of /proc/driver/nvidia/version ("NVIDIA UNIX Open Kernel Module …").
    kernel_module: Optional[str] = None
    # Why NVML could not be used, e.g. "LibraryNotFound: NVML Shared Library Not Found".
    nvml_error: Optional[str] = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class GpuFacts:
    """One physical GPU as NVML (or nvidia-smi) reports it; a field it does not support is None."""

    index: int
    name: Optional[str] = None
    uuid: Optional[str] = None
    pci_bus_id: Optional[str] = None
    compute_capability: Optional[ComputeCapability] = None
    memory_total_mib: Optional[int] = None
    mig_enabled: Optional[bool] = None
    mig_pending: Optional[bool] = None
    # The MIG devices (GPU instances) on it by profile, e.g. ("3g.40gb", "3g.40gb"), as
    # ``nvidia-smi -L`` lists them below their GPU; () when none or not read.
    mig_devices: tuple[str, ...] = ()
    persistence_mode: Optional[bool] = None
    ecc_enabled: Optional[bool] = None
    ecc_pending: Optional[bool] = None
    ecc_uncorrected_volatile: Optional[int] = None
    retired_pages: Optional[int] = None
    retired_pages_pending: Optional[bool] = None
    remapped_rows_pending: Optional[bool] = None
    remapped_rows_failure: Optional[bool] = None
    pcie_gen: Optional[int] = None
    pcie_gen_max: Optional[int] = None
    pcie_width: Optional[int] = None
    pcie_width_max: Optional[int] = None
    # Active clock-event ("throttle") reasons by name: "hw_slowdown", "sw_thermal", …
    clock_events: Optional[tuple[str, ...]] = None
    temperature_c: Optional[int] = None
    temperature_slowdown_c: Optional[int] = None
    power_w: Optional[float] = None
    power_limit_w: Optional[float] = None
    # Whether CUDA_VISIBLE_DEVICES lets processes see it, and under which CUDA index.
    visible: bool = True
    cuda_index: Optional[int] = None
    # A fatal per-GPU NVML error ("GpuIsLost: …"): the GPU is there but cannot be used.
    error: Optional[str] = None
    # Fields the GPU or driver does not support (NVML NotSupported / FunctionNotFound).
    unsupported: tuple[str, ...] = ()
    source: str = "nvml"


@dataclass(frozen=True)
class AccelGpu:
    """One AMD or Intel GPU (envkit.detect.amd / intel): the kernel's view (sysfs) merged with the
    vendor tools' (amdsmi, amd-smi, rocm-smi; xpu-smi, sycl-ls). A field nothing reported is None."""

    index: int
    name: Optional[str] = None
    pci_bus_id: Optional[str] = None  # "0000:05:00.0"
    device_id: Optional[str] = None  # PCI device id, "0x74a1"
    # AMD: the LLVM target (gfx942, gfx90a, gfx1100) the kernel's KFD reports; Intel: the device
    # family torch's XPU build names (dg2, bmg, pvc, mtl-h, arl-h, lnl-m, ptl), from the device id.
    arch: Optional[str] = None
    memory_total_mib: Optional[int] = None
    # AMD compute partitions (an MI300X in CPX mode is 8 KFD nodes): one GPU, ``partitions`` devices.
    partitions: int = 1
    source: str = "sysfs"


@dataclass(frozen=True)
class VendorFacts:
    """The GPUs of one vendor other than NVIDIA ("amd", "intel") and their driver and runtime."""

    vendor: str
    gpus: tuple[AccelGpu, ...] = ()
    # The kernel driver: "amdgpu", "xe", "i915"; its version where it has one: the amdgpu module's
    # (/sys/module/amdgpu/version, "6.8.5", a DKMS build of AMD's; the kernel's own version for the
    # in-tree one, as amd-smi reports it), Intel's compute runtime (xpu-smi's "Driver Version").
    driver: Optional[str] = None
    driver_version: Optional[str] = None
    # The user-space runtime on the host: ROCm (/opt/rocm/.info/version, amd-smi's "ROCm version");
    # Intel: the Level Zero runtime sycl-ls names. torch's wheels bring their own; this is context.
    runtime: Optional[Version] = None
    # Intel: whether sycl-ls lists a level_zero GPU (torch's XPU build needs Level Zero); None: not run.
    level_zero: Optional[bool] = None
    sources: tuple[str, ...] = ()  # what answered: "sysfs", "amd-smi", "rocm-smi", "xpu-smi", ...
    notes: tuple[str, ...] = ()


def _amd() -> VendorFacts:
    return VendorFacts("amd")


def _intel() -> VendorFacts:
    return VendorFacts("intel")


@dataclass(frozen=True)
class ToolkitFacts:
    """One CUDA toolkit (an nvcc), with every way it was found."""

    nvcc: str
    version: Optional[Version] = None
    root: Optional[str] = None
    # "PATH", "CUDA_HOME", "CUDA_PATH", "/usr/local/cuda-12.4", "conda env", …
    sources: tuple[str, ...] = ()
    on_path: bool = False
    build: Optional[str] = None  # "cuda_12.4.r12.4/compiler.34097967_0"
    error: Optional[str] = None


class EnvKind(StrEnum):
    """What kind of environment an interpreter runs in."""

    VENV = "venv"  # sys.prefix differs from sys.base_prefix (PEP 405)
    CONDA = "conda"  # the prefix has conda-meta/
    SYSTEM = "system"


@dataclass(frozen=True)
class PythonFacts:
    """The inspected interpreter (the active environment's unless --python / --env say so)."""

    executable: str
    # "--python", "--env", "VIRTUAL_ENV", "CONDA_PREFIX", "torchrun", "srun", "PATH", "envkit"
    selected_by: str
    version: Optional[Version] = None
    implementation: Optional[str] = None
    platform: Optional[str] = None  # "linux-x86_64", "linux-aarch64", "windows-x86_64", "macos-arm64"
    glibc: Optional[Version] = None
    prefix: Optional[str] = None
    kind: Optional[EnvKind] = None
    env_name: Optional[str] = None
    include_dir: Optional[str] = None
    has_python_h: Optional[bool] = None
    installers: dict[str, str] = field(default_factory=dict)  # name -> path, only those found
    error: Optional[str] = None
    # PEP 668: an EXTERNALLY-MANAGED file in the stdlib folder of an interpreter outside a venv
    # (Debian's and Ubuntu's /usr/bin/python3): pip refuses to install into it. None: not known.
    externally_managed: Optional[bool] = None


# CUDA library wheels torch depends on (torch's METADATA, e.g. torch 2.9.0+cu130's Requires-Dist;
# pytorch/pytorch .github/scripts/generate_binary_build_matrix.py PYTORCH_EXTRA_INSTALL_REQUIREMENTS).
CUDA_LIBRARY_FAMILIES: frozenset[str] = frozenset(
    {
        "cublas", "cuda-cupti", "cuda-nvrtc", "cuda-runtime", "cudnn", "cufft", "cufile", "curand",
        "cusolver", "cusparse", "cusparselt", "nccl", "nvjitlink", "nvshmem", "nvtx",
    }
)  # fmt: skip
# Suffix-less CUDA 13 wheels whose version is the CUDA version (13.0.x); cufft, curand, cusolver,
# cusparse and cufile number their own releases.
_CUDA_VERSIONED: frozenset[str] = frozenset(
    {"cublas", "cuda-cupti", "cuda-nvrtc", "cuda-runtime", "nvjitlink", "nvtx"}
)


# A fleet's 10,000 reports name the same few dozen distributions: each name is normalized once.
_canonical: Final = functools.lru_cache(maxsize=4096)(canonicalize_name)


@dataclass(frozen=True)
class Distribution:
    """An installed distribution (dist-info / egg-info) as importlib.metadata sees it. The name is
    kept normalized (PEP 503: ``nvidia_cudnn_cu12`` -> ``nvidia-cudnn-cu12``), whatever it came from."""

    name: str
    version: Optional[Version]
    location: Optional[str] = None
    # Its metadata's ``Requires-Dist`` entries for torch (``torch==2.5.1``, markers kept, extras'
    # left out), read from the installed dist-info; () when it names no torch or was not read
    # (a pasted report shows versions only).
    requires_torch: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", _canonical(self.name))

    @property
    def cuda_library(self) -> Optional[str]:
        """The CUDA library family of an NVIDIA wheel torch loads at run time ("nccl" for
        nvidia-nccl-cu12, "cuda-runtime" for CUDA 13's suffix-less nvidia-cuda-runtime), None for
        any other distribution: nvidia-ml-py (NVML bindings), nvidia-cudnn-frontend, nvidia-dali-*.
        The families are those torch's wheels require (PYTORCH_EXTRA_INSTALL_REQUIREMENTS in
        pytorch/pytorch .github/scripts/generate_binary_build_matrix.py)."""
        if not self.name.startswith("nvidia-"):
            return None
        family = re.sub(r"-cu\d+$", "", self.name[len("nvidia-") :])
        return family if family in CUDA_LIBRARY_FAMILIES else None

    @property
    def cuda_major(self) -> Optional[int]:
        """The CUDA major a CUDA library wheel is built for: its -cuNN suffix, else (CUDA 13's
        suffix-less wheels) its version where that follows the CUDA version (nvidia-cuda-runtime
        13.0.96, nvidia-cublas 13.1.1.3; not nvidia-cufft 12.0.0.61, a CUDA 13 wheel); None when
        it is not one or nothing says."""
        if self.cuda_library is None:
            return None
        suffix = re.search(r"-cu(\d+)$", self.name)
        if suffix:
            return int(suffix.group(1))
        if self.cuda_library in _CUDA_VERSIONED and self.version is not None:
            return self.version.major
        return None


@dataclass(frozen=True)
class CondaPackage:
    """A package record of the environment's conda-meta/ folder."""

    name: str
    version: Optional[Version]
    build: str = ""
    channel: Optional[str] = None


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    compute_capability: Optional[ComputeCapability] = None


@dataclass(frozen=True)
class DeepTorchFacts:
    """What importing torch in the target interpreter reported (``--deep``)."""

    ok: bool
    error: Optional[str] = None
    version: Optional[Version] = None
    cuda_available: Optional[bool] = None
    device_count: Optional[int] = None
    # torch.xpu.is_available() of an XPU build (--deep, or collect_env's "Is XPU available"); None
    # where torch has no XPU runtime or nothing asked.
    xpu_available: Optional[bool] = None
    arch_list: tuple[str, ...] = ()
    cudnn: Optional[int] = None  # torch.backends.cudnn.version(), e.g. 90100
    nccl: Optional[Version] = None
    bf16_supported: Optional[bool] = None
    devices: tuple[DeviceInfo, ...] = ()
    warnings: tuple[str, ...] = ()
    duration_s: Optional[float] = None
    # The probe did not answer within its budget ("import torch did not finish in N s").
    timed_out: bool = False


@dataclass(frozen=True)
class IncompatibleGpu:
    """A GPU that torch itself said this build cannot run (its warnings in torch/cuda/__init__.py)."""

    name: str
    index: Optional[int] = None  # "Found GPU1 …"; None where the warning names no index
    compute_capability: Optional[ComputeCapability] = None
    # "no_kernels": _check_cubins' "… with CUDA capability sm_XX is not compatible with the current
    # PyTorch installation"; "too_old": _check_capability's "PyTorch no longer supports this GPU
    # because it is too old" (and its later "Minimum and Maximum …" / "compute capability (CC)"
    # wordings; "too_new" for a GPU above its maximum); "needs_newer_cuda": 1.x's "which requires
    # CUDA_VERSION >= N to work properly".
    reason: str = "no_kernels"


@dataclass(frozen=True)
class ExtensionBinary:
    """One shared object of an installed extension (flash_attn_2_cuda…so), as glibc's ld.so
    resolves it with torch's lib folder on the search path and every symbol bound
    (LD_TRACE_LOADED_OBJECTS, LD_BIND_NOW, LD_WARN: what ``ldd -r`` asks): the torch and CUDA
    libraries it needs and the torch C++ symbols none of them provides."""

    package: str  # the distribution, normalized: "flash-attn"
    file: str
    needed: tuple[str, ...] = ()  # its torch and CUDA runtime DT_NEEDED sonames: libc10.so, libcudart.so.12
    not_found: tuple[str, ...] = ()  # sonames the loader could not find
    undefined: tuple[str, ...] = ()  # torch's C++ symbols (c10::, at::, torch::) it needs and none exports


@dataclass(frozen=True)
class ResolvedLib:
    """One library of torch's DT_NEEDED chain, resolved as glibc's ld.so does (elf/dl-load.c
    _dl_map_object: an object already loaded under that name, DT_RPATH without DT_RUNPATH,
    LD_LIBRARY_PATH, DT_RUNPATH, ld.so.cache, the default folders)."""

    soname: str  # the DT_NEEDED entry, e.g. "libcublas.so.12"
    needed_by: str  # the file name whose DT_NEEDED names it ("libtorch_cuda.so")
    path: Optional[str] = None  # the file the loader picks; None: not found
    # How: "LD_PRELOAD", "RPATH", "LD_LIBRARY_PATH", "RUNPATH", "ld.so.cache", "default path",
    # "not found".
    via: str = "not found"
    family: Optional[str] = None  # CUDA library family ("cublas", "nvjitlink", …)
    version: Optional[Version] = None  # from the real file's name or its folder (cuda-12.2)
    # Whether the file is the torch build's own: torch/lib, its nvidia-* wheels, its conda prefix.
    bundled: Optional[bool] = None


@dataclass(frozen=True)
class TorchFacts:
    """The torch build in the inspected environment, read without importing it."""

    version: Optional[Version] = None
    cuda: Optional[Version] = None  # torch.version.cuda
    hip: Optional[str] = None
    git_version: Optional[str] = None
    location: Optional[str] = None
    # Every torch / torchvision / torchaudio / triton / nvidia-* distribution, duplicates included.
    distributions: tuple[Distribution, ...] = ()
    conda_packages: tuple[CondaPackage, ...] = ()
    error: Optional[str] = None
    deep: Optional[DeepTorchFacts] = None
    # What torch itself said (its warnings and errors in a pasted report, or caught by the --deep
    # probe; envkit.detect.torch_messages reads them). torch's own verdict on this machine is the
    # strongest evidence there is, and often all that is left of a paste that was cut short.
    # Why torch cannot use CUDA: "no_driver", "driver_too_old", "init_failed", "unknown_error",
    # "no_gpus", "cuda_error" (another cudaGetDeviceCount() error), "not_compiled" (a CPU build).
    cuda_init_error: Optional[str] = None
    cuda_init_message: Optional[str] = None  # torch's words, e.g. "Found no NVIDIA driver on your system"
    # The CUDA version the driver provides (cudaDriverGetVersion), from "The NVIDIA driver on your
    # system is too old (found version 11040)": 11.4. nvidia-smi prints the same as "CUDA Version".
    reported_driver_cuda: Optional[Version] = None
    # The build's architectures as torch printed them ("The current PyTorch install supports CUDA
    # capabilities sm_50 … compute_120"): torch.cuda.get_arch_list(), the exact list.
    supported_arches: tuple[str, ...] = ()
    # The range of GPUs the build supports as torch said it ("The minimum cuda capability supported
    # by this library is 7.5"; "Minimum and Maximum … is (8.0) - (12.0)").
    supported_cc_min: Optional[ComputeCapability] = None
    supported_cc_max: Optional[ComputeCapability] = None
    incompatible_gpus: tuple[IncompatibleGpu, ...] = ()
    # torch's CUDA libraries as the dynamic loader picks them (envkit.detect.loader): the DT_NEEDED
    # chain of libtorch_global_deps.so and libtorch_cuda.so; () when not read (a CPU build, a paste).
    loader: tuple[ResolvedLib, ...] = ()
    # The compiled extensions' own .so files as the loader sees them beside this torch
    # (envkit.detect.extensions); () when not read (no extension envkit knows, a paste).
    extension_binaries: tuple[ExtensionBinary, ...] = ()
    # An error text's evidence that the build has CUDA where nothing names its CUDA (a paste cut
    # short): the file of torch's own CUDA libraries a failed load names, e.g.
    # ".../site-packages/nvidia/cusparse/lib/libcusparse.so.12". None when no text said so.
    cuda_build_evidence: Optional[str] = None

    @property
    def installed(self) -> bool:
        """Whether torch is there: its version or distribution, or torch's own messages (only an
        installed torch prints them)."""
        return self.version is not None or any(d.name == "torch" for d in self.distributions) or self.spoke

    @property
    def spoke(self) -> bool:
        """Whether torch's own messages were read (see cuda_init_error … incompatible_gpus)."""
        return bool(
            self.cuda_init_error
            or self.reported_driver_cuda
            or self.supported_arches
            or self.supported_cc_min
            or self.incompatible_gpus
        )

    @property
    def driver_too_old(self) -> bool:
        """torch said "The NVIDIA driver on your system is too old"."""
        return self.cuda_init_error == "driver_too_old"

    @property
    def cuda_build(self) -> Optional[bool]:
        """Whether this is a CUDA build: torch.version.cuda, else what torch's messages imply (only a
        CUDA build checks the driver or lists sm_XX architectures); None when nothing says."""
        if self.cuda is not None:
            return True
        if self.cuda_init_error == "not_compiled":
            return False
        if self.spoke or self.cuda_build_evidence:
            return True
        local = (self.version.local or "") if self.version is not None else ""
        if local.startswith("cu"):
            return True
        rocm = bool(self.hip) or local.startswith("rocm")
        if self.deep is not None and self.deep.cuda_available and not rocm:
            # torch.cuda.is_available() is True only in a build with CUDA compiled in (a paste that
            # lost "CUDA used to build PyTorch" still says "Is CUDA available: True").
            return True
        if self.hip or self.version is not None:
            return False
        return None

    @property
    def arch_list(self) -> tuple[str, ...]:
        """The build's exact architecture list as torch reported it: the --deep probe's
        get_arch_list(), else the list in torch's incompatible-device warning; () when unknown."""
        if self.deep is not None and self.deep.ok and self.deep.arch_list:
            return self.deep.arch_list
        return self.supported_arches

    @property
    def variant(self) -> Optional[str]:
        """cu121 / cpu / rocm6.2: from the local version label, else from version.py."""
        if self.version is not None and self.version.local:
            label = self.version.local.split(".")[0]
            if label.startswith(("cu", "cpu", "rocm", "xpu")):
                return self.version.local if label.startswith("rocm") else label
        if self.cuda is not None:
            return f"cu{self.cuda.major}{self.cuda.minor}"
        if self.hip:
            return "rocm"
        if self.version is not None and self.cuda_build is False:
            return "cpu"
        return None  # a CUDA build whose CUDA nothing names, or nothing known

    def wheel_lib(self, family: str) -> Optional[Distribution]:
        """The nvidia-* wheel that bundles a CUDA library family ("cudnn" -> nvidia-cudnn-cu12)."""
        prefix = f"nvidia-{family}"
        for dist in self.distributions:
            if dist.name == prefix or dist.name.startswith(prefix + "-cu"):
                return dist
        return None

    def library_version(self, family: str) -> Optional[Version]:
        """The version of a CUDA library torch would load: its nvidia-* wheel, else the conda package."""
        wheel = self.wheel_lib(family)
        if wheel is not None and wheel.version is not None:
            return wheel.version
        return next((p.version for p in self.conda_packages if p.name == family), None)

    def nccl_version(self) -> Optional[Version]:
        """What torch reported loading (--deep) is the truth; else the NCCL it would load."""
        if self.deep is not None and self.deep.nccl is not None:
            return self.deep.nccl
        return self.library_version("nccl")


class ContainerKind(StrEnum):
    """Which container runtime envkit runs under (envkit.detect.container says from what)."""

    DOCKER = "docker"  # /.dockerenv
    PODMAN = "podman"  # /run/.containerenv
    APPTAINER = "apptainer"  # APPTAINER_CONTAINER / SINGULARITY_CONTAINER, /.singularity.d
    KUBERNETES = "kubernetes"  # KUBERNETES_SERVICE_HOST (a pod, whatever its runtime)
    OTHER = "other"  # only a cgroup hint (containerd, lxc, …)


@dataclass(frozen=True)
class ContainerFacts:
    """The container around envkit, if any: the image's CUDA and what of the host's driver and GPUs
    the runtime mounted into it. ``kind`` None: not in a container (or none was recognised)."""

    kind: Optional[ContainerKind] = None
    # What said so: "/.dockerenv", "KUBERNETES_SERVICE_HOST", "/proc/1/cgroup: kubepods", …
    evidence: tuple[str, ...] = ()
    # The image's CUDA: CUDA_VERSION, else /usr/local/cuda/version.json, else NVIDIA_REQUIRE_CUDA.
    image_cuda: Optional[Version] = None
    image_cuda_source: Optional[str] = None
    require_cuda: Optional[str] = None  # NVIDIA_REQUIRE_CUDA as the image set it
    # The host driver's libcuda.so.<version> the runtime mounted into the library folders.
    mounted_driver: Optional[NvVersion] = None
    mounted_driver_path: Optional[str] = None
    device_nodes: tuple[str, ...] = ()  # /dev/nvidia0, /dev/nvidiactl, /dev/nvidia-uvm, …
    visible_devices: Optional[str] = None  # NVIDIA_VISIBLE_DEVICES
    driver_capabilities: Optional[str] = None  # NVIDIA_DRIVER_CAPABILITIES
    # The forward-compatibility package (cuda-compat-<major>-<minor>): its folder, the driver
    # version of its libcuda.so.<version>, and whether the loader looks there (LD_LIBRARY_PATH or
    # /etc/ld.so.conf.d); None when there is no such package.
    compat_dir: Optional[str] = None
    compat_driver: Optional[NvVersion] = None
    compat_on_loader_path: Optional[bool] = None
    notes: tuple[str, ...] = ()

    @property
    def detected(self) -> bool:
        return self.kind is not None


@dataclass(frozen=True)
class LoadFailure:
    """A shared object that did not load, as an error text quotes glibc's ld.so: "<file>: undefined
    symbol: <symbol>, version <library>" (elf/dl-lookup.c), "<name>: cannot open shared object
    file" (elf/dl-load.c), "version `<tag>' not found (required by <file>)" (elf/dl-version.c).
    Read by envkit.detect.errtext; judged by torch.cuda_libs (torch's own libraries) and
    torch.extension_load (a compiled extension: any other *.so under site-packages)."""

    kind: str  # "undefined_symbol", "cannot_open" or "version_not_found"
    # The object that failed: the file referencing the symbol, the file that could not be opened,
    # or the file that required the missing version (a path where the text gives one).
    file: str
    symbol: Optional[str] = None  # the undefined symbol, or the version tag ("GLIBCXX_3.4.30")
    # The library the symbol's version names ("libnvJitLink.so.12"), or the file that needed a
    # missing one ("… cannot open …" after "libX.so: " in Python's ImportError).
    library: Optional[str] = None
    # The distribution the failing file lies in (site-packages/<dir>/…, normalized): "flash-attn".
    package: Optional[str] = None
    # What should have provided it: "torch" (a c10/at/torch C++ symbol), a CUDA library family
    # ("nvjitlink", "cudart", "nccl", …), "libstdc++", "glibc"; None when the text does not say.
    provider: Optional[str] = None
    # The provider's version the symbol implies: __nvJitLinkAddData_12_1 -> 12.1,
    # "version `libcudart.so.11.0'" -> 11.0, GLIBCXX_3.4.30 -> 3.4.30.
    needs: Optional[Version] = None


@dataclass(frozen=True)
class ErrorEvent:
    """One message of a known family in an error text (the families, and where each message is
    produced, are envkit.detect.errtext's)."""

    family: str  # "no_kernel_image", "nvml_mismatch", "cuda_error", "torchvision_ops", …
    message: str  # the line as read: redacted, at most 300 characters
    code: Optional[str] = None  # a CUDA error number ("999"), an NCCL result, a missing header


@dataclass(frozen=True)
class CudaOom:
    """torch's "CUDA out of memory" (c10/cuda/CUDACachingAllocator.cpp), in MiB: whether the
    memory went to this process or to others is what the message says."""

    gpu: Optional[int] = None
    tried_mib: Optional[float] = None
    total_mib: Optional[float] = None
    free_mib: Optional[float] = None
    # "Including non-PyTorch memory, this process has X memory in use" (torch ≥ 2.1)
    process_mib: Optional[float] = None
    allocated_mib: Optional[float] = None  # "X is allocated by PyTorch" / "X already allocated"
    # "X is reserved by PyTorch but unallocated" (torch ≥ 2.1); before: reserved in total - allocated
    unallocated_mib: Optional[float] = None
    # "Process 1234 has X memory in use": (pid, MiB) of the other processes on the GPU
    others: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class NcclFailure:
    """An NCCL error as torch and NCCL print it: the result (NCCL src/init.cc ncclGetErrorString),
    NCCL's version and its CUDA ("NCCL version 2.18.1+cuda12.1"), and NCCL's own WARN line."""

    result: str  # "unhandled system error", "unhandled cuda error", "remote process exited …", …
    version: Optional[Version] = None
    cuda: Optional[Version] = None
    last_error: Optional[str] = None  # "Last error:" / "NCCL WARN …" (redacted)
    # What NCCL's words point at: "shm", "socket", "p2p", "ib", "cuda", "remote"; None: not said.
    cause: Optional[str] = None


@dataclass(frozen=True)
class ErrorFacts:
    """What an error text (a traceback, a log, an issue body) says beyond the machine's own facts;
    empty when none was read (envkit doctor --from / --error)."""

    events: tuple[ErrorEvent, ...] = ()
    load_failures: tuple[LoadFailure, ...] = ()
    oom: Optional[CudaOom] = None
    nccl: Optional[NcclFailure] = None
    # NCCL's version and CUDA as the text prints them ("NCCL version 2.18.1+cuda12.1"), failure or not
    nccl_version: Optional[Version] = None
    nccl_cuda: Optional[Version] = None
    # What the text held, by kind: "traceback", "collect_env", "pip list", "nvidia-smi", …
    read: tuple[str, ...] = ()

    def event(self, family: str) -> Optional[ErrorEvent]:
        """The first message of ``family``; None when the text has none."""
        return next((e for e in self.events if e.family == family), None)


@dataclass(frozen=True)
class Facts:
    """Everything envkit detected about one machine and one Python environment."""

    host: HostFacts = field(default_factory=HostFacts)
    driver: DriverFacts = field(default_factory=DriverFacts)
    gpus: tuple[GpuFacts, ...] = ()
    toolkits: tuple[ToolkitFacts, ...] = ()
    python: Optional[PythonFacts] = None
    torch: TorchFacts = field(default_factory=TorchFacts)
    # The container envkit runs in (envkit.detect.container); kind None outside one.
    container: ContainerFacts = field(default_factory=ContainerFacts)
    # AMD and Intel GPUs (envkit.detect.amd, envkit.detect.intel); a report from before they were
    # detected reads as none found.
    amd: VendorFacts = field(default_factory=_amd)
    intel: VendorFacts = field(default_factory=_intel)
    # What an error text given to doctor (--from, --error) says: loader failures, CUDA and NCCL
    # errors, out-of-memory figures (envkit.detect.errtext).
    errors: ErrorFacts = field(default_factory=ErrorFacts)
    # Detectors that could not finish ("nvml: timed out after 30 s") and other remarks.
    notes: tuple[str, ...] = ()
    # Fields the source did not report, as dotted paths ("gpus", "driver.version",
    # "torch.distributions", "host.cuda_libs", …): a paste cut short before their lines. Their
    # None / empty value means "unknown", not "absent"; a check that needs one skips and says so.
    unknown: tuple[str, ...] = ()

    def reported(self, path: str) -> bool:
        """Whether the field at ``path`` was reported (see ``unknown``)."""
        return path not in self.unknown

    @property
    def visible_gpus(self) -> tuple[GpuFacts, ...]:
        return tuple(g for g in self.gpus if g.visible)


def facts_to_json(facts: Facts) -> dict[str, Any]:
    data: dict[str, Any] = to_jsonable(facts)
    return data


def facts_from_json(data: object, where: str = "facts") -> Facts:
    return from_jsonable(Facts, data, where)
