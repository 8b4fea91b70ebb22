"""envkit create: the exact commands of every backend, refusal to touch an existing environment,
and all-or-nothing on failure (real venvs, real pip)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from envkit.create import CreateFailed, execute
from envkit.create_prepare import CreateRequest, prepare
from envkit.errors import InputError
from envkit.planning import PlanFlags
from envkit.system import System
from tests.conftest import write_program

CPU_213 = PlanFlags(torch="2.13.0", cuda="cpu", python="3.11", platform="linux-x86_64", no_gpu=True)
GPU_550 = PlanFlags(driver="550.54.15", gpus=("sm_80",), python="3.11", platform="linux-x86_64")


def fake_tools(tmp_path: Path, *names: str) -> System:
    """A System whose PATH has stand-in installers (and this interpreter as python3.11)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        write_program(bin_dir, name, "")
    (bin_dir / "python3.11").symlink_to(sys.executable)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "ENVKIT_ENVS_DIR": str(tmp_path / "envs"),
    }
    return System(env=env)


@pytest.mark.parametrize(
    ("backend", "verb"),
    [
        ("conda", "env create"),
        ("mamba", "env create"),
        ("micromamba", "create --yes"),
    ],
)
def test_conda_family_dry_run_commands(tmp_path: Path, backend: str, verb: str) -> None:
    system = fake_tools(tmp_path, backend)
    prefix = tmp_path / "envs" / "pt2"
    install = prepare(system, CreateRequest(name="pt2", prefix=str(prefix), flags=GPU_550, backend=backend))
    exe = tmp_path / "bin" / backend
    spec = tmp_path / "envs" / ".pt2.envkit-spec" / "environment.yml"
    assert [s.shown() for s in install.steps] == [f"{exe} {verb} --prefix {prefix} --file {spec}"]
    assert install.backend == backend
    env_yml = install.spec_files["environment.yml"]
    assert "pytorch=2.8.0=cuda*" in env_yml and "cuda-version=12" in env_yml


def test_conda_route_for_cuda_12_1_is_the_pytorch_channel(tmp_path: Path) -> None:
    system = fake_tools(tmp_path, "micromamba")
    flags = PlanFlags(
        driver="550.54.15", gpus=("sm_80",), python="3.11", platform="linux-x86_64", cuda="12.1"
    )
    install = prepare(
        system, CreateRequest(name="old", prefix=str(tmp_path / "old"), flags=flags, backend="micromamba")
    )
    env_yml = install.spec_files["environment.yml"]
    assert "pytorch-cuda=12.1" in env_yml
    assert "- pytorch\n" in env_yml and "- nvidia\n" in env_yml


def test_venv_and_uv_dry_run_commands(tmp_path: Path) -> None:
    system = fake_tools(tmp_path, "uv")
    prefix = tmp_path / "envs" / "pt2"
    uv = prepare(system, CreateRequest(name="pt2", flags=CPU_213, backend="uv"))
    assert [s.shown() for s in uv.steps] == [
        f"{tmp_path}/bin/uv venv {prefix} --seed --python 3.11",
        (
            f"{tmp_path}/bin/uv pip install --python {prefix}/bin/python torch==2.13.0+cpu torchvision==0.28.0 "
            "torchaudio==2.11.0 --index-url https://download.pytorch.org/whl/cpu"
        ),
    ]
    venv = prepare(
        system, CreateRequest(name="pt2-train", flags=CPU_213, backend="venv", wheelhouse=str(tmp_path))
    )
    prefix = tmp_path / "envs" / "pt2-train"
    shown = [s.shown() for s in venv.steps]
    assert shown[0] == f"{tmp_path}/bin/python3.11 -m venv {prefix}"
    assert shown[1].endswith(f"--index-url https://download.pytorch.org/whl/cpu --find-links {tmp_path}")
    assert shown[2].startswith(
        f"{prefix}/bin/python -m pip install 'lightning>=2.2' 'torchmetrics>=1.3' 'tensorboard>=2.15' --constraint "
    )
    assert (
        venv.spec_files["constraints.txt"] == "torch==2.13.0+cpu\ntorchvision==0.28.0\ntorchaudio==2.11.0\n"
    )


def test_torch_installs_from_where_the_written_spec_says(tmp_path: Path) -> None:
    """create runs the spec's decision (envkit.spec_pip.pip_source), with the real credentials."""
    system = fake_tools(tmp_path)
    # A torch mirror other than pytorch's: PyPI beside it for the nvidia-* dependencies, as in the spec.
    sjtu = prepare(system, CreateRequest(name="a", flags=CPU_213, backend="venv", mirrors=("sjtu",)))
    assert sjtu.steps[1].argv[-4:] == (
        "--index-url",
        "https://mirror.sjtu.edu.cn/pytorch-wheels/cpu",
        "--extra-index-url",
        "https://pypi.org/simple",
    )
    assert "--extra-index-url https://pypi.org/simple\n" in sjtu.spec_files["requirements.txt"]
    # Only a PyPI mirror, and PyPI's torch of this release is the planned build: torch from the mirror.
    flags = PlanFlags(
        torch="2.8.0",
        cuda="12.8",
        driver="580.65.06",
        gpus=("sm_90",),
        python="3.11",
        platform="linux-x86_64",
    )
    tuna = prepare(system, CreateRequest(name="b", flags=flags, backend="venv", mirrors=("tuna",)))
    assert tuna.steps[1].argv[4:] == (
        "torch==2.8.0",
        "torchvision==0.23.0",
        "torchaudio==2.8.0",
        "--index-url",
        "https://pypi.tuna.tsinghua.edu.cn/simple",
    )
    assert tuna.spec_files["constraints.txt"].startswith("torch==2.8.0\n")
    # Credentials reach the installer's argv, never the files or what is shown.
    private = ("https://me:s3cret@wheels.example.org/whl", "pypi=https://u:p@pypi.example.org/simple")
    own = prepare(system, CreateRequest(name="c", flags=CPU_213, backend="venv", mirrors=private))
    assert own.steps[1].argv[-2:] == ("--index-url", "https://me:s3cret@wheels.example.org/whl/cpu")
    assert "s3cret" not in own.steps[1].shown()
    assert not any("s3cret" in text for text in own.spec_files.values())


