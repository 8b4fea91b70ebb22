"""preflight --every: intervals, change-only logging, no stacked runs behind a hung nvidia-smi or a
detector stuck in the kernel (a FIFO that no one writes stands in for a wedged driver's /proc
file), and SIGTERM ending a real watch cleanly."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from envkit.commands.preflight import preflight
from envkit.commands.watch import Verdicts, parse_every, watch
from envkit.detect import stragglers
from envkit.errors import InputError
from envkit.report import CheckResult, Report, Status
from tests.conftest import MachineBuilder
from tests.unit.commands.test_preflight_outputs import all_ignored


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5m", 300), ("30s", 30), ("1h30m", 5400), ("0.3s", 0.3), ("250ms", 0.25), ("90", 90)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_every(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    ["", "5x", "m5", "-1s", "1e9999", "0.01s", "5 m s", "366d", "99999999999d", "9" * 22 + "s"],
)
def test_bad_durations_are_input_errors(text: str) -> None:
    with pytest.raises(InputError, match="--every"):
        parse_every(text)


def result(check_id: str, status: Status) -> CheckResult:
    return CheckResult(check_id, status, f"{check_id} is {status.value}")


def report_of(*checks: CheckResult) -> Report:
    from envkit.facts import Facts

    return Report.new(Facts(), checks)


def test_a_line_only_when_a_verdict_changes() -> None:
    verdicts = Verdicts()
    ok = report_of(result("gpu.health", Status.PASS), result("python.shm", Status.PASS))
    bad = report_of(result("gpu.health", Status.FAIL), result("python.shm", Status.PASS))
    lines = [verdicts.change(r) for r in (ok, ok, bad, bad, ok)]
    assert lines == [
        "healthy: 2 pass",
        None,
        "unhealthy (was healthy): gpu.health pass->fail; cause gpu.health: gpu.health is fail",
        None,
        "healthy (was unhealthy): gpu.health fail->pass",
    ]


def test_a_warning_that_comes_and_goes_is_a_change_too() -> None:
    verdicts = Verdicts()
    verdicts.change(report_of(result("python.shm", Status.PASS)))
    line = verdicts.change(report_of(result("python.shm", Status.WARN)))
    assert line == "healthy: python.shm pass->warn; cause python.shm: python.shm is warn"
    assert verdicts.change(report_of(result("python.shm", Status.WARN)), strict=True) == (
        "unhealthy (was healthy); cause python.shm: python.shm is warn"
    )


def test_could_not_check_is_said_once() -> None:
    verdicts = Verdicts()
    error = InputError("node.toml:1: unknown key 'gpu_cuont'")
    assert verdicts.failed(error) == "could not check: node.toml:1: unknown key 'gpu_cuont'"
    assert verdicts.failed(error) is None
    assert (
        verdicts.change(report_of(result("gpu.health", Status.PASS)))
        == "healthy (was could not check): 1 pass"
    )


def test_runs_keep_to_the_grid_and_skip_missed_slots() -> None:
    clock = [0.0]
    starts: list[float] = []

    def run() -> Report:
        starts.append(clock[0])
        clock[0] += 2.5 if len(starts) == 2 else 0.1  # the second run overruns two slots
        return report_of(result("gpu.health", Status.PASS))

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    done = watch(
        run,
        interval=1.0,
        landed=lambda *_: None,
        log=lambda _: None,
        runs=4,
        clock=lambda: clock[0],
        sleep=sleep,
        stuck=list,  # no detector threads here (another test's may still be running)
    )
    assert done == 4
    assert starts == pytest.approx([0.0, 1.0, 4.0, 5.0])  # 2 and 3 are not caught up


def hung_nvidia_smi(machine: MachineBuilder, pids: Path) -> None:
    # exec: the stand-in is the process envkit started, as the real nvidia-smi is.
    script = machine.bin / "nvidia-smi"
    script.write_text(f"#!/bin/sh\necho $$ >> '{pids}'\nexec sleep 30\n", encoding="utf-8")
    script.chmod(0o755)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_hung_nvidia_smi_never_stacks_runs(machine: MachineBuilder, tmp_path: Path) -> None:
    pids = tmp_path / "nvidia-smi.pids"
    hung_nvidia_smi(machine, pids)
    system = machine.system()
    most = [0]
    stop = threading.Event()

    def sample() -> None:  # how many stand-ins run at once, every 10 ms
        while not stop.wait(0.01):
            if pids.exists():
                started = [int(p) for p in pids.read_text().split()]
                most[0] = max(most[0], sum(alive(p) for p in started))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    logs: list[str] = []
    landed: list[tuple[int, Report]] = []
    start = time.monotonic()
    before = set(stragglers())  # another test's, in this process: not this watch's business
    try:
        done = watch(
            lambda: preflight(system, python=sys.executable, timeout=0.4),
            interval=0.2,
            landed=lambda report, runs, _skipped: landed.append((runs, report)),
            log=logs.append,
            runs=2,
            stuck=lambda: [t for t in stragglers() if t not in before],
        )
    finally:
        stop.set()
        sampler.join()
    assert done == 2 and [n for n, _ in landed] == [1, 2]
    assert time.monotonic() - start < 8
    started = [int(p) for p in pids.read_text().split()]
    # One nvidia-smi per run (a run whose detector a loaded machine starved past the deadline
    # starts none).
    assert 1 <= len(started) <= 2
    assert most[0] == 1  # never two at once
    assert not any(alive(p) for p in started)  # none outlives its run
    for _, report in landed:
        # The run says NVIDIA did not answer: its detector was given up at the deadline, or came
        # back just in time with nvidia-smi's own timeout (which of the two is the machine's load).
        notes = (*report.facts.notes, *(report.facts.driver.notes if report.facts.driver else ()))
        assert any(
            "nvidia: no answer before the time limit" in n or ("nvidia-smi" in n and "timed out after" in n)
            for n in notes
        ), notes
    # No run waited or was skipped for the other's nvidia-smi. (Whether the two verdicts are alike
    # depends on which detectors a loaded machine lets answer in 0.4 s: Verdicts' own tests and the
    # SIGTERM test check the lines.)
    assert not any(line.startswith("run skipped") for line in logs)


@pytest.mark.slow  # ~1.2 s of waiting on a stuck reader
def test_a_detector_stuck_in_the_kernel_makes_the_next_run_wait(
    machine: MachineBuilder, tmp_path: Path
) -> None:
    # open() of a FIFO that no one writes blocks as a read of a wedged driver's /proc file does,
    # and no signal or deadline ends it: the detector's thread outlives its run.
    version = machine.root / "proc" / "driver" / "nvidia" / "version"
    version.parent.mkdir(parents=True)
    os.mkfifo(version)
    held = tmp_path / "fifo"
    os.link(version, held)  # the same FIFO under a second name, to release the readers later
    system = machine.system()
    logs: list[str] = []
    skipped_seen: list[int] = []
    heard: list[tuple[int, int]] = []

    def release() -> None:
        real = tmp_path / "version"
        real.write_text(
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
        )
        os.replace(real, version)  # the next run reads a plain file
        with open(held, "w") as fifo:  # the stuck readers get this, then end of file
            fifo.write("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15\n")

    timer = threading.Timer(2.5, release)  # past the 1 s grace a straggler gets
    before = set(stragglers())
    timer.start()
    try:
        done = watch(
            lambda: preflight(system, python=sys.executable, timeout=0.3),
            interval=0.2,
            landed=lambda _report, _runs, skipped: skipped_seen.append(skipped),
            skipped_run=lambda runs, skipped: heard.append((runs, skipped)),
            log=logs.append,
            runs=2,
            stuck=lambda: [t for t in stragglers() if t not in before],
        )
    finally:
        timer.join()
        for thread in set(stragglers()) - before:
            thread.join(5)
    assert done == 2
    assert skipped_seen[0] == 0 and skipped_seen[1] >= 1  # slots skipped while the reader was stuck
    assert heard == [(1, n) for n in range(1, skipped_seen[1] + 1)]  # heard as each was skipped
    skips = [line for line in logs if line.startswith("run skipped")]
    assert len(skips) == 1  # said once, not once per slot
    assert "envkit-" in skips[0] and "has not ended" in skips[0]
    assert set(stragglers()) <= before


class StuckDetector:
    """A detector thread stuck for the first ``joins`` waits on it (a stand-in: waiting moves the
    fake clock instead of the real one)."""

    name = "envkit-driver"

    def __init__(self, clock: list[float], joins: int) -> None:
        self.clock, self.joins = clock, joins

    def join(self, timeout: float | None = None) -> None:
        self.clock[0] += timeout or 0.0
        self.joins -= 1

    def is_alive(self) -> bool:
        return self.joins >= 0


def test_skipped_runs_are_heard_while_the_detector_stays_stuck() -> None:
    # While a detector stays stuck no run lands, so the skip count must reach the files on its own:
    # it is what EnvkitDetectorStuck alerts on (before, the metrics kept the last run's count until a
    # run landed again, which a detector stuck for good never lets happen).
    clock = [0.0]
    detector = StuckDetector(clock, joins=2)
    landed: list[tuple[int, int]] = []
    heard: list[tuple[int, int]] = []

    def run() -> Report:
        clock[0] += 0.1
        return report_of(result("gpu.health", Status.PASS))

    logs: list[str] = []
    done = watch(
        run,
        interval=1.0,
        landed=lambda _report, runs, skipped: landed.append((runs, skipped)),
        skipped_run=lambda runs, skipped: heard.append((runs, skipped)),
        log=logs.append,
        runs=2,
        clock=lambda: clock[0],
        sleep=lambda seconds: clock.__setitem__(0, clock[0] + seconds),
        stuck=lambda: [detector] if landed else [],  # type: ignore[list-item]
    )
    assert done == 2
    assert heard == [(1, 1), (1, 2)]  # each skip as it happens, the first run's count beside it
    assert landed == [(1, 0), (2, 2)]
    assert len([line for line in logs if line.startswith("run skipped")]) == 1


def test_a_skip_rewrites_the_metrics_of_the_last_run_and_leaves_the_labels_to_expire(
    tmp_path: Path,
) -> None:
    from envkit.render.files import ReportFiles, WatchFiles

    prom, labels = tmp_path / "envkit.prom", tmp_path / "envkit-labels"
    logs: list[str] = []
    writer = WatchFiles(
        ReportFiles(metrics=str(prom), nfd_labels=str(labels)), interval=300.0, strict=False, log=logs.append
    )
    writer.skipped_run(0, 1)  # nothing landed yet: nothing to write
    assert not prom.exists()
    report = dataclasses.replace(report_of(result("gpu.health", Status.PASS)), duration_s=0.2)
    writer.landed(report, 1, 0)
    labelled = labels.read_bytes()

    def figures() -> dict[str, float]:
        text = prom.read_text(encoding="utf-8")
        return {f.name: f.samples[0].value for f in text_string_to_metric_families(text) if f.samples}

    stamp = figures()["envkit_run_timestamp_seconds"]
    writer.skipped_run(1, 1)
    writer.skipped_run(1, 2)
    got = figures()
    assert (got["envkit_watch_runs"], got["envkit_watch_runs_skipped"]) == (1, 2)
    assert got["envkit_run_timestamp_seconds"] == stamp  # the run is as old as it is: EnvkitStale
    assert got["envkit_healthy"] == 1
    assert labels.read_bytes() == labelled  # their expiry is not pushed on by a skip
    # A metrics path that cannot be written on a skip: said once, and once when written again.
    prom.unlink()
    prom.mkdir()
    writer.skipped_run(1, 3)
    writer.skipped_run(1, 4)
    prom.rmdir()
    writer.skipped_run(1, 5)
    assert logs == [f"--metrics {prom}: is a folder; give a file name", f"--metrics {prom}: written again"]
    assert figures()["envkit_watch_runs_skipped"] == 5


def test_a_bad_expect_edit_is_logged_once_and_the_watch_goes_on(tmp_path: Path) -> None:
    calls = [0]

    def run() -> Report:
        calls[0] += 1
        if calls[0] in (2, 3):
            raise InputError("node.toml:1: unknown key 'gpu_cuont'")
        return report_of(result("gpu.health", Status.PASS))

    logs: list[str] = []
    done = watch(run, interval=0.01, landed=lambda *_: None, log=logs.append, runs=2, stuck=list)
    assert done == 2 and calls[0] == 4
    assert logs == [
        "healthy: 1 pass",
        "could not check: node.toml:1: unknown key 'gpu_cuont'",
        "healthy (was could not check): 1 pass",
    ]


def metrics_runs(path: Path) -> int:
    with contextlib.suppress(FileNotFoundError, ValueError):
        for family in text_string_to_metric_families(path.read_text(encoding="utf-8")):
            if family.name == "envkit_watch_runs":
                return int(family.samples[0].value)
    return 0


def start_watch(
    tmp_path: Path, *args: str, path: str = "/usr/bin:/bin"
) -> tuple[subprocess.Popen[str], Path, Path]:
    prom, labels = tmp_path / "envkit.prom", tmp_path / "envkit-labels"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "envkit",
            "preflight",
            "--metrics",
            str(prom),
            "--nfd-labels",
            str(labels),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PATH": path},
    )
    return proc, prom, labels


def stop_after(proc: subprocess.Popen[str], prom: Path, runs: int, within: float) -> tuple[int, str, str]:
    end = time.monotonic() + within
    try:
        while metrics_runs(prom) < runs and time.monotonic() < end and proc.poll() is None:
            time.sleep(0.05)
        assert metrics_runs(prom) >= runs, (
            proc.stderr.read() if proc.poll() is not None and proc.stderr else ""
        )
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


def test_sigterm_ends_a_real_watch_cleanly(tmp_path: Path) -> None:
    proc, prom, labels = start_watch(tmp_path, "--every", "0.1s", "--expect", all_ignored(tmp_path))
    code, out, err = stop_after(proc, prom, runs=2, within=20)
    assert code == 130
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 2, err  # the first verdict (no change after it), then the interruption
    assert lines[0].startswith("envkit: 20") and " healthy: " in lines[0]
    assert lines[1] == "envkit: interrupted (SIGTERM)"
    assert "# +expiry-time=" in labels.read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all-ignored.toml", "envkit-labels", "envkit.prom"]


def test_a_watch_whose_files_cannot_be_written_does_not_start(tmp_path: Path) -> None:
    from tests.unit.commands.test_preflight import envkit_in_process

    proc = envkit_in_process("preflight", "--every", "5m", "--metrics", str(tmp_path))
    assert proc.returncode == 2
    assert f"--metrics {tmp_path}: is a folder" in proc.stderr


@pytest.mark.slow  # each run waits out a hung nvidia-smi: ~2 s a run on the real command line
def test_a_real_watch_with_a_hung_nvidia_smi(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pids = tmp_path / "nvidia-smi.pids"
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho $$ >> '{pids}'\nexec sleep 60\n", encoding="utf-8")
    smi.chmod(0o755)
    proc, prom, _labels = start_watch(
        tmp_path, "--every", "0.3s", "--timeout", "1", path=f"{bin_dir}:/usr/bin:/bin"
    )
    code, _out, err = stop_after(proc, prom, runs=2, within=30)
    assert code == 130, err
    started = [int(p) for p in pids.read_text().split()]
    assert 2 <= len(started) <= 3
    assert not any(alive(p) for p in started)
    families = {f.name: f for f in text_string_to_metric_families(prom.read_text(encoding="utf-8"))}
    (duration,) = families["envkit_run_duration_seconds"].samples
    assert duration.value < 5


# The real command line on a fake machine root (a real process cannot use the cli_machine fixture).
ON_A_ROOT = """\
import dataclasses, sys
from pathlib import Path
import envkit.system
@dataclasses.dataclass(frozen=True)
class OnRoot(envkit.system.System):
    root: Path = Path(sys.argv.pop(1))
