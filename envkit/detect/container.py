"""The container around envkit: which runtime, the image's CUDA, and what of the host's driver and
GPUs the runtime mounted in. File reads and the environment only (through ``System``), no process.

Where each sign comes from:

- Docker creates ``/.dockerenv`` in every container; Podman ``/run/.containerenv``
  (podman-run(1): "/run/.containerenv … is created in each container").
- Apptainer sets ``APPTAINER_CONTAINER`` (Singularity: ``SINGULARITY_CONTAINER``) and keeps its
  runtime files under ``/.singularity.d`` (apptainer.org/docs/user/latest/environment_and_metadata.html).
- Kubernetes injects ``KUBERNETES_SERVICE_HOST`` into every pod's containers
  (kubernetes.io/docs/concepts/containers/container-environment/).
- cgroup v1 paths in ``/proc/1/cgroup`` name the runtime (``/docker/<id>``, ``/kubepods/…``).
- nvidia/cuda images set ``CUDA_VERSION``, ``NVIDIA_REQUIRE_CUDA``, ``NVIDIA_VISIBLE_DEVICES=all``
  and ``NVIDIA_DRIVER_CAPABILITIES=compute,utility``, and install ``cuda-compat-<major>-<minor>``
  under ``/usr/local/cuda/compat`` without putting it on the loader path
  (gitlab.com/nvidia/container-images/cuda dist/12.0.0/ubuntu2204/base/Dockerfile).
- The NVIDIA Container Toolkit mounts the host driver's ``libcuda.so.<driver version>`` into the
  image's library folder and the ``/dev/nvidia*`` nodes of the GPUs it exposes
  (docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html);
  Apptainer's ``--nv`` binds the same libraries under ``/.singularity.d/libs``
  (apptainer.org/docs/user/latest/gpu.html).
"""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Final, Optional

from envkit.facts import ContainerFacts, ContainerKind
from envkit.versions import NvVersion, Version, parse_version

if TYPE_CHECKING:
    from envkit.system import System

__all__ = ["LIBRARY_DIRS", "detect_container", "parse_require_cuda"]

# Where the runtimes mount the driver's user-space libraries: Debian/Ubuntu's multiarch folders,
# RHEL's lib64, Apptainer's --nv bind folder, and nvidia-docker 1's /usr/local/nvidia.
LIBRARY_DIRS: Final = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/.singularity.d/libs",
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
)
# cuda-compat's folder in nvidia/cuda images (its libcuda.so.<version> lies in it) and in NGC's,
# which keep the libraries one level down in lib/.
COMPAT_DIRS: Final = ("/usr/local/cuda/compat", "/usr/local/cuda/compat/lib")
_LIBCUDA_RE: Final = re.compile(r"^libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$")
_DEVICE_RE: Final = re.compile(r"^nvidia(?:\d+|ctl|-uvm|-uvm-tools|-modeset)$")
_CGROUP_HINTS: Final = (
    ("kubepods", ContainerKind.KUBERNETES),
    ("docker", ContainerKind.DOCKER),
    ("libpod", ContainerKind.PODMAN),
    ("containerd", ContainerKind.OTHER),
    ("lxc", ContainerKind.OTHER),
)


def parse_require_cuda(text: str) -> Optional[Version]:
    """The CUDA of ``NVIDIA_REQUIRE_CUDA`` ("cuda>=12.0 brand=tesla,driver>=470,driver<471 …").

    >>> parse_require_cuda("cuda>=12.0 brand=tesla,driver>=470,driver<471")
    <Version('12.0')>
    """
    match = re.search(r"(?:^|\s)cuda>=(\d+\.\d+)", text)
    return Version(match.group(1)) if match else None


def _read(system: System, path: str) -> Optional[str]:
    try:
        return system.read_text(path)
    except OSError:
        return None


def _listdir(system: System, path: str) -> list[str]:
    try:
        return sorted(os.listdir(system.path(path)))
    except OSError:
        return []


