"""``envkit spec --format docker`` and ``--format apptainer``: a Dockerfile or an Apptainer
definition file for a plan, beside the requirements.txt the pip format makes.

The base image comes from the knowledge base (containers.toml; every row cites where its tag is
used), never from a guess: an ``nvidia/cuda`` runtime image whose CUDA the target driver runs (the
torch wheel brings its own CUDA libraries; the image's must still not need a newer driver), of the
plan's CUDA major and no newer than the plan's CUDA, whose OS python3 is the plan's Python; or,
when the template asks for it (``base = "pytorch"``), a ``pytorch/pytorch`` image of the plan's
torch and CUDA. The pip lines are the requirements.txt the pip format writes, installed into a
venv at /opt/venv, and ``envkit verify --python /opt/venv/bin/python`` is the image's check, run on
a GPU node (a build has no GPU): the header says how; Apptainer's ``%test`` runs it where envkit is
on the PATH. envkit itself is not installed into the image.
Credentials never enter the file: the index URLs keep pip's ``${VAR}`` placeholders, and Docker
gets them as BuildKit secrets (docs.docker.com/build/building/secrets/), never ARG or ENV, which
would stay in the image's history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Optional, Union

from envkit.errors import InputError
from envkit.knowledge import load_knowledge
from envkit.knowledge.containers import BaseImage, ImageKind, OsImage, load_os_images
from envkit.resolve import rules
from envkit.specs.pip import comment, header
from envkit.versions import NvVersion, Version

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.knowledge import Knowledge
    from envkit.resolve import Plan
    from envkit.resolve.target import GpuTarget
    from envkit.specs.pip import PipSource
    from envkit.specs.template import Template

__all__ = [
    "CONTAINER_FORMATS",
    "apptainer_gpu_flag",
    "choose_image",
    "choose_os_image",
    "container_warnings",
    "docker_gpu_flags",
    "forward_compatible",
    "image_fits",
    "image_floor",
    "image_kind",
    "render_apptainer",
    "render_dockerfile",
]

CONTAINER_FORMATS: Final = ("docker", "apptainer")
_LISTED: Final = 6  # rows named when none fits
# The flags that pick what a kind of image is matched on: the OS's Python, or the image's own torch.
_MATCHED_BY: Final = {
    ImageKind.CUDA_RUNTIME: "--python or --cuda",
    ImageKind.PYTORCH: "--torch and --cuda",
    ImageKind.NGC: "--cuda",
}
VENV: Final = "/opt/venv"


def _mm(v: Version) -> Version:
    return Version(f"{v.major}.{v.minor}")


def image_floor(k: Knowledge, image: BaseImage, driver: Optional[NvVersion]) -> rules.FloorVerdict:
    """What ``image`` needs of the driver: the minimum its release notes state where its row has
    one (NGC: "Release 24.05 ... requires NVIDIA Driver release 545 or later"), else what its CUDA
    needs (rules.driver_floor)."""
    by_cuda = rules.driver_floor(k, image.cuda, driver)
    if image.driver is None:
        return by_cuda
    need = image.driver
    if driver is None:
        status = rules.FloorStatus.NO_DRIVER
    elif driver < need:
        status = rules.FloorStatus.TOO_OLD
    else:
        status = rules.FloorStatus.RUNS
    return rules.FloorVerdict(
        by_cuda.cuda,
        driver,
        status,
        rules.FloorReason.TOOLKIT_DRIVER,
        need,
        need,
        by_cuda.minor_version_compatibility,
        image.source,
    )


def image_fits(
    k: Knowledge, image: BaseImage, driver: Optional[NvVersion], gpus: Sequence[GpuTarget] = ()
) -> bool:
    """Whether ``driver`` starts and runs ``image`` with nothing to warn about: the one rule
    choose_image picks by and ``container.image`` (spec --check) judges by.

    - nvidia/cuda: the driver's own CUDA must be the image's or newer. The image sets
      NVIDIA_REQUIRE_CUDA="cuda>=X.Y …", which the NVIDIA container runtime checks before the
      container starts ("requirement error: unsatisfied condition: cuda>=12.6, please update your
      driver", ggml-org/llama.cpp#9665; NVIDIA/nvidia-container-toolkit#152): minor-version
      compatibility is not enough, unless one of the image's brand clauses names the driver's
      branch for the GPU's brand, which envkit does not know.
    - NGC (nvcr.io/nvidia/pytorch): the minimum driver its release notes state, else the floor of
      its CUDA (image_floor; containers.toml's NGC rows say why).
    - pytorch/pytorch: built FROM ubuntu without NVIDIA_REQUIRE_CUDA (github.com/pytorch/pytorch
      Dockerfile, official stage): its torch wheel decides, as any wheel does
      (rules.build_on_driver with the target's GPUs).
    """
    if driver is None:
        return True
    if image.kind is ImageKind.PYTORCH and image.torch is not None:
        variant = f"cu{image.cuda.major}{image.cuda.minor}"
        build = rules.build_arches(k, torch=image.torch, variant=variant, or_linux=True)
        coverage = [rules.arch_coverage(build, g.cc) for g in gpus] if build.exact else []
        return rules.build_on_driver(k, image.cuda, driver, coverage).clean
    if image.kind is ImageKind.NGC:
        return image_floor(k, image, driver).runs
    return image_floor(k, image, driver).status is rules.FloorStatus.RUNS


def forward_compatible(image: BaseImage, driver: NvVersion) -> Optional[NvVersion]:
    """The forward-compatible branch floor of ``image``'s release notes that ``driver`` meets (its
    own branch, at or above the listed driver), or None. Data-center GPUs only, through the CUDA
    compatibility package the image carries (docs.nvidia.com/deploy/cuda-compatibility/)."""
    for floor in image.compat_drivers:
        if floor.major == driver.major and driver >= floor:
            return floor
    return None


def image_kind(template: Template) -> ImageKind:
    """The kind of base image the template asks for (its ``base``), cuda-runtime by default."""
    return ImageKind(template.base) if template.base else ImageKind.CUDA_RUNTIME


def choose_image(
    plan: Plan,
    k: Knowledge,
    *,
    want: ImageKind = ImageKind.CUDA_RUNTIME,
    images: Optional[Sequence[BaseImage]] = None,
) -> BaseImage:
    """The base image for ``plan`` (see the module's doc); InputError listing what there is when
    no row fits, never a made-up tag."""
    rows = list(load_knowledge().images if images is None else images)
    if plan.cuda is None:
        raise InputError(
            f"--format docker/apptainer: the plan is a {plan.variant} build; containers.toml has "
            "CUDA base images only for it",
            hint="plan a CUDA build (--cuda auto or --cuda 12.8)",
        )
    driver = plan.target.checked_driver

    def runs(image: BaseImage) -> bool:
        return image_fits(k, image, driver, plan.target.gpus)

    if want is ImageKind.NGC:  # NVIDIA's torch build: any release of the plan's CUDA major it runs
        fits = [i for i in rows if i.kind is ImageKind.NGC and i.cuda.major == plan.cuda.major and runs(i)]
    elif want is ImageKind.PYTORCH:
        fits = [
            i
            for i in rows
            if i.kind is ImageKind.PYTORCH
            and i.torch == plan.torch
            and _mm(i.cuda) == _mm(plan.cuda)
            and runs(i)
        ]
    else:
        fits = [
            i
            for i in rows
            if i.kind is ImageKind.CUDA_RUNTIME
            and i.cuda.major == plan.cuda.major
            and _mm(i.cuda) <= _mm(plan.cuda)
            and _same_python(i, plan.python)
            and runs(i)
        ]
    if not fits:
        # The rows of the plan's CUDA major first (the nearest answers), a handful of them.
        cuda = plan.cuda
        kin = [i for i in rows if i.kind is want]
        newest_first = sorted(kin, key=lambda i: (i.cuda, i.ref), reverse=True)
        near = sorted(newest_first, key=lambda i: i.cuda.major != cuda.major)
        have = ", ".join(f"{i.ref} (CUDA {i.cuda}, python {i.python or '-'})" for i in near[:_LISTED])
        if len(near) > _LISTED:
            have += f" and {len(near) - _LISTED} more (envkit/knowledge/containers.toml)"
        python = f", python {plan.python}" if plan.python else ""
        if driver is not None and want is ImageKind.CUDA_RUNTIME:
            # Images of the plan's CUDA and Python that this driver cannot start: say which driver
            # starts the newest of them, and that the pip files alone need none of it.
            blocked = [
                i
                for i in kin
                if i.cuda.major == cuda.major and _mm(i.cuda) <= _mm(cuda) and _same_python(i, plan.python)
            ]
            if blocked:
                image = max(blocked, key=_preference)
                need = image_floor(k, image, None).toolkit_driver
                raise InputError(
                    f"no cuda-runtime base image envkit knows starts on driver {driver} for torch "
                    f"{plan.torch} CUDA {plan.cuda}{python}: an nvidia/cuda image needs a driver of its "
                    "CUDA or newer (its NVIDIA_REQUIRE_CUDA is checked before the container starts)",
                    hint=(f"upgrade the driver to ≥ {need} for {image.ref}; or " if need else "")
                    + "--format pip for the requirements alone (the torch wheels bring their own CUDA)",
                )
        raise InputError(
            f"no {want} base image in envkit's containers.toml fits torch {plan.torch} "
            f"CUDA {plan.cuda}{python}" + (f" and driver {driver}" if driver else ""),
            hint=f"it has {have or 'none'}; pass {_MATCHED_BY[want]} to match one",
        )
    return max(fits, key=_preference)


def _same_python(image: BaseImage, python: Optional[Version]) -> bool:
    return python is None or (image.python is not None and _mm(image.python) == _mm(python))


def _preference(image: BaseImage) -> tuple[Version, bool, Version, str]:
    """choose_image's order among the rows that fit, so the pick never depends on the table's row
    order: the newest CUDA (patch included: every row already fits the plan's CUDA and the
    driver); then a plain runtime image over a cuDNN one (the torch CUDA wheels bring their own
    cuDNN, the nvidia-cudnn-cu12/-cu13 wheel they require, so the image's is a second copy); then
    the newer OS (its python3 is the plan's Python wherever the plan names one, so this only
    decides for a plan without a Python; templates name no OS); then the ref itself."""
    return (image.cuda, "cudnn" not in image.ref, image.python or Version("0"), image.ref)


def choose_os_image(plan: Plan) -> OsImage:
    """The OS image for a plan whose wheels bring their own GPU user space (ROCm, XPU) or need none
    (CPU): the one whose python3 is the plan's Python; InputError listing them when none is."""
    rows = load_os_images()
    fits = [i for i in rows if _same_python_os(i, plan.python)]
    if not fits:
        have = ", ".join(f"{i.ref} (python {i.python})" for i in rows) or "none"
        raise InputError(
            f"no OS base image in envkit's containers.toml has python {plan.python} for torch "
            f"{plan.torch}+{plan.variant}",
            hint=f"it has {have}; pass --python to match one",
        )
    return max(fits, key=lambda i: (i.python, i.ref))


def _same_python_os(image: OsImage, python: Optional[Version]) -> bool:
    return python is None or _mm(image.python) == _mm(python)


def container_warnings(plan: Plan) -> list[str]:
    """What an image for a plan needs beyond its wheels: an XPU build reaches the GPU through
    Level Zero, whose runtime is part of Intel's GPU driver, not of the wheels."""
    if plan.variant == "xpu":
        why = (
            "an XPU image needs Intel's GPU user-space driver (Level Zero and the compute runtime) "
            "beside the wheels: install it in the image (dgpu-docs.intel.com/driver/installation.html) "
            "and run with --device=/dev/dri"
        )
        return [why]
    return []


# How a container reaches the GPUs: NVIDIA through the container toolkit (--gpus all); AMD's ROCm
# through the KFD and DRI device files and the video group (ROCm docs, "Running ROCm Docker
# containers": --device=/dev/kfd --device=/dev/dri --group-add video); Intel through /dev/dri.
def docker_gpu_flags(plan: Plan) -> str:
    if plan.variant.startswith("rocm") or (plan.target.has_amd and plan.cuda is None):
        return " --device=/dev/kfd --device=/dev/dri --group-add video"
    if plan.variant == "xpu":
        return " --device=/dev/dri"
    return " --gpus all" if plan.target.has_nvidia else ""


def apptainer_gpu_flag(plan: Plan) -> str:
    """Apptainer's GPU option: --nv (NVIDIA), --rocm (AMD); Intel's /dev/dri is bound by default."""
    if plan.variant.startswith("rocm"):
        return " --rocm"
    return " --nv" if plan.cuda is not None else ""


def _verify_line(plan: Plan) -> str:
    gpus = docker_gpu_flags(plan)
    return f"docker run --rm{gpus} -it IMAGE, then inside it: envkit verify --python {VENV}/bin/python"


def render_dockerfile(
    plan: Plan, template: Template, source: PipSource, regen: str, image: Union[BaseImage, OsImage]
) -> str:
    use = "docker build -t IMAGE ." + "".join(f" --secret id={s},env={s}" for s in source.secrets)
    lines = ["# syntax=docker/dockerfile:1"]
    lines += comment(header(plan, template.name, use, regen))
    lines += comment(
        [f"Base image: {image.ref} ({image.publisher})", "Check it on a GPU node:", f"  {_verify_line(plan)}"]
    )
    lines += [f"FROM {image.ref}", "ENV DEBIAN_FRONTEND=noninteractive PIP_NO_CACHE_DIR=1"]
    if _os_python(image):
        lines += [
            "RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \\",
            "    && rm -rf /var/lib/apt/lists/*",
            f"RUN python3 -m venv {VENV}",
        ]
    else:
        lines.append(f"RUN python -m venv --system-site-packages {VENV}")
    lines += [f'ENV PATH="{VENV}/bin:$PATH"', "COPY requirements.txt /tmp/requirements.txt"]
    mounts = "".join(f"--mount=type=secret,id={s},env={s} " for s in source.secrets)
    lines.append(f"RUN {mounts}pip install -r /tmp/requirements.txt")
    return "\n".join(lines) + "\n"


def _os_python(image: Union[BaseImage, OsImage]) -> bool:
    """Whether the image's python3 is the OS's (installed with apt, a venv made of it)."""
    return isinstance(image, OsImage) or image.kind is ImageKind.CUDA_RUNTIME


def render_apptainer(
    plan: Plan, template: Template, source: PipSource, regen: str, image: Union[BaseImage, OsImage]
) -> str:
    if source.secrets:
        raise InputError(
            f"--format apptainer: the index needs credentials ({', '.join(source.secrets)}), and an "
            "Apptainer definition file has no secret mounts",
            hint="use --format docker (BuildKit secrets), or a mirror that needs no token",
        )
    flag = apptainer_gpu_flag(plan)
    use = f"apptainer build{flag} IMAGE.sif Apptainer.def  (requirements.txt in the same folder)"
    lines = ["Bootstrap: docker", f"From: {image.ref}", ""]
    lines += comment(header(plan, template.name, use, regen))
    lines += comment([f"Base image: {image.ref} ({image.publisher})"])
    python = "python3" if _os_python(image) else "python"
    lines += ["", "%files", "    requirements.txt /opt/requirements.txt", "", "%post"]
    if _os_python(image):
        lines += [
            "    export DEBIAN_FRONTEND=noninteractive",
            "    apt-get update && apt-get install -y --no-install-recommends python3 python3-venv",
            "    rm -rf /var/lib/apt/lists/*",
        ]
    site = "" if _os_python(image) else " --system-site-packages"
    lines += [
        f"    {python} -m venv{site} {VENV}",
        f"    {VENV}/bin/pip install --no-cache-dir -r /opt/requirements.txt",
        "",
        "%environment",
        f'    export PATH="{VENV}/bin:$PATH"',
        "",
        "%test",
        "    if command -v envkit >/dev/null; then",
        f"        envkit verify --python {VENV}/bin/python",
        "    else",
        f"        {VENV}/bin/python -c 'import torch; print(torch.__version__, torch.version.cuda)'",
        "    fi",
    ]
    return "\n".join(lines) + "\n"
