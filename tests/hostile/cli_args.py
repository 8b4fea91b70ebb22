"""Fuzzed command lines: a command of the app (every one, read from it), its safe invocation
(tests/hostile/commands.py SAFE), and one to three of its options set to hostile values — control
characters, escape sequences, empty strings, huge and negative numbers, NaN, over-long names and
paths, special files, another option's name, values of another kind. The property: a documented
exit code other than 70, and on an error one line (and a hint).

Options that would turn the cheap run into a long or unsafe one are never set: preflight's
``--every`` (a watch that runs until stopped) and ``--verify`` (real torch kernels), lock's
``--lock-platform`` (conda-lock to the network).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from tests.hostile.commands import (
    SAFE,
    TOO_LONG_NAME,
    TOO_LONG_PATH,
    Place,
    a_uv,
    assert_answered,
    commands,
    label,
)
from tests.hostile.invoke import invoke

__all__ = ["run"]

NEVER = {("preflight", "--every"), ("preflight", "--verify"), ("lock", "--lock-platform")}

VALUES = [
    "",
    " ",
    "-",
    "--json",
    "\n",
    "x\n--extra-index-url http://elsewhere",
    "\x1b[2J\x1b[H",
    "\x00",
    "\u202eevil",
    "[bold red]x[/]",
    "nan",
    "inf",
    "-1",
    "0",
    "1e309",
    "9" * 5000,
    "1." + "0" * 300,
    "sm_" + "9" * 400,
    "==" + "1" * 500,
    "2.5.*",
    ">=2,<3",
    "535.104.05",
    "12.1",
    "cu121",
    "rocm6.2",
    "auto",
    "cpu",
    "conda",
    "pip",
    "linux-64",
    "sm_90",
    "A100",
    "4090",
    "../../etc/passwd",
    "/",
    "/dev/null",
    "/dev/zero",
    "/proc/self/environ",
    "https://user:token@example.invalid/simple",
    "torch-wheels=https://example.invalid/whl",
    "KIND=https://x",
    "é" * 300,
    TOO_LONG_NAME,
    TOO_LONG_PATH,
]


def _value(rng: random.Random) -> str:
    value = rng.choice(VALUES)
    if rng.random() < 0.2:  # two of them together
        value += rng.choice(VALUES)
    return value


def one_case(rng: random.Random, place: Place) -> list[str]:
    """A command line: a command, its safe invocation, and hostile values for some of its options."""
    found = commands()
    name = rng.choice(sorted(n for n in found if n in SAFE))
    positionals, options = SAFE[name](place)
    params = [
        p
        for p in found[name].params
        if p.param_type_name == "option" and not p.is_flag and (name, label(p)) not in NEVER
    ]
    extra: list[str] = []
    for _ in range(rng.randint(1, 3)):
        if params and rng.random() < 0.9:
            param: Any = rng.choice(params)
            extra += [rng.choice(param.opts), _value(rng)]
        else:
            extra.append(rng.choice(["--no-such-flag", "-", "--", _value(rng)]))
    return [name, *positionals, *options, *extra]


def run(counts: Any, n: int, rng: random.Random) -> None:
    from tests.hostile.harness import fake_machine

    if n <= 0:
        return
    with fake_machine() as machine:
        place = Place(Path.cwd())
        machine.env["ENVKIT_ENVS_DIR"] = str(place.root / "envs")
        machine.env["PATH"] = f"{a_uv(place)}:{machine.env['PATH']}"
        for _ in range(n):
            argv = one_case(rng, place)
            counts.case(repr(argv)[:400], lambda argv=argv: assert_answered(invoke(argv), repr(argv)))
