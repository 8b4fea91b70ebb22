"""Every command, read from the typer app (a command added tomorrow is walked too), run with what a
hostile world hands it: a closed stdin, a full stdout (``> /dev/full``), over-long names and paths
(past NAME_MAX and PATH_MAX), and files whose JSON / TOML fields have the wrong type. Each must end
with a documented exit code other than 70 (70 is only for envkit's own bugs) and, where it fails,
one line on stderr (and an optional hint) — never a traceback.

The commands run in this process on a fake machine (tests/conftest.py cli_machine) through
tests/hostile/invoke.py, whose streams can be closed or full. ``SAFE`` gives each command an
invocation that does its real work without the network or this machine's tools; ``INPUTS`` gives
each file a command reads a file of its kind with a field of the wrong type. A command or an input
missing from them fails the walk, naming it.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from envkit import cli
from tests.hostile.commands import (
    INPUTS,
    NAME_KINDS,
    PARSED_KINDS,
    PATH_KINDS,
    SAFE,
    TOO_LONG_NAME,
    TOO_LONG_PATH,
    Place,
    a_uv,
    assert_answered,
    commands,
    inputs,
    label,
    with_value,
)
from tests.hostile.invoke import Sink, invoke


@pytest.fixture
def place(tmp_path: Path, cli_machine: Any, monkeypatch: pytest.MonkeyPatch) -> Place:
    monkeypatch.chdir(tmp_path)  # whatever a command writes by default lands here
    here = Place(tmp_path)
    cli_machine.env["PATH"] = f"{a_uv(here)}:{cli_machine.env['PATH']}"
    cli_machine.env["ENVKIT_ENVS_DIR"] = str(tmp_path / "envs")
    return here


def test_the_walk_knows_every_command_and_every_input() -> None:
    found = commands()
    assert set(found) <= set(SAFE), f"give {sorted(set(found) - set(SAFE))} a SAFE invocation"
    missing = [(n, label(p)) for n, c in found.items() for p in inputs(c) if (n, label(p)) not in INPUTS]
    assert missing == [], f"give each input a file with a wrong-typed field in INPUTS: {missing}"
    kinds = {p.metavar for c in found.values() for p in c.params}
    assert {"NAME", "FILE", "PATH"} <= kinds  # the walk below really meets names and paths
    # A new kind of value is checked by kind (cli._value_checks) or named as parsed: `--python
    # VERSION|PATH` (a later metavar) met neither, and a name past NAME_MAX there was exit 70.
    unknown = kinds - {None} - set(cli._value_checks()) - PARSED_KINDS
    assert unknown == set(), f"check {sorted(unknown)} in cli._value_checks or list it in PARSED_KINDS"


@pytest.mark.parametrize("name", sorted(SAFE))
def test_every_command_with_a_closed_stdin_and_a_full_stdout(place: Place, name: str) -> None:
    if name not in commands():
        pytest.skip(f"no {name} command here")
    positionals, options = SAFE[name](place)
    argv = [name, *positionals, *options]
    assert_answered(invoke(argv, stdin_closed=True), f"{argv} <&-")
    full = invoke(argv, stdout=Sink(limit=0, error=errno.ENOSPC))
    assert_answered(full, f"{argv} > /dev/full")
    whole = invoke(argv) if name != "preflight" else None  # preflight's data: its --json, always
    if whole is None or whole.stdout:  # it writes data: the full disk is said, the work's failure kept
        assert "cannot write to standard output (No space left on device)" in full.stderr, full.stderr
        assert full.code == ((whole.code if whole else 0) or 2), full.code
    for param in inputs(commands()[name]):  # each file it reads, as `-` from a closed stdin
        result = invoke(with_value(name, place, param, "-"), stdin_closed=True)
        assert_answered(result, f"{name} {label(param)} - <&-", failed=True)


@pytest.mark.parametrize("name", sorted(SAFE))
def test_every_name_and_path_past_what_a_file_system_takes(place: Place, name: str) -> None:
    if name not in commands():
        pytest.skip(f"no {name} command here")
    params = [p for p in commands()[name].params if p.metavar in NAME_KINDS | PATH_KINDS]
    for param in params:
        # preflight's outputs are checked when written, after a whole (fake) run: one of them here
        # (the check is envkit._files.check_output's, the same for each).
        later = cli._CHECKED_WHEN_WRITTEN.intersection(param.opts)
        if later and "--junit" not in later:
            continue
        once = param.metavar in NAME_KINDS or later
        values = [TOO_LONG_NAME] if once else [TOO_LONG_NAME, TOO_LONG_PATH]
        for value in values:
            result = invoke(with_value(name, place, param, value))
            what = f"{name} {label(param)} <{len(value)} bytes>"
            assert_answered(result, what, failed=True)
            assert result.code == 2, (what, result.stderr)


@pytest.mark.parametrize("name", sorted(SAFE))
def test_every_input_with_a_wrong_typed_field(place: Place, name: str) -> None:
    if name not in commands():
        pytest.skip(f"no {name} command here")
    for param in inputs(commands()[name]):
        make = INPUTS.get((name, label(param)))
        if make is None:
            continue  # test_the_walk_knows_every_command_and_every_input names it
        result = invoke(with_value(name, place, param, make(place)))
        assert_answered(result, f"{name} {label(param)} <wrong-typed field>")


@pytest.mark.parametrize("name", sorted(SAFE))
def test_every_duration_that_no_clock_can_hold(place: Place, name: str) -> None:
    # `--timeout inf` and `1e300` overflowed time_t in a wait (exit 70); `nan` ended every wait at once.
    if name not in commands():
        pytest.skip(f"no {name} command here")
    for param in [p for p in commands()[name].params if p.metavar == "SECONDS"]:
        for value in ("inf", "1e300", "nan", "-0.0"):
            result = invoke(with_value(name, place, param, value))
            what = f"{name} {label(param)} {value}"
            assert_answered(result, what, failed=True)
            assert result.code == 2, (what, result.stderr)


@pytest.mark.parametrize("option", ["--junit", "--html", "--metrics"])
def test_an_output_path_with_a_newline_is_one_line_of_error(tmp_path: Path, option: str) -> None:
    """The slow fuzz run found 'envkit: --junit x' and a second line '--extra-index-url http://…':
    the label of an output path shows the value, and showed it raw."""
    from envkit._files import check_output
    from envkit.errors import InputError

    value = "x\n--extra-index-url http://elsewhere"
    with pytest.raises(InputError) as info:
        check_output(str(tmp_path / value), label=f"{option} {tmp_path / value}")
    assert "\n" not in info.value.message
    assert "\\n--extra-index-url" in info.value.message
