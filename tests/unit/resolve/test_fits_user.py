"""Plans that fit what the user has: the builds a wheelhouse holds, a driver nobody gave, values no
GPU or CUDA has, what --explain passed over, and whose machine a message talks about."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from envkit import cli
from envkit.errors import EXIT_NO_BUILD, EXIT_OK, EXIT_USAGE, NoBuildError
from envkit.knowledge import load_knowledge
from envkit.resolve import Request, resolve
from envkit.resolve.available import read_wheelhouse
from envkit.resolve.target import Target, parse_gpu
from envkit.versions import NvVersion, Version

K = load_knowledge()
runner = CliRunner()
# Flags that leave nothing to detect: the CLI tests start no process.
DESCRIBED = ("--python", "3.11", "--platform", "linux-x86_64")


def _wheelhouse(folder: Path, *names: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"")  # only the name is read (PEP 427), never the archive
    return folder


def _local_wheelhouse() -> Path | None:
    """The folder pip's own configuration names for --find-links, when it holds a torch wheel."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", "global.find-links"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    folder = Path(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip() else None
    if folder is None or not folder.is_dir() or not any(folder.glob("torch-*.whl")):
        return None
    return folder


LINUX_311 = Target(platform="linux-x86_64", python=Version("3.11"))


# The wheelhouse ----------------------------------------------------------------------------------


def test_wheel_names_are_read_as_builds(tmp_path: Path) -> None:
    folder = _wheelhouse(
        tmp_path / "wh",
        "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
        "torch-2.5.1+cu121-cp310-cp310-linux_x86_64.whl",
        "torch-2.8.0-cp312-cp312-win_amd64.whl",
        "torchvision-0.28.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
        "not-a-wheel.whl",
        "torch-2.13.0.tar.gz",
    )
    available = read_wheelhouse(folder)
    assert [(str(b.torch), b.variant, b.platforms) for b in available.builds] == [
        ("2.13.0", "cpu", ("linux-x86_64",)),
        ("2.8.0", None, ("windows-x86_64",)),
        ("2.5.1", "cu121", ("linux-x86_64",)),
    ]
    assert available.builds[0].pythons == (Version("3.11"),)
    assert "holds torch 2.13.0+cpu (cp311, linux-x86_64)" in available.describe()


