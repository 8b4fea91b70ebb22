"""The most likely cause: one ranking (envkit.report.CAUSE_RANK) behind doctor's first line,
``summary.cause`` in --json and preflight's drain reason."""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from rich.console import Console

from envkit.checks import CHECKS, run_checks
from envkit.commands.doctor import diagnose_file
from envkit.commands.preflight import drain_reason
from envkit.facts import Facts
from envkit.render.console import render_report
from envkit.report import (
    CAUSE_RANK,
    CHECK_BROKEN,
    CheckResult,
    Report,
    Status,
    cause_rank,
    rank_causes,
    report_from_json,
)
from envkit.verify import ALL_CHECKS
from tests.conftest import torch_collect_env

FAIL, WARN, PASS, SKIP = Status.FAIL, Status.WARN, Status.PASS, Status.SKIP
# Check ids the diagnosis work adds (issue 11); they are ranked before they are registered.
NEW_IDS = ("torch.cuda_available", "torch.companions", "gpu.mig")


def result(cid: str, status: Status, summary: str = "", fix: str = "") -> CheckResult:
    return CheckResult(cid, status, summary or f"{cid} {status.value}", fix=fix)


def cause_of(*checks: CheckResult) -> str | None:
    cause = Report.new(Facts(), checks).cause
    return None if cause is None else cause.id


# The ranking --------------------------------------------------------------------------------------


def test_every_check_is_ranked() -> None:
    """A new check must be placed in CAUSE_RANK, not fall to the end unnoticed."""
    ids = [*CHECKS, *NEW_IDS, *(f"verify.{c}" for c in ALL_CHECKS), "expect.driver"]
    unranked = [cid for cid in ids if cause_rank(cid) == len(CAUSE_RANK)]
    assert unranked == []
    assert len(set(CAUSE_RANK)) == len(CAUSE_RANK)


def test_nothing_flagged_has_no_cause() -> None:
    assert cause_of() is None
    assert cause_of(result("driver.loaded", PASS), result("toolkit.nvcc", SKIP)) is None


def test_a_warning_alone_is_the_cause() -> None:
    assert cause_of(result("driver.loaded", PASS), result("gpu.mig", WARN)) == "gpu.mig"


def test_driver_loaded_comes_before_everything_gpu_side() -> None:
    checks = [
        result("torch.installed", FAIL),
        result("torch.gpu_arch", FAIL),
        result("gpu.health", FAIL),
        result("driver.loaded", FAIL),
    ]
    assert cause_of(*checks) == "driver.loaded"


def test_a_container_started_without_gpus_explains_the_missing_driver() -> None:
    checks = [
        result("driver.loaded", FAIL),
        result("torch.cuda_available", WARN),
        result("container.gpus", FAIL),
    ]
    assert cause_of(*checks) == "container.gpus"
    assert cause_of(result("torch.cuda_available", FAIL), result("container.cuda_driver", WARN)) == (
        "container.cuda_driver"
    )


def test_the_build_against_this_driver_beats_an_inference_about_releases() -> None:
    """pytorch#30071's shape: driver 410 runs no current torch (driver.support, from the tables)
    and cannot run the installed CUDA 10.1 build (torch.driver_compat): the build is the cause."""
    checks = [
        result("driver.support", FAIL),
        result("torch.installed", FAIL),
        result("torch.driver_compat", FAIL),
    ]
    assert cause_of(*checks) == "torch.driver_compat"
    # apex#1545: a CPU build on an A10G whose driver is too old for current releases
    assert cause_of(result("driver.support", WARN), result("torch.cpu_build_on_gpu", FAIL)) == (
        "torch.cpu_build_on_gpu"
    )
    # pytorch#130181: MIG slices beside a driver too old for current releases (both warnings)
    assert cause_of(result("driver.support", WARN), result("gpu.mig", WARN)) == "gpu.mig"


def test_a_driver_that_cannot_run_the_build_beats_a_missing_compiler() -> None:
    assert (
        cause_of(result("toolkit.nvcc", WARN), result("torch.driver_compat", WARN)) == "torch.driver_compat"
    )
    assert (
        cause_of(result("toolkit.nvcc", FAIL), result("torch.driver_compat", FAIL)) == "torch.driver_compat"
    )


def test_a_fail_beats_a_warn() -> None:
    assert cause_of(result("gpu.health", WARN), result("torch.gpu_arch", FAIL)) == "torch.gpu_arch"
    assert cause_of(result("torch.driver_compat", WARN), result("python.shm", FAIL)) == "python.shm"


