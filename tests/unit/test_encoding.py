"""A stdout that cannot encode the report's characters (LC_ALL=C's ASCII, latin-1) is no crash: human
output replaces what it cannot show, --json is UTF-8 bytes whatever the locale (RFC 8259 §8.1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPORT = Path(__file__).parents[1] / "data" / "reports" / "h200-580-torch2.11-cu130.json"


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_narrow_stdout_gets_the_report_not_an_internal_error(encoding: str) -> None:
    env = {**os.environ, "PYTHONIOENCODING": encoding, "LC_ALL": "C"}
    human = subprocess.run(
        [sys.executable, "-m", "envkit", "doctor", "--from", str(REPORT)],
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert human.returncode == 0, human.stderr.decode(errors="replace")
    assert b"Traceback" not in human.stderr and b"internal error" not in human.stderr
    assert b"healthy" in human.stdout
    as_json = subprocess.run(
        [sys.executable, "-m", "envkit", "doctor", "--from", str(REPORT), "--json"],
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert as_json.returncode == 0, as_json.stderr.decode(errors="replace")
    report = json.loads(as_json.stdout.decode("utf-8"))
    assert report["schema"] == "envkit.report/1"
    assert report["summary"]["status"] == "healthy"
