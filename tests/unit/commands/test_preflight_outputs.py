"""preflight's files for clusters (--metrics, --nfd-labels), its node-problem-detector mode (--npd)
and doctor --format: each read back with its own parser, bad paths as exit 2 with the previous
file kept."""

from __future__ import annotations

import datetime
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families as text_families

from envkit.checks import CHECKS
from envkit.render.nfd import LABEL_PREFIX
from tests.unit.commands.test_preflight import envkit_in_process
from tests.unit.render.test_nfd_npd import read_feature_file, valid_label_key, valid_label_value
from tests.unit.test_bad_input import unwritable_places

pytestmark = pytest.mark.usefixtures("cli_machine")


def all_ignored(tmp_path: Path) -> str:
    """An --expect file that ignores every check: healthy on any machine."""
    path = tmp_path / "all-ignored.toml"
    path.write_text(f"ignore = {json.dumps(sorted(CHECKS))}\n", encoding="utf-8")
    return str(path)


def impossible(tmp_path: Path) -> str:
    path = tmp_path / "impossible.toml"
    path.write_text("gpu_count = 4096\n", encoding="utf-8")
    return str(path)


def test_metrics_and_labels_are_written_and_read_back(tmp_path: Path) -> None:
    prom = tmp_path / "textfile" / "envkit.prom"
    labels = tmp_path / "features.d" / "envkit"
    proc = envkit_in_process(
        "preflight", "--python", sys.executable, "--metrics", str(prom), "--nfd-labels", str(labels)
    )
    assert proc.returncode == 0, proc.stderr
    families = {f.name: f for f in text_families(prom.read_text(encoding="utf-8"))}
    assert [s.value for s in families["envkit_healthy"].samples] == [1.0]
    assert {s.labels["check"] for s in families["envkit_check_status"].samples} == set(CHECKS)
    (duration,) = families["envkit_run_duration_seconds"].samples
    assert 0 < duration.value < 30
    read = read_feature_file(labels.read_text(encoding="utf-8"), datetime.datetime.now(datetime.timezone.utc))
    assert read[LABEL_PREFIX + "healthy"] == "true"
    assert all(valid_label_key(k) and valid_label_value(v) for k, v in read.items())
    # Written whole: no temporary file left beside them.
    assert sorted(p.name for p in prom.parent.iterdir()) == ["envkit.prom"]
    assert sorted(p.name for p in labels.parent.iterdir()) == ["envkit"]


def test_an_unhealthy_node_is_written_as_unhealthy(tmp_path: Path) -> None:
    prom, labels = tmp_path / "envkit.prom", tmp_path / "envkit-labels"
    proc = envkit_in_process(
        "preflight", "--expect", impossible(tmp_path), "--metrics", str(prom), "--nfd-labels", str(labels)
    )
    assert proc.returncode == 1
    families = {f.name: f for f in text_families(prom.read_text(encoding="utf-8"))}
    assert [s.value for s in families["envkit_healthy"].samples] == [0.0]
    (cause,) = families["envkit_cause_info"].samples
    assert cause.labels["check"] == "expect.gpu_count"
    text = labels.read_text(encoding="utf-8")
    assert f"{LABEL_PREFIX}healthy=false\n" in text and f"{LABEL_PREFIX}cause=expect.gpu_count\n" in text


@pytest.mark.parametrize(("option", "why"), [("--metrics", "a folder"), ("--nfd-labels", "read-only")])
def test_a_path_that_cannot_be_written_is_exit_2_after_the_verdict(
    tmp_path: Path, option: str, why: str
) -> None:
    path = unwritable_places(tmp_path)[why]
    proc = envkit_in_process("preflight", "--expect", all_ignored(tmp_path), option, path)
    assert proc.returncode == 2, proc.stderr
    assert f"{option} {path}" in proc.stderr and "the checks passed" in proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr


def test_unhealthy_stays_1_when_a_file_cannot_be_written(tmp_path: Path) -> None:
    # The node must be drained whatever happened to the file.
    path = unwritable_places(tmp_path)["under a file"]
    proc = envkit_in_process("preflight", "--expect", impossible(tmp_path), "--metrics", path)
    assert proc.returncode == 1
    assert "expect.gpu_count" in proc.stderr and f"--metrics {path}" in proc.stderr