envkit.system.System = OnRoot
from envkit.cli import main
main()
"""


@pytest.mark.slow  # ~4 s: a run that waits out a stuck reader, then two skips of a second or more
def test_a_real_watch_writes_the_skips_while_a_detector_stays_stuck(tmp_path: Path) -> None:
    root = tmp_path / "root"
    version = root / "proc" / "driver" / "nvidia" / "version"
    version.parent.mkdir(parents=True)
    os.mkfifo(version)  # no writer, ever: the driver's reader stays stuck as on a wedged driver
    driver = tmp_path / "on_root.py"
    driver.write_text(ON_A_ROOT, encoding="utf-8")
    prom, labels = tmp_path / "envkit.prom", tmp_path / "envkit-labels"
    proc = subprocess.Popen(
        [sys.executable, str(driver), str(root), "preflight", "--every", "0.3s", "--timeout", "1"]
        + ["--metrics", str(prom), "--nfd-labels", str(labels)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[3]), "PATH": "/usr/bin:/bin"},
    )

    def skips() -> float:
        with contextlib.suppress(FileNotFoundError, ValueError):
            for family in text_string_to_metric_families(prom.read_text(encoding="utf-8")):
                if family.name == "envkit_watch_runs_skipped":
                    return family.samples[0].value
        return 0

    try:
        end = time.monotonic() + 30
        while skips() < 2 and time.monotonic() < end and proc.poll() is None:
            time.sleep(0.05)
        assert skips() >= 2, proc.stderr.read() if proc.poll() is not None and proc.stderr else ""
        assert metrics_runs(prom) == 1  # no run landed meanwhile: the reader is still stuck
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert sum("run skipped" in line for line in err.splitlines()) == 1


def test_watch_metrics_carry_the_run_count(tmp_path: Path) -> None:
    del tmp_path
    report = report_of(result("gpu.health", Status.PASS))
    from envkit.render.metrics import WatchState, prometheus_text

    text = prometheus_text(dataclasses.replace(report, duration_s=0.1), watch=WatchState(2, 0, 0.2))
    assert "envkit_watch_runs_total 2" in text
