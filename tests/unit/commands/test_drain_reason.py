"""Preflight's drain reason keeps the check and the cause, and a probe's timeout has a fix about
the timeout: provoked with a real interpreter that never answers, deep in a long path."""

from __future__ import annotations

import os
from pathlib import Path

from envkit.commands.preflight import REASON_MAX, drain_reason, preflight
from envkit.facts import Facts
from envkit.report import CheckResult, Report, Status
from tests.conftest import MachineBuilder


def test_a_timed_out_probe_leads_the_reason_with_its_check_and_cause(
    machine: MachineBuilder, tmp_path: Path
) -> None:
    deep = tmp_path / "cluster" / "shared" / "software" / "projects" / "team-vision" / ".venv" / "bin"
    deep.mkdir(parents=True)
    frozen = deep / "python"
    frozen.write_text("#!/bin/sh\nsleep 120\n")
    frozen.chmod(0o755)
    report = preflight(machine.system(), python=str(frozen), verify_checks=["device"], timeout=1.5)
    device = next(c for c in report.checks if c.id == "verify.device")
    assert device.status is Status.FAIL
    if device.metrics.get("timed_out"):  # it ran and hit its limit (else: no time was left to start it)
        assert "timed out after" in device.summary and str(frozen) not in device.summary
        assert "--timeout" in device.fix and "issue tracker" not in device.fix
    reason = drain_reason(report)
    assert reason is not None and len(reason) <= REASON_MAX
    assert str(deep) not in reason and "@@" not in reason  # no interpreter path, no probe marker


def test_paths_shrink_and_the_cause_survives() -> None:
    summary = (
        f"the compile probe did not answer: `{os.sep}home{os.sep}u{os.sep}p{os.sep}.venv/bin/python "
        "/home/u/p/.venv/lib/python3.11/site-packages/envkit/probes/verify_compile.py @@envkit-1@@` "
        "timed out after 4.9 s"
    )
    reason = drain_reason(Report.new(Facts(), [CheckResult("verify.compile", Status.FAIL, summary)]))
    assert reason == "envkit: verify.compile: the compile probe did not answer: python timed out after 4.9 s"
    lib = "driver.loaded: no such file /usr/lib/x86_64-linux-gnu/libcuda.so.1"
    checks = [CheckResult("driver.loaded", Status.FAIL, lib.split(": ", 1)[1])]
    assert drain_reason(Report.new(Facts(), checks)) == "envkit: driver.loaded: no such file libcuda.so.1"
