"""`envkit mirrors --probe` when every mirror fails: exit 1 and a one-line summary. Every request
goes to a proxy on a closed 127.0.0.1 port, so each probe really fails and nothing leaves the machine."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envkit import cli


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends


def test_every_mirror_failing_exits_1_with_a_summary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    proxy = f"http://127.0.0.1:{_closed_port()}"
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(var, proxy)
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    result = CliRunner().invoke(
        cli.app, ["mirrors", "--probe", "--kind", "torch-wheels", "--variant", "cpu", "--timeout", "2"]
    )
    assert result.exit_code == 1, result.output
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("envkit:")]
    assert line.startswith("envkit: every mirror failed the probe (")
    # Without --probe nothing is fetched and the listing is a success.
    assert CliRunner().invoke(cli.app, ["mirrors", "--kind", "torch-wheels"]).exit_code == 0
