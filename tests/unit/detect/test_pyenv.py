"""Which interpreter is inspected, and what the probe reads from it (real interpreters, real venvs)."""

from __future__ import annotations

import importlib.metadata
import os
import sys
from pathlib import Path

import pytest

from envkit.detect.pyenv import (
    Interpreter,
    detect_python,
    parse_torch_version_py,
    select_interpreter,
)
from envkit.errors import InputError
from envkit.system import System
from envkit.versions import Version
from tests.conftest import add_dist, add_fake_torch, make_venv


def test_select_prefers_virtual_env_then_conda_then_path(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    make_venv(venv)
    conda = tmp_path / "conda-env"
    make_venv(conda)
    env = {"VIRTUAL_ENV": str(venv), "CONDA_PREFIX": str(conda), "PATH": os.environ["PATH"]}
    assert select_interpreter(System(env=env)).selected_by == "VIRTUAL_ENV"
    del env["VIRTUAL_ENV"]
    chosen = select_interpreter(System(env=env))
    assert (chosen.selected_by, chosen.env_name) == ("CONDA_PREFIX", "conda-env")
    del env["CONDA_PREFIX"]
    assert select_interpreter(System(env=env)).selected_by == "PATH"
    assert select_interpreter(System(env={"PATH": str(tmp_path)})) == Interpreter(sys.executable, "envkit")


def test_select_python_flag(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    make_venv(venv)
    by_dir = select_interpreter(System(env={}), python=str(venv))
    assert by_dir.path == str(venv / "bin/python") and by_dir.selected_by == "--python"
    with pytest.raises(InputError, match="nor a runnable interpreter"):
        select_interpreter(System(env={}), python=str(tmp_path / "nope"))
    with pytest.raises(InputError, match="give one of them"):
        select_interpreter(System(env={}), python=str(venv), env_name="x")


def test_select_python_flag_by_name_on_path(tmp_path: Path) -> None:
    """`--python python3` is what people type: a bare name is looked up on PATH, as a shell would."""
    make_venv(tmp_path / "venv")
    bin_dir = tmp_path / "venv" / "bin"
    chosen = select_interpreter(System(env={"PATH": str(bin_dir)}), python="python")
    assert chosen == Interpreter(str(bin_dir / "python"), "--python")
    with pytest.raises(InputError, match="nor a runnable interpreter"):
        select_interpreter(System(env={"PATH": str(bin_dir)}), python="python9.9")


def test_a_program_that_is_no_interpreter_is_not_run(tmp_path: Path) -> None:
    """envkit runs --python with its probe's path as the argument: `--python rm` would have been
    handed envkit's own file (the hostile run's `--python pip` ran pip so); a name on PATH or a path
    whose file is no interpreter's is exit 2 before anything runs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tmp_path / "ran"
    for name in ("rm", "pip", "my-python"):
        tool = bin_dir / name
        tool.write_text(f"#!/bin/sh\necho {name} >> {marker}\n", encoding="utf-8")
        tool.chmod(0o755)
    system = System(env={"PATH": str(bin_dir)})
    for given in ("rm", "pip", str(bin_dir / "rm")):
        with pytest.raises(InputError, match="is not a Python interpreter's name"):
            select_interpreter(system, python=given)
    assert select_interpreter(system, python="my-python").path == str(bin_dir / "my-python")
    assert not marker.exists()


def test_select_env_by_name(tmp_path: Path) -> None:
    make_venv(tmp_path / "miniforge3/envs/pt2")
    env = {"HOME": str(tmp_path), "PATH": ""}
    chosen = select_interpreter(System(env=env), env_name="pt2")
    assert chosen.path == str(tmp_path / "miniforge3/envs/pt2/bin/python")
    with pytest.raises(InputError, match="--env nope: no environment of that name"):
        select_interpreter(System(env=env), env_name="nope")


def test_select_env_from_conda_registry(tmp_path: Path) -> None:
    make_venv(tmp_path / "elsewhere/myenv")
    (tmp_path / ".conda").mkdir()
    (tmp_path / ".conda/environments.txt").write_text(f"{tmp_path / 'elsewhere/myenv'}\n")
    chosen = select_interpreter(System(env={"HOME": str(tmp_path)}), env_name="myenv")
    assert chosen.path.startswith(str(tmp_path / "elsewhere/myenv"))


def test_probe_reads_this_interpreter_and_its_torch() -> None:
    python, torch = detect_python(System(), Interpreter(sys.executable, "envkit"))
    assert python.error is None
    assert python.version == Version(".".join(map(str, sys.version_info[:3])))
    assert python.platform is not None and python.platform.startswith("linux-")
    assert python.glibc is not None
    installed = importlib.metadata.version("torch")
    assert str(torch.version) == installed
    assert torch.location is not None and torch.location.endswith("torch")
    assert torch.error is None


def test_fake_cuda_torch_with_nvidia_wheels(tmp_path: Path) -> None:
    site = make_venv(tmp_path / "env")
    add_fake_torch(site, "2.5.1+cu121", cuda="12.1")
    add_dist(site, "nvidia-cudnn-cu12", "9.1.0.70")
    add_dist(site, "nvidia-nccl-cu12", "2.21.5")
    add_dist(site, "torchvision", "0.20.1+cu121")
    python, torch = detect_python(System(env={}), Interpreter(str(tmp_path / "env/bin/python"), "--python"))
    assert python.kind == "venv" and python.env_name == "env"
    assert torch.version == Version("2.5.1+cu121")
    assert torch.cuda == Version("12.1")
    assert torch.variant == "cu121"
    assert torch.git_version == "a8d6afb511a69687bbb2b7e88a3cf67917e1697e"
    cudnn = torch.wheel_lib("cudnn")
    assert cudnn is not None and cudnn.version == Version("9.1.0.70")
    assert {d.name for d in torch.distributions} >= {"torch", "torchvision", "nvidia-nccl-cu12"}


def test_pypi_torch_keeps_the_local_tag_of_its_version_py(tmp_path: Path) -> None:
    """PyPI's default CUDA wheel: dist-info says 2.11.0, torch.__version__ says 2.11.0+cu130 (as
    recorded on an H200, tests/data/reports/h200-580-torch2.11-cu130.json)."""
    site = make_venv(tmp_path / "env")
    add_fake_torch(site, "2.11.0+cu130", cuda="13.0", dist_version="2.11.0")
    _python, torch = detect_python(System(env={}), Interpreter(str(tmp_path / "env/bin/python"), "--python"))
    assert torch.version == Version("2.11.0+cu130")
    assert torch.variant == "cu130"
    # A version.py that disagrees with the installed metadata does not override it.
    site2 = make_venv(tmp_path / "env2")
    add_fake_torch(site2, "2.10.0+cu128", cuda="12.8", dist_version="2.11.0")
    _python, torch = detect_python(System(env={}), Interpreter(str(tmp_path / "env2/bin/python"), "--python"))
    assert torch.version == Version("2.11.0")


def test_conda_env_records_its_packages(tmp_path: Path) -> None:
    prefix = tmp_path / "condaenv"
    site = make_venv(prefix)
    add_fake_torch(site, "2.1.0", cuda="12.1")
    meta = prefix / "conda-meta"
    meta.mkdir()
    (meta / "pytorch-2.1.0-py3.10_cuda12.1_cudnn8.9.2_0.json").write_text('{"channel": "pytorch"}')
    (meta / "pytorch-cuda-12.1-ha16c6d3_6.json").write_text('{"channel": "nvidia"}')
    (meta / "zlib-1.2.13-h5eee18b_0.json").write_text("{}")
    python, torch = detect_python(System(env={}), Interpreter(str(prefix / "bin/python"), "CONDA_PREFIX"))
    assert python.kind == "conda"
    names = {(p.name, str(p.version), p.channel) for p in torch.conda_packages}
    assert names == {("pytorch", "2.1.0", "pytorch"), ("pytorch-cuda", "12.1", "nvidia")}


def test_broken_version_py_is_an_error_not_a_crash(tmp_path: Path) -> None:
    site = make_venv(tmp_path / "env")
    pkg = add_fake_torch(site, "2.4.0", cuda=None)
    (pkg / "version.py").write_text("__version__ = '2.4.0\n")  # truncated by a bad download
    _python, torch = detect_python(System(env={}), Interpreter(str(tmp_path / "env/bin/python"), "--python"))
    assert torch.version == Version("2.4.0")  # from the distribution metadata
    assert torch.error is not None and "not valid Python" in torch.error


def test_missing_version_py(tmp_path: Path) -> None:
    site = make_venv(tmp_path / "env")
    pkg = add_fake_torch(site, "2.4.0", cuda=None)
    (pkg / "version.py").unlink()
    _python, torch = detect_python(System(env={}), Interpreter(str(tmp_path / "env/bin/python"), "--python"))
    assert torch.error is not None and "version.py" in torch.error


def test_no_torch(tmp_path: Path) -> None:
    make_venv(tmp_path / "env")
    _python, torch = detect_python(System(env={}), Interpreter(str(tmp_path / "env/bin/python"), "--python"))
    assert not torch.installed


def test_user_site_torch_is_a_second_install(tmp_path: Path) -> None:
    site = make_venv(tmp_path / "env")
    add_fake_torch(site, "2.5.1+cu121", cuda="12.1")
    other = tmp_path / "pythonpath"
    other.mkdir()
    add_fake_torch(other, "2.3.0+cu118", cuda="11.8")
    env = {"PYTHONPATH": str(other)}
    _python, torch = detect_python(System(env=env), Interpreter(str(tmp_path / "env/bin/python"), "--python"))
    torches = [d for d in torch.distributions if d.name == "torch"]
    assert sorted(str(d.version) for d in torches) == ["2.3.0+cu118", "2.5.1+cu121"]
    # The importable one (PYTHONPATH comes first) decides the version.
    assert torch.version == Version("2.3.0+cu118") and torch.cuda == Version("11.8")


def test_interpreter_that_does_not_run(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'Illegal instruction' >&2\nexit 132\n")
    fake.chmod(0o755)
    python, torch = detect_python(System(env={}), Interpreter(str(fake), "--python"))
    assert python.error is not None and "exited with 132" in python.error
    assert "Illegal instruction" in python.error
    assert not torch.installed


def test_parse_version_py_variants() -> None:
    assert parse_torch_version_py("__version__ = '1.13.1+cu117'\ncuda = '11.7'\n") == {
        "__version__": "1.13.1+cu117",
        "cuda": "11.7",
    }
    assert parse_torch_version_py("hip: Optional[str] = '6.2.41133'")["hip"] == "6.2.41133"
    assert parse_torch_version_py("x = foo()\n") == {}
    with pytest.raises(ValueError, match="not valid Python"):
        parse_torch_version_py("def (")


def test_requires_dist_pins_on_torch_are_read_from_the_metadata(tmp_path: Path) -> None:
    """vllm and xformers pin the torch they were built against in Requires-Dist; an extra's
    requirement is not installed with the package, and a package naming no torch is not reported."""
    site = make_venv(tmp_path / "env")
    add_fake_torch(site, "2.5.1+cu124", cuda="12.4")
    add_dist(site, "nvidia-ml-py", "12.560.30")
    for name, version, requires in [
        ("vllm", "0.6.3.post1", ["torch==2.4.0", "xformers==0.0.27.post2; platform_system == 'Linux'"]),
        ("transformers", "4.46.0", ['torch>=2.0; extra == "torch"', "tokenizers<0.21,>=0.20"]),
        ("xformers", "0.0.28.post3", ["torch==2.5.1"]),
        ("requests", "2.32.3", ["idna<4,>=2.5"]),
    ]:
        info = site / f"{name}-{version}.dist-info"
        info.mkdir()
        headers = "".join(f"Requires-Dist: {r}\n" for r in requires)
        # The body (the long description) follows the first blank line: never read as headers.
        body = "\nRequires-Dist: torch==1.0.0\n"
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{headers}{body}"
        )
    egg = site / "legacy_pkg-1.0-py3.11.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: legacy-pkg\nVersion: 1.0\n")
    (egg / "requires.txt").write_text("torch>=1.13\nnumpy\n\n[dev]\ntorch==9.9\n")
    _python, torch = detect_python(System(env={}), Interpreter(str(tmp_path / "env/bin/python"), "--python"))
    pins = {d.name: d.requires_torch for d in torch.distributions}
    assert pins["vllm"] == ("torch==2.4.0",)
    assert pins["xformers"] == ("torch==2.5.1",)
    assert pins["legacy-pkg"] == ("torch>=1.13",)
    assert pins["torch"] == () and pins["nvidia-ml-py"] == ()
    assert pins["transformers"] == ()  # reported as before (a torch-family package), without a pin
    assert "requests" not in pins
