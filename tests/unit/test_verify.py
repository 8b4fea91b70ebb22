"""The verifier's machinery with real child processes: timeouts, crashes and garbage become that
check's failure while the others report; failure classes map to fixes; throughput is compared
with the datasheet."""

from __future__ import annotations

import copy
import importlib
import sys
import time
from pathlib import Path

import pytest

from envkit.errors import InputError
from envkit.facts import Facts, PythonFacts, TorchFacts
from envkit.report import Status
from envkit.system import PROBES_DIR, System
from envkit.verify import ProbeSpec, parse_checks, run_probes
from envkit.verify.interpret import interpret
from envkit.versions import Version

sys.path.insert(0, str(PROBES_DIR))
compile_probe = importlib.import_module("verify_compile")
dist_probe = importlib.import_module("verify_dist")
util = importlib.import_module("envkit_probe_util")

FACTS = Facts(
    python=PythonFacts(
        executable=sys.executable,
        selected_by="--python",
        version=Version("3.11.7"),
        installers={"pip": "py -m pip"},
    ),
    torch=TorchFacts(version=Version("2.5.1+cu124"), cuda=Version("12.4")),
)


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("import sys\nmarker = sys.argv[1]\n" + body)
    return str(path)


def test_parse_checks() -> None:
    assert parse_checks(None) == ("device", "compile", "amp", "dist")
    assert parse_checks("verify.dist, perf,dist") == ("dist", "perf")
    with pytest.raises(InputError, match="unknown gpu"):
        parse_checks("device,gpu")


def test_hang_crash_and_garbage_fail_alone_while_the_others_report(tmp_path: Path) -> None:
    specs = [
        ProbeSpec(
            "device",
            script(tmp_path, "ok.py", 'print(marker + \'{"status": "pass", "summary": "fine"}\' + marker)\n'),
            {},
            10,
        ),
        ProbeSpec(
            "compile",
            script(
                tmp_path,
                "hang.py",
                "import time\nprint('compiling', file=sys.stderr, flush=True)\ntime.sleep(60)\n",
            ),
            {},
            1.0,
        ),
        ProbeSpec(
            "amp",
            script(
                tmp_path,
                "crash.py",
                "import os, signal\nprint('about to crash', file=sys.stderr, flush=True)\nos.kill(os.getpid(), signal.SIGSEGV)\n",
            ),
            {},
            10,
        ),
        ProbeSpec("dist", script(tmp_path, "garbage.py", "print('<html>not json</html>')\n"), {}, 10),
        ProbeSpec("perf", script(tmp_path, "badjson.py", "print(marker + '{broken' + marker)\n"), {}, 10),
    ]
    start = time.monotonic()
    outcomes = run_probes(System(), sys.executable, specs)
    assert time.monotonic() - start < 8  # the hang is cut at its own 1 s timeout
    results = {s.check: interpret(s.check, outcomes[s.check], FACTS) for s in specs}
    assert results["device"].status is Status.PASS
    assert results["compile"].status is Status.FAIL
    assert "timed out after" in results["compile"].summary
    assert "compiling" in results["compile"].detail  # the tail of its stderr
    assert results["amp"].status is Status.FAIL
    assert "killed by SIGSEGV" in results["amp"].summary
    assert "about to crash" in results["amp"].detail
    assert results["dist"].status is Status.FAIL
    assert "did not answer" in results["dist"].summary
    assert "<html>not json</html>" in results["dist"].detail  # what it printed instead
    assert results["perf"].status is Status.FAIL
    assert "invalid JSON" in results["perf"].summary


def test_a_check_that_never_ran() -> None:
    result = interpret("dist", None, FACTS)
    assert result.status is Status.FAIL
    assert result.summary == "did not run before the time limit"