def _kind(system: System) -> tuple[Optional[ContainerKind], list[str]]:
    env = system.env
    evidence: list[str] = []
    kinds: list[ContainerKind] = []
    for name in ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER"):
        if env.get(name):
            evidence.append(name)
            kinds.append(ContainerKind.APPTAINER)
    if system.path("/.singularity.d").is_dir():
        evidence.append("/.singularity.d")
        kinds.append(ContainerKind.APPTAINER)
    if env.get("KUBERNETES_SERVICE_HOST"):
        evidence.append("KUBERNETES_SERVICE_HOST")
        kinds.append(ContainerKind.KUBERNETES)
    if system.path("/run/.containerenv").exists():
        evidence.append("/run/.containerenv")
        kinds.append(ContainerKind.PODMAN)
    if system.path("/.dockerenv").exists():
        evidence.append("/.dockerenv")
        kinds.append(ContainerKind.DOCKER)
    for line in (_read(system, "/proc/1/cgroup") or "").splitlines():
        hint = next(((word, kind) for word, kind in _CGROUP_HINTS if word in line), None)
        if hint is not None:
            evidence.append(f"/proc/1/cgroup: {hint[0]}")
            kinds.append(hint[1])
            break
    # The first sign in this order names it: Apptainer and Kubernetes say more than the runtime
    # under them (a pod's containers run under containerd or Docker).
    return (kinds[0] if kinds else None), evidence


def _image_cuda(system: System) -> tuple[Optional[Version], Optional[str]]:
    value = system.env.get("CUDA_VERSION", "").strip()
    version = parse_version(value) if value else None
    if version is not None:
        return version, "CUDA_VERSION"
    text = _read(system, "/usr/local/cuda/version.json")
    if text:
        try:
            data = json.loads(text)
            found = parse_version(str(data["cuda"]["version"]))
        except (ValueError, KeyError, TypeError):
            found = None
        if found is not None:
            return found, "/usr/local/cuda/version.json"
    required = parse_require_cuda(system.env.get("NVIDIA_REQUIRE_CUDA", ""))
    return (required, "NVIDIA_REQUIRE_CUDA") if required is not None else (None, None)


def _libcuda_in(system: System, folder: str) -> Optional[tuple[NvVersion, str]]:
    for name in _listdir(system, folder):
        match = _LIBCUDA_RE.match(name)
        if match:
            return NvVersion(match.group(1)), f"{folder.rstrip('/')}/{name}"
    return None


def _real(system: System, path: str) -> str:
    return os.path.realpath(system.path(path))


def _loader_dirs(system: System) -> list[str]:
    """The folders the dynamic loader searches besides its defaults: LD_LIBRARY_PATH, then every
    /etc/ld.so.conf.d/*.conf line (ld.so(8), ldconfig(8))."""
    dirs = [d for d in system.env.get("LD_LIBRARY_PATH", "").split(":") if d]
    for conf in _listdir(system, "/etc/ld.so.conf.d"):
        if conf.endswith(".conf"):
            text = _read(system, f"/etc/ld.so.conf.d/{conf}") or ""
            dirs += [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    return dirs


def detect_container(system: System) -> ContainerFacts:
    """The container facts of ``system``; ``kind`` None (and nothing else read) outside one."""
    kind, evidence = _kind(system)
    if kind is None:
        return ContainerFacts()
    notes: list[str] = []
    image_cuda, cuda_source = _image_cuda(system)
    compat: Optional[tuple[NvVersion, str]] = None
    compat_dir = None
    for folder in COMPAT_DIRS:
        compat = _libcuda_in(system, folder)
        if compat is not None:
            compat_dir = folder
            break
    compat_real = {_real(system, compat_dir)} if compat_dir else set()
    mounted = None
    ld_path = [d for d in system.env.get("LD_LIBRARY_PATH", "").split(":") if d]
    for folder in (*LIBRARY_DIRS, *ld_path):
        if folder in COMPAT_DIRS or _real(system, folder) in compat_real:
            continue  # the image's forward-compatibility libcuda is not the host's driver
        mounted = _libcuda_in(system, folder)
        if mounted is not None:
            break
    on_path = None
    if compat_dir is not None:
        loader = _loader_dirs(system)
        on_path = any(d.rstrip("/") == compat_dir or _real(system, d) in compat_real for d in loader)
    devices = tuple(f"/dev/{n}" for n in _listdir(system, "/dev") if _DEVICE_RE.match(n))
    if not devices and not system.path("/dev").is_dir():
        notes.append("/dev could not be listed")
    return ContainerFacts(
        kind=kind,
        evidence=tuple(evidence),
        image_cuda=image_cuda,
        image_cuda_source=cuda_source,
        require_cuda=system.env.get("NVIDIA_REQUIRE_CUDA") or None,
        mounted_driver=mounted[0] if mounted else None,
        mounted_driver_path=mounted[1] if mounted else None,
        device_nodes=devices,
        visible_devices=system.env.get("NVIDIA_VISIBLE_DEVICES"),
        driver_capabilities=system.env.get("NVIDIA_DRIVER_CAPABILITIES"),
        compat_dir=compat_dir,
        compat_driver=compat[0] if compat else None,
        compat_on_loader_path=on_path,
        notes=tuple(notes),
    )
