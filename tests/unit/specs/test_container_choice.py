"""The base image spec --format docker/apptainer picks for the plans the resolver makes on common
targets, and what the image needs of the driver: the release notes' minimum where its row states
one (NGC), else its CUDA's floor; spec --check of a Dockerfile FROM such an image judges by it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from envkit.errors import InputError, NoBuildError
from envkit.knowledge import load_knowledge
from envkit.knowledge._table import Row
from envkit.knowledge.containers import BaseImage, ImageKind, _image
from envkit.report import Status
from envkit.resolve import rules
from envkit.resolve.target import Target
from envkit.specs.check import check_spec
from envkit.specs.container import choose_image, forward_compatible, image_floor
from envkit.specs.render import render_specs
from envkit.specs.template import builtin_dir, load_template
from envkit.versions import NvVersion, Version
from tests.unit.specs.test_specs import plan

K = load_knowledge()
# A made-up NGC release (the tests' own row, not containers.toml's): CUDA 12.4.1, and release notes
# that ask for driver 545 or a data-center branch from 470.57 / 525.85 / 535.86.
NGC_ROW = _image(
    Row(
        "containers.toml",
        "image",
        0,
        {
            "ref": "nvcr.io/nvidia/pytorch:99.01-py3",
            "kind": "ngc",
            "cuda": "12.4.1",
            "torch": "2.4.0a0",
            "os": "ubuntu22.04",
            "python": "3.10",
            "driver": "545",
            "compat_drivers": ["470.57", "525.85", "535.86"],
            "source": "https://docs.nvidia.com/deeplearning/frameworks/pytorch-release-notes/index.html",
        },
    )
)


def _template(base: str) -> str:
    """The built-in pt2 template, asking for ``base`` images (the format: envs/README.md)."""
    return (
        (builtin_dir() / "pt2.toml")
        .read_text(encoding="utf-8")
        .replace('name = "pt2"\n', f'name = "pt2-{base}"\nbase = "{base}"\n')
    )


@pytest.mark.parametrize(
    ("driver", "cuda", "python", "minor"),
    [
        ("535.104.05", "12.1", "3.10", "12.1"),
        ("550.54.15", "12.4", "3.10", "12.4"),  # cu124: a 12.4 image now, no longer 12.3.2
        ("570.124.06", "12.8", "3.12", "12.8"),
        ("570.124.06", "12.8", "3.10", "12.8"),
        ("570.124.06", "12.6", "3.12", "12.6"),
        ("575.57.08", "12.9", "3.12", "12.9"),
        ("575.57.08", "12.9", "3.10", "12.9"),
        ("580.65.06", "13.0", "3.12", "13.0"),  # cu130 on R580: was an InputError (no 13.x row)
        ("580.65.06", "13.0", "3.10", "13.0"),
        ("535.104.05", "11.8", "3.10", "11.8"),
    ],
)
def test_common_targets_get_a_cuda_runtime_image_their_driver_runs(
    driver: str, cuda: str, python: str, minor: str
) -> None:
    p = plan(driver, "sm_80", cuda=cuda, python=python)
    assert p.cuda == Version(cuda)
    image = choose_image(p, K)
    assert image.kind is ImageKind.CUDA_RUNTIME and image.ref.startswith(f"nvidia/cuda:{minor}.")
    assert Version(f"{image.cuda.major}.{image.cuda.minor}") == Version(minor) <= p.cuda
    assert image.python is not None and (image.python.major, image.python.minor) == (
        Version(python).major,
        Version(python).minor,
    )
    # Never a newer driver than the target's: at or above the toolkit's own driver (Table 3), not
    # only through minor-version compatibility.
    verdict = image_floor(K, image, NvVersion(driver))
    assert verdict.status is rules.FloorStatus.RUNS
    assert verdict.floor is not None and verdict.floor <= NvVersion(driver)
    assert verdict.toolkit_driver is not None and verdict.toolkit_driver <= NvVersion(driver)
    files = render_specs(p, load_template("pt2"), "docker")
    assert f"FROM {image.ref}\n" in files["Dockerfile"]
    assert f"From: {image.ref}\n" in render_specs(p, load_template("pt2"), "apptainer")["Apptainer.def"]


@pytest.mark.parametrize("driver", ["535.104.05", "550.54.15", "570.124.06", "575.57.08", "580.65.06"])
def test_no_cuda_runtime_image_chosen_needs_a_newer_driver_than_the_target(driver: str) -> None:
    # Whatever CUDA a plan asks for, the image is one whose CUDA the target driver runs
    # (rules.driver_floor) or there is none (InputError), never one it cannot start.
    chosen: set[int] = set()
    for cuda in ("11.8", "12.1", "12.4", "12.6", "12.8", "12.9", "13.0"):
        for python in ("3.10", "3.12"):
            try:
                p = plan(driver, "sm_80", cuda=cuda, python=python)
                image = choose_image(p, K)
            except (InputError, NoBuildError):  # no torch build, or no image: nothing chosen
                continue
            assert rules.driver_floor(K, image.cuda, NvVersion(driver)).runs, (driver, cuda, image.ref)
            assert image_floor(K, image, NvVersion(driver)).runs, (driver, cuda, image.ref)
            chosen.add(image.cuda.major * 100 + image.cuda.minor)
    # Not vacuous: every driver gets 12.x images, never one of a CUDA newer than the driver's own
    # (an nvidia/cuda image's NVIDIA_REQUIRE_CUDA=cuda>=X.Y refuses to start there: image_fits), and
    # a 13.0 one exactly where it is R580 or newer.
    own = K.cuda_for_driver(NvVersion(driver))
    assert own is not None and 1201 in chosen, (driver, chosen)
    assert max(chosen) <= own.major * 100 + own.minor, (driver, chosen)
    assert (1300 in chosen) == (NvVersion(driver) >= NvVersion("580.65.06")), (driver, chosen)
    # A cu130 plan judged for an R575 driver (which cannot start CUDA 13: its floor is R580): none of
    # the table's 13.x rows is offered, it says so instead.
    p = plan("580.65.06", "sm_80", cuda="13.0", python="3.12")
    older = dataclasses.replace(p, target=dataclasses.replace(p.target, driver=NvVersion("575.57.08")))
    assert any(i.cuda.major == 13 for i in K.images if i.kind is ImageKind.CUDA_RUNTIME)
    with pytest.raises(InputError, match=r"no cuda-runtime base image .* driver 575\.57\.08"):
        choose_image(older, K)


def _row(ref: str, cuda: str, os: str, python: str) -> BaseImage:
    return _image(
        Row(
            "containers.toml",
            "image",
            0,
            {
                "ref": ref,
                "kind": "cuda-runtime",
                "cuda": cuda,
                "os": os,
                "python": python,
                "source": "https://example.org/the-tests-own-row",
            },
        )
    )


def test_the_choice_among_rows_of_one_cuda_minor_does_not_depend_on_their_order() -> None:
    # Newest patch first; then plain runtime over cudnn (the CUDA wheels bring their own cuDNN);
    # then the newer OS, which only decides for a plan without a Python; then the ref.
    rows = [
        _row("nvidia/cuda:13.0.2-cudnn-runtime-ubuntu24.04", "13.0.2", "ubuntu24.04", "3.12"),
        _row("nvidia/cuda:13.0.2-runtime-ubuntu24.04", "13.0.2", "ubuntu24.04", "3.12"),
        _row("nvidia/cuda:13.0.1-runtime-ubuntu24.04", "13.0.1", "ubuntu24.04", "3.12"),
        _row("nvidia/cuda:13.0.2-runtime-ubuntu22.04", "13.0.2", "ubuntu22.04", "3.10"),
    ]
    p = plan("580.65.06", "sm_90", cuda="13.0", python="3.12")
    no_python = dataclasses.replace(p, python=None)
    for order in (rows, rows[::-1], rows[1:] + rows[:1], rows[2:] + rows[:2]):
        assert choose_image(p, K, images=order).ref == "nvidia/cuda:13.0.2-runtime-ubuntu24.04"
        assert choose_image(no_python, K, images=order).ref == "nvidia/cuda:13.0.2-runtime-ubuntu24.04"
    p310 = plan("580.65.06", "sm_90", cuda="13.0", python="3.10")
    assert choose_image(p310, K, images=rows).ref == "nvidia/cuda:13.0.2-runtime-ubuntu22.04"
    # Only cudnn at the newest patch: the newest patch still wins over an older plain one.
    only_cudnn = [rows[0], rows[2]]
    assert choose_image(p, K, images=only_cudnn).ref == "nvidia/cuda:13.0.2-cudnn-runtime-ubuntu24.04"
    # And the table's own rows: 13.0.1 plain and cudnn on 24.04, plain chosen.
    assert choose_image(p, K).ref == "nvidia/cuda:13.0.1-runtime-ubuntu24.04"


def test_driver_580_and_cu130_gets_an_ngc_image_it_runs(tmp_path: Path) -> None:
    p = plan("580.65.06", "sm_90", cuda="13.0", python="3.12")
    template = tmp_path / "ngc.toml"
    template.write_text(_template("ngc"), encoding="utf-8")
    docker = render_specs(p, load_template(str(template)), "docker")["Dockerfile"]
    image = choose_image(p, K, want=ImageKind.NGC)
    assert f"FROM {image.ref}\n" in docker and image.cuda.major == 13
    assert image_floor(K, image, NvVersion("580.65.06")).runs
    with pytest.raises(InputError, match="no ngc base image"):
        choose_image(plan("575.57.08", "sm_90", cuda="12.9", python="3.12"), K, want=ImageKind.NGC)


def test_a_template_asking_for_pytorch_gets_the_pytorch_image_of_the_plans_torch(tmp_path: Path) -> None:
    template = tmp_path / "pt.toml"
    template.write_text(_template("pytorch"), encoding="utf-8")
    p = plan("570.124.06", "sm_90", torch="==2.7.1", cuda="12.8", python="3.11")
    docker = render_specs(p, load_template(str(template)), "docker")["Dockerfile"]
    assert "FROM pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime\n" in docker
    image = choose_image(p, K, want=ImageKind.PYTORCH)
    assert image_floor(K, image, NvVersion("570.124.06")).runs


def test_the_release_notes_minimum_decides_where_a_row_states_one() -> None:
    # By its CUDA alone (12.4, minor-version compatibility from R525) driver 535 would run it.
    assert rules.driver_floor(K, NGC_ROW.cuda, NvVersion("535.104.05")).runs
    verdict = image_floor(K, NGC_ROW, NvVersion("535.104.05"))
    assert verdict.status is rules.FloorStatus.TOO_OLD and verdict.floor == NvVersion("545")
    assert image_floor(K, NGC_ROW, NvVersion("550.54.15")).status is rules.FloorStatus.RUNS
    assert image_floor(K, NGC_ROW, None).status is rules.FloorStatus.NO_DRIVER
    assert forward_compatible(NGC_ROW, NvVersion("535.104.05")) == NvVersion("535.86")
    assert forward_compatible(NGC_ROW, NvVersion("530.30.02")) is None  # R530 is not listed
    assert forward_compatible(NGC_ROW, NvVersion("470.42.01")) is None  # below 470.57


def _check_from(tmp_path: Path, driver: str) -> tuple[Status, str, str]:
    k = dataclasses.replace(K, images=(*K.images, NGC_ROW))
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM nvcr.io/nvidia/pytorch:99.01-py3\nRUN echo hi\n", encoding="utf-8")
    results = {r.id: r for r in check_spec(dockerfile, k, Target("linux-x86_64", NvVersion(driver)))}
    image = results["container.image"]
    return image.status, image.summary, image.detail


def test_spec_check_of_a_dockerfile_from_an_ngc_tag_uses_the_release_notes_driver(tmp_path: Path) -> None:
    status, summary, _ = _check_from(tmp_path, "550.54.15")
    assert status is Status.PASS
    status, summary, detail = _check_from(tmp_path, "530.30.02")
    assert status is Status.FAIL and "needs driver ≥ 545" in summary and "release notes" in detail
    status, summary, detail = _check_from(tmp_path, "535.104.05")
    assert (
        status is Status.WARN and "forward compatibility" in summary and "R535 branch from 535.86" in detail
    )
