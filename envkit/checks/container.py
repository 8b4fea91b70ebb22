"""Checks of the container around envkit: did the runtime give it the GPUs, does the host's driver
run the image's CUDA, and does the runtime mount the driver's compute libraries.

Outside a container each skips and says so. Sources:

- NVIDIA Container Toolkit, "Specialized Configurations with Docker"
  (docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html):
  ``NVIDIA_VISIBLE_DEVICES`` (``none``: no GPU; ``void``, empty or unset: plain runc, no GPU and no
  driver) and ``NVIDIA_DRIVER_CAPABILITIES`` (``compute``: "required for CUDA and OpenCL
  applications"; ``utility``: "required for using nvidia-smi and NVML"; default when unset:
  ``utility,compute``).
- CUDA Compatibility (docs.nvidia.com/deploy/cuda-compatibility/): minor-version compatibility
  (the family floor; no JIT of newer PTX below the toolkit's own driver) and forward compatibility
  (forward-compatibility.html): the ``cuda-compat-<major>-<minor>`` package lets a newer CUDA run on
  an older driver, "applicable only for systems with NVIDIA Data Center GPUs", select NGC Server
  Ready RTX SKUs and Jetson, and only up to the CUDA of that package.
- Apptainer GPU support (apptainer.org/docs/user/latest/gpu.html): ``--nv`` binds the driver.
- Kubernetes: the NVIDIA device plugin exposes GPUs as ``resources.limits: nvidia.com/gpu``
  (github.com/NVIDIA/k8s-device-plugin README), and the GPU Operator's runtime class is ``nvidia``
  (docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final, Optional

from envkit.checks._common import join_lines
from envkit.facts import ContainerKind
from envkit.knowledge import load_knowledge
from envkit.report import CheckResult, Status
from envkit.resolve import rules
from envkit.versions import Version

if TYPE_CHECKING:
    from envkit.facts import ContainerFacts, Facts
    from envkit.versions import NvVersion

__all__ = [
    "CHECKS",
    "check_container_capabilities",
    "check_container_cuda_driver",
    "check_container_gpus",
    "gpu_fix",
    "is_data_center_gpu",
]

K8S_GPU_FIX: Final = (
    "in the pod spec: resources: {limits: {nvidia.com/gpu: 1}} on the container, and "
    "runtimeClassName: nvidia where the GPU Operator installed that runtime class"
)
_GPU_FIXES: Final = {
    ContainerKind.DOCKER: "docker run --gpus all …  (the NVIDIA Container Toolkit; "
    "--gpus '\"device=0,1\"' for some)",
    ContainerKind.PODMAN: "podman run --device nvidia.com/gpu=all …  (CDI: sudo nvidia-ctk cdi generate "
    "--output=/etc/cdi/nvidia.yaml)",
    ContainerKind.APPTAINER: "apptainer exec --nv IMAGE.sif …  (or apptainer run --nv / shell --nv)",
    ContainerKind.KUBERNETES: K8S_GPU_FIX,
}
# Consumer and workstation GPUs, by their NVML names: forward compatibility is not for them.
_NOT_DATA_CENTER: Final = re.compile(r"GeForce|Quadro|TITAN|\bRTX\b|Laptop|\bMX\d", re.IGNORECASE)
# Select NGC-Server-Ready RTX parts are the documented exception ("RTX PRO 6000 Blackwell Server").
_SERVER_RTX: Final = re.compile(r"\bRTX\b.*\bServer\b", re.IGNORECASE)


def gpu_fix(kind: Optional[ContainerKind]) -> str:
    """How to start a container of ``kind`` with the GPUs (all kinds when unknown)."""
    if kind in _GPU_FIXES:
        return _GPU_FIXES[kind]
    return "; ".join(f"{k.value}: {v}" for k, v in _GPU_FIXES.items())


def is_data_center_gpu(name: Optional[str]) -> Optional[bool]:
    """Whether forward compatibility applies to a GPU of this NVML name; None when unnamed.

    >>> is_data_center_gpu("NVIDIA H100 80GB HBM3"), is_data_center_gpu("NVIDIA GeForce RTX 4090")
    (True, False)
    """
    if not name:
        return None
    if _SERVER_RTX.search(name):
        return True
    return not _NOT_DATA_CENTER.search(name)


def _not_here(cid: str, facts: Facts) -> Optional[CheckResult]:
    if not facts.reported("container"):
        return CheckResult(cid, Status.SKIP, "the container detector did not answer in time")
    if not facts.container.detected:
        return CheckResult(
            cid,
            Status.SKIP,
            "not in a container",
            detail="no /.dockerenv, /run/.containerenv, APPTAINER_CONTAINER, KUBERNETES_SERVICE_HOST "
            "or container cgroup was found",
        )
    return None


def _where(c: ContainerFacts) -> str:
    return f"a {c.kind} container ({', '.join(c.evidence)})"


def _gpu_wanted(facts: Facts) -> list[str]:
    """What says this container is meant to have GPUs (empty: nothing does)."""
    c = facts.container
    why = []
    if c.image_cuda is not None or c.require_cuda:
        why.append(f"a CUDA image (CUDA {c.image_cuda or c.require_cuda})")
    if c.visible_devices and c.visible_devices.strip().lower() not in ("void", ""):
        why.append(f"NVIDIA_VISIBLE_DEVICES={c.visible_devices}")
    if c.driver_capabilities:
        why.append(f"NVIDIA_DRIVER_CAPABILITIES={c.driver_capabilities}")
    if facts.torch.installed and facts.torch.cuda_build:
        why.append(f"a CUDA build of torch ({facts.torch.version})")
    if facts.host.nvidia_pci_devices:
        why.append("an NVIDIA GPU on the PCI bus")
    return why


def check_container_gpus(facts: Facts) -> CheckResult:
    """container.gpus: the runtime gave the container the GPUs and the driver's libcuda."""
    cid = "container.gpus"
    skip = _not_here(cid, facts)
    if skip is not None:
        return skip
    c = facts.container
    gpu_nodes = [d for d in c.device_nodes if re.fullmatch(r"/dev/nvidia\d+", d)]
    driver = facts.driver.version or c.mounted_driver
    visible = (c.visible_devices or "").strip().lower()
    fix = gpu_fix(c.kind)
    if visible == "none":
        return CheckResult(
            cid,
            Status.FAIL,
            "NVIDIA_VISIBLE_DEVICES=none: the runtime exposes no GPU to this container",
            detail=f"{_where(c)}; 'none' mounts the driver but no GPU (NVIDIA Container Toolkit)",
            fix=f"start it with the GPUs: {fix}",
        )
    wanted = _gpu_wanted(facts)
    if not gpu_nodes and driver is None and not wanted:
        # A CPU container (a CI job, a CPU torch) is healthy without GPUs: only evidence that this
        # one is meant for them makes their absence a failure.
        return CheckResult(
            cid,
            Status.SKIP,
            "a container without GPUs, and nothing here asks for one",
            detail="no CUDA image (CUDA_VERSION, NVIDIA_*), no CUDA build of torch, no NVIDIA GPU on the bus",
        )
    if not gpu_nodes and driver is None:
        return CheckResult(
            cid,
            Status.FAIL,
            "started without GPUs: no /dev/nvidia* device and no libcuda from the host driver",
            detail=join_lines(
                _where(c),
                "the image's NVIDIA_VISIBLE_DEVICES alone does nothing without the NVIDIA runtime"
                if visible
                else "",
                f"GPUs are wanted here: {', '.join(wanted)}",
            ),
            fix=fix,
        )
    if driver is None:
        return CheckResult(
            cid,
            Status.FAIL,
            f"{len(gpu_nodes)} GPU device(s) but no driver library (libcuda.so.<version>) mounted",
            detail=join_lines(
                _where(c),
                "the device nodes are there (Apptainer shares the host's /dev) but not the host "
                "driver's user-space libraries: CUDA cannot initialise",
            ),
            fix=fix,
        )
    if not gpu_nodes:
        return CheckResult(
            cid,
            Status.FAIL,
            f"the host driver {driver} is mounted but no /dev/nvidia<N> GPU device",
            detail=join_lines(_where(c), f"NVIDIA_VISIBLE_DEVICES={c.visible_devices}"),
            fix=fix,
        )
    where = c.mounted_driver_path or f"NVML ({facts.driver.source})"
    return CheckResult(
        cid,
        Status.PASS,
        f"{len(gpu_nodes)} GPU device(s) and the host driver {driver} are in this container",
        detail=join_lines(_where(c), f"driver from {where}"),
    )