def test_a_cause_beats_its_consequences_whatever_their_status() -> None:
    # "does not import": torch.installed's own fix says to look at cuda_libs and duplicates first
    assert cause_of(result("torch.installed", FAIL), result("torch.cuda_libs", WARN)) == "torch.cuda_libs"
    assert cause_of(result("torch.installed", FAIL), result("torch.duplicates", FAIL)) == "torch.duplicates"
    # "cannot see the GPU"
    assert cause_of(result("torch.installed", FAIL), result("torch.cuda_available", WARN)) == (
        "torch.cuda_available"
    )
    assert cause_of(result("torch.cuda_available", FAIL), result("torch.driver_compat", FAIL)) == (
        "torch.driver_compat"
    )
    # a smoke test that fails is a symptom
    assert cause_of(result("verify.nccl", FAIL), result("nccl.env", WARN)) == "nccl.env"
    # ... but an import that fails beats an unrelated inference that only warns
    assert cause_of(result("torch.installed", FAIL), result("driver.support", WARN)) == "torch.installed"


def test_unknown_ids_rank_after_known_ones() -> None:
    assert cause_rank("vendor.thing") == len(CAUSE_RANK)
    assert cause_of(result("vendor.thing", FAIL), result("toolkit.nvcc", FAIL)) == "toolkit.nvcc"
    assert cause_of(result("vendor.thing", FAIL), result("toolkit.nvcc", WARN)) == "vendor.thing"
    assert cause_of(result("vendor.thing", WARN)) == "vendor.thing"


def test_a_check_that_raised_is_no_evidence(monkeypatch: pytest.MonkeyPatch) -> None:
    """run_checks turns a check's exception into a warning; it is envkit's bug, not the machine's."""

    def broken(facts: Facts) -> CheckResult:
        raise NameError("name 'rules' is not defined")

    monkeypatch.setitem(CHECKS, "torch.driver_compat", broken)
    (crashed,) = run_checks(Facts(), ["torch.driver_compat"])
    assert crashed.status is WARN and crashed.summary.startswith(CHECK_BROKEN)
    assert cause_of(crashed, result("toolkit.nvcc", WARN)) == "toolkit.nvcc"
    # nor does it explain a consequence away
    assert cause_of(crashed, result("torch.installed", FAIL)) == "torch.installed"
    assert cause_of(crashed) == "torch.driver_compat"  # alone, it is still what to look at


def test_rank_causes_orders_every_flagged_result_and_keeps_ties_in_report_order() -> None:
    checks = [
        result("x.one", WARN),
        result("toolkit.nvcc", WARN),
        result("x.two", WARN),
        result("torch.gpu_arch", FAIL),
        result("driver.support", PASS),
    ]
    assert [c.id for c in rank_causes(checks)] == ["torch.gpu_arch", "toolkit.nvcc", "x.one", "x.two"]


# Where it shows -----------------------------------------------------------------------------------


def test_json_summary_carries_the_cause_and_keeps_every_field() -> None:
    report = Report.new(Facts(), [result("toolkit.nvcc", WARN), result("torch.gpu_arch", FAIL)])
    summary = report.to_json()["summary"]
    assert summary["cause"] == "torch.gpu_arch"
    # envkit.report/1: the fields published before summary.cause are all still there, unchanged
    assert {k: summary[k] for k in ("pass", "warn", "fail", "skip", "status", "strict", "exit_code")} == {
        "pass": 0,
        "warn": 1,
        "fail": 1,
        "skip": 0,
        "status": "unhealthy",
        "strict": False,
        "exit_code": 1,
    }
    healthy = Report.new(Facts(), [result("driver.loaded", PASS)]).to_json()["summary"]
    assert "cause" in healthy and healthy["cause"] is None


def test_a_saved_report_gives_the_same_cause_back() -> None:
    report = Report.new(Facts(), [result("torch.installed", FAIL), result("torch.cuda_libs", WARN)])
    back = report_from_json(json.loads(json.dumps(report.to_json())), "saved.json")
    assert back.cause is not None and back.cause.id == "torch.cuda_libs"
    # a report saved before summary.cause existed reads as before, and gets its cause computed
    old = report.to_json()
    del old["summary"]["cause"]
    assert report_from_json(old, "old.json").to_json()["summary"]["cause"] == "torch.cuda_libs"


def text_of(report: Report) -> str:
    out = io.StringIO()
    render_report(report, Console(file=out, width=200, color_system=None, force_terminal=False))
    return out.getvalue()


