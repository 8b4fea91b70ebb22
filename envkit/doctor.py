"""``envkit doctor``: detect this machine (or read a saved report) and run every check on it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from envkit.checks import run_checks
from envkit.detect import detect_all
from envkit.detect.pyenv import select_interpreter
from envkit.errors import InputError
from envkit.report import Report, report_from_json

if TYPE_CHECKING:
    from envkit.system import System

__all__ = ["DEFAULT_TIMEOUT_S", "diagnose", "diagnose_file"]

DEFAULT_TIMEOUT_S = 30.0


def diagnose(
    system: System,
    *,
    python: Optional[str] = None,
    env_name: Optional[str] = None,
    deep: bool = False,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> Report:
    """Detect the machine and the chosen interpreter within ``timeout`` seconds, then check it."""
    if timeout <= 0:
        raise InputError(f"--timeout {timeout:g}: give a positive number of seconds")
    start = time.monotonic()
    system = system.with_deadline(timeout)
    interp = select_interpreter(system, python=python, env_name=env_name)
    facts = detect_all(system, interp, deep=deep)
    return Report.new(facts, run_checks(facts), duration_s=round(time.monotonic() - start, 3))


def load_report(path: str) -> Report:
    """Read a saved ``envkit.report/1`` file; InputError names the file and what is wrong."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"--from {path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise InputError(f"--from {path}: not a text file") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(
            f"--from {path}: not an envkit report (invalid JSON: {exc})",
            hint="save one with `envkit doctor --json > report.json`",
        ) from None
    return report_from_json(data, path)


def diagnose_file(path: str) -> Report:
    """Run today's checks on the facts of a saved report (from this or another machine)."""
    saved = load_report(path)
    return Report.new(saved.facts, run_checks(saved.facts), source=path)