def test_auto_backend(tmp_path: Path) -> None:
    assert prepare(fake_tools(tmp_path / "a", "uv"), CreateRequest(name="x", flags=CPU_213)).backend == "uv"
    assert prepare(fake_tools(tmp_path / "b"), CreateRequest(name="x", flags=CPU_213)).backend == "venv"


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (CreateRequest(flags=CPU_213), "give the environment a NAME or a --prefix PATH"),
        (CreateRequest(name="x", flags=CPU_213, offline=True), "--offline needs --wheelhouse"),
        (
            CreateRequest(name="x", flags=CPU_213, backend="conda"),
            "--backend conda: `conda` is not installed",
        ),
        (CreateRequest(name="x", flags=CPU_213, backend="pixi"), "--backend 'pixi': one of"),
        (
            CreateRequest(name="x", flags=CPU_213, wheelhouse="/nonexistent"),
            "--wheelhouse /nonexistent: not a folder",
        ),
    ],
)
def test_bad_requests(tmp_path: Path, request_: CreateRequest, message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        prepare(fake_tools(tmp_path), request_)


def test_an_existing_environment_is_never_touched(tmp_path: Path) -> None:
    system = fake_tools(tmp_path)
    prefix = tmp_path / "taken"
    prefix.mkdir()
    (prefix / "keep.txt").write_text("mine")
    install = prepare(system, CreateRequest(prefix=str(prefix), flags=CPU_213, backend="venv"))
    with pytest.raises(InputError, match="already exists; envkit never touches an existing environment"):
        execute(system, install)
    assert (prefix / "keep.txt").read_text() == "mine"


@pytest.mark.slow  # a real venv with ensurepip (~6 s); tests/unit/test_create_safety.py has fast stand-ins
def test_a_failed_install_leaves_nothing_behind(tmp_path: Path) -> None:
    system = fake_tools(tmp_path)
    wheelhouse = tmp_path / "empty-wheelhouse"
    wheelhouse.mkdir()
    prefix = tmp_path / "envs" / "doomed"
    install = prepare(
        system,
        CreateRequest(
            prefix=str(prefix), flags=CPU_213, backend="venv", wheelhouse=str(wheelhouse), offline=True
        ),
    )
    with pytest.raises(CreateFailed) as info:
        execute(system, install)
    assert "install torch 2.13.0+cpu failed" in info.value.message
    assert "exited with 1" in info.value.message
    assert "ERROR: " in info.value.message.split("\n", 1)[1]  # pip's last lines follow the summary
    assert not prefix.exists()
    assert not install.staging.exists()
    assert f"removed the half-made {prefix}" in info.value.hint


@pytest.mark.slow  # a real venv with ensurepip (~6 s)
def test_force_puts_the_old_environment_back_when_the_new_one_fails(tmp_path: Path) -> None:
    system = fake_tools(tmp_path)
    prefix = tmp_path / "envs" / "precious"
    prefix.mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")  # an environment: what --force may replace
    (prefix / "old.txt").write_text("old env")
    install = prepare(
        system,
        CreateRequest(
            prefix=str(prefix), flags=CPU_213, backend="venv", wheelhouse=str(tmp_path), offline=True
        ),
    )
    with pytest.raises(CreateFailed):
        execute(system, install, force=True)
    assert (prefix / "old.txt").read_text() == "old env"
    assert [p.name for p in prefix.parent.iterdir()] == ["precious"]  # no backup left behind


@pytest.mark.slow  # a real venv with ensurepip (~6 s)
def test_ctrl_c_cleans_up(tmp_path: Path) -> None:
    system = fake_tools(tmp_path)
    prefix = tmp_path / "envs" / "interrupted"
    install = prepare(system, CreateRequest(prefix=str(prefix), flags=CPU_213, backend="venv"))

    def interrupt(step: object) -> None:
        if "install" in str(getattr(step, "title", "")):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute(system, install, on_step=interrupt)
    assert not prefix.exists()


def test_cli_dry_run_json(tmp_path: Path) -> None:
    import subprocess

    env = {**os.environ, "ENVKIT_ENVS_DIR": str(tmp_path)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "envkit",
            "create",
            "demo",
            "--dry-run",
            "--json",
            "--backend",
            "venv",
            "--torch",
            "2.13.0",
            "--cuda",
            "cpu",
            "--no-gpu",
            "--python",
            "3.11",
            "--platform",
            "linux-x86_64",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["schema"] == "envkit.create/1"
    assert data["status"] == "dry-run"
    assert data["prefix"] == str(tmp_path / "demo")
    assert not (tmp_path / "demo").exists()  # a dry run changes nothing
