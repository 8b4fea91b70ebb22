"""envkit create --with, for real (marked slow): uv against a PEP 503 index on 127.0.0.1 serving
stand-in wheels with the real names and Requires-Dist pins, and a stand-in compiled extension whose
.so links the installed torch's libc10.

- create keeps the planned torch where plain pip, asked for the same extension, replaces it;
- an index that does not answer, and a file whose sha256 differs, leave nothing behind;
- a compiled extension built against this torch imports and passes verify.extensions; one built
  with the other C++ ABI fails it, classified as such.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
H100_R550 = ("--driver", "550.54.15", "--gpu", "H100", "--python", "3.11")


def _standin() -> ModuleType:
    spec = importlib.util.spec_from_file_location("standin_wheels", ROOT / "scripts" / "standin_wheels.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sw = _standin()


def uv() -> str:
    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if found is None:
        pytest.skip("uv is not installed (it comes with the test extra)")
    return found


def envkit(*args: str, envs: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ENVKIT_ENVS_DIR": str(envs), "UV_NO_CACHE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "envkit", *args], capture_output=True, text=True, env=env, timeout=600
    )


def installed(python: Path) -> dict[str, str]:
    """name -> version of what the environment holds (its dist-info folders)."""
    proc = subprocess.run(
        [uv(), "pip", "list", "--python", str(python), "--format", "json"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return {d["name"]: d["version"] for d in json.loads(proc.stdout)}


@pytest.fixture
def index(tmp_path: Path) -> Path:
    """torch 2.6.0+cu124 on a torch index (/whl/cu124), PyPI's torch 2.7.0 and xformers 0.0.29.post3
    (Requires-Dist: torch==2.6.0) and 0.0.30 (torch==2.7.0) on a PyPI-like one (/simple): the pins
    of the real releases (envkit/knowledge/extensions/xformers.toml, from their METADATA)."""
    wheels = tmp_path / "wheels"
    root = tmp_path / "srv"
    sw.write_index(root, [sw.build_wheel(wheels, "torch", "2.6.0+cu124")], base="whl/cu124")
    pypi = [
        sw.build_wheel(wheels, "torch", "2.7.0"),
        sw.build_wheel(wheels, "xformers", "0.0.29.post3", requires=["torch==2.6.0"]),
        sw.build_wheel(wheels, "xformers", "0.0.30", requires=["torch==2.7.0"]),
    ]
    sw.write_index(root, pypi, base="simple")
    return root


def test_create_keeps_the_planned_torch_where_plain_pip_replaces_it(tmp_path: Path, index: Path) -> None:
    uv()
    with sw.serve(index) as url:
        proc = envkit(
            "create", "xf", "--template", "pt2-minimal", "--backend", "uv", "--torch", "2.6.0",
            "--cuda", "12.4", *H100_R550, "--with", "xformers",
            "--mirror", f"torch-wheels={url}/whl", "--mirror", f"pypi={url}/simple",
            "--no-verify", "--json", envs=tmp_path / "envs",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        created = json.loads(proc.stdout)
        (pick,) = created["plan"]["extensions"]
        assert (pick["name"], pick["version"]) == ("xformers", "0.0.29.post3")
        have = installed(Path(created["python"]))
        assert have["torch"] == "2.6.0+cu124" and have["xformers"] == "0.0.29.post3"
        assert "constraints.txt" in " ".join(created["commands"])

        # Plain pip, asked for the same name beside the same torch, takes the newest xformers and
        # replaces torch 2.6.0+cu124 with the 2.7.0 it pins.
        plain = tmp_path / "plain"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(plain)], check=True)
        py = plain / "bin" / "python"
        pip = [sys.executable, "-m", "pip", "--python", str(py), "--disable-pip-version-check", "-q"]
        first = subprocess.run(
            [*pip, "install", "torch==2.6.0+cu124", "--index-url", f"{url}/whl/cu124"], capture_output=True
        )
        assert first.returncode == 0, first.stderr
        second = subprocess.run(
            [*pip, "install", "xformers", "--index-url", f"{url}/simple"], capture_output=True
        )
        assert second.returncode == 0, second.stderr
        assert installed(py)["torch"] == "2.7.0" and installed(py)["xformers"] == "0.0.30"


def test_an_index_that_does_not_answer_fails_the_step_and_leaves_nothing(tmp_path: Path) -> None:
    proc = envkit(
        "create", "down", "--template", "pt2-minimal", "--backend", "uv", "--torch", "2.6.0",
        "--cuda", "12.4", *H100_R550, "--with", "xformers",
        "--mirror", "pypi=http://127.0.0.1:9/simple", "--no-verify", envs=tmp_path / "envs",
    )  # fmt: skip
    # The installer's own words, exit 4 (an installer step failed), and the half-made env removed.
    assert proc.returncode == 4, proc.stderr
    assert "127.0.0.1:9" in proc.stderr and "Connection refused" in proc.stderr
    assert "Traceback" not in proc.stderr and "removed the half-made" in proc.stderr
    # The last words are the next step (issue 22): the mirror probe's verdict, a wheelhouse.
    assert "; next: the index did not answer: `envkit mirrors --probe --variant cu124`" in proc.stderr
    assert not (tmp_path / "envs" / "down").exists()


def test_a_wheel_whose_sha256_differs_fails_and_the_environment_is_removed(
    tmp_path: Path, index: Path
) -> None:
    uv()
    from envkit.commands import create as create_command
    from envkit.create.prepare import CreateRequest, choose_template, lay_out
    from envkit.errors import CreateFailed
    from envkit.resolve.plan import PlanFlags
    from envkit.system import System

    os.environ["ENVKIT_ENVS_DIR"] = str(tmp_path / "envs")
    try:
        with sw.serve(index) as url:
            flags = PlanFlags(
                driver="550.54.15",
                gpus=("H100",),
                python="3.11",
                torch="2.6.0",
                cuda="12.4",
                extensions=("xformers",),
            )
            request = CreateRequest(
                "badhash", None, "pt2-minimal", flags, "uv", (f"torch-wheels={url}/whl",), None, False
            )
            system = System()
            install = create_command.prepare(system, request)
            (pick,) = install.plan.extensions
            served = f"{url}/simple/xformers/xformers-0.0.29.post3-py3-none-any.whl"
            wrong = dataclasses.replace(
                pick, requirement=f"xformers @ {served}#sha256={'0' * 64}", sha256="0" * 64
            )
            plan: Any = dataclasses.replace(install.plan, extensions=(wrong,))
            install = lay_out(system, request, choose_template(request), "pip", plan)
            with pytest.raises(CreateFailed) as caught:
                create_command.run(system, install, force=False, verify=False)
        assert "hash" in str(caught.value).lower() or "sha256" in str(caught.value).lower()
        assert not install.prefix.exists() and not install.staging.exists()
    finally:
        os.environ.pop("ENVKIT_ENVS_DIR", None)


@pytest.fixture(scope="module")
def torch_wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """torch 2.13.0 (CPU) and its dependencies, as tests/integration/test_create_e2e.py gets them."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", "global.find-links"], capture_output=True, text=True
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        pytest.skip("no pip find-links folder with the CPU torch wheel on this machine")
    folder = tmp_path_factory.mktemp("wheelhouse")
    got = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "torch==2.13.0", "--dest", str(folder)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if got.returncode != 0:
        pytest.skip(f"could not fill the wheelhouse: {got.stderr.strip().splitlines()[-1:]}")
    return folder


