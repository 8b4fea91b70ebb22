"""NVML in a child process: a stand-in ``libnvidia-ml.so.1`` (built here with the system C compiler)
that answers, segfaults, aborts or spins, loaded by the real pynvml the way it loads the driver's
(``CDLL("libnvidia-ml.so.1")``, found through LD_LIBRARY_PATH). envkit must answer in every case."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from envkit.detect.nvml import CRASHED, NO_ANSWER, WORKER, RecordedNvml, ask_nvml, read_nvml
from envkit.system import System
from envkit.versions import ComputeCapability, NvVersion, Version

# The NVML symbols pynvml (nvidia-ml-py) calls: nvmlInit() is nvmlInitWithFlags(0); an NVMLError's
# text comes from nvmlErrorString; a symbol the library lacks is NVMLError_FunctionNotFound, which
# envkit records as an unsupported field. Signatures as in NVIDIA's nvml.h.
STAND_IN_C = textwrap.dedent(
    r"""
    #include <signal.h>
    #include <stdlib.h>
    #include <string.h>

    typedef int nvmlReturn_t;
    typedef struct nvmlDevice_st *nvmlDevice_t;
    typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
    static int device0, device1;
    static volatile unsigned long spins;
    extern int PyGILState_Ensure(void); /* resolved from the Python that loads this library */

    static nvmlReturn_t copy(char *buf, unsigned int len, const char *text) {
        if (strlen(text) + 1 > len) return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
        strcpy(buf, text);
        return 0;
    }

    nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
        (void)flags;
    #if defined(STAND_IN_SEGV)
        *(volatile int *)0 = 1;
        raise(SIGSEGV);
    #elif defined(STAND_IN_ABORT)
        abort();
    #elif defined(STAND_IN_SPIN)
        for (;;) spins++;
    #elif defined(STAND_IN_SPIN_GIL)
        /* ctypes released the GIL for this call; take it back, so no Python thread can run. */
        PyGILState_Ensure();
        for (;;) spins++;
    #endif
        return 0;
    }
    nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
    nvmlReturn_t nvmlShutdown(void) { return 0; }
    const char *nvmlErrorString(nvmlReturn_t r) { return r == 3 ? "Not Supported" : "Unknown Error"; }
    nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int n) { return copy(v, n, "550.54.15"); }
    nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { *v = 12040; return 0; }
    nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = 12040; return 0; }
    #if defined(STAND_IN_SPIN_GPU1) /* two GPUs; the second hangs NVML, as a wedged GPU does */
    #define GPUS 2
    #else
    #define GPUS 1
    #endif
    nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) { *n = GPUS; return 0; }
    nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) {
        if (i >= GPUS) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
        *d = (nvmlDevice_t)(i == 0 ? &device0 : &device1);
        return 0;
    }
    nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *v, unsigned int n) {
        if (d == (nvmlDevice_t)&device1)
            for (;;) spins++;
        return copy(v, n, "NVIDIA H100 80GB HBM3");
    }
    nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *v, unsigned int n) {
        (void)d;
        return copy(v, n, "GPU-5b9a0000-1111-2222-3333-444444444444");
    }
    nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor) {
        (void)d;
        *major = 9;
        *minor = 0;
        return 0;
    }
    nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
        (void)d;
        m->total = 81559ULL * 1024 * 1024;
        m->free = m->total;
        m->used = 0;
        return 0;
    }
    nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t) {
        (void)d;
        (void)sensor;
        *t = 33;
        return 0;
    }
    """
)
KINDS = ("ok", "segv", "abort", "spin", "spin-gil", "spin-gpu1")


@pytest.fixture(scope="session")
def stand_in_nvml(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One folder per behaviour, each holding a libnvidia-ml.so.1 (compiled once per session)."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH to build a stand-in libnvidia-ml.so.1")
    base = tmp_path_factory.mktemp("nvml-stand-in")
    source = base / "stand_in_nvml.c"
    source.write_text(STAND_IN_C, encoding="utf-8")
    folders = {}
    for kind in KINDS:
        folder = base / kind
        folder.mkdir()
        flags = [] if kind == "ok" else [f"-DSTAND_IN_{kind.upper().replace('-', '_')}"]
        subprocess.run(
            [cc, "-shared", "-fPIC", "-O0", *flags, "-o", str(folder / "libnvidia-ml.so.1"), str(source)],
            check=True,
            timeout=60,
        )
        folders[kind] = folder
    return folders


def nvml_env(folder: Path, bin_dir: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = str(folder)
    if bin_dir is not None:
        env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', os.defpath)}"
    return env


def test_the_child_returns_what_the_library_says(stand_in_nvml: dict[str, Path]) -> None:
    reading = ask_nvml(System(env=nvml_env(stand_in_nvml["ok"])).with_deadline(30))
    assert reading.error is None
    assert reading.driver_version == NvVersion("550.54.15")
    assert reading.cuda_version == Version("12.4")
    (gpu,) = reading.gpus
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.uuid == "GPU-5b9a0000-1111-2222-3333-444444444444"
    assert gpu.compute_capability == ComputeCapability(9, 0)
    assert gpu.memory_total_mib == 81559
    assert gpu.temperature_c == 33
    assert gpu.source == "nvml"
    # Symbols the stand-in lacks are FunctionNotFound in pynvml: unsupported, not a failure.
    assert "ecc_mode" in gpu.unsupported and gpu.ecc_enabled is None


def test_the_child_prints_the_record_that_recordings_replay(stand_in_nvml: dict[str, Path]) -> None:
    marker = "@@test-marker@@"
    proc = subprocess.run(
        [sys.executable, str(WORKER), marker],
        env=nvml_env(stand_in_nvml["ok"]),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    so_far, whole = (json.loads(block) for block in proc.stdout.split(marker)[1:-1:2])
    # As it goes, the child prints what NVML said so far: here the driver, before GPU 0.
    assert so_far == {
        "driver_version": "550.54.15",
        "cuda_driver_version": 12040,
        "devices": [],
        "devices_pending": 1,
    }
    record: dict[str, Any] = whole
    assert record["driver_version"] == "550.54.15"
    assert record["devices"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert record["devices"][0]["ecc_mode"]["error"] == "FunctionNotFound"
    replayed = read_nvml(lambda: RecordedNvml(record))
    assert replayed == ask_nvml(System(env=nvml_env(stand_in_nvml["ok"])).with_deadline(30))


@pytest.mark.parametrize(
    ("kind", "how"),
    [("segv", "killed by SIGSEGV in nvmlInitWithFlags"), ("abort", "killed by SIGABRT in nvmlInitWithFlags")],
)
def test_a_crashing_library_is_a_fact(stand_in_nvml: dict[str, Path], kind: str, how: str) -> None:
    reading = ask_nvml(System(env=nvml_env(stand_in_nvml[kind])).with_deadline(30))
    assert reading.error == f"{CRASHED}: NVML did not answer ({how})"
    assert reading.error_name == CRASHED
    assert reading.driver_version is None and reading.gpus == ()


@pytest.mark.parametrize("kind", ["spin", "spin-gil"])
def test_a_spinning_library_times_out_within_its_share(stand_in_nvml: dict[str, Path], kind: str) -> None:
    start = time.monotonic()
    reading = ask_nvml(System(env=nvml_env(stand_in_nvml[kind])).with_deadline(2.0))
    took = time.monotonic() - start
    assert reading.error_name == NO_ANSWER
    assert reading.error is not None
    assert "NVML did not answer (timed out after" in reading.error
    assert reading.error.endswith(" in nvmlInitWithFlags)")  # the call it was stuck in
    assert took < 15  # half of the 2 s deadline, the TERM grace, and a generous margin


def test_a_gpu_that_hangs_nvml_costs_only_itself(stand_in_nvml: dict[str, Path]) -> None:
    reading = ask_nvml(System(env=nvml_env(stand_in_nvml["spin-gpu1"])).with_deadline(2.0))
    # What NVML said before GPU 1 hung is kept: the driver and GPU 0.
    assert reading.driver_version == NvVersion("550.54.15")
    first, stuck = reading.gpus
    assert first.name == "NVIDIA H100 80GB HBM3" and first.error is None
    assert stuck.index == 1 and stuck.name is None
    assert stuck.error is not None
    assert stuck.error.startswith(f"{NO_ANSWER}: NVML did not answer for this GPU (timed out after ")
    assert stuck.error.endswith(" in nvmlDeviceGetName)")
    assert reading.error_name == NO_ANSWER


# --- the real CLI: doctor --json and preflight answer whatever the library does -------------------

SMI = """\
#!/bin/sh
case "$1" in
  -q) printf 'Driver Version                            : 550.54.15\\nCUDA Version : 12.4\\n' ;;
  --query-gpu=*) echo '0, NVIDIA H100 80GB HBM3, GPU-5b9a, 00000000:18:00.0, 550.54.15, 81559, 9.0' ;;
  *) exit 6 ;;
