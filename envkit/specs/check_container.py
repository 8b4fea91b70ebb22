"""``envkit spec --check`` on container files (envkit.specs.read_container reads them): the base
image's CUDA against the target driver, the torch build each ``pip install`` gets, and for Compose
services and Kubernetes containers the GPU request and /dev/shm. Every finding has its fix: the
flag, the manifest field, or the FROM line.

One result per check, in this order: ``container.image``, ``container.torch``, ``container.gpu``,
``container.shm``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final, Optional

from envkit.errors import InputError, NoBuildError
from envkit.knowledge import variant_cuda
from envkit.knowledge.containers import ImageKind
from envkit.report import CheckResult, Status
from envkit.resolve import Channel, Request, parse_cuda_request, resolve, rules
from envkit.specs.container import forward_compatible, image_fits, image_floor
from envkit.specs.intent import variant_of_url
from envkit.versions import Version

if TYPE_CHECKING:
    from envkit.knowledge import Knowledge
    from envkit.knowledge.containers import BaseImage
    from envkit.resolve.target import Target
    from envkit.specs.read import SpecFile
    from envkit.specs.read_container import ContainerFile, PipInstall

__all__ = ["CONTAINER_CHECK_IDS", "check_container", "image_cuda"]

CONTAINER_CHECK_IDS: Final = ("container.image", "container.torch", "container.gpu", "container.shm")
_ORDER: Final = (Status.FAIL, Status.WARN, Status.PASS, Status.SKIP)
Finding = tuple[Status, str, str, str]
# nvidia/cuda tags start with the CUDA version (gitlab.com/nvidia/container-images/cuda: dist/<cuda>/...);
# pytorch/pytorch tags are <torch>-cuda<X.Y>-cudnn<N>-<flavor> (github.com/pytorch/pytorch Dockerfile,
# .github/workflows/docker-release.yml).
_CUDA_TAG_RE: Final = re.compile(r"^(\d+\.\d+(?:\.\d+)?)(?:-|$)")
_PYTORCH_TAG_RE: Final = re.compile(r"^\d+\.\d+(?:\.\d+)?-cuda(\d+\.\d+)(?:-|$)")
_GPU_REPOS: Final = ("nvidia/cuda", "pytorch/pytorch", "nvidia/pytorch")
_COMPOSE_GPU: Final = (
    "deploy:\n  resources:\n    reservations:\n      devices:\n        - driver: nvidia\n"
    "          count: all\n          capabilities: [gpu]"
)
_K8S_SHM: Final = (
    "volumes: [{name: dshm, emptyDir: {medium: Memory, sizeLimit: 8Gi}}] and, in the container, "
    "volumeMounts: [{name: dshm, mountPath: /dev/shm}]"
)


def _mm(v: Version) -> Version:
    return Version(f"{v.major}.{v.minor}")


def _repo_tag(ref: str) -> tuple[str, str]:
    name, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "latest")
    for prefix in ("docker.io/", "index.docker.io/", "nvcr.io/", "library/"):
        name = name[len(prefix) :] if name.startswith(prefix) else name
    return name, tag


def _row(ref: str, k: Knowledge) -> Optional[BaseImage]:
    return next((i for i in k.images if i.ref == ref or _repo_tag(i.ref) == _repo_tag(ref)), None)


def image_cuda(ref: str, k: Knowledge) -> Optional[tuple[Version, str]]:
    """The CUDA of an image and where envkit knows it from: containers.toml's row (NGC and
    pytorch/pytorch rows cite their release notes), else the nvidia/cuda or pytorch/pytorch tag."""
    row = _row(ref, k)
    if row is not None:
        return row.cuda, f"{row.publisher}; envkit's containers.toml"
    name, tag = _repo_tag(ref)
    match = (
        _CUDA_TAG_RE.match(tag)
        if name == "nvidia/cuda"
        else _PYTORCH_TAG_RE.match(tag)
        if name == "pytorch/pytorch"
        else None
    )
    return (Version(match.group(1)), f"the {name} tag") if match else None


def _gpu_image(ref: Optional[str], k: Knowledge) -> bool:
    return ref is not None and (_repo_tag(ref)[0] in _GPU_REPOS or image_cuda(ref, k) is not None)


def _result(check_id: str, found: list[Finding], ok: str, *, skip: str = "", note: str = "") -> CheckResult:
    if not found:
        return CheckResult(check_id, Status.SKIP if skip else Status.PASS, skip or ok, note)
    found.sort(key=lambda f: _ORDER.index(f[0]))
    summary = found[0][1] + (f" (and {len(found) - 1} more)" if len(found) > 1 else "")
    detail = "\n".join(dict.fromkeys(f[2] for f in found if f[2]))
    fix = "\n".join(dict.fromkeys(f[3] for f in found if f[3]))
    return CheckResult(check_id, found[0][0], summary, detail, fix)


def _image(c: ContainerFile, k: Knowledge, t: Target) -> CheckResult:
    driver, found, unknown = t.checked_driver, [], []
    known = [(use, image_cuda(use.ref, k)) for use in c.images]
    if not any(cuda for _, cuda in known):
        return _result("container.image", [], "", skip="no base image whose CUDA envkit knows")
    if driver is None:
        return _result("container.image", [], "", skip="no target driver to check against (pass --driver)")
    for use, cuda_from in known:
        if cuda_from is None:
            unknown.append(use.ref)
            continue
        cuda, source = cuda_from
        row = _row(use.ref, k)
        # The release notes' stated minimum where containers.toml has one (NGC), else the CUDA's.
        verdict = image_floor(k, row, driver) if row is not None else rules.driver_floor(k, cuda, driver)
        if verdict.status is rules.FloorStatus.UNKNOWN:
            unknown.append(use.ref)
            continue
        repo = _repo_tag(use.ref)[0]
        kind = (
            ImageKind.CUDA_RUNTIME
            if repo == "nvidia/cuda"
            else ImageKind.NGC
            if repo == "nvidia/pytorch"
            else ImageKind.PYTORCH
        )
        # container.image and choose_image judge by the same rule (image_fits).
        if verdict.status is rules.FloorStatus.MINOR_VERSION and row and image_fits(k, row, driver, t.gpus):
            continue
        better = [i for i in k.images if i.kind is kind and image_fits(k, i, driver, t.gpus)]
        instead = f"FROM {max(better, key=lambda i: i.cuda).ref}, or " if better else ""
        where = f"{use.where}: {use.ref} is CUDA {cuda} ({source})"
        compat = forward_compatible(row, driver) if row is not None and row.driver is not None else None
        if verdict.status is rules.FloorStatus.TOO_OLD and compat is not None:
            summary = (
                f"driver {driver} runs {use.ref} only on data-center GPUs, through forward compatibility"
            )
            why = (
                f"{where}: its release notes ask for driver ≥ {verdict.floor}, or a data-center GPU "
                f"on the R{compat.major} branch from {compat} with the CUDA compatibility package "
                "(docs.nvidia.com/deploy/cuda-compatibility/); a GeForce or RTX card will not start it."
            )
            found.append((Status.WARN, summary, why, f"{instead}upgrade the driver to ≥ {verdict.floor}"))
        elif verdict.status is rules.FloorStatus.TOO_OLD and row is not None and row.driver is not None:
            fix = f"{instead}upgrade the driver to ≥ {verdict.floor}"
            summary = f"{use.ref} needs driver ≥ {verdict.floor}; the target has {driver}"
            why = f"{where}; the minimum driver its release notes state."
            found.append((Status.FAIL, summary, why, fix))
        elif verdict.status is rules.FloorStatus.TOO_OLD:
            fix = f"{instead}upgrade the driver to ≥ {verdict.toolkit_driver or verdict.floor}"
            summary = f"{use.ref} needs driver ≥ {verdict.floor} (CUDA {cuda}); the target has {driver}"
            why = f"{where}; NVIDIA's driver floor for it (CUDA release notes, Tables 2 and 3)."
            found.append((Status.FAIL, summary, why, fix))
        elif verdict.status is rules.FloorStatus.MINOR_VERSION and kind is ImageKind.CUDA_RUNTIME:
            summary = f"driver {driver} is older than CUDA {_mm(cuda)}'s: {use.ref} may not start"
            why = (
                f"{where}, which shipped with driver {verdict.toolkit_driver} (Table 3). The image sets "
                f"NVIDIA_REQUIRE_CUDA=cuda>={_mm(cuda)}, which the NVIDIA container runtime checks "
                "before it starts ('unsatisfied condition: cuda>=X.Y, please update your driver'; "
                "NVIDIA/nvidia-container-toolkit#152) unless the image's brand clauses name this "
                "driver's branch for the GPU; minor-version compatibility is not enough."
            )
            found.append(
                (Status.WARN, summary, why, f"{instead}upgrade the driver to ≥ {verdict.toolkit_driver}")
            )
        elif verdict.status is rules.FloorStatus.MINOR_VERSION:
            summary = f"driver {driver} runs the torch of {use.ref} only through minor-version compatibility"
            why = (
                f"{where}, which shipped with driver {verdict.toolkit_driver} (Table 3); whether a "
                "target GPU needs its PTX, which this driver cannot JIT-compile, is "
                + ("not known (pass --gpu)." if not t.gpus else "yes: a GPU has only PTX in it.")
            )
            found.append(
                (Status.WARN, summary, why, f"{instead}upgrade the driver to ≥ {verdict.toolkit_driver}")
            )
    note = f"CUDA not known for: {', '.join(unknown)}" if unknown else ""
    return _result("container.image", found, f"driver {driver} runs every base image's CUDA", note=note)


def _installs(pip: PipInstall) -> Optional[SpecFile]:
    """The requirements that install torch: the pip line's own, else the -r file it installs."""
    for spec in (pip.spec, pip.followed):
        if spec is not None and "torch" in spec.pip:
            return spec
    return None


