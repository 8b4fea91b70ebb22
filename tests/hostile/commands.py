"""Every command of the app, and a way to run each cheaply: ``SAFE`` (the command's real work,
without the network or this machine's tools, nothing written outside the given folder) and
``INPUTS`` (each file a command reads, as a file of its kind with a wrong-typed field). Used by the
walk of tests/unit/test_hostile_cli.py and the command-line fuzzer of tests/hostile/cli_args.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import click

from envkit.checks import CHECKS
from envkit.errors import EXIT_CODES, EXIT_INTERNAL, NAME_MAX, PATH_MAX
from tests.hostile.invoke import Result

REPORT = Path(__file__).parents[1] / "data" / "reports" / "h200-580-torch2.11-cu130.json"
TARGET = ["--driver", "550.54.15", "--gpu", "sm_90", "--python", "3.11", "--platform", "linux-x86_64"]
DOCUMENTED = {code for code, _ in EXIT_CODES} - {EXIT_INTERNAL}
NAME_KINDS = {"NAME"}
PATH_KINDS = {"PATH", "FILE", "DIR", "TEMPLATE", "A.json", "B.json", "REPORT|FOLDER...", "VERSION|PATH"}
# The kinds of value their own parsers read (versions, specifiers, GPUs, CUDA requests, choices),
# after envkit.cli's check_text: every metavar is one of these or a kind cli._value_checks checks.
PARSED_KINDS = {
    *("BACKEND", "CHANNEL", "CHECKS", "CUDA", "CUDAS", "DEVICES", "EXT", "FORMAT", "GPU", "INTERVAL"),
    *("KIND", "PACKAGE...", "PLATFORM", "SECONDS", "SPEC", "VARIANT", "VERSION"),
}
# Values past what a file system takes: one name of NAME_MAX + 45 bytes, one path past PATH_MAX.
TOO_LONG_NAME = "x" * (NAME_MAX + 45)
TOO_LONG_PATH = "/x" * (PATH_MAX // 2 + 50)


@dataclass(frozen=True)
class Place:
    """The test's folder: the files the invocations name."""

    root: Path

    def path(self, name: str) -> str:
        return str(self.root / name)


def commands() -> dict[str, click.Command]:
    """The app's commands, as typer builds them (every one: a command added tomorrow too)."""
    from tests.hostile.invoke import _command

    return dict(_command().commands)


def _write(place: Place, name: str, text: str) -> str:
    path = place.root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def everything_ignored(place: Place) -> str:
    return _write(place, "ignore-all.toml", f"ignore = {json.dumps(sorted(CHECKS))}\n")


def a_project(place: Place) -> str:
    return str(Path(_write(place, "project/requirements.txt", "numpy\n")).parent)


def a_python(place: Place) -> str:
    """A stand-in interpreter: any probe run with it fails at once (verify's cheap real run)."""
    path = Path(_write(place, "bin/fakepython", "#!/bin/sh\necho not python\nexit 3\n"))
    path.chmod(0o755)
    return str(path)


def a_uv(place: Place) -> str:
    path = Path(_write(place, "bin/uv", "#!/bin/sh\nexit 0\n"))
    path.chmod(0o755)
    return str(path.parent)


# Each command's real work, cheap and safe: no network, no GPU, nothing written outside the test's
# folder. positionals and options are kept apart so that the walk can swap a positional's value.
SAFE: dict[str, Callable[[Place], tuple[list[str], list[str]]]] = {
    "doctor": lambda p: ([], ["--from", str(REPORT)]),
    "resolve": lambda p: ([], TARGET),
    "verify": lambda p: ([], ["--python", a_python(p), "--checks", "device", "--timeout", "5"]),
    "mirrors": lambda p: ([], []),
    "preflight": lambda p: ([], ["--expect", everything_ignored(p), "--json"]),
    "fleet": lambda p: ([str(REPORT)], ["--json"]),
    "diff": lambda p: ([str(REPORT), str(REPORT)], ["--json"]),
    "spec": lambda p: (["pt2"], ["--stdout", "--format", "pip", "--cuda", "cpu", *TARGET]),
    "create": lambda p: (
        ["x"],
        ["--dry-run", "--json", "--backend", "uv", "--prefix", p.path("envs/x"), "--cuda", "cpu", *TARGET],
    ),
    # conda-lock would go to the network: an unknown platform ends it at once (its real run is slow).
    "lock": lambda p: (["pt2"], ["--lock-platform", "no-such-platform", "-o", p.path("lock"), *TARGET]),
    "add": lambda p: (["torch"], ["--project", a_project(p), "--dry-run", "--cuda", "cpu", *TARGET]),
    "check": lambda p: ([], ["--project", a_project(p), *TARGET]),
}


