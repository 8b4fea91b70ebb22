"""The container base-image table, ``containers.toml``: image references with their CUDA, OS and
Python (each row cites where the tag was seen in use), and for NGC releases the minimum driver
their release notes state. Data only: choosing one for a plan is envkit.specs.container's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Optional

from envkit._serial import StrEnum
from envkit.knowledge._table import KnowledgeError, Row, read_table, table_rows
from envkit.versions import NvVersion, Version

__all__ = ["BaseImage", "ImageKind", "OsImage", "load_os_images", "read_images"]

# registry/name:tag, no digest: what a FROM line and Apptainer's "From:" take.
_REF_RE: Final = re.compile(r"^[a-z0-9][a-z0-9._/-]*:[A-Za-z0-9][A-Za-z0-9._-]*$")


class ImageKind(StrEnum):
    CUDA_RUNTIME = "cuda-runtime"
    PYTORCH = "pytorch"
    NGC = "ngc"  # nvcr.io/nvidia/pytorch: NVIDIA's own torch build (a 2.x.0a0 prerelease)


@dataclass(frozen=True)
class BaseImage:
    ref: str
    kind: ImageKind
    cuda: Version
    os: str
    python: Optional[Version]  # the OS's python3 (cuda-runtime); None where not recorded
    torch: Optional[Version]  # pytorch images only
    source: str
    # The minimum driver the image's release notes state ("requires NVIDIA Driver release 570 or
    # later"); None: not stated, the image's CUDA decides (envkit.resolve.rules.driver_floor).
    driver: Optional[NvVersion] = None
    # The data-center branches the notes say run it through forward compatibility ("470.57 (or
    # later R470), 525.85 (or later R525) ..."): each the oldest driver of its branch.
    compat_drivers: tuple[NvVersion, ...] = ()

    @property
    def publisher(self) -> str:
        """Who publishes the image and where it is built: what a generated file names as the
        image's origin. ``source`` is only where envkit saw the tag in use (often a third party's
        Dockerfile), evidence that the tag exists, not its origin."""
        if self.kind is ImageKind.CUDA_RUNTIME:
            python = f"; its python3 is {self.os}'s {self.python}" if self.python else ""
            return (
                "NVIDIA's CUDA image, hub.docker.com/r/nvidia/cuda, built from "
                f"gitlab.com/nvidia/container-images/cuda{python}"
            )
        if self.kind is ImageKind.PYTORCH:
            return (
                "PyTorch's image, hub.docker.com/r/pytorch/pytorch, built by the Dockerfile of "
                "github.com/pytorch/pytorch"
            )
        notes = self.source if self.source.startswith("https://docs.nvidia.com/") else "its release notes"
        return f"NVIDIA's NGC PyTorch container, catalog.ngc.nvidia.com; {notes}"


def _image(row: Row) -> BaseImage:
    ref = row.text("ref")
    if not _REF_RE.match(ref):
        raise row.fail("ref", "an image reference like nvidia/cuda:12.8.0-runtime-ubuntu24.04")
    try:
        kind = ImageKind(row.text("kind"))
    except ValueError:
        raise row.fail("kind", " or ".join(k.value for k in ImageKind)) from None
    python, torch = row.version("python", optional=True), row.version("torch", optional=True)
    if kind in (ImageKind.PYTORCH, ImageKind.NGC) and torch is None:
        raise row.fail("torch", "the torch version of a pytorch image")
    if kind is ImageKind.CUDA_RUNTIME and python is None:
        raise row.fail("python", "the python3 version of the image's OS")
    driver = row.version("driver", optional=True)
    compat = _drivers(row, "compat_drivers")
    if compat and driver is None:
        raise row.fail("driver", "the minimum driver the release notes state, beside compat_drivers")
    if driver is not None and any(c >= driver for c in compat):
        raise row.fail("compat_drivers", f"forward-compatible branches below the minimum driver {driver}")
    return BaseImage(
        ref, kind, row.version("cuda"), row.text("os"), python, torch, row.source(), driver, compat
    )


def _drivers(row: Row, field: str) -> tuple[NvVersion, ...]:
    items = row.raw(field, list, True) or []
    try:
        drivers = tuple(NvVersion(v) for v in items if isinstance(v, str))
    except ValueError:
        drivers = ()
    if len(drivers) != len(items) or len({d.major for d in drivers}) != len(drivers):
        raise row.fail(field, 'a list of driver versions, one per branch, like ["470.57", "525.85"]')
    return tuple(sorted(drivers))


@dataclass(frozen=True)
class OsImage:
    """A plain OS image (``[[os_image]]``, ubuntu:24.04) for wheels that bring their GPU user space
    themselves: the ROCm wheels bundle ROCm's libraries, the XPU wheels the SYCL runtime, the CPU
    wheels need none. No CUDA in it, so none of the CUDA image rules applies."""

    ref: str
    os: str
    python: Version  # the OS's python3
    source: str

    @property
    def publisher(self) -> str:
        name = self.ref.split(":", 1)[0]
        return f"the {name} image, hub.docker.com/_/{name}; its python3 is {self.os}'s {self.python}"


def load_os_images() -> tuple[OsImage, ...]:
    """containers.toml's ``[[os_image]]`` rows, validated."""
    rows = table_rows(read_table("containers"), "containers.toml", "os_image")
    images = []
    for row in rows:
        ref = row.text("ref")
        if not _REF_RE.match(ref):
            raise row.fail("ref", "an image reference like ubuntu:24.04")
        python = Version(str(row.version("python")))
        images.append(OsImage(ref, row.text("os"), python, row.source()))
    return tuple(images)


def read_images() -> tuple[BaseImage, ...]:
    """containers.toml's rows, validated (a bad row names its file, position and field); read by
    envkit.knowledge.load_knowledge with the other tables (Knowledge.images)."""
    images = tuple(_image(r) for r in table_rows(read_table("containers"), "containers.toml", "image"))
    load_os_images()  # the [[os_image]] rows are checked with the rest of the file
    refs = [i.ref for i in images]
    if len(set(refs)) != len(refs):
        raise KnowledgeError("containers.toml: an image is listed twice")
    return images