def _gpu_names(facts: Facts) -> list[str]:
    return [g.name for g in facts.visible_gpus if g.name]


def _compat_cuda(c: ContainerFacts) -> Optional[Version]:
    """The CUDA the forward-compatibility package brings: its driver's own CUDA (Table 3)."""
    if c.compat_driver is None:
        return None
    return load_knowledge().cuda_for_driver(c.compat_driver)


def _older_image(driver: NvVersion) -> str:
    cuda = load_knowledge().cuda_for_driver(driver)
    if cuda is None:
        return "use an image whose CUDA this driver runs"
    return f"or use an image with CUDA {cuda} or older (the newest this driver runs in full)"


def check_container_cuda_driver(facts: Facts) -> CheckResult:
    """container.cuda_driver: the host's driver runs the image's CUDA (or forward compatibility
    bridges it)."""
    cid = "container.cuda_driver"
    skip = _not_here(cid, facts)
    if skip is not None:
        return skip
    c = facts.container
    if c.image_cuda is None:
        return CheckResult(
            cid,
            Status.SKIP,
            "the image's CUDA is unknown",
            detail="no CUDA_VERSION, /usr/local/cuda/version.json or NVIDIA_REQUIRE_CUDA",
        )
    driver = facts.driver.version or c.mounted_driver
    if driver is None:
        return CheckResult(
            cid, Status.SKIP, f"the image has CUDA {c.image_cuda}; no host driver is visible (container.gpus)"
        )
    verdict = rules.driver_floor(load_knowledge(), c.image_cuda, driver)
    image = f"the image's CUDA {c.image_cuda} ({c.image_cuda_source})"
    if verdict.status is rules.FloorStatus.UNKNOWN:
        return CheckResult(cid, Status.SKIP, f"envkit's tables have no driver floor for CUDA {c.image_cuda}")
    if verdict.status is rules.FloorStatus.RUNS:
        return CheckResult(cid, Status.PASS, f"the host driver {driver} runs {image}")
    upgrade = f"upgrade the host's driver to {verdict.toolkit_driver or verdict.floor} or newer"
    if verdict.status is rules.FloorStatus.MINOR_VERSION:
        return CheckResult(
            cid,
            Status.WARN,
            f"the host driver {driver} runs {image} only through minor-version compatibility",
            detail=f"{verdict.family} needs {verdict.floor}+; below the toolkit's own driver "
            f"{verdict.toolkit_driver}, kernels shipped as newer PTX cannot be JIT-compiled "
            "(docs.nvidia.com/deploy/cuda-compatibility/)",
            fix=f"{upgrade}, {_older_image(driver)}",
        )
    # Too old: forward compatibility is the one bridge, on data-center GPUs only.
    names = _gpu_names(facts)
    kinds = [is_data_center_gpu(n) for n in names]
    data_center = all(kinds) if kinds else None
    compat_cuda = _compat_cuda(c)
    summary = f"the host driver {driver} is too old for {image} (needs {verdict.floor}+)"
    detail = [
        _where(c),
        (
            f"{verdict.family} needs driver {verdict.floor} or newer "
            "(docs.nvidia.com/deploy/cuda-compatibility/)"
        ),
    ]
    fix = f"{upgrade}, {_older_image(driver)}"
    covers = compat_cuda is not None and compat_cuda >= Version(f"{c.image_cuda.major}.{c.image_cuda.minor}")
    if c.compat_dir is not None:
        detail.append(
            f"the image has the forward-compatibility package in {c.compat_dir} (its libcuda is "
            f"{c.compat_driver}, CUDA {compat_cuda or 'unknown'}); "
            f"on the loader path: {'yes' if c.compat_on_loader_path else 'no'}"
        )
    if c.compat_dir is not None and covers and data_center is not False:
        gpus = "data-center GPUs" if data_center else "GPUs of unknown kind (data-center ones only)"
        if c.compat_on_loader_path:
            return CheckResult(
                cid,
                Status.WARN,
                f"{summary}; forward compatibility bridges it on these {gpus}",
                detail=join_lines(
                    *detail,
                    "forward compatibility holds only on the driver branches its package supports "
                    "(docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html)",
                ),
                fix=fix,
            )
        return CheckResult(
            cid,
            Status.FAIL,
            f"{summary}; the image's forward-compatibility package would bridge it but is not on "
            "the loader path",
            detail=join_lines(*detail),
            fix=f"export LD_LIBRARY_PATH={c.compat_dir}:$LD_LIBRARY_PATH  (then check with "
            f"nvidia-smi / envkit doctor); or {upgrade}",
        )
    if c.compat_dir is not None and data_center is False:
        detail.append(
            "forward compatibility is for data-center GPUs only, not " + ", ".join(sorted(set(names)))
        )
    elif c.compat_dir is not None and not covers:
        detail.append(f"the package brings CUDA {compat_cuda or 'unknown'}, not {c.image_cuda}")
    return CheckResult(cid, Status.FAIL, summary, detail=join_lines(*detail), fix=fix)


