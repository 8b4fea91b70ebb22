"""One file, one answer: fleet gives the verdicts `doctor --from` gives, and verify reports carry
the host facts a fleet groups by."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from envkit.commands.doctor import diagnose_file
from envkit.facts import DriverFacts, Facts, HostFacts
from envkit.fleet.aggregate import load_fleet
from envkit.report import CheckResult, Report, Status
from envkit.versions import NvVersion

FACTS = Facts(
    host=HostFacts(hostname="node01", os="Ubuntu 22.04.4 LTS", kernel="5.15.0-105-generic", arch="x86_64"),
    driver=DriverFacts(version=NvVersion("550.54.15")),
)


def _write(path: Path, report: Report) -> str:
    path.write_text(json.dumps(report.to_json()), encoding="utf-8")
    return str(path)


def test_an_older_envkits_verdicts_are_recomputed_as_doctor_from_does(tmp_path: Path) -> None:
    truth = diagnose_file(_write(tmp_path / "probe.json", Report.new(FACTS, ())))
    target = next(c for c in truth.checks if c.status is not Status.PASS)
    # The same facts, with a verdict an older envkit gave (and a verify result it measured).
    stale = [
        CheckResult(target.id, Status.PASS, "fine then"),
        CheckResult("verify.device", Status.PASS, "ok"),
    ]
    old = dataclasses.replace(Report.new(FACTS, stale), envkit_version="0.0.1")
    path = _write(tmp_path / "old.json", old)
    (node,) = load_fleet([path]).nodes
    assert (
        node.status(target.id)
        is diagnose_file(path).checks[[c.id for c in truth.checks].index(target.id)].status
    )
    assert node.status(target.id) is not Status.PASS
    assert node.status("verify.device") is Status.PASS  # measured on the machine: kept


def test_this_versions_verdicts_are_kept(tmp_path: Path) -> None:
    report = Report.new(FACTS, (CheckResult("driver.loaded", Status.FAIL, "as recorded"),))
    (node,) = load_fleet([_write(tmp_path / "now.json", report)]).nodes
    assert node.result("driver.loaded") == CheckResult("driver.loaded", Status.FAIL, "as recorded")
