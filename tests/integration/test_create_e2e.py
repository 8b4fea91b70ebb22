"""envkit create for real: a venv (pip) and a uv environment from a local wheelhouse holding the CPU
torch wheel of this machine kind, then torch imported in the new environment. Marked slow."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def find_links() -> str | None:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", "global.find-links"], capture_output=True, text=True
    )
    return proc.stdout.strip() or None if proc.returncode == 0 else None


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """torch 2.13.0 (CPU) and its dependencies: the torch wheel from the machine's find-links folder,
    the rest from the package registry (the only network these machines have)."""
    if find_links() is None:
        pytest.skip("no pip find-links folder with the CPU torch wheel on this machine")
    folder = tmp_path_factory.mktemp("wheelhouse")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "torch==2.13.0", "--dest", str(folder)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        pytest.skip(f"could not fill the wheelhouse: {proc.stderr.strip().splitlines()[-1:]}")
    return folder


def envkit(*args: str, envs: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ENVKIT_ENVS_DIR": str(envs)}
    return subprocess.run(
        [sys.executable, "-m", "envkit", *args], capture_output=True, text=True, env=env, timeout=900
    )


def create_cpu(
    name: str, backend: str, wheelhouse: Path, *more: str, envs: Path
) -> subprocess.CompletedProcess[str]:
    """``envkit create NAME`` of the CPU torch 2.13.0 environment, offline from the wheelhouse."""
    return envkit(
        "create",
        name,
        *("--template", "pt2-minimal", "--backend", backend, "--torch", "2.13.0", "--cuda", "cpu"),
        *("--no-gpu", "--wheelhouse", str(wheelhouse), "--offline"),
        *more,
        envs=envs,
    )


@pytest.mark.parametrize("backend", ["venv", "uv"])
def test_create_from_the_wheelhouse_then_import_torch(tmp_path: Path, wheelhouse: Path, backend: str) -> None:
    if (
        backend == "uv"
        and shutil.which("uv", path=str(Path(sys.executable).parent)) is None
        and shutil.which("uv") is None
    ):
        pytest.skip("uv is not installed (it comes with the test extra)")
    proc = create_cpu(
        "cpu-env", backend, wheelhouse, "--python", "3.11", "--no-verify", "--json", envs=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    python = Path(result["python"])
    version = subprocess.run(
        [str(python), "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True
    )
    assert version.stdout.strip() == "2.13.0+cpu", version.stderr
    kept = sorted(p.name for p in (tmp_path / "cpu-env" / "envkit").iterdir())
    assert kept == ["commands.txt", "constraints.txt", "created.json", "plan.json", "requirements.txt"]
    # A second create of the same name is refused and leaves the first one alone.
    again = create_cpu("cpu-env", backend, wheelhouse, envs=tmp_path)
    assert again.returncode == 2
    assert "already exists; envkit never touches an existing environment" in again.stderr
    assert python.exists()


def test_create_verifies_the_new_environment(tmp_path: Path, wheelhouse: Path) -> None:
    proc = create_cpu("verified", "venv", wheelhouse, "--python", "3.11", "--json", envs=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)["verify"]
    assert {c["id"]: c["status"] for c in report["checks"]} == {
        "verify.device": "pass",
        "verify.compile": "pass",
        "verify.amp": "pass",
    }
