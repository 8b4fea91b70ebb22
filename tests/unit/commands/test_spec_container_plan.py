"""spec --format docker / apptainer plans for the image, not for the machine envkit runs on: the
image's OS python3 is the venv's Python, so a template's (or a laptop's) Python that no fitting base
image has gives way to an image's, with a warning; a --python the user gave must be met."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from envkit import cli

runner = CliRunner()
TARGET = ["--cuda", "13.0", "--driver", "580.65.06", "--gpu", "sm_90", "--platform", "linux-x86_64"]


def _spec(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(
        cli.app, ["spec", "pt2", "--format", "docker", *TARGET, "-o", str(tmp_path), *args]
    )
    dockerfile = tmp_path / "Dockerfile"
    return result.exit_code, result.stderr, dockerfile.read_text() if dockerfile.exists() else ""


def test_the_templates_python_gives_way_to_the_images(tmp_path: Path) -> None:
    # pt2 asks for Python 3.11; no cited CUDA 13.0 runtime image ships it (22.04: 3.10, 24.04: 3.12).
    code, err, docker = _spec(tmp_path)
    assert code == 0, err
    assert "the template's Python 3.11 is no base image's python3: planned for Python 3.12" in err
    assert "FROM nvidia/cuda:13.0.1-runtime-ubuntu24.04\n" in docker
    # The header's regenerate command pins the Python, so that running it again gives the same file.
    assert "--python 3.12" in docker.splitlines()[2]
    assert "planned for linux-x86_64, driver 580.65.06, sm_90, Python 3.12" in docker
    regen = docker.splitlines()[2].removeprefix("#   envkit ").split()
    result = runner.invoke(cli.app, [*regen, "-o", str(tmp_path / "again")])
    assert result.exit_code == 0, result.stderr
    # The same file, but for the warning: the command now names the Python itself.
    lines = docker.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("# warning: the template's Python"))
    assert [line.startswith("#   ") for line in lines[start + 1 : start + 4]] == [True, True, False]
    kept = lines[:start] + lines[start + 3 :]  # the warning takes three comment lines
    assert (tmp_path / "again" / "Dockerfile").read_text() == "".join(kept)


def test_a_python_the_user_gave_must_be_met(tmp_path: Path) -> None:
    code, err, _ = _spec(tmp_path, "--python", "3.11")
    assert code == 2
    assert "no cuda-runtime base image in envkit's containers.toml fits" in err and "python 3.11" in err
    # The hint names the nearest rows, a handful of them, not the whole table.
    assert (
        "nvidia/cuda:13.0.1-runtime-ubuntu24.04" in err and "more (envkit/knowledge/containers.toml)" in err
    )
    code, err, docker = _spec(tmp_path / "py310", "--python", "3.10")
    assert code == 0, err
    assert "FROM nvidia/cuda:13.0.2-runtime-ubuntu22.04\n" in docker and "no base image's python3" not in err


def test_a_platform_the_user_gave_must_be_linux(tmp_path: Path) -> None:
    # An image is Linux: a Windows plan's requirements in a Linux image (or macOS's "no CUDA build",
    # exit 3) would answer another question than the one asked.
    target = [a for a in TARGET if a not in ("--platform", "linux-x86_64")]
    for platform in ("windows-x86_64", "macos-arm64"):
        for fmt in ("docker", "apptainer"):
            out = tmp_path / f"{platform}-{fmt}"
            result = runner.invoke(
                cli.app, ["spec", "pt2", "--format", fmt, *target, "--platform", platform, "-o", str(out)]
            )
            assert result.exit_code == 2, result.stderr
            assert f"--platform {platform}" in result.stderr and "Linux" in result.stderr
            assert not out.exists()
    result = runner.invoke(
        cli.app,
        [
            "spec",
            "pt2",
            "--format",
            "docker",
            *target,
            "--platform",
            "linux-aarch64",
            "-o",
            str(tmp_path / "arm"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert "planned for linux-aarch64" in (tmp_path / "arm" / "Dockerfile").read_text()


def test_a_templates_python_without_any_torch_build_gives_way_too(tmp_path: Path) -> None:
    # Python 3.7 has no torch 2 build at all: the plan is still the image's Python's, not exit 3.
    template = tmp_path / "old.toml"
    template.write_text('name = "old"\ndescription = "d"\npython = "3.7"\ntorch = ">=2.0"\n')
    result = runner.invoke(
        cli.app, ["spec", str(template), "--format", "docker", *TARGET, "-o", str(tmp_path / "o")]
    )
    assert result.exit_code == 0, result.stderr
    assert "the template's Python 3.7 is no base image's python3: planned for Python 3.12" in result.stderr
    assert "FROM nvidia/cuda:13.0.1-runtime-ubuntu24.04\n" in (tmp_path / "o" / "Dockerfile").read_text()
    # A --python the user gave with no build is still no build (exit 3), as for every format.
    result = runner.invoke(
        cli.app,
        ["spec", str(template), "--format", "docker", *TARGET, "--python", "3.7", "-o", str(tmp_path / "p")],
    )
    assert result.exit_code == 3


def test_a_pytorch_image_template_gets_the_newest_image_the_driver_runs(tmp_path: Path) -> None:
    # The newest torch for the target (2.14+) is newer than any pytorch/pytorch image in the table:
    # the plan takes the newest image's torch and CUDA instead, with a warning; --torch insists.
    template = tmp_path / "img.toml"
    template.write_text('name = "img"\ndescription = "torch from the image"\nbase = "pytorch"\n')
    args = [
        "spec",
        str(template),
        "--format",
        "docker",
        "--driver",
        "570.124.06",
        "--platform",
        "linux-x86_64",
    ]
    result = runner.invoke(cli.app, [*args, "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.stderr
    assert "no pytorch/pytorch image envkit knows has torch" in result.stderr
    docker = (tmp_path / "out" / "Dockerfile").read_text()
    from_line = next(line for line in docker.splitlines() if line.startswith("FROM "))
    image_torch = from_line.split(":")[1].split("-")[0]
    assert f"--torch {image_torch} " in docker.splitlines()[2]  # the header pins the image's torch
    insisted = runner.invoke(cli.app, [*args, "--torch", "2.14.1", "-o", str(tmp_path / "insist")])
    assert insisted.exit_code == 2 and "no pytorch base image" in insisted.stderr
