"""The README's examples, as a user would run them.

Every ``envkit …`` line of the README's ``sh`` blocks (the ones each command's ``--help`` repeats):
the fast suite parses each against the typer app (a flag the README names that the command does not
take is a stale example); ``-m slow`` runs each in a folder holding the files the examples name
(node.json, issue.txt, environment.yml, a project, reports/), on a machine without a GPU, and
asserts an answer a user can act on: exit 0, 1 or 3 (or 2 where the example needs what that machine
lacks), never a usage error, a traceback or an internal error (70).

What runs differently, and why: ``create`` runs with ``--dry-run`` added (nothing is installed);
``verify`` and ``preflight --verify`` are left to tests/integration (real torch, minutes);
``preflight --every`` runs until stopped; ``lock`` and ``mirrors --probe`` need the network (the
probe runs against a closed port instead: its verdict and exit 1).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import socket
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from envkit import cli
from tests.conftest import MachineBuilder

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
USAGE = re.compile(r"No such option|Got unexpected extra argument|Invalid value for|Missing argument|Error: ")


def examples() -> list[str]:
    """Every line of the README's sh blocks that runs envkit (not the opening install block)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)[1:]
    lines = [line.strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if re.match(r"^(?:.*\| )?envkit \w", line)]


def argv_of(line: str) -> tuple[list[str], str | None, str | None]:
    """(envkit's arguments, the file stdout goes to, what feeds stdin) of one example line."""
    stdin = None
    if " | envkit " in line:
        stdin, line = line.split(" | ", 1)
    out = None
    if " > " in line:
        line, out = (part.strip() for part in line.rsplit(" > ", 1))
    words = shlex.split(line)
    assert words[0] == "envkit", line
    # What a shell does first: ~ and globs.
    expanded: list[str] = []
    for word in words[1:]:
        word = os.path.expanduser(word)
        matches = sorted(glob.glob(word)) if any(c in word for c in "*?[") else []
        expanded += matches or [word]
    return expanded, out, stdin


def test_the_readme_has_examples_of_every_command() -> None:
    commands = {argv_of(line)[0][0] for line in examples()}
    registered = set(typer.main.get_command(cli.app).commands)  # type: ignore[attr-defined]
    assert registered <= commands, registered - commands


@pytest.mark.parametrize("line", examples())
def test_every_readme_example_parses(line: str) -> None:
    argv, _out, _stdin = argv_of(line)
    group = typer.main.get_command(cli.app)
    command = group.commands[argv[0]]  # type: ignore[attr-defined]
    # click's own parsing of the example's arguments: an option the command does not take, a value
    # a choice does not admit, a missing argument all raise here.
    command.make_context(f"envkit {argv[0]}", list(argv[1:]), resilient_parsing=False)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def user_folder(tmp_path: Path, cli_machine: MachineBuilder, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's folder holding what the examples name, HOME beside it, and no network."""
    home = tmp_path / "home"
    (home / "src" / "app").mkdir(parents=True)
    (home / "src" / "app" / "requirements.txt").write_text("numpy\ntorch>=2.4\n", encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    report = DATA / "reports" / "h200-580-torch2.11-cu130.json"
    for name in ("node.json", "works.json", "broken.json"):
        shutil.copy(report, work / name)
    (work / "reports").mkdir()
    shutil.copy(report, work / "reports" / "node1.json")
    shutil.copy(report, work / "reports" / "node2.json")
    (work / "issue.txt").write_text(_paste(), encoding="utf-8")
    (work / "environment.yml").write_text(
        "name: pt\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\n  - pytorch>=2.4\n",
        encoding="utf-8",
    )
    (work / "node.toml").write_text("gpu_count = 0\n", encoding="utf-8")
    (work / "wheels").mkdir()
    (work / "app").mkdir()
    (work / "app" / "pyproject.toml").write_text(
        '[project]\nname = "app"\nversion = "0.1"\ndependencies = ["torch>=2.4"]\n', encoding="utf-8"
    )
    uv = shutil.which("uv")
    if uv is not None:  # the installers a user has: uv (envkit's test extra brings it)
        (cli_machine.bin / "uv").symlink_to(uv)
    conda_env = home / ".conda" / "envs" / "myenv" / "bin"
    conda_env.mkdir(parents=True)
    (conda_env / "python").symlink_to(Path(shutil.which("python") or "/usr/bin/python3"))
    proxy = f"http://127.0.0.1:{_closed_port()}"
    settings = {"HOME": str(home), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    settings.update(dict.fromkeys(("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"), proxy))
    for name, value in settings.items():  # this process (the HTTP client) and the fake machine alike
        monkeypatch.setenv(name, value)
        cli_machine.env[name] = value
    monkeypatch.chdir(work)
    return work


def _paste() -> str:
    cases = sorted((DATA / "diagnosis" / "cases").glob("**/*.txt"))
    for case in cases:
        text = case.read_text(encoding="utf-8", errors="replace")
        if "PyTorch version" in text:
            return text
    return "PyTorch version: 2.5.1+cu121\nIs CUDA available: False\n"


def _run_as_user(line: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv, out, stdin = argv_of(line)
    if argv[0] == "add" and "--project" not in argv:
        monkeypatch.chdir(folder / "app")  # the project the user is in: one manifest, uv's
    if argv[0] == "verify" or (argv[0] == "preflight" and ("--verify" in argv or "--every" in argv)):
        pytest.skip("real torch runs and watch mode are tests/integration's")
    if argv[0] == "lock":
        pytest.skip("envkit lock solves against conda channels: the network")
    if argv[0] == "create" and "--dry-run" not in argv:
        argv = [*argv, "--dry-run"]
    given = None
    if stdin is not None:
        traceback = DATA / "diagnosis" / "cases" / "a1111-17296-no-kernel-image-rtx50.txt"
        given = _paste() if "collect_env" in stdin else traceback.read_text(encoding="utf-8")
    result = CliRunner().invoke(cli.app, argv, input=given)
    said = result.stdout + result.stderr
    assert result.exit_code != 70 and "Traceback" not in said, (line, said[-2000:])
    assert not USAGE.search(result.stderr), (line, result.stderr)
    allowed = {0, 1, 3}
    if argv[0] in ("mirrors",) or (argv[:2] == ["create", "pt2"] and "--offline" in argv):
        allowed |= {2}  # a probe with no network; a wheelhouse without torch wheels
    assert result.exit_code in allowed, (line, result.exit_code, said[-1500:])
    if out is not None and result.exit_code in (0, 1):
        (folder / out).write_text(result.stdout, encoding="utf-8")
        json.loads(result.stdout)  # what the README saves is a JSON document


@pytest.mark.slow
@pytest.mark.host_tools  # as a user would: the machine's compilers and installers are envkit's to find
@pytest.mark.parametrize("line", examples())
def test_every_readme_example_runs_as_a_user_would(
    line: str, user_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _run_as_user(line, user_folder, monkeypatch)