def test_the_console_report_leads_with_the_cause_and_its_fix() -> None:
    report = Report.new(
        Facts(),
        [
            result("toolkit.nvcc", WARN, "nvcc 11.8 vs torch built with CUDA 12.4", fix="export CUDA_HOME=…"),
            result(
                "torch.driver_compat",
                FAIL,
                "torch 2.5.1+cu124 (CUDA 12.4) needs driver ≥ 525.60.13; this is 470.82.01",
                fix="python -m pip install torch==2.5.1+cu118 --index-url https://download.pytorch.org/whl/cu118\n"
                "or upgrade the driver to ≥ 525.60.13",
            ),
        ],
        source="paste.txt",
    )
    lines = text_of(report).splitlines()
    assert lines[0].startswith("envkit doctor")
    assert lines[1] == (
        "✗ Most likely cause: torch.driver_compat — torch 2.5.1+cu124 (CUDA 12.4) needs driver ≥ 525.60.13; "
        "this is 470.82.01"
    )
    assert lines[2].strip().startswith("fix: python -m pip install torch==2.5.1+cu118")
    assert lines[3].strip() == "or upgrade the driver to ≥ 525.60.13"
    # then the rest: the table still has both results
    rest = "\n".join(lines[4:])
    assert "torch.driver_compat" in rest and "toolkit.nvcc" in rest


def test_a_healthy_console_report_names_no_cause() -> None:
    assert "Most likely cause" not in text_of(Report.new(Facts(), [result("driver.loaded", PASS)]))


def test_the_drain_reason_uses_the_same_ranking() -> None:
    checks = [
        result("driver.support", FAIL, "driver 410.104 runs no torch release envkit knows"),
        result("torch.installed", FAIL, "torch 1.3.1 cannot use the GPU"),
        result("torch.driver_compat", FAIL, "torch 1.3.1 (CUDA 10.1) needs driver ≥ 418.39"),
        result("torch.cuda_libs", WARN, "a warning is never a drain reason"),
    ]
    report = Report.new(Facts(), checks)
    reason = drain_reason(report)
    assert reason == "envkit: torch.driver_compat: torch 1.3.1 (CUDA 10.1) needs driver ≥ 418.39 (+2 more)"
    assert report.cause is not None and report.cause.id == "torch.driver_compat"


# A real paste, end to end -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def collect_env() -> ModuleType:
    with warnings.catch_warnings():  # the CPU test wheel warns about numpy; warnings are errors here
        warnings.simplefilter("ignore")
        module: ModuleType = torch_collect_env()  # no torch import (tests/conftest.py)
    return module


def paste(collect_env: ModuleType, **fields: Any) -> str:
    values: dict[str, Any] = dict.fromkeys(collect_env.SystemEnv._fields)
    values.update(fields)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text: str = collect_env.pretty_str(collect_env.SystemEnv(**values))
    return "Collecting environment information...\n" + text + "\n"


def test_a_pasted_cpu_build_on_an_a10g_leads_with_it(collect_env: ModuleType, tmp_path: Path) -> None:
    """NVIDIA/apex#1545 (facts only): conda's CPU pytorch 1.13.0 on an AWS A10G, driver 515.65.01."""
    path = tmp_path / "apex-1545.txt"
    path.write_text(
        paste(
            collect_env,
            torch_version="1.13.0",
            is_debug_build=False,
            os="Ubuntu 20.04.5 LTS (x86_64)",
            python_version="3.9.0 | packaged by conda-forge | (default, Nov 26 2020, 07:57:39)  [GCC 9.3.0]",
            python_platform="Linux-5.15.0-1022-aws-x86_64-with-glibc2.31",
            is_cuda_available=False,
            nvidia_gpu_models="GPU 0: NVIDIA A10G",
            nvidia_driver_version="515.65.01",
            pip_packages="[pip3] numpy==1.23.4\n[pip3] torch==1.13.0",
            conda_packages="[conda] pytorch                   1.13.0              py3.9_cpu_0    pytorch",
        )
    )
    report = diagnose_file(str(path))
    assert report.facts.gpus[0].compute_capability is not None
    assert str(report.facts.gpus[0].compute_capability) == "8.6"
    assert report.to_json()["summary"]["cause"] == "torch.cpu_build_on_gpu"
    lines = text_of(report).splitlines()
    assert lines[1].startswith(
        "✗ Most likely cause: torch.cpu_build_on_gpu — torch 1.13.0 is a CPU-only build"
    )
    assert lines[2].strip().startswith("fix: ")