def _variant(spec: SpecFile) -> Optional[str]:
    """The build an index option or a +local pin selects (None: PyPI's default)."""
    torch = spec.pip["torch"]
    if torch.local:
        return torch.local
    for url in (spec.index_url, *spec.extra_index_urls, *spec.find_links):
        for segment in (url or "").rstrip("/").split("/"):
            if variant_of_url(segment):
                return segment
    return None


def _torch(c: ContainerFile, k: Knowledge, t: Target) -> CheckResult:
    driver, found = t.checked_driver, []
    platform = t.platform if t.platform.startswith("linux") else "linux-x86_64"  # a container is Linux
    checked = 0
    for pip in c.pips:
        spec = _installs(pip)
        if spec is None:
            continue
        checked += 1
        torch = spec.pip["torch"]
        variant = _variant(spec)
        releases = [
            r for r in k.releases if torch.spec is None or torch.spec.contains(r.torch, prereleases=True)
        ]
        pypi = variant is None
        if pypi:
            release = releases[0] if releases else None
            variant = release.pypi_variant(platform) if release else None
            if variant is None:
                continue
        cuda = variant_cuda(variant) if variant else None
        plan = None
        for wanted in dict.fromkeys((torch.spec, None)):  # the file's torch range, else any torch
            try:
                plan = resolve(k, t, Request(wanted, parse_cuda_request("auto"), Channel.PIP))
                break
            except (NoBuildError, InputError):
                continue
        index = f"--index-url https://download.pytorch.org/whl/{plan.variant}" if plan else ""
        fix = f"{pip.where}: add {index} (and pin torch=={plan.torch}+{plan.variant})" if plan else ""
        head = f"{pip.where}: `{pip.text}`"
        if pypi and cuda is None and t.gpus:
            why = f"PyPI's torch {releases[0].torch} for {platform} is its CPU build."
            found.append((Status.FAIL, f"{head} gets PyPI's CPU build of torch", why, fix))
            continue
        if cuda is None or driver is None:
            if pypi:
                why = (
                    f"Without an index pip takes PyPI's torch: {releases[0].torch} is the {variant} build "
                    "(since torch 2.11 a cu13x build that needs driver ≥ 580); the build changes with PyPI."
                )
                found.append((Status.WARN, f"{head} installs PyPI's default {variant} build", why, fix))
            continue
        verdict = rules.driver_floor(k, cuda, driver)
        what = f"PyPI's default torch {releases[0].torch} ({variant})" if pypi else f"the {variant} build"
        if verdict.status is rules.FloorStatus.TOO_OLD:
            why = f"{what} is CUDA {cuda}: it needs driver ≥ {verdict.floor} (NVIDIA's CUDA release notes)."
            fix = "; or ".join(x for x in (fix, f"upgrade the driver to ≥ {verdict.floor}") if x)
            found.append((Status.FAIL, f"{head} installs {what}; driver {driver} cannot run it", why, fix))
        elif pypi:
            why = f"{what} runs on driver {driver}, but the build follows PyPI's default as it changes."
            found.append(
                (Status.WARN, f"{head} has no index: torch's build is whatever PyPI ships", why, fix)
            )
    if not checked:
        return _result("container.torch", [], "", skip="the file installs no torch with pip")
    return _result(
        "container.torch", found, "every pip install of torch names its build and the driver runs it"
    )