def test_the_plan_comes_from_the_wheelhouse(tmp_path: Path) -> None:
    folder = _wheelhouse(tmp_path / "wh", "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
    available = read_wheelhouse(folder)
    plan = resolve(K, LINUX_311, Request(available=available))
    assert (plan.torch, plan.variant) == (Version("2.13.0"), "cpu")
    assert plan.notes == (available.describe(),)
    assert any(r.candidate == "2.15.0+cpu" and "not in the wheelhouse" in r.reason for r in plan.rejected)
    # Without the restriction the same target gets a newer release: the restriction did the work.
    assert resolve(K, LINUX_311, Request()).torch > Version("2.13.0")


def test_a_wheel_for_another_python_or_platform_does_not_count(tmp_path: Path) -> None:
    folder = _wheelhouse(tmp_path / "wh", "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
    available = read_wheelhouse(folder)
    for target in (
        Target(platform="linux-x86_64", python=Version("3.12")),
        Target(platform="linux-aarch64", python=Version("3.11")),
    ):
        with pytest.raises(NoBuildError) as info:
            resolve(K, target, Request(available=available))
        assert "holds torch 2.13.0+cpu" in info.value.message


def test_no_fitting_build_names_the_nearest_available_one(tmp_path: Path) -> None:
    folder = _wheelhouse(tmp_path / "wh", "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
    gpu = Target(
        platform="linux-x86_64",
        driver=NvVersion("550.54.14"),
        gpus=(parse_gpu("sm_90", K),),
        python=Version("3.11"),
    )
    with pytest.raises(NoBuildError) as info:
        resolve(K, gpu, Request(available=read_wheelhouse(folder)))
    ways = {w.rule: w for w in info.value.ways_out}
    assert ways["cuda"].candidate == "2.13.0+cpu"  # the wheel it has, with --cuda cpu
    assert ways["available"].candidate is not None  # and the build that would fit, to fetch
    assert "not in the wheelhouse" in info.value.message


def _create(*args: str, envs: Path) -> Result:
    """``envkit create --dry-run`` in this process (typer's runner: the command as ``python -m
    envkit`` runs it, without an interpreter start of ~0.5 s); it detects this machine's Python."""
    argv = ["create", "demo", "--dry-run", "--backend", "venv", *args]
    return runner.invoke(cli.app, argv, env={"ENVKIT_ENVS_DIR": str(envs)})


@pytest.mark.real_processes  # envkit create as a user runs it
def test_create_with_the_local_wheelhouse_plans_the_wheel_it_holds(tmp_path: Path) -> None:
    folder = _local_wheelhouse()
    if folder is None:
        pytest.skip("pip's configuration names no find-links folder with a torch wheel")
    held = read_wheelhouse(folder)
    proc = _create("--wheelhouse", str(folder), "--no-gpu", "--json", envs=tmp_path)
    assert proc.exit_code == EXIT_OK, proc.stderr
    plan = json.loads(proc.stdout)["plan"]
    assert any(
        Version(plan["torch"]) == b.torch and b.variant in (None, plan["variant"]) for b in held.builds
    )
    assert plan["notes"] == [held.describe()]
    # --offline with a GPU the CPU wheel cannot serve: exit 3 at once, naming the wheel it has.
    gpu = ("--gpu", "sm_90", "--driver", "550.54.14", "--python", "3.11")
    proc = _create("--wheelhouse", str(folder), "--offline", *gpu, envs=tmp_path)
    assert proc.exit_code == EXIT_NO_BUILD, proc.stderr
    assert held.describe() in proc.stderr and "--cuda cpu" in proc.stderr


@pytest.mark.real_processes
def test_offline_with_a_wheelhouse_without_torch_fails_before_any_install(tmp_path: Path) -> None:
    folder = _wheelhouse(tmp_path / "wh", "numpy-2.0.0-cp311-cp311-manylinux_2_28_x86_64.whl")
    proc = _create("--wheelhouse", str(folder), "--offline", "--no-gpu", envs=tmp_path / "envs")
    assert proc.exit_code == EXIT_NO_BUILD
    assert "holds no torch wheel" in proc.stderr
    # Not offline: torch may come from the index, so the plan is not restricted.
    proc = _create("--wheelhouse", str(folder), "--no-gpu", "--json", envs=tmp_path / "envs")
    assert proc.exit_code == EXIT_OK, proc.stderr
    assert json.loads(proc.stdout)["plan"]["notes"] == []


# Flags that describe the target ------------------------------------------------------------------


def test_gpu_without_driver_warns_that_no_driver_was_checked() -> None:
    result = runner.invoke(cli.app, ["resolve", "--gpu", "sm_90", "--json", *DESCRIBED])
    assert result.exit_code == EXIT_OK, result.output
    warnings = json.loads(result.stdout)["warnings"]
    assert any("without a driver to check" in w and "--driver" in w for w in warnings)
    given = runner.invoke(
        cli.app, ["resolve", "--gpu", "sm_90", "--driver", "580.65.06", "--json", *DESCRIBED]
    )
    assert not any("without a driver" in w for w in json.loads(given.stdout)["warnings"])


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--gpu", "sm_999"], "no NVIDIA GPU has compute capability 99.9"),
        (["--gpu", "99.9"], "no NVIDIA GPU has compute capability 99.9"),
        (["--gpu", "sm_900"], "no NVIDIA GPU has compute capability 90.0"),
        (["--gpu", "sm_20"], "older than any GPU"),
        (["--cuda", "99.9"], "no CUDA 99.9 exists"),
        (["--cuda", "12.7"], "no CUDA 12.7 exists"),
        (["--cuda", "99"], "there is no CUDA 99"),
    ],
)
def test_impossible_values_are_input_errors(args: list[str], words: str) -> None:
    result = runner.invoke(cli.app, ["resolve", *args, *DESCRIBED])
    assert result.exit_code == EXIT_USAGE, result.output
    assert words in result.stderr
    assert "Traceback" not in result.output


def test_real_values_still_plan() -> None:
    for args in (["--gpu", "sm_121"], ["--gpu", "3.5", "--cuda", "11.8"], ["--cuda", "12.1", "--gpu", "8.0"]):
        result = runner.invoke(cli.app, ["resolve", *args, "--json", *DESCRIBED])
        assert result.exit_code in (EXIT_OK, EXIT_NO_BUILD), (args, result.output)


def test_explain_lists_the_newer_variants_passed_over_for_the_chosen_release() -> None:
    # Driver 580.65.06 runs CUDA 13.2 only through minor-version compatibility: cu130 is chosen.
    result = runner.invoke(
        cli.app, ["resolve", "--gpu", "sm_90", "--driver", "580.65.06", "--json", *DESCRIBED]
    )
    plan = json.loads(result.stdout)
    newer = [r for r in plan["rejected"] if r["candidate"].startswith(plan["torch"] + "+")]
    assert newer, plan["rejected"]
    assert all("minor-version compatibility" in r["reason"] for r in newer)
    shown = runner.invoke(
        cli.app, ["resolve", "--gpu", "sm_90", "--driver", "580.65.06", "--explain", *DESCRIBED]
    )
    assert "Nothing newer was passed over" not in shown.stdout
    assert newer[0]["candidate"] in shown.stdout


def test_a_target_from_flags_is_the_target_not_this_machine() -> None:
    # macOS has CPU wheels only: a GPU there rejects every build for the CUDA rule, and says whose GPU.
    for described_by, who in (("flags", "the target"), ("this machine", "this machine")):
        target = Target(
            platform="macos-arm64",
            driver=NvVersion("550.54.14"),
            gpus=(parse_gpu("sm_90", K),),
            python=Version("3.11"),
            described_by=described_by,
        )
        with pytest.raises(NoBuildError) as info:
            resolve(K, target, Request())
        assert f"({who} has an NVIDIA GPU)" in info.value.message
        if who == "the target":
            assert "this machine" not in info.value.message
