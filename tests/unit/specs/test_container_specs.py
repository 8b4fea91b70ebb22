"""spec --format docker / apptainer: the base image from containers.toml, the pip lines, no secret."""

from __future__ import annotations

import pytest

from envkit.errors import InputError
from envkit.knowledge import KnowledgeError
from envkit.knowledge._table import Row
from envkit.knowledge.containers import _image, load_images
from envkit.specs.pip import GENERATED_MARK
from envkit.specs.render import FORMATS, render_specs
from envkit.specs.template import load_template
from tests.unit.specs.test_specs import plan


def test_every_image_row_cites_a_source_and_parses() -> None:
    images = load_images()
    assert images and all(i.source for i in images)
    with pytest.raises(KnowledgeError, match="field 'ref'"):
        _image(Row("containers.toml", "image", 0, {"ref": "not a ref", "kind": "pytorch", "source": "x"}))


def test_docker_format_for_a_cuda_12_8_plan() -> None:
    assert {"docker", "apptainer"} <= set(FORMATS)
    p = plan("570.124.06", "sm_90", cuda="12.8", python="3.12")
    files = render_specs(p, load_template("pt2"), "docker")
    assert set(files) == {"Dockerfile", "requirements.txt"}
    docker = files["Dockerfile"]
    assert docker.splitlines()[1].startswith(f"# {GENERATED_MARK}")
    assert "FROM nvidia/cuda:12.8.1-runtime-ubuntu24.04\n" in docker  # the newest cited 12.8 patch
    assert "--format docker" in docker and "RUN pip install -r /tmp/requirements.txt" in docker
    assert "envkit verify --python /opt/venv/bin/python" in docker
    assert "download.pytorch.org/whl/cu128" in files["requirements.txt"]


def test_apptainer_format_and_an_older_image_for_an_older_plan() -> None:
    p = plan("535.104.05", "sm_80", cuda="12.4", python="3.10")
    files = render_specs(p, load_template("pt2"), "apptainer")
    definition = files["Apptainer.def"]
    # Not the plan's CUDA 12.4: an nvidia/cuda image's NVIDIA_REQUIRE_CUDA=cuda>=12.4 would not start
    # on driver 535 (CUDA 12.2), minor-version compatibility or not (image_fits); the newest image
    # of the major that it starts, on the OS whose python3 is the plan's Python.
    assert definition.startswith("Bootstrap: docker\nFrom: nvidia/cuda:12.1.1-runtime-ubuntu22.04\n")
    assert "%test" in definition and "%files\n    requirements.txt /opt/requirements.txt" in definition


def test_no_fitting_image_is_an_input_error_that_lists_the_table() -> None:
    p = plan("570.124.06", "sm_90", cuda="12.8", python="3.11")
    with pytest.raises(InputError, match="no cuda-runtime base image") as err:
        render_specs(p, load_template("pt2"), "docker")
    assert "nvidia/cuda:12.8.0-runtime-ubuntu24.04" in (err.value.hint or "")
