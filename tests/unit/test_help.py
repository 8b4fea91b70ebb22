"""The conventions users bring: -h, an Examples section in every command's help that the README
shows too, placeholders that read as values, shell completion (typer's), and the same
target/request flags on resolve, spec, lock and create."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envkit import cli

runner = CliRunner()
README = (Path(__file__).parents[2] / "README.md").read_text()
COMMANDS = sorted(cli.EXAMPLES)
PLAN_FLAGS = (
    "--driver",
    "--gpu",
    "--no-gpu",
    "--platform",
    "--python",
    "--env",
    "--torch",
    "--cuda",
    "--channel",
)


def help_of(*args: str) -> str:
    result = runner.invoke(cli.app, [*args, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.stdout


def readme_examples() -> dict[str, list[str]]:
    """The README's "Examples (also in `envkit X --help`):" blocks, by command."""
    pattern = re.compile(r"Examples \(also in `envkit (\w+) --help`\):\n\n```sh\n(.*?)```", re.S)
    return {cmd: body.splitlines() for cmd, body in pattern.findall(README)}


def test_every_command_has_examples() -> None:
    registered = sorted(c.name or c.callback.__name__ for c in cli.app.registered_commands)  # type: ignore[union-attr]
    assert registered == COMMANDS


@pytest.mark.parametrize("command", COMMANDS)
def test_help_examples_are_the_readmes(command: str) -> None:
    text = help_of(command)
    shown = text.split("Examples:\n", 1)[1].splitlines()
    assert [line.strip() for line in shown if line.strip()] == list(cli.EXAMPLES[command])
    assert readme_examples()[command] == list(cli.EXAMPLES[command])
    for line in cli.EXAMPLES[command]:
        assert f"envkit {command}" in line


@pytest.mark.parametrize("command", COMMANDS)
def test_dash_h_and_placeholders(command: str) -> None:
    short = runner.invoke(cli.app, [command, "-h"], terminal_width=100)
    assert short.exit_code == 0
    assert short.stdout == help_of(command)
    assert "<" not in short.stdout.split("Options:", 1)[1].split("Examples:", 1)[0]  # no <str>, <float range>
    assert "TEXT" not in short.stdout and "FLOAT" not in short.stdout


def test_placeholders_read_as_values() -> None:
    assert "--timeout SECONDS" in help_of("doctor")
    assert "--from FILE" in help_of("doctor")
    assert "--driver VERSION" in help_of("resolve")
    assert "-o, --output DIR" in help_of("spec")
    assert "--wheelhouse DIR" in help_of("create")


def test_spec_format_default_is_documented() -> None:
    assert "default: --channel's, else the template's channel" in " ".join(help_of("spec").split())


@pytest.mark.parametrize("command", ["resolve", "spec", "lock", "create"])
def test_the_plan_flags_are_the_same_everywhere(command: str) -> None:
    text = help_of(command)
    options = {
        flag: " ".join(line.split())
        for flag in PLAN_FLAGS
        for line in text.splitlines()
        if f"  {flag} " in line
    }
    assert set(options) == set(PLAN_FLAGS), command
    assert options == {
        flag: " ".join(line.split())
        for flag in PLAN_FLAGS
        for line in help_of("resolve").splitlines()
        if f"  {flag} " in line
    }


@pytest.mark.parametrize("command", ["doctor", "verify", "preflight", "resolve", "spec", "create", "lock"])
def test_quiet_and_verbose(command: str) -> None:
    text = help_of(command)
    assert "-q, --quiet" in text
    if command != "lock":
        assert "-v, --verbose" in text


def complete(line: str) -> list[str]:
    """What typer's bash completion answers for the last word of ``line`` (its own mechanism: the
    environment variables the installed script sets)."""
    words = line.split(" ")
    result = runner.invoke(
        cli.app,
        [],
        env={"_ENVKIT_COMPLETE": "complete_bash", "COMP_WORDS": line, "COMP_CWORD": str(len(words) - 1)},
        prog_name="envkit",
    )
    return result.stdout.split()


def test_completion_installs_and_completes() -> None:
    assert "--install-completion" in help_of()
    assert complete("envkit pre") == ["preflight"]
    assert set(complete("envkit ")) >= set(COMMANDS)
    assert complete("envkit spec pt2-") == ["pt2-minimal", "pt2-train"]
    assert complete("envkit create x --template pt2-t") == ["pt2-train"]
    assert complete("envkit verify --checks device,c") == ["device,compile"]
    assert "perf" in complete("envkit preflight --verify ")
    assert complete("envkit doctor --de") == ["--deep"]


