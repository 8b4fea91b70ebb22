"""containers.toml: every base-image row parses and cites a source a reader can follow; the
release notes' minimum driver (``driver``) and forward-compatible branches (``compat_drivers``)
are validated when a row has them."""

from __future__ import annotations

import re
from typing import Any

import pytest

from envkit.knowledge import KnowledgeError, load_knowledge
from envkit.knowledge._table import Row, table_rows
from envkit.knowledge.containers import _REF_RE, ImageKind, _image
from envkit.versions import NvVersion

NGC = {
    "ref": "nvcr.io/nvidia/pytorch:99.01-py3",  # a made-up release: the tests' own row
    "kind": "ngc",
    "cuda": "12.4.1",
    "torch": "2.4.0a0",
    "os": "ubuntu22.04",
    "python": "3.10",
    "source": "https://docs.nvidia.com/deeplearning/frameworks/pytorch-release-notes/index.html",
}


def _row(**fields: Any) -> Row:
    data = {**NGC, **fields}
    return Row("containers.toml", "image", 0, {k: v for k, v in data.items() if v is not None})


def test_every_row_parses_cites_a_source_and_has_a_well_formed_ref() -> None:
    images = load_knowledge().images
    by_kind = {kind: [i for i in images if i.kind is kind] for kind in ImageKind}
    assert len(by_kind[ImageKind.CUDA_RUNTIME]) >= 18 and len(by_kind[ImageKind.PYTORCH]) >= 11
    assert by_kind[ImageKind.NGC]
    for image in images:
        assert _REF_RE.match(image.ref), image.ref
        assert "https://" in image.source, image.ref
        assert image.compat_drivers == () or image.driver is not None
    cuda_tags = {i.ref for i in by_kind[ImageKind.CUDA_RUNTIME]}
    # Runtime images for every wheel CUDA (cu118 ... cu130), on Ubuntu 22.04 (python3 3.10) and, from
    # 12.8 on, 24.04 (python3 3.12).
    for cuda in ("11.8", "12.1", "12.4", "12.6", "12.8", "12.9", "13.0"):
        assert any(ref.startswith(f"nvidia/cuda:{cuda}.") for ref in cuda_tags), cuda
    for cuda in ("12.8", "12.9", "13.0"):
        for os in ("ubuntu22.04", "ubuntu24.04"):
            assert any(r.startswith(f"nvidia/cuda:{cuda}.") and r.endswith(f"-{os}") for r in cuda_tags), (
                cuda,
                os,
            )


def test_cuda_runtime_rows_agree_with_their_tag() -> None:
    # nvidia/cuda:<CUDA_VERSION>-[cudnn[N]-]runtime-<os>: the row's cuda and os are the tag's, and
    # its python is that OS's python3 (packages.ubuntu.com, cited in each row).
    python3 = {
        "ubuntu20.04": ("focal", "3.8"),
        "ubuntu22.04": ("jammy", "3.10"),
        "ubuntu24.04": ("noble", "3.12"),
    }
    tag = re.compile(r"^nvidia/cuda:(\d+\.\d+\.\d+)-(?:cudnn\d*-)?runtime-(ubuntu\d+\.\d+)$")
    for image in load_knowledge().images:
        if image.kind is not ImageKind.CUDA_RUNTIME:
            continue
        m = tag.match(image.ref)
        assert m, image.ref
        assert (str(image.cuda), image.os) == (m.group(1), m.group(2)), image.ref
        codename, python = python3[image.os]
        assert str(image.python) == python, image.ref
        assert f"https://packages.ubuntu.com/{codename}/python3" in image.source, image.ref
        # the evidence for the tag: a file at a commit (https://github.com/OWNER/REPO/blob/SHA/PATH)
        assert re.search(r"https://github\.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{40}/\S+", image.source), (
            image.ref
        )


@pytest.mark.parametrize("source", [None, "", "   ", "see shared/reference/containers.md", "compat-data.md"])
def test_a_row_without_a_followable_source_is_refused(source: Any) -> None:
    with pytest.raises(KnowledgeError, match="field 'source'"):
        _image(_row(source=source))
    with pytest.raises(KnowledgeError, match="field 'source'"):
        table_rows(
            {"image": [{k: v for k, v in {**NGC, "source": source}.items() if v is not None}]},
            "containers.toml",
            "image",
        )


def test_release_notes_driver_and_forward_compatible_branches() -> None:
    image = _image(_row(driver="545", compat_drivers=["535.86", "470.57", "525.85"]))
    assert image.driver == NvVersion("545")
    assert [str(d) for d in image.compat_drivers] == ["470.57", "525.85", "535.86"]  # sorted
    assert _image(_row()).driver is None and _image(_row()).compat_drivers == ()


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"compat_drivers": ["470.57"]}, "driver"),  # branches without the minimum they sit below
        ({"driver": "545", "compat_drivers": ["550.54"]}, "compat_drivers"),  # not below it
        ({"driver": "545", "compat_drivers": ["470.57", "470.82"]}, "compat_drivers"),  # a branch twice
        ({"driver": "545", "compat_drivers": "470.57"}, "compat_drivers"),  # not a list
        ({"driver": "545", "compat_drivers": ["R470"]}, "compat_drivers"),
        ({"driver": "five hundred"}, "driver"),
    ],
)
def test_bad_driver_fields_name_the_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(KnowledgeError, match=f"field '{field}'"):
        _image(_row(**fields))
