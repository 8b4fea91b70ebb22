"""The test suite's own guards (tests/conftest.py): no test makes envkit start the host's tools by
accident, and the packages that never run a process start none."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from envkit import _proc
from tests.conftest import HostProcessError, MachineBuilder, _guard_spawn, host_allows


def test_the_host_guard_is_on_in_the_unit_tests() -> None:
    assert _proc._spawn.__name__ == "guarded"


def test_stand_ins_the_interpreter_and_posix_utilities_run(machine: MachineBuilder) -> None:
    stand_in = machine.program("nvidia-smi", "recorded\n")
    assert _proc.run([str(stand_in)], timeout=30).stdout == "recorded\n"
    assert _proc.run([sys.executable, "-c", "print(1)"], timeout=30).stdout == "1\n"
    assert _proc.run(["sh", "-c", "echo ok"], timeout=30).stdout == "ok\n"


@pytest.mark.host_tools  # the autouse guard is off here: the test installs one of its own
def test_a_program_of_the_host_is_refused_and_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    basetemp = str(tmp_path_factory.getbasetemp())
    refused = _guard_spawn(monkeypatch, lambda args, program: host_allows(program, basetemp), "host")
    with pytest.raises(HostProcessError, match="host: ls /"):
        _proc.run(["ls", "/"], timeout=30)
    assert len(refused) == 1 and refused[0].startswith("ls / (/") and refused[0].endswith("/ls)")
    # A program that is not there starts nothing: _proc reports it, the guard lets it be.
    assert _proc.run(["/nonexistent/nvcc"], timeout=30).error == "not found"


@pytest.mark.host_tools
def test_what_the_host_guard_allows(tmp_path: Path) -> None:
    base = str(tmp_path)
    assert host_allows(str(tmp_path / "bin" / "nvcc"), base)
    assert host_allows(sys.executable, base)
    assert host_allows("/bin/sleep", base)
    assert not host_allows("/usr/local/cuda/bin/nvcc", base)
    assert not host_allows("/sbin/ldconfig", base)
    assert not host_allows("/usr/bin/nvidia-smi", base)