def test_show_completion_prints_a_script() -> None:
    result = runner.invoke(cli.app, ["--show-completion", "bash"], prog_name="envkit")
    assert result.exit_code == 0
    assert "_ENVKIT_COMPLETE=complete_bash" in result.stdout


def test_spec_channel_picks_the_format_and_must_agree(cli_machine: object, tmp_path: Path) -> None:
    out = runner.invoke(
        cli.app, ["spec", "pt2", "--channel", "conda", "--no-gpu", "--python", "3.11", "--stdout"]
    )
    assert out.exit_code == 0, out.output
    assert "dependencies:" in out.stdout  # an environment.yml
    bad = runner.invoke(cli.app, ["spec", "pt2", "--channel", "conda", "--format", "uv", "--no-gpu"])
    assert bad.exit_code == 2
    assert "--channel conda and --format uv disagree" in bad.stderr


def test_lock_takes_the_resolve_flags(cli_machine: object, tmp_path: Path) -> None:
    # --channel pip makes pip locks (uv's); its own options are checked before anything runs
    bad = runner.invoke(cli.app, ["lock", "--channel", "pip", "--format", "nope", "-o", str(tmp_path)])
    assert bad.exit_code == 2
    assert "--format nope" in bad.stderr
    unknown = runner.invoke(cli.app, ["lock", "--env", "no-such-env", "--no-gpu", "-o", str(tmp_path)])
    assert unknown.exit_code == 2
    assert "--env no-such-env" in unknown.stderr  # --env is read (not "no such option")


def test_resolve_quiet_prints_only_the_command(cli_machine: object) -> None:
    result = runner.invoke(cli.app, ["resolve", "--no-gpu", "--python", "3.11", "-q"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("pip install torch==") and result.stdout.count("\n") == 1


def test_doctor_deep_results_show_without_verbose() -> None:
    import io

    from packaging.version import Version
    from rich.console import Console

    from envkit.facts import DeepTorchFacts, Facts, TorchFacts
    from envkit.render.console import render_report
    from envkit.report import Report

    deep = DeepTorchFacts(
        ok=True,
        cuda_available=True,
        device_count=8,
        arch_list=("sm_80", "sm_90"),
        cudnn=90100,
        nccl=Version("2.21.5"),
        bf16_supported=True,
    )
    buffer = io.StringIO()
    render_report(Report.new(Facts(torch=TorchFacts(deep=deep)), []), Console(file=buffer, width=200))
    assert (
        "torch --deep: cuda available: yes · 8 devices · arch list: sm_80 sm_90 · cuDNN 90100 · NCCL 2.21.5 · bf16: yes"
        in buffer.getvalue()
    )
    buffer = io.StringIO()
    broken = DeepTorchFacts(ok=False, error="ImportError: libcudnn.so.9: cannot open shared object file")
    render_report(Report.new(Facts(torch=TorchFacts(deep=broken)), []), Console(file=buffer, width=200))
    assert "import torch (--deep): ImportError: libcudnn.so.9" in buffer.getvalue()


def test_fleet_html_says_where_it_wrote_and_counts_agree(tmp_path: Path) -> None:
    import json

    report = Path(__file__).parents[1] / "data" / "reports" / "h200-580-torch2.11-cu130.json"
    folder = tmp_path / "reports"
    folder.mkdir()
    for i, gpus in enumerate((8, 8, 4)):  # one node with another GPU count: 1 that differs
        data = json.loads(report.read_text(encoding="utf-8"))
        data["host"] = data["facts"]["host"]["hostname"] = f"node-{i}"
        data["facts"]["gpus"] = (data["facts"]["gpus"] * 8)[:gpus]
        (folder / f"node-{i}.json").write_text(json.dumps(data), encoding="utf-8")
    page = tmp_path / "fleet.html"
    result = runner.invoke(cli.app, ["fleet", str(folder), "--html", str(page)])
    assert result.exit_code in (0, 1), result.output
    assert f"wrote {page}" in result.stderr
    assert f"wrote {page}" not in result.stdout
    assert "1 that differs" in " ".join(result.stdout.split())
    assert "3 nodes" in page.read_text() and "1 that differs from the fleet" in page.read_text()