def _gpu(c: ContainerFile, k: Knowledge) -> CheckResult:
    if c.kind in ("dockerfile", "apptainer"):
        what, how = (
            ("a Dockerfile", "docker run --gpus all")
            if c.kind == "dockerfile"
            else ("an Apptainer definition file", "apptainer run --nv / exec --nv")
        )
        return _result("container.gpu", [], "", skip=f"{what} does not say how it is run ({how})")
    found: list[Finding] = []
    wants = [w for w in c.workloads if w.gpu or _gpu_image(w.image, k)]
    for w in c.workloads:
        if c.kind == "compose" and not w.gpu and w.gpu_legacy:
            why = (
                "`runtime: nvidia` is the Compose v2.3 form; the device reservation is the current one "
                "(docs.docker.com/compose/how-tos/gpu-support/)."
            )
            found.append(
                (
                    Status.WARN,
                    f"{w.where} asks for GPUs only with runtime: nvidia",
                    why,
                    f"{w.where}:\n{_COMPOSE_GPU}",
                )
            )
        elif c.kind == "compose" and not w.gpu and _gpu_image(w.image, k):
            why = (
                f"{w.image} is a CUDA image, and without a device reservation the service starts with no GPU."
            )
            found.append(
                (Status.FAIL, f"{w.where} has no GPU device reservation", why, f"{w.where}:\n{_COMPOSE_GPU}")
            )
        elif c.kind == "kubernetes" and w.gpu_request_only:
            why = (
                "Kubernetes takes extended resources such as nvidia.com/gpu from limits, not requests "
                "(kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/)."
            )
            found.append(
                (
                    Status.FAIL,
                    f"{w.where} requests nvidia.com/gpu without a limit",
                    why,
                    f"{w.where}: resources.limits: {{nvidia.com/gpu: 1}}",
                )
            )
        elif c.kind == "kubernetes" and not w.gpu and _gpu_image(w.image, k):
            why = (
                f"{w.image} is a CUDA image; without resources.limits nvidia.com/gpu the device plugin "
                "gives the container no GPU."
            )
            found.append(
                (
                    Status.FAIL,
                    f"{w.where} has no nvidia.com/gpu limit",
                    why,
                    f"{w.where}: resources.limits: {{nvidia.com/gpu: 1}}",
                )
            )
    if not any(w.gpu for w in c.workloads) and not found:
        fix = (
            _COMPOSE_GPU
            if c.kind == "compose"
            else "resources.limits: {nvidia.com/gpu: 1} on the container that runs torch"
        )
        found.append(
            (
                Status.WARN,
                f"no {'service' if c.kind == 'compose' else 'container'} in the file asks for a GPU",
                "",
                fix,
            )
        )
    note = ""
    if c.kind == "kubernetes":
        bare = [w.where for w in c.workloads if w.gpu and w.runtime_class is None]
        if bare:
            note = (
                f"no runtimeClassName for {', '.join(bare)}: the GPUs reach it only where nvidia is "
                "the node's default container runtime (the GPU Operator's default); else add "
                "runtimeClassName: nvidia"
            )
    noun = "service" if c.kind == "compose" else "container"
    ok = f"{len([w for w in wants if w.gpu])} GPU {noun}(s) ask for GPUs"
    return _result("container.gpu", found, ok, note=note)