def _capabilities(value: Optional[str]) -> Optional[set[str]]:
    if value is None:
        return None
    return {p.strip().lower() for p in value.split(",") if p.strip()}


def check_container_capabilities(facts: Facts) -> CheckResult:
    """container.capabilities: NVIDIA_DRIVER_CAPABILITIES mounts the compute (and utility) libraries."""
    cid = "container.capabilities"
    skip = _not_here(cid, facts)
    if skip is not None:
        return skip
    c = facts.container
    caps = _capabilities(c.driver_capabilities)
    if caps is None or not caps:
        return CheckResult(
            cid,
            Status.PASS,
            "NVIDIA_DRIVER_CAPABILITIES is unset: the runtime's default, utility,compute",
        )
    if "all" in caps:
        return CheckResult(cid, Status.PASS, "NVIDIA_DRIVER_CAPABILITIES=all")
    fix = (
        "docker run -e NVIDIA_DRIVER_CAPABILITIES=compute,utility …  (or ENV in the Dockerfile; "
        "env: in a pod)"
    )
    shown = f"NVIDIA_DRIVER_CAPABILITIES={c.driver_capabilities}"
    if "compute" not in caps:
        return CheckResult(
            cid,
            Status.FAIL,
            f"{shown} has no 'compute': libcuda is not mounted, CUDA cannot run",
            detail="'compute' is required for CUDA and OpenCL applications (NVIDIA Container Toolkit)",
            fix=fix,
        )
    if "utility" not in caps:
        return CheckResult(
            cid,
            Status.WARN,
            f"{shown} has no 'utility': no nvidia-smi and no NVML in this container",
            detail="'utility' is required for nvidia-smi and NVML; envkit then reads the driver from files",
            fix=fix,
        )
    return CheckResult(cid, Status.PASS, shown)


CHECKS: Final = {
    "container.gpus": check_container_gpus,
    "container.cuda_driver": check_container_cuda_driver,
    "container.capabilities": check_container_capabilities,
}