# Failure classes of torch.compile, from what inductor and Triton print -----------------------------


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        # Seen on this machine kind with PATH stripped of compilers (torch 2.13.0 CPU).
        (
            (
                "torch._inductor.exc.InductorError: InvalidCxxCompiler: No working C++ compiler found in "
                "torch._inductor.config.cpp.cxx: (None, 'g++')"
            ),
            "no_compiler",
        ),
        # pytorch/pytorch#90768 and #143406 (Triton building its helper module).
        (
            "subprocess.CalledProcessError: ... /tmp/tmpx/main.c:5:10: fatal error: Python.h: No such file or directory",
            "no_python_headers",
        ),
        (
            (
                "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised: RuntimeError: Failed to find C compiler. "
                "Please specify via CC environment variable."
            ),
            "no_compiler",
        ),
        # torch/_inductor/exc.py TritonMissing (pytorch/pytorch#129351 reports).
        (
            (
                "torch._inductor.exc.TritonMissing: Cannot find a working triton installation. More information on "
                "installing Triton can be found at https://github.com/openai/triton"
            ),
            "triton_missing",
        ),
        # torch/_inductor device checks (pytorch/pytorch#97146: a Pascal GPU).
        (
            (
                "RuntimeError: Found Tesla P100-PCIE-16GB which is too old to be supported by the triton GPU compiler, "
                "which is used as the backend. Triton only supports devices of CUDA Capability >= 7.0"
            ),
            "gpu_too_old",
        ),
        # vllm-project/vllm#28305: a driver older than the PTX toolchain.
        (
            "RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.",
            "ptx_toolchain",
        ),
        ("RuntimeError: something else entirely", None),
    ],
)
def test_compile_failure_classes(text: str, kind: str | None) -> None:
    assert compile_probe.classify(text) == kind


def compile_failure(kind: str) -> dict[str, object]:
    return {"status": "fail", "summary": "torch.compile fails on cpu", "failure_class": kind, "detail": "x"}


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("no_compiler", "sudo apt install build-essential"),
        ("no_python_headers", "sudo apt install python3.11-dev"),
        ("triton_missing", "py -m pip install triton==3.1.0"),  # the triton of torch 2.5.1 (knowledge base)
        ("gpu_too_old", "backend='aot_eager'"),
        ("ptx_toolchain", "upgrade the driver to ≥ 550.54.14"),  # CUDA 12.4's own driver
    ],
)
def test_compile_fixes(kind: str, words: str) -> None:
    from envkit._proc import ProcResult
    from envkit.system import ProbeOutcome

    outcome = ProbeOutcome(compile_failure(kind), None, ProcResult(("x",), 0, "", "", 1.0))
    result = interpret("compile", outcome, FACTS)
    assert result.status is Status.FAIL
    assert words in result.fix
    assert result.metrics["failure_class"] == kind


# Throughput against the datasheet --------------------------------------------------------------------


def perf_outcome(bf16: float, copy: float) -> object:
    from envkit._proc import ProcResult
    from envkit.system import ProbeOutcome

    devices = [
        {
            "index": 0,
            "name": "NVIDIA H200",
            "bf16_tflops": bf16,
            "fp16_tflops": bf16,
            "tf32_tflops": 400.0,
            "d2d_gbs": copy,
        }
    ]
    return ProbeOutcome(
        {"status": "pass", "summary": "measured", "metrics": {"devices": devices}},
        None,
        ProcResult(("x",), 0, "", "", 1.0),
    )


def test_perf_near_the_datasheet_passes() -> None:
    result = interpret("perf", perf_outcome(790.0, 3600.0), FACTS)  # type: ignore[arg-type]
    assert result.status is Status.PASS
    device = result.metrics["devices"][0]
    assert device["bf16_of_peak"] == round(790 / 989, 3)
    assert device["d2d_of_peak"] == 0.75


def test_perf_rates_a_copy_and_leaves_the_probe_answer_as_it_was() -> None:
    """CheckResult is frozen: the ratings go into new metrics, not into the probe's dicts."""
    outcome = perf_outcome(790.0, 3600.0)
    before = copy.deepcopy(outcome.data)  # type: ignore[attr-defined]
    first = interpret("perf", outcome, FACTS)  # type: ignore[arg-type]
    assert outcome.data == before  # type: ignore[attr-defined]
    second = interpret("perf", outcome, FACTS)  # type: ignore[arg-type]
    assert first == second and "bf16_of_peak" in first.metrics["devices"][0]
    assert "bf16_of_peak" not in before["metrics"]["devices"][0]


