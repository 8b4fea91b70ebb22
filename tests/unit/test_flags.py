"""Flags mean one thing: every option that several commands take is read from the typer app, and
holds one meaning everywhere. --python was an interpreter on doctor / verify / preflight and a
version on resolve / spec / create / lock; mirrors' --timeout was per request where every other
--timeout bounds the whole run."""

from __future__ import annotations

import collections
from typing import Any

import typer.main

from envkit import cli

# Options whose help may be worded for each command while the meaning is one, which the note names.
# Every other shared option has the same help text everywhere.
WORDED: dict[str, str] = {
    "--json": "print the command's JSON document (its schema named) on stdout",
    "--quiet": "print less: no progress or notes, only what the command is for",
    "-q": "as --quiet",
    "--verbose": "print more: every finding's detail",
    "-v": "as --verbose",
    "--strict": "warnings fail too (exit 1)",
    "--format": "the format of what the command writes or prints",
    "--force": "replace what is there (files, an environment)",
    "--dry-run": "show what would be done; change nothing",
    "--output": "the folder the files go into",
    "-o": "as --output",
    "--offline": "install or lock from --wheelhouse alone",
    "--wheelhouse": "a folder of wheels to install or lock from",
    "--mirror": "an index or mirror by NAME, URL or KIND=URL (repeatable)",
    "--platform": "the target platform (linux-x86_64, …)",
    "--with": "an extension package to take with torch (repeatable)",
}


def _options() -> dict[str, list[tuple[str, Any]]]:
    """Option name -> (command, click parameter) for every command of the app."""
    found: dict[str, list[tuple[str, Any]]] = collections.defaultdict(list)

    def walk(command: Any, path: tuple[str, ...]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name, sub in subcommands.items():
                walk(sub, (*path, name))
            return
        for param in command.params:
            if getattr(param, "param_type_name", "") == "option":
                for name in (*param.opts, *param.secondary_opts):
                    found[name].append((" ".join(path), param))

    walk(typer.main.get_command(cli.app), ())
    return found


def test_every_shared_option_has_one_type_metavar_and_kind() -> None:
    shared = {name: uses for name, uses in _options().items() if len(uses) > 1}
    assert {"--python", "--env", "--timeout", "--json", "--platform"} <= set(shared)  # not vacuous
    for name, uses in shared.items():
        kinds = {(type(p.type).__name__, p.metavar, p.is_flag) for _, p in uses}  # repeatable may vary
        assert len(kinds) == 1, (name, {cmd: (type(p.type).__name__, p.metavar) for cmd, p in uses})


def test_every_shared_option_has_one_help_unless_worded_per_command() -> None:
    for name, uses in _options().items():
        if len(uses) < 2 or name in WORDED:
            continue
        helps = {p.help for _, p in uses}
        assert len(helps) == 1, (name, {cmd: p.help for cmd, p in uses})


def test_python_is_a_version_or_an_interpreter_on_every_command() -> None:
    uses = dict(_options()["--python"])
    assert {"doctor", "verify", "preflight", "resolve", "spec", "create", "lock"} <= set(uses)
    for command, param in uses.items():
        assert param.metavar == "VERSION|PATH", command
        assert "version" in param.help.lower() and "interpreter" in param.help.lower(), command


def test_timeout_bounds_the_whole_run_everywhere() -> None:
    for command, param in _options()["--timeout"]:
        assert param.help == "Seconds the whole run may take.", command