esac
"""


def stand_in_smi(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    smi = folder / "nvidia-smi"
    smi.write_text(SMI, encoding="utf-8")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return folder


def processes_with(text: str) -> list[int]:
    """Our processes whose environment mentions ``text`` (the stand-in's unique folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if text.encode() in environ:
            found.append(int(entry.name))
    return found


def survivors(text: str) -> list[int]:
    """``processes_with(text)`` that are still there a few seconds after envkit ended: SIGKILL takes
    effect when the killed process next runs, which a loaded machine may put off past envkit's own
    exit (a spinning NVML worker was seen once, right after)."""
    end = time.monotonic() + 5
    while (found := processes_with(text)) and time.monotonic() < end:
        time.sleep(0.05)
    return found


def envkit_cli(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "envkit", *args], env=env, capture_output=True, text=True, timeout=120
    )
    return proc, time.monotonic() - start


def health_code(report: dict[str, Any]) -> int:
    return 1 if any(c["status"] == "fail" for c in report["checks"]) else 0


@pytest.mark.parametrize(
    ("kind", "how"),
    [
        ("segv", f"{CRASHED}: NVML did not answer (killed by SIGSEGV"),
        ("abort", f"{CRASHED}: NVML did not answer (killed by SIGABRT"),
        # A hang costs half the budget (about 2 s of its 4 s): the slow job's.
        pytest.param("spin", f"{NO_ANSWER}: NVML did not answer (timed out after", marks=pytest.mark.slow),
        pytest.param(
            "spin-gil", f"{NO_ANSWER}: NVML did not answer (timed out after", marks=pytest.mark.slow
        ),
    ],
)
@pytest.mark.parametrize("command", ["doctor", "preflight"])
def test_cli_answers_whatever_nvml_does(
    stand_in_nvml: dict[str, Path], tmp_path: Path, kind: str, how: str, command: str
) -> None:
    lib = stand_in_nvml[kind]
    env = nvml_env(lib, stand_in_smi(tmp_path / "bin"))
    # A spinning NVML gets half the budget, so its cases take a small one (their run waits it out).
    # A crash ends at once whatever the budget, and a small one only lets a loaded machine's start
    # (interpreter, imports, the NVML worker's own start) eat it: with 2 s and 6 busy processes on
    # 2 cores the segv case read 'NoAnswer: NVML and nvidia-smi did not answer before the time
    # limit' instead of the crash it is about.
    budget = 4.0 if kind.startswith("spin") else 30.0
    proc, took = envkit_cli(env, command, "--json", "--timeout", str(budget))
    assert "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    assert report["schema"] == "envkit.report/1"
    assert proc.returncode == health_code(report), proc.stderr
    driver = report["facts"]["driver"]
    assert driver["nvml_error"].startswith(how)
    # The other detectors still answer: the driver and the GPU come from nvidia-smi.
    assert driver["version"] == "550.54.15" and driver["source"] == "nvidia-smi"
    assert [g["name"] for g in report["facts"]["gpus"]] == ["NVIDIA H100 80GB HBM3"]
    if command == "preflight" and proc.returncode == 1:
        assert proc.stderr.strip().splitlines()[-1].startswith("envkit: ")  # the drain line
    assert took < budget + 20  # generous: a shared, noisy machine
    assert survivors(str(lib)) == []  # no child of envkit's outlives it


