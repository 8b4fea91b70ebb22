"""NVML's worker is skipped only where nothing could load NVML, and then envkit says exactly what
the worker would have said (envkit.detect.nvml_library)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pynvml
import pytest

from envkit.detect.nvml import WORKER, RecordedNvml, ask_nvml, read_nvml
from envkit.detect.nvml_library import LIBRARY_NOT_FOUND, NVML_SONAME, nvml_may_load
from envkit.system import System

# This machine, as the worker would see it: the test of the shortcut needs one without NVML.
HERE_WITHOUT_NVML = not nvml_may_load(os.environ)


def test_the_shortcut_says_what_pynvml_says() -> None:
    error = pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    assert (type(error).__name__.replace("NVMLError_", ""), str(error)) == LIBRARY_NOT_FOUND


@pytest.mark.skipif(not HERE_WITHOUT_NVML, reason="this machine has an NVIDIA driver or an NVML library")
def test_without_nvml_the_reading_is_the_workers_own() -> None:
    marker = "@@test-marker@@"
    proc = subprocess.run(
        [sys.executable, str(WORKER), marker], capture_output=True, text=True, timeout=60, check=True
    )
    record = json.loads(proc.stdout.split(marker)[-2])
    assert record == {"init_error": LIBRARY_NOT_FOUND[0], "message": LIBRARY_NOT_FOUND[1]}
    assert ask_nvml(System().with_deadline(30)) == read_nvml(lambda: RecordedNvml(record))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the loader's rules are glibc's")
def test_a_library_where_the_loader_looks_runs_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    (tmp_path / NVML_SONAME).write_bytes(b"")  # only its presence is looked at, never loaded
    assert nvml_may_load({**base, "LD_LIBRARY_PATH": f"/nonexistent:{tmp_path}"})
    assert nvml_may_load({**base, "LD_LIBRARY_PATH": f"/nonexistent;{tmp_path}"})
    assert nvml_may_load({**base, "LD_PRELOAD": f"{tmp_path}/{NVML_SONAME}"})
    # What this cannot follow is asked of NVML itself.
    assert nvml_may_load({**base, "LD_LIBRARY_PATH": "$ORIGIN/../lib"})
    if HERE_WITHOUT_NVML:
        assert not nvml_may_load({**base, "LD_LIBRARY_PATH": f"/nonexistent:{tmp_path / 'other'}"})
        # An empty entry is the working folder (ld.so(8)).
        monkeypatch.chdir(tmp_path)
        assert nvml_may_load({**base, "LD_LIBRARY_PATH": "/nonexistent:"})