def _pyg_lib_wheel(dest: Path, build: Path, *, cxx11_abi: bool) -> Path:
    """A stand-in pyg_lib 0.8.0+pt213cpu (the name, version and tag of data.pyg.org's wheel for torch
    2.13 CPU: pyg-team/pyg-lib README@26a2d1a06a47) whose module loads a .so linked to libc10."""
    spec = importlib.util.find_spec("torch")  # where torch is, without importing it here
    assert spec is not None and spec.origin is not None
    so = sw.compiled_module(Path(spec.origin).parent, build, "_standin", cxx11_abi=cxx11_abi)
    init = b"import torch  # torch's libraries first: the .so links libc10\nfrom . import _standin\n__version__ = '0.8.0'\n"
    files = {"pyg_lib/__init__.py": init, f"pyg_lib/{so.name}": so.read_bytes()}
    return sw.build_wheel(
        dest, "pyg-lib", "0.8.0+pt213cpu", tag="cp310-abi3-linux_x86_64", files=files, purelib=False
    )


def test_a_compiled_extension_built_against_this_torch_passes_verify(
    tmp_path: Path, torch_wheelhouse: Path
) -> None:
    uv()
    if shutil.which(os.environ.get("CXX", "g++")) is None:
        pytest.skip("no C++ compiler to build the stand-in extension")
    house = tmp_path / "house"
    shutil.copytree(torch_wheelhouse, house)
    _pyg_lib_wheel(house, tmp_path / "build-ok", cxx11_abi=True)
    proc = envkit(
        "create", "pyg", "--template", "pt2-minimal", "--backend", "uv", "--torch", "2.13.0", "--cuda", "cpu",
        "--no-gpu", "--python", "3.11", "--with", "pyg-lib", "--wheelhouse", str(house), "--offline",
        "--no-verify", "--json", envs=tmp_path / "envs",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    python = json.loads(proc.stdout)["python"]
    assert installed(Path(python))["pyg-lib"] == "0.8.0+pt213cpu"
    verify = envkit("verify", "--checks", "extensions", "--python", python, "--json", envs=tmp_path / "envs")
    (check,) = json.loads(verify.stdout)["checks"]
    assert (check["id"], check["status"]) == ("verify.extensions", "pass"), check
    assert check["metrics"]["extensions"][0]["ok"] is True
    doctor = envkit("doctor", "--python", python, "--json", envs=tmp_path / "envs")
    (ext,) = [c for c in json.loads(doctor.stdout)["checks"] if c["id"] == "torch.extensions"]
    assert ext["status"] == "pass", ext

    # The same module built with the pre-C++11 ABI refers to a c10 symbol torch 2.13 does not export.
    bad = _pyg_lib_wheel(tmp_path / "bad", tmp_path / "build-bad", cxx11_abi=False)
    subprocess.run(
        [uv(), "pip", "install", "--python", python, "--reinstall", "--no-deps", "--offline", str(bad)],
        check=True,
        capture_output=True,
    )
    verify = envkit("verify", "--checks", "extensions", "--python", python, "--json", envs=tmp_path / "envs")
    (check,) = json.loads(verify.stdout)["checks"]
    assert check["status"] == "fail" and check["metrics"]["failure_class"] == "cxx11_abi", check
    assert "undefined symbol" in check["detail"]
    # doctor sees it without importing anything: ld.so on the .so, beside torch's lib folder.
    doctor = envkit("doctor", "--python", python, "--json", envs=tmp_path / "envs")
    (ext,) = [c for c in json.loads(doctor.stdout)["checks"] if c["id"] == "torch.extensions"]
    assert ext["status"] == "fail" and "the other C++ ABI than torch's" in ext["summary"], ext
    assert "pyg-lib==0.8.0+pt213cpu" in ext["fix"]