def bad_report(place: Place) -> str:
    data = json.loads(REPORT.read_text(encoding="utf-8"))
    data["checks"] = 5  # was exit 70: TypeError: 'int' object is not iterable
    return _write(place, "bad-report.json", json.dumps(data))


def bad_template(place: Place) -> str:
    return _write(place, "bad-template.toml", 'name = "bad"\ndescription = "d"\npackages = 5\n')


# Each file a command reads, as a file of its kind with a field of the wrong type.
INPUTS: dict[tuple[str, str], Callable[[Place], str]] = {
    ("doctor", "--from"): bad_report,
    ("doctor", "--error"): bad_report,
    ("preflight", "--expect"): lambda p: _write(p, "bad.toml", 'gpu_count = "four"\n'),
    ("fleet", "REPORT|FOLDER..."): bad_report,
    ("diff", "A.json"): bad_report,
    ("diff", "B.json"): bad_report,
    ("spec", "TEMPLATE"): bad_template,
    ("spec", "--check"): lambda p: _write(p, "environment.yml", "dependencies: 5\nchannels: {a: 1}\n"),
    ("create", "--template"): bad_template,
    ("create", "--from-lock"): lambda p: _write(p, "lock.txt", json.dumps({"torch": 5}) + "\n"),
    ("lock", "TEMPLATE"): bad_template,
    ("add", "--project"): lambda p: str(
        Path(_write(p, "bad-project/pyproject.toml", "project = 5\n")).parent
    ),
    ("check", "--project"): lambda p: str(
        Path(_write(p, "bad-check/pyproject.toml", "project = 5\n")).parent
    ),
}


def is_option(param: Any) -> bool:
    # typer builds its commands from its own copy of click's classes (typer._click): by kind, not class.
    return bool(param.param_type_name == "option")


def label(param: Any) -> str:
    return max(param.opts, key=len) if is_option(param) else str(param.metavar)


INPUT_KINDS = PATH_KINDS - {"DIR", "PATH", "VERSION|PATH"}  # an interpreter or a prefix: not a file read


def is_input(param: Any) -> bool:
    """A file (or a project folder) the command reads; not one it writes (--junit, --html, -o)."""
    text = (getattr(param, "help", "") or "").lower()
    if param.metavar == "DIR":
        return "project" in text
    return param.metavar in INPUT_KINDS and "write" not in text


def inputs(command: click.Command) -> list[click.Parameter]:
    return [p for p in command.params if is_input(p)]


# Options that exclude one another: setting the first drops the second from the safe invocation.
EXCLUDES = {"--error": "--from"}


def with_value(name: str, place: Place, param: click.Parameter, value: str) -> list[str]:
    """The command's safe invocation with ``param`` set to ``value``."""
    positionals, options = SAFE[name](place)
    if not is_option(param):
        index = [p for p in commands()[name].params if not is_option(p)].index(param)
        positionals = [*positionals] + [""] * (index + 1 - len(positionals))
        positionals[index] = value
        return [name, *positionals, *options]
    drop = EXCLUDES.get(label(param))
    if drop in options:
        at = options.index(drop)
        options = options[:at] + options[at + 2 :]
    return [name, *positionals, *options, param.opts[0], value]


def assert_answered(result: Result, what: str, *, failed: bool = False) -> None:
    """A documented code other than 70; where it is an error, one line (and an optional hint)."""
    assert result.code in DOCUMENTED, (what, result.code, result.stderr)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, (what, result.stderr)
    lines = result.stderr.splitlines()
    if failed or result.code == 2:
        assert result.code != 0, (what, result.stderr)
        # The error is the last line that starts "envkit: " (notes before it are the command's own),
        # one line, followed by nothing but its hint.
        said = [i for i, ln in enumerate(lines) if ln.startswith("envkit: ")]
        assert said, (what, result.stderr)
        assert all(ln.startswith("  hint:") for ln in lines[said[-1] + 1 :]), (what, result.stderr)