def _shm(c: ContainerFile, k: Knowledge) -> CheckResult:
    if c.kind == "dockerfile":
        return _result(
            "container.shm",
            [],
            "",
            skip="/dev/shm is set at run time: docker run --ipc=host or --shm-size=8g",
        )
    if c.kind == "apptainer":
        return _result("container.shm", [], "", skip="Apptainer shares the host's /dev/shm")
    found: list[Finding] = []
    why = (
        "Docker and containerd give a container 64 MiB of /dev/shm: DataLoader workers and NCCL fail "
        "with 'bus error'."
    )
    for w in c.workloads:
        if w.shm or not (w.gpu or _gpu_image(w.image, k)):
            continue
        fix = (
            f'{w.where}: ipc: host (or shm_size: "8gb")' if c.kind == "compose" else f"{w.where}: {_K8S_SHM}"
        )
        found.append((Status.WARN, f"{w.where} has the default 64 MiB /dev/shm", why, fix))
    gpu = [w for w in c.workloads if w.gpu or _gpu_image(w.image, k)]
    if not gpu:
        return _result("container.shm", [], "", skip="no GPU service or container in the file")
    return _result("container.shm", found, "every GPU workload has a larger /dev/shm")


def check_container(c: ContainerFile, knowledge: Knowledge, target: Target) -> list[CheckResult]:
    """One result per CONTAINER_CHECK_IDS entry for the container file ``c``."""
    return [
        _image(c, knowledge, target),
        _torch(c, knowledge, target),
        _gpu(c, knowledge),
        _shm(c, knowledge),
    ]
