"""The container base-image table, ``containers.toml``: image references with their CUDA, OS and
Python (each row cites where the tag was seen in use). Data only: choosing one for a plan is
envkit.specs.container's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Optional

from envkit._serial import StrEnum
from envkit.knowledge._table import KnowledgeError, Row, read_table, table_rows
from envkit.versions import Version

__all__ = ["BaseImage", "ImageKind", "load_images", "read_images"]

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
    return BaseImage(ref, kind, row.version("cuda"), row.text("os"), python, torch, row.source())


def read_images() -> tuple[BaseImage, ...]:
    """containers.toml's rows, validated (a bad row names its file, position and field); read by
    envkit.knowledge.load_knowledge with the other tables (Knowledge.images)."""
    images = tuple(_image(r) for r in table_rows(read_table("containers"), "containers.toml", "image"))
    refs = [i.ref for i in images]
    if len(set(refs)) != len(refs):
        raise KnowledgeError("containers.toml: an image is listed twice")
    return images


def load_images() -> tuple[BaseImage, ...]:
    """The knowledge base's images (load_knowledge's cache)."""
    from envkit.knowledge import load_knowledge  # the package imports this module

    return load_knowledge().images
