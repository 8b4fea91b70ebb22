"""-q and -v on the commands that report many things: fleet, diff, mirrors (the real CLI, in-process)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from typer.testing import CliRunner

from envkit import cli
from envkit.facts import DriverFacts
from envkit.versions import NvVersion
from tests.unit.fleet.test_fleet import node_facts, write_report

runner = CliRunner()


def fleet_of(folder: Path, nodes: int, odd: range) -> Path:
    folder.mkdir()
    for n in range(1, nodes + 1):
        facts = node_facts(n)
        if n in odd:  # another driver: a deviation, nothing fails
            facts = dataclasses.replace(
                facts, driver=DriverFacts(version=NvVersion("560.35.03"), source="nvml")
            )
        write_report(folder, facts)
    return folder


def test_fleet_quiet_is_the_tally_and_verbose_names_every_node(tmp_path: Path) -> None:
    folder = fleet_of(tmp_path / "r", 40, range(1, 13))  # 12 odd nodes: more than the 8 names shown
    plain = runner.invoke(cli.app, ["fleet", str(folder)], terminal_width=200)
    quiet = runner.invoke(cli.app, ["fleet", str(folder), "-q"], terminal_width=200)
    verbose = runner.invoke(cli.app, ["fleet", str(folder), "-v"], terminal_width=200)
    assert plain.exit_code == quiet.exit_code == verbose.exit_code
    assert "and 4 more" in plain.stdout
    assert quiet.stdout.strip().splitlines() == [plain.stdout.strip().splitlines()[-1]]
    assert quiet.stdout.startswith("40 nodes:")
    assert "and 4 more" not in verbose.stdout
    named = {word.strip(",:") for word in verbose.stdout.split()}
    assert {f"gpu-node-{n:03d}" for n in range(1, 13)} <= named


def test_diff_quiet_is_one_line(tmp_path: Path) -> None:
    a = write_report(tmp_path, node_facts(1), "a")
    b = write_report(
        tmp_path,
        dataclasses.replace(node_facts(2), driver=DriverFacts(version=NvVersion("560.35.03"), source="nvml")),
        "b",
    )
    plain = runner.invoke(cli.app, ["diff", str(a), str(b)], terminal_width=200)
    quiet = runner.invoke(cli.app, ["diff", str(a), str(b), "--quiet"], terminal_width=200)
    assert plain.exit_code == quiet.exit_code == 0
    (line,) = quiet.stdout.strip().splitlines()
    assert line == plain.stdout.strip().splitlines()[-1]
    assert "look first at driver.version" in line


def test_mirrors_quiet_and_verbose() -> None:
    plain = runner.invoke(cli.app, ["mirrors"], terminal_width=250)
    quiet = runner.invoke(cli.app, ["mirrors", "-q"], terminal_width=250)
    verbose = runner.invoke(cli.app, ["mirrors", "-v"], terminal_width=250)
    assert plain.exit_code == quiet.exit_code == verbose.exit_code == 0
    assert "carries" in plain.stdout and "carries" not in quiet.stdout
    assert "download.pytorch.org" in quiet.stdout
    assert "source:" in verbose.stdout and "source:" not in plain.stdout