@pytest.mark.slow  # a real envkit process (~1 s)
def test_a_failed_write_keeps_the_previous_file(tmp_path: Path) -> None:
    # A real write failure after the path checks passed (as a full disk gives): the child may write
    # files of at most 1000 bytes (RLIMIT_FSIZE; Python ignores SIGXFSZ, so the write fails with
    # EFBIG). The metrics (~2 KB) cannot be written, the labels (~350 bytes) can.
    prom, labels = tmp_path / "envkit.prom", tmp_path / "envkit-labels"
    prom.write_text("# the previous run's metrics\nenvkit_healthy 1\n", encoding="utf-8")

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))

    proc = subprocess.run(
        [sys.executable, "-m", "envkit", "preflight", "--expect", all_ignored(tmp_path)]
        + ["--metrics", str(prom), "--nfd-labels", str(labels)],
        preexec_fn=small_files,  # a resource limit for this child alone
        capture_output=True,
        text=True,
        timeout=60,
        # No bytecode written: a .pyc cut at 1000 bytes would be written short without an error
        # (importlib's raw write) and break every later run that shares the cache.
        env={**os.environ, "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("envkit: --metrics")]
    assert "cannot write it (File too large)" in line
    assert prom.read_text(encoding="utf-8") == "# the previous run's metrics\nenvkit_healthy 1\n"
    assert labels.read_text(encoding="utf-8").count(f"{LABEL_PREFIX}healthy=true") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all-ignored.toml", "envkit-labels", "envkit.prom"]


# --- node-problem-detector -----------------------------------------------------------------------


def test_npd_healthy_is_exit_0_and_one_line(tmp_path: Path) -> None:
    proc = envkit_in_process("preflight", "--npd", "--expect", all_ignored(tmp_path))
    assert proc.returncode == 0
    assert proc.stdout == "envkit: healthy (nothing checked)\n"


def test_npd_unhealthy_is_exit_1_with_the_reason_as_the_message(tmp_path: Path) -> None:
    proc = envkit_in_process("preflight", "--npd", "--expect", impossible(tmp_path))
    assert proc.returncode == 1
    assert proc.stdout == "envkit: expect.gpu_count: expected 4096, found 0\n"
    assert len(proc.stdout.strip()) <= 80 and proc.stdout.isascii()


def test_npd_could_not_check_is_exit_2_unknown_with_why(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("gpu_cuont = 8\n", encoding="utf-8")
    proc = envkit_in_process("preflight", "--npd", "--expect", str(bad))
    assert proc.returncode == 2  # NPD: Unknown
    (line,) = proc.stdout.splitlines()
    assert line.startswith("envkit: could not check: ") and len(line) <= 80 and line.isascii()


@pytest.mark.parametrize("other", [["--json"], ["-v"], ["--every", "5m"]])
def test_npd_prints_only_its_line(other: list[str]) -> None:
    proc = envkit_in_process("preflight", "--npd", *other)
    assert proc.returncode == 2
    assert "--npd" in proc.stderr


# --- doctor --format -----------------------------------------------------------------------------


def test_doctor_format_openmetrics_and_prometheus() -> None:
    proc = envkit_in_process("doctor", "--format", "openmetrics", "--python", sys.executable)
    assert proc.returncode == 0, proc.stderr
    families = {f.name: f for f in openmetrics_families(proc.stdout)}
    assert families["envkit_build"].type == "info"
    assert proc.stderr == ""
    proc = envkit_in_process("doctor", "--format", "prometheus", "--python", sys.executable)
    assert {f.name for f in text_families(proc.stdout)} >= {"envkit_check_status", "envkit_healthy"}


def test_doctor_format_json_is_json_and_json_still_works() -> None:
    saved = str(Path(__file__).parents[2] / "data" / "reports" / "h200-580-torch2.11-cu130.json")
    as_format = json.loads(envkit_in_process("doctor", "--from", saved, "--format", "json").stdout)
    as_flag = json.loads(envkit_in_process("doctor", "--from", saved, "--json").stdout)
    both = json.loads(envkit_in_process("doctor", "--from", saved, "--json", "--format", "json").stdout)
    assert as_format["checks"] == as_flag["checks"] == both["checks"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--format", "xml"], "one of text, json, openmetrics, prometheus"),
        (["--json", "--format", "openmetrics"], "--json and --format openmetrics"),
    ],
)
def test_doctor_bad_format_is_exit_2(args: list[str], says: str) -> None:
    proc = envkit_in_process("doctor", *args)
    assert proc.returncode == 2
    assert says in proc.stderr


def test_doctor_format_reads_a_saved_report() -> None:
    report = Path(__file__).parents[2] / "data" / "reports" / "h200-580-torch2.11-cu130.json"
    proc = envkit_in_process("doctor", "--from", str(report), "--format", "openmetrics")
    families = {f.name: f for f in openmetrics_families(proc.stdout)}
    (gpu,) = families["envkit_gpu"].samples
    assert gpu.labels["model"] == "NVIDIA H200"
