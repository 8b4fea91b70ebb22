"""envkit lock: conda-lock's command line, and a fast, clear failure without the network."""

from __future__ import annotations

import importlib.util
import socket
import time
from pathlib import Path

import pytest

from envkit.commands.lock import prepare_lock
from envkit.create.lock import LockFailed, lock
from envkit.create.lock_job import LockJob
from envkit.resolve.plan import PlanFlags
from envkit.system import System
from tests.conftest import write_program

H100_535 = PlanFlags(
    driver="535.104.05", gpus=("sm_90",), python="3.11", platform="linux-x86_64", channel="conda"
)


def system_with(tmp_path: Path, *programs: str) -> System:
    for name in programs:
        write_program(tmp_path / "bin", name, "")
    (tmp_path / "bin").mkdir(exist_ok=True)
    return System(env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)})


def test_command_line_and_inputs(tmp_path: Path) -> None:
    job = prepare_lock(system_with(tmp_path, "conda-lock"), "pt2", H100_535, out_dir=str(tmp_path / "out"))
    assert job.argv == (
        str(tmp_path / "bin" / "conda-lock"),
        "lock",
        "--file",
        "environment.yml",
        "--virtual-package-spec",
        "virtual-packages.yml",
        "--lockfile",
        str(tmp_path / "out" / "conda-lock.yml"),
        "--platform",
        "linux-64",
    )
    assert (
        '__cuda: "12.2"' in job.inputs["virtual-packages.yml"]
    )  # driver 535 runs CUDA 12.2, not conda-lock's 11.4
    assert job.channels == ("conda-forge",)


def test_several_platforms_and_a_bad_one(tmp_path: Path) -> None:
    system = system_with(tmp_path, "conda-lock")
    job = prepare_lock(system, "pt2-minimal", H100_535, platforms=("linux-64", "linux-aarch64"))
    assert job.argv[-4:] == ("--platform", "linux-64", "--platform", "linux-aarch64")
    from envkit.errors import InputError

    with pytest.raises(InputError, match="--lock-platform win-32"):
        prepare_lock(system, "pt2-minimal", H100_535, platforms=("win-32",))


def closed_port_condarc(tmp_path: Path, login: str = "") -> tuple[Path, int]:
    """A .condarc whose channel_alias is a port on 127.0.0.1 where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends
    rc = tmp_path / "condarc"
    rc.write_text(f"channel_alias: http://{login}127.0.0.1:{port}\n", encoding="utf-8")
    return rc, port


def test_without_network_it_fails_within_seconds(tmp_path: Path) -> None:
    """A clear failure, not conda's retry loop (conda-lock's way: it has a solver, micromamba, to
    run), naming the channel where .condarc puts it, as micromamba would read it."""
    rc, port = closed_port_condarc(tmp_path)
    system = system_with(tmp_path, "conda-lock", "micromamba")
    system = System(env={**system.env, "CONDARC": str(rc)})
    job = prepare_lock(system, "pt2", H100_535, out_dir=str(tmp_path))
    start = time.monotonic()
    with pytest.raises(LockFailed) as info:
        lock(system, job)
    assert time.monotonic() - start < 10
    assert info.value.message.startswith(
        f"cannot lock: the conda channels do not answer (http://127.0.0.1:{port}/conda-forge/"
    )
    assert not (tmp_path / "conda-lock.yml").exists()


def test_a_channel_password_is_not_in_the_error(tmp_path: Path) -> None:
    rc, port = closed_port_condarc(tmp_path, login="alice:s3cret@")
    system = system_with(tmp_path, "conda-lock", "micromamba")
    system = System(env={**system.env, "CONDARC": str(rc)})
    job = prepare_lock(system, "pt2", H100_535, out_dir=str(tmp_path))
    with pytest.raises(LockFailed) as info:
        lock(system, job)
    said = f"{info.value.message} {info.value.hint}"
    assert f"(http://***@127.0.0.1:{port}/conda-forge/" in said
    assert "s3cret" not in said


def test_cli_exit_code_and_one_clear_message(tmp_path: Path) -> None:
    """No conda, mamba or micromamba here: rattler solves (envkit.create.rattler_lock), and finds the
    channel unreachable at once; without py-rattler, the error says what is missing. The channel is
    a closed port on 127.0.0.1 (.condarc's channel_alias), never the real conda.anaconda.org."""
    from typer.testing import CliRunner

    from envkit import cli

    rc, port = closed_port_condarc(tmp_path)
    args = ["lock", "pt2", "--driver", "535.104.05", "--gpu", "sm_90", "--python", "3.11"]
    args += ["--platform", "linux-x86_64", "-o", str(tmp_path)]
    env = {"CONDARC": str(rc), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    result = CliRunner().invoke(cli.app, args, env=env)
    assert result.exit_code == 4  # LockFailed: EXIT_STEP_FAILED
    said = result.stderr
    if importlib.util.find_spec("rattler") is not None:
        assert said.startswith(f"envkit: cannot lock: http://127.0.0.1:{port}/conda-forge does not answer")
    else:
        assert said.startswith("envkit: conda-lock needs conda, mamba or micromamba to solve")
    assert "Traceback" not in said
    assert not (tmp_path / "conda-lock.yml").exists()


def test_a_failure_message_carries_no_credentials(tmp_path: Path) -> None:
    """conda-lock echoes a private pip repository's URL, token and all: LockFailed does not."""
    token = "s3cret-t0ken"
    said = f"ERROR: https://alice:{token}@pkgs.corp/simple/torch/ answered 401\nPIP_INDEX_URL=https://alice:{token}@pkgs.corp"
    exe = write_program(tmp_path / "bin", "conda-lock", said, rc=1)
    job = LockJob((str(exe), "lock", "--file", "environment.yml"), tmp_path / "conda-lock.yml", (), {})
    with pytest.raises(LockFailed) as info:
        lock(system_with(tmp_path, "micromamba"), job)
    text = info.value.message + info.value.hint + str(info.value)
    assert "conda-lock failed" in text and "exited with 1" in text
    assert token not in text
    assert "https://***@pkgs.corp/simple/torch/ answered 401" in text  # the line is kept, redacted
