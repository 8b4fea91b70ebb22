"""CUDA toolkit detection: the real CUDA 13.0 toolkit of this machine kind, and fake trees."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envkit.detect.toolkit import detect_toolkits, parse_nvcc_version
from envkit.system import System
from envkit.versions import Version
from tests.conftest import write_program

NVCC_12_4 = (
    "nvcc: NVIDIA (R) Cuda compiler driver\n"
    "Copyright (c) 2005-2024 NVIDIA Corporation\n"
    "Built on Thu_Mar_28_02:18:24_PDT_2024\n"
    "Cuda compilation tools, release 12.4, V12.4.131\n"
    "Build cuda_12.4.r12.4/compiler.34097967_0\n"
)
REAL_CUDA = Path("/usr/local/cuda-13.0/bin/nvcc")


def toolkit(root: Path, name: str, output: str) -> Path:
    base = root / "usr/local" / name
    (base / "include").mkdir(parents=True)
    (base / "include/cuda_runtime.h").write_text("")
    return write_program(base / "bin", "nvcc", output)


def test_parse_nvcc() -> None:
    assert parse_nvcc_version(NVCC_12_4) == (
        Version("12.4.131"),
        "cuda_12.4.r12.4/compiler.34097967_0",
    )
    assert parse_nvcc_version("Cuda compilation tools, release 10.1, V10.1.243") == (
        Version("10.1.243"),
        None,
    )
    assert parse_nvcc_version("release 9.2") == (Version("9.2"), None)
    assert parse_nvcc_version("") == (None, None)


@given(st.text())
def test_parse_nvcc_never_raises(text: str) -> None:
    parse_nvcc_version(text)


def test_finds_the_toolkit_of_this_machine_kind(machine) -> None:  # type: ignore[no-untyped-def]
    # This machine kind's layout, recorded: /usr/local/cuda -> cuda-13.0, whose nvcc printed
    # tests/data/nvcc/13.0-this-machine.txt, and a /usr/local/bin/nvcc wrapper on PATH.
    recorded = (Path(__file__).parents[2] / "data" / "nvcc" / "13.0-this-machine.txt").read_text()
    toolkit(machine.root, "cuda-13.0", recorded)
    (machine.root / "usr/local/cuda").symlink_to("cuda-13.0")
    machine.program("nvcc", recorded)
    found = detect_toolkits(machine.system())
    real = [t for t in found if t.root == str(machine.root / "usr/local/cuda-13.0")]
    assert len(real) == 1
    assert real[0].version == Version("13.0.88") and real[0].on_path
    assert "/usr/local/cuda" in real[0].sources and "/usr/local/cuda-13.0" in real[0].sources


@pytest.mark.slow
@pytest.mark.host_tools
@pytest.mark.skipif(not REAL_CUDA.exists(), reason="needs the CUDA 13.0 toolkit of this machine kind")
def test_finds_the_real_toolkit_of_this_machine() -> None:
    env = {"PATH": os.environ.get("PATH", "")}
    found = detect_toolkits(System(env=env))
    real = [t for t in found if t.root == "/usr/local/cuda-13.0"]
    assert len(real) == 1
    assert real[0].version is not None and real[0].version.major == 13
    assert "/usr/local/cuda" in real[0].sources or "/usr/local/cuda-13.0" in real[0].sources


def test_several_toolkits_and_cuda_home(machine) -> None:  # type: ignore[no-untyped-def]
    toolkit(machine.root, "cuda-12.4", NVCC_12_4)
    toolkit(
        machine.root,
        "cuda-11.8",
        NVCC_12_4.replace("12.4", "11.8").replace("V11.8.131", "V11.8.89"),
    )
    machine.env["CUDA_HOME"] = "/usr/local/cuda-11.8"
    found = detect_toolkits(machine.system())
    by_version = {str(t.version): t for t in found}
    assert set(by_version) == {"12.4.131", "11.8.89"}
    assert "CUDA_HOME" in by_version["11.8.89"].sources
    assert by_version["12.4.131"].root == str(machine.root / "usr/local/cuda-12.4")


def test_a_wrapper_on_path_merges_with_its_toolkit(machine) -> None:  # type: ignore[no-untyped-def]
    toolkit(machine.root, "cuda-12.4", NVCC_12_4)
    machine.program("nvcc", NVCC_12_4)  # like /usr/local/bin/nvcc: a script that execs the real one
    (found,) = detect_toolkits(machine.system())
    assert found.on_path
    assert found.sources[0] == "PATH"
    assert found.root == str(machine.root / "usr/local/cuda-12.4")


def test_garbage_and_failing_nvcc_are_reported(machine) -> None:  # type: ignore[no-untyped-def]
    toolkit(machine.root, "cuda-12.4", "Segmentation fault\n")
    machine.program("nvcc", "", rc=127, stderr="nvcc: error while loading shared libraries")
    found = {t.nvcc: t for t in detect_toolkits(machine.system())}
    assert len(found) == 2
    assert all(t.version is None and t.error for t in found.values())
    path_one = next(t for t in found.values() if t.on_path)
    assert "exited with 127" in (path_one.error or "")


def test_hanging_nvcc_is_bounded(machine) -> None:  # type: ignore[no-untyped-def]
    machine.program("nvcc", "", sleep=30)
    start = time.monotonic()
    (found,) = detect_toolkits(machine.system(deadline=time.monotonic() + 0.3))  # it hangs 30 s
    assert time.monotonic() - start < 5
    assert "timed out" in (found.error or "")


def test_no_toolkit(machine) -> None:  # type: ignore[no-untyped-def]
    assert detect_toolkits(machine.system()) == ()