@pytest.mark.slow
def test_cli_names_the_gpu_that_hangs_nvml(stand_in_nvml: dict[str, Path]) -> None:
    lib = stand_in_nvml["spin-gpu1"]
    proc, _took = envkit_cli(nvml_env(lib), "doctor", "--json", "--timeout", "4")
    report = json.loads(proc.stdout)
    assert proc.returncode == health_code(report) == 1, proc.stderr
    assert report["facts"]["driver"]["version"] == "550.54.15"
    assert report["facts"]["driver"]["source"] == "nvml"
    health = next(c for c in report["checks"] if c["id"] == "gpu.health")
    assert health["status"] == "fail"
    assert "GPU 1" in health["summary"] + health["detail"]
    assert survivors(str(lib)) == []


def test_cli_reports_the_library_that_answers(stand_in_nvml: dict[str, Path]) -> None:
    proc, _took = envkit_cli(nvml_env(stand_in_nvml["ok"]), "doctor", "--json", "--timeout", "30")
    report = json.loads(proc.stdout)
    assert proc.returncode == health_code(report), proc.stderr
    driver = report["facts"]["driver"]
    assert driver["version"] == "550.54.15" and driver["source"] == "nvml"
    assert driver["nvml_error"] is None
    (gpu,) = report["facts"]["gpus"]
    assert gpu["name"] == "NVIDIA H100 80GB HBM3" and gpu["source"] == "nvml"
