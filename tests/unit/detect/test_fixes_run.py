"""Fixes that run as printed: an externally managed Python (PEP 668) gets a venv route, verify says
torch is missing where it is, and a launcher's ranks inspect the interpreter they run in."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from envkit.checks._common import VENV_FOR_FIXES, pip_command
from envkit.detect.pyenv import Interpreter, detect_python, select_interpreter
from envkit.facts import Facts, PythonFacts
from envkit.system import System
from tests.conftest import make_venv

SYSTEM_PYTHON = Path("/usr/bin/python3")


def _managed_system_python() -> Path | None:
    """Debian's / Ubuntu's /usr/bin/python3 when it carries PEP 668's marker."""
    if not SYSTEM_PYTHON.exists():
        return None
    proc = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    marker = Path(proc.stdout.strip()) / "EXTERNALLY-MANAGED"
    return SYSTEM_PYTHON if proc.returncode == 0 and marker.is_file() else None


@pytest.mark.host_tools  # the system's own python3 is the case
def test_the_probe_reads_pep_668s_marker() -> None:
    python = _managed_system_python()
    if python is None:
        pytest.skip("no /usr/bin/python3 with an EXTERNALLY-MANAGED marker on this machine")
    facts, _torch = detect_python(System(env=dict(os.environ)), Interpreter(str(python), "--python"))
    assert facts.externally_managed is True
    # pip itself refuses, as PEP 668 says it must (nothing is installed: --dry-run of a name).
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "--dry-run", "--no-index", "envkit-no-such-package"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "No module named pip" not in proc.stderr:
        assert proc.returncode != 0 and "externally-managed-environment" in proc.stderr


def test_a_venv_is_never_externally_managed(tmp_path: Path) -> None:
    make_venv(tmp_path / "venv")
    stdlib = Path(sysconfig.get_paths()["stdlib"])  # the base's stdlib: it may carry the marker
    facts, _torch = detect_python(System(env={}), Interpreter(str(tmp_path / "venv/bin/python"), "--python"))
    assert facts.externally_managed is False, stdlib


def _facts(**python: object) -> Facts:
    return Facts(python=PythonFacts(executable="/usr/bin/python3", selected_by="--python", **python))  # type: ignore[arg-type]


def test_fixes_for_an_externally_managed_python_go_through_a_venv() -> None:
    plain = _facts(installers={"pip": "/usr/bin/python3 -m pip"})
    assert pip_command(plain) == "/usr/bin/python3 -m pip"
    managed = _facts(installers={"pip": "/usr/bin/python3 -m pip"}, externally_managed=True)
    assert pip_command(managed) == (
        f"/usr/bin/python3 -m venv {VENV_FOR_FIXES} && {VENV_FOR_FIXES}/bin/python -m pip"
    )
    with_uv = _facts(installers={"uv": "/opt/uv"}, externally_managed=True)
    assert pip_command(with_uv).startswith(f"uv venv {VENV_FOR_FIXES} --python /usr/bin/python3 && uv pip")
    assert pip_command(managed, installs=False) == "/usr/bin/python3 -m pip"  # `pip show` still works


@pytest.mark.slow  # creates a real venv from the system Python and runs pip in it (~5 s)
@pytest.mark.host_tools
def test_the_venv_route_runs_as_printed(tmp_path: Path) -> None:
    python = _managed_system_python()
    if python is None or shutil.which("bash") is None:
        pytest.skip("no externally managed /usr/bin/python3 here")
    managed = Facts(
        python=PythonFacts(executable=str(python), selected_by="--python", externally_managed=True)
    )
    command = f"{pip_command(managed)} --version"
    proc = subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    if proc.returncode != 0 and "ensurepip" in proc.stdout + proc.stderr:
        pytest.skip("this system Python has no ensurepip (Debian's python3-venv is not installed)")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / ".venvs/torch/bin/python").exists()


def _verify(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envkit", "verify", "--checks", "device", "--json", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_verify_says_torch_is_not_installed_and_how_to_install_it(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    make_venv(venv)  # a real interpreter without torch
    proc = _verify("--python", str(venv / "bin/python"), env={**os.environ, "ENVKIT_OFFLINE": "1"})
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    # Which host ran it (a fleet of verify reports groups by these).
    assert all(report["facts"]["host"][k] for k in ("hostname", "os", "kernel", "arch"))
    (check,) = report["checks"]
    assert check["summary"] == f"torch is not installed in {venv}/bin/python (--python)"
    assert "install torch==" in check["fix"] and str(venv / "bin/python") in check["fix"]
    assert "NCCL" not in check["fix"] and "envkit doctor" not in check["fix"]


def test_a_launcher_rank_inspects_the_interpreter_it_runs_in(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    other = bin_dir / "python"
    other.symlink_to(sys.executable)  # the first python on PATH: not the one envkit runs in
    base = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    assert select_interpreter(System(env=base)).selected_by == "PATH"
    for var, who in (
        ("LOCAL_RANK", "torchrun"),
        ("TORCHELASTIC_RUN_ID", "torchrun"),
        ("SLURM_PROCID", "srun"),
    ):
        chosen = select_interpreter(System(env={**base, var: "0"}))
        assert chosen == Interpreter(sys.executable, who)
    # An active environment still wins: the user said which one.
    venv = tmp_path / "venv"
    make_venv(venv)
    active = select_interpreter(System(env={**base, "LOCAL_RANK": "0", "VIRTUAL_ENV": str(venv)}))
    assert active.selected_by == "VIRTUAL_ENV"


@pytest.mark.slow  # a real torchrun of one rank (~5 s)
def test_torchrun_python_m_envkit_verify_checks_its_own_interpreter(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    make_venv(tmp_path / "bare")  # the first python on PATH has no torch
    (bin_dir / "python").symlink_to(tmp_path / "bare/bin/python")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env["PATH"] = f"{bin_dir}:{env.get('PATH', '')}"
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "1", "-m", "envkit"]
    argv += ["verify", "--checks", "device", "--json"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["facts"]["python"]["selected_by"] == "torchrun", proc.stderr
    assert report["facts"]["python"]["executable"] == sys.executable
