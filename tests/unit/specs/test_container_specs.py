"""spec --format docker / apptainer: the base image from containers.toml, the pip lines, no secret."""

from __future__ import annotations

import pytest

from envkit.errors import InputError
from envkit.knowledge import KnowledgeError, load_knowledge
from envkit.knowledge._table import Row
from envkit.knowledge.containers import _image
from envkit.specs.pip import GENERATED_MARK
from envkit.specs.render import FORMATS, render_specs
from envkit.specs.template import load_template
from tests.unit.specs.test_specs import plan


def test_every_image_row_cites_a_source_and_parses() -> None:
    images = load_knowledge().images
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


# AMD, Intel and CPU wheels bring their GPU user space (or need none): a plain OS image ---------


def vendor_plan(gpu: str, python: str = "3.12") -> object:
    from envkit.knowledge import load_knowledge
    from envkit.resolve import Request, resolve
    from envkit.resolve.target import Target, target_from_flags

    k = load_knowledge()
    base = Target(platform="linux-x86_64", python=None)
    return resolve(k, target_from_flags(k, base=base, gpus=(gpu,), python=python), Request())


def test_a_rocm_plan_starts_from_ubuntu_and_reaches_the_gpu_through_kfd() -> None:
    p = vendor_plan("MI300X")
    files = render_specs(p, load_template("pt2"), "docker")  # type: ignore[arg-type]
    docker = files["Dockerfile"]
    assert "FROM ubuntu:24.04\n" in docker and "python3 -m venv /opt/venv" in docker
    assert "docker run --rm --device=/dev/kfd --device=/dev/dri --group-add video -it IMAGE" in docker
    assert "--gpus all" not in docker
    assert "download.pytorch.org/whl/rocm" in files["requirements.txt"]
    apptainer = render_specs(p, load_template("pt2"), "apptainer")["Apptainer.def"]  # type: ignore[arg-type]
    assert apptainer.startswith("Bootstrap: docker\nFrom: ubuntu:24.04\n")
    assert "apptainer build --rocm IMAGE.sif" in apptainer


def test_an_xpu_plan_names_intels_device_and_an_os_image_needs_the_plans_python() -> None:
    docker = render_specs(vendor_plan("Arc B580"), load_template("pt2"), "docker")["Dockerfile"]  # type: ignore[arg-type]
    assert "FROM ubuntu:24.04\n" in docker and "docker run --rm --device=/dev/dri -it IMAGE" in docker
    with pytest.raises(InputError, match="no OS base image") as err:
        render_specs(vendor_plan("MI300X", python="3.11"), load_template("pt2"), "docker")  # type: ignore[arg-type]
    assert "ubuntu:24.04 (python 3.12)" in (err.value.hint or "")
