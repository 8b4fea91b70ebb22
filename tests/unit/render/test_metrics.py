"""The metrics renderers, read back with real parsers: prometheus_client's text-format parser (what
node_exporter's textfile collector reads) and its OpenMetrics parser, and promtool's linter when it
is installed (Debian's `prometheus` package; .ci/run installs it)."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families as text_families

from envkit.commands.doctor import diagnose_file
from envkit.facts import GpuFacts, HostFacts
from envkit.render.metrics import STATUS_VALUE, WatchState, families, openmetrics_text, prometheus_text
from envkit.report import CheckResult, Report, Status
from envkit.versions import ComputeCapability
from tests.conftest import DATA, check_property, examples

H200 = DATA / "reports" / "h200-580-torch2.11-cu130.json"


def h200() -> Report:
    return diagnose_file(str(H200))


def parsed(text: str, *, openmetrics: bool = False) -> dict[str, Any]:
    parse = openmetrics_families if openmetrics else text_families
    return {family.name: family for family in parse(text)}


def samples(family: Any) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(s.labels.items())): s.value for s in family.samples}


def test_text_format_reads_back_with_every_check_and_fact() -> None:
    report = h200()
    got = parsed(prometheus_text(report))
    status = got["envkit_check_status"]
    assert status.type == "gauge"
    assert samples(status) == {(("check", c.id),): STATUS_VALUE[c.status] for c in report.checks}
    assert samples(got["envkit_healthy"]) == {(): 1.0}
    # The facts that matter, as info metrics (gauges of value 1 in the text format).
    assert samples(got["envkit_driver_info"]) == {
        (("branch", "580"), ("cuda_version", "13.0"), ("version", "580.159.04")): 1.0
    }
    assert samples(got["envkit_torch_info"]) == {
        (("cuda_version", "13.0"), ("hip_version", ""), ("variant", "cu130"), ("version", "2.11.0")): 1.0
    }
    assert samples(got["envkit_nccl_info"]) == {(("version", "2.28.9"),): 1.0}
    assert samples(got["envkit_gpus"]) == {(("vendor", "nvidia"),): 1.0}
    ((labels, value),) = samples(got["envkit_gpu_info"]).items()
    assert value == 1
    assert dict(labels) == {
        "vendor": "nvidia",
        "gpu": "0",
        "model": "NVIDIA H200",
        "uuid": "GPU-9a8b5d69-e0af-053d-85fe-e03dc949d6ac",
        "compute_capability": "9.0",
        "arch": "sm_90",
    }
    # No client-side timestamps: node_exporter skips a whole file that has one (textfile.go).
    assert all(s.timestamp is None for f in got.values() for s in f.samples)
    assert samples(got["envkit_run_timestamp_seconds"])[()] > 1.7e9


def test_openmetrics_reads_back_with_its_own_types_and_units() -> None:
    report = dataclasses.replace(h200(), duration_s=7.1)
    text = openmetrics_text(report)
    assert text.endswith("# EOF\n")
    got = parsed(text, openmetrics=True)
    assert got["envkit_driver"].type == "info"
    assert got["envkit_check_status"].type == "gauge"
    assert got["envkit_run_duration_seconds"].unit == "seconds"
    assert samples(got["envkit_run_duration_seconds"]) == {(): 7.1}
    assert set(got) >= {"envkit_build", "envkit_torch", "envkit_gpu", "envkit_nccl", "envkit_healthy"}


# verify's figures from the H200 run in the README (scripts/gpu_check.sh, 2026-11-29): bf16 777 TFLOP/s
# (0.79 of the datasheet), fp16 745, tf32 404, device-to-device copy 4162 GB/s (0.87).
H200_PERF = CheckResult(
    "verify.perf",
    Status.PASS,
    "GPU 0 (NVIDIA H200): bf16_tflops 777.0",
    metrics={
        "matmul_n": 8192,
        "devices": [
            {
                "index": 0,
                "name": "NVIDIA H200",
                "bf16_tflops": 777.0,
                "fp16_tflops": 745.0,
                "tf32_tflops": 404.0,
                "d2d_gbs": 4162.0,
                "bf16_of_peak": 0.785,
                "d2d_of_peak": 0.87,
            }
        ],
    },
)
DIST = CheckResult(
    "verify.dist",
    Status.PASS,
    "2 ranks over nccl",
    metrics={"backend": "nccl", "world_size": 2, "busbw_max_gbs": 361.25},
)


@pytest.mark.parametrize("openmetrics", [False, True], ids=["text", "openmetrics"])
def test_verify_figures_in_base_units(openmetrics: bool) -> None:
    report = dataclasses.replace(h200(), checks=(*h200().checks, H200_PERF, DIST))
    text = openmetrics_text(report) if openmetrics else prometheus_text(report)
    got = parsed(text, openmetrics=openmetrics)
    matmul = samples(got["envkit_verify_matmul_operations_per_second"])
    assert matmul[(("device", "cuda:0"), ("dtype", "bf16"))] == 777e12
    assert matmul[(("device", "cuda:0"), ("dtype", "tf32"))] == 404e12
    assert samples(got["envkit_verify_matmul_peak_ratio"]) == {
        (("device", "cuda:0"), ("dtype", "bf16")): 0.785
    }
    assert samples(got["envkit_verify_copy_bytes_per_second"]) == {(("device", "cuda:0"),): 4162e9}
    assert samples(got["envkit_verify_dist_bus_bandwidth_bytes_per_second"]) == {
        (("backend", "nccl"),): 361.25e9
    }
    assert samples(got["envkit_check_status"])[(("check", "verify.perf"),)] == 0


def test_a_failure_sets_healthy_to_0_and_names_the_cause() -> None:
    failing = CheckResult("torch.gpu_arch", Status.FAIL, "sm_120 is not in torch 2.5.1+cu121's architectures")
    others = tuple(c for c in h200().checks if c.id != failing.id)
    report = dataclasses.replace(h200(), checks=(*others, failing))
    got = parsed(prometheus_text(report))
    assert samples(got["envkit_healthy"]) == {(): 0.0}
    assert samples(got["envkit_check_status"])[(("check", "torch.gpu_arch"),)] == 2
    ((labels, _),) = samples(got["envkit_cause_info"]).items()
    assert dict(labels) == {"check": "torch.gpu_arch", "status": "fail"}


def test_the_cause_stays_one_series_while_its_figures_move() -> None:
    # A summary is free text with figures that move from run to run: as a label it made a new series
    # each time (Prometheus's naming guide: no labels of unbounded values), and each new series
    # restarted EnvkitNodeUnhealthy's `for: 10m`, so a node whose ECC count grew every run never
    # alerted (promtool showed no alert after 14 unhealthy minutes).
    def series(summary: str) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
        report = dataclasses.replace(h200(), checks=(CheckResult("gpu.health", Status.FAIL, summary),))
        return {(f.name, labels) for f in families(report) for labels, _ in f.samples}

    assert series("GPU 3 has 12 volatile uncorrected ECC errors") == series(
        "GPU 3 has 13 volatile uncorrected ECC errors"
    )


def test_strict_counts_warnings() -> None:
    warn = CheckResult("python.shm", Status.WARN, "/dev/shm is 512 MiB")
    report = dataclasses.replace(h200(), checks=(warn,))
    assert samples(parsed(prometheus_text(report))["envkit_healthy"]) == {(): 1.0}
    assert samples(parsed(prometheus_text(report, strict=True))["envkit_healthy"]) == {(): 0.0}


def test_watch_counters_are_counters() -> None:
    text = prometheus_text(h200(), watch=WatchState(runs=3, skipped=1, interval_s=300.0))
    got = parsed(text)
    assert got["envkit_watch_runs"].type == "counter"  # the parser names counters without _total
    assert samples(got["envkit_watch_runs"]) == {(): 3.0}
    assert samples(got["envkit_watch_runs_skipped"]) == {(): 1.0}
    assert samples(got["envkit_watch_interval_seconds"]) == {(): 300.0}
    assert "envkit_watch_runs_total 3\n" in text


SECRET = "hf_s3cr3tT0kenValue"


def hostile(name: str) -> Report:
    report = h200()
    gpu = dataclasses.replace(report.facts.gpus[0], name=name)
    facts = dataclasses.replace(
        report.facts,
        gpus=(gpu,),
        host=dataclasses.replace(
            HostFacts(), env={"HF_TOKEN": SECRET, "PIP_INDEX_URL": f"https://u:{SECRET}@h/"}
        ),
    )
    cause = CheckResult(
        "torch.installed", Status.FAIL, f"pip said: https://user:{SECRET}@mirror.example/simple"
    )
    return dataclasses.replace(report, facts=facts, checks=(cause,))


@pytest.mark.parametrize("openmetrics", [False, True], ids=["text", "openmetrics"])
def test_hostile_names_stay_one_label_and_secrets_stay_out(openmetrics: bool) -> None:
    name = 'H100 "x"\\ \n\x1b[2J} 1\nenvkit_healthy 1 HF_TOKEN=' + SECRET
    text = (openmetrics_text if openmetrics else prometheus_text)(hostile(name))
    assert SECRET not in text
    got = parsed(text, openmetrics=openmetrics)
    (labels,) = samples(got["envkit_gpu" if openmetrics else "envkit_gpu_info"])
    model = dict(labels)["model"]
    assert model.startswith('H100 "x"\\ \n␛[2J} 1\nenvkit_healthy 1 HF_TOKEN=***')
    assert samples(got["envkit_healthy"]) == {(): 0.0}  # the GPU name did not forge a sample


@examples(15, 200)
def test_any_gpu_name_reads_back_as_one_label(max_examples: int) -> None:
    check_property(max_examples, _reads_back, st.text(max_size=80))


def _reads_back(name: str) -> None:
    for openmetrics in (False, True):
        text = (openmetrics_text if openmetrics else prometheus_text)(hostile(name))
        got = parsed(text, openmetrics=openmetrics)
        assert len(got["envkit_gpu" if openmetrics else "envkit_gpu_info"].samples) == 1


def test_a_report_without_facts_still_has_the_verdict() -> None:
    report = Report.new(dataclasses.replace(h200().facts, gpus=()), ())
    names = {f.name for f in families(report)}
    assert {"envkit_build", "envkit_healthy", "envkit_gpus", "envkit_run_timestamp_seconds"} <= names
    assert "envkit_gpu" not in names  # no GPUs: no empty family
    parsed(prometheus_text(report))


def test_nan_figures_are_left_out() -> None:
    odd = CheckResult(
        "verify.perf", Status.PASS, "x", metrics={"devices": [{"index": 0, "bf16_tflops": float("nan")}]}
    )
    report = dataclasses.replace(h200(), checks=(odd,))
    assert "envkit_verify_matmul" not in prometheus_text(report)


@pytest.mark.slow  # promtool starts in ~0.3 s
@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool is not installed (apt-get install prometheus)"
)
def test_promtool_lints_the_textfile_clean(tmp_path: Path) -> None:
    gpus = tuple(
        GpuFacts(index=i, name="NVIDIA H200", compute_capability=ComputeCapability(9, 0)) for i in range(2)
    )
    base = h200()
    report = dataclasses.replace(
        base,
        facts=dataclasses.replace(base.facts, gpus=gpus),
        checks=(*base.checks, H200_PERF, DIST),
        duration_s=7.1,
    )
    text = prometheus_text(report, watch=WatchState(runs=2, skipped=0, interval_s=300))
    proc = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_duplicate_series_is_written_once() -> None:
    # Two results of one check id (a report edited by hand, or from another tool): Prometheus would
    # refuse the whole scrape over a duplicate series.
    twice = (CheckResult("gpu.health", Status.FAIL, "lost"), CheckResult("gpu.health", Status.PASS, "ok"))
    report = dataclasses.replace(h200(), checks=twice)
    assert samples(parsed(prometheus_text(report))["envkit_check_status"]) == {
        (("check", "gpu.health"),): 2.0
    }


def test_an_unknown_gpu_list_has_no_count() -> None:
    report = h200()
    facts = dataclasses.replace(report.facts, gpus=(), unknown=("gpus",))
    names = {f.name for f in families(dataclasses.replace(report, facts=facts))}
    assert "envkit_gpus" not in names and "envkit_gpu" not in names


def test_amd_gpus_from_a_recorded_mi300x_are_counted_and_described(machine: Any, tmp_path: Path) -> None:
    # The recorded KFD tree of 8x MI300X in CPX mode (tests/data/README.md, amd/mi300x-x8-cpx).
    from envkit.detect.amd import detect_amd
    from envkit.system import System

    root = tmp_path / "mi300x"
    shutil.copytree(DATA / "amd" / "mi300x-x8-cpx", root, symlinks=True)
    amd = detect_amd(System(env=machine.env, root=root, nvml=machine.nvml))
    report = h200()
    report = dataclasses.replace(report, facts=dataclasses.replace(report.facts, gpus=(), amd=amd))
    got = parsed(openmetrics_text(report), openmetrics=True)
    assert samples(got["envkit_gpus"]) == {(("vendor", "nvidia"),): 0.0, (("vendor", "amd"),): 8.0}
    arches = {dict(labels)["arch"] for labels in samples(got["envkit_gpu"])}
    assert arches == {"gfx942"}
    ((labels, _),) = samples(got["envkit_gpu_driver"]).items()
    assert dict(labels)["vendor"] == "amd"