def test_perf_far_below_the_datasheet_warns() -> None:
    result = interpret("perf", perf_outcome(300.0, 1500.0), FACTS)  # type: ignore[arg-type]
    assert result.status is Status.WARN
    assert result.summary.startswith(
        "GPU 0 (NVIDIA H200): bf16 matmul 300.0 TFLOP/s is below 50% of the 989 peak"
    )
    assert "device copy 1500.0 GB/s is below 60% of 4800 GB/s" in result.detail


# The dist aggregate ------------------------------------------------------------------------------------


def test_wrong_values_fail_and_name_the_rank() -> None:
    results = {
        0: {
            "rank": 0,
            "host": "n1",
            "ok": True,
            "backend": "nccl",
            "bandwidth": [{"bytes": 1, "busbw_gbs": 100.0}],
        },
        1: {
            "rank": 1,
            "host": "n2",
            "ok": False,
            "problems": ["all_reduce of 1024 elements: 1024 wrong (got 2.0, expected 3.0)"],
        },
    }
    answer = dist_probe.aggregate(results, 2, "torchrun")
    assert answer["status"] == "fail"
    assert answer["failure_class"] == "wrong_values"
    assert (
        answer["summary"]
        == "1 of 2 ranks failed: rank 1 (n2): all_reduce of 1024 elements: 1024 wrong (got 2.0, expected 3.0)"
    )


def test_a_missing_rank_is_blamed_first() -> None:
    results = {
        0: {"rank": 0, "host": "n1", "ok": False, "error": "DistStoreError: wait timeout"},
        1: {"rank": 1, "ok": False, "error": "never joined"},
    }
    answer = dist_probe.aggregate(results, 2, "env")
    assert answer["summary"].startswith("2 of 2 ranks failed: rank 1 (?): never joined")


def test_bus_bandwidth_formula() -> None:
    # nccl-tests: busbw = algbw * 2(n-1)/n for all_reduce.
    assert dist_probe.bus_bandwidth(10.0, 2) == 10.0
    assert dist_probe.bus_bandwidth(10.0, 8) == 17.5
    assert dist_probe.bus_bandwidth(10.0, 1) == 0.0
    results = {
        0: {
            "rank": 0,
            "ok": True,
            "backend": "gloo",
            "bandwidth": [
                {"bytes": 8, "algbw_gbs": 10.0, "busbw_gbs": 15.0},
                {"bytes": 64, "algbw_gbs": 12.0, "busbw_gbs": 18.0},
            ],
        },
        1: {"rank": 1, "ok": True},
    }
    answer = dist_probe.aggregate(results, 2, "spawn")
    assert answer["status"] == "pass"
    assert answer["metrics"]["busbw_max_gbs"] == 18.0
    assert answer["summary"].endswith("; best busbw 18.00 GB/s")


def test_one_rank_reports_no_bus_bandwidth() -> None:
    """Seen on an H200 (1 GPU, NCCL 2.28.9): a one-rank all_reduce "ran" at 7780 GB/s; no sweep then."""
    answer = dist_probe.aggregate(
        {0: {"rank": 0, "ok": True, "backend": "nccl", "bandwidth": []}}, 1, "spawn"
    )
    assert answer["status"] == "pass"
    assert answer["metrics"]["busbw_max_gbs"] is None
    assert answer["summary"] == (
        "1 rank over nccl: all_reduce, all_gather and broadcast exact (bus bandwidth needs 2 or more ranks)"
    )


def test_arch_coverage_in_the_probe() -> None:
    assert util.covered(["sm_80", "sm_86", "sm_90"], 8, 9)
    assert not util.covered(["sm_80", "sm_86", "sm_90"], 12, 0)
    assert util.covered(["sm_90", "compute_90"], 12, 0)  # PTX JIT runs on newer GPUs
    assert util.covered(["sm_90a"], 9, 0)
