"""`envkit mirrors --probe` when every mirror fails: exit 1 and a one-line summary. Every request
goes to a proxy on a closed 127.0.0.1 port, so each probe really fails and nothing leaves the machine."""

from __future__ import annotations

import dataclasses
import json
import socket
from pathlib import Path
from typing import Callable

import pytest
from typer.testing import CliRunner

from envkit import cli
from tests.unit.mirrors.test_mirrors import WHEELS, Server, _no_proxy, closed_port, serve

__all__ = ["_no_proxy", "serve"]  # the fixtures this module uses


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
    assert line.startswith("envkit: cpu torch wheels: no mirror served them (pytorch: ")
    assert line.endswith(
        "next: a torch-wheels index you can reach (--mirror URL), or a folder of cpu wheels (--wheelhouse DIR)"
    )
    # Without --probe nothing is fetched and the listing is a success.
    assert CliRunner().invoke(cli.app, ["mirrors", "--kind", "torch-wheels"]).exit_code == 0


def test_pypi_answering_is_no_yes_to_a_variant_question(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, serve: Callable[..., Server]
) -> None:
    # mirrors --probe --variant cu121 showed PyPI as ✓ and exited 0 while every torch-wheels mirror
    # failed: PyPI has no cu121 wheels (only torch's default build, no +cu121 versions).
    import envkit.mirrors.choose as choose

    pypi = serve({"/simple/torch/": b'<a href="/torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl">t</a>'})
    rows = {m.name: m for m in choose.load_mirrors()}
    mirrors = [
        dataclasses.replace(rows["pytorch"], url=closed_port() + "/whl"),
        dataclasses.replace(rows["pypi"], url=pypi.base + "/simple"),
    ]
    monkeypatch.setattr(choose, "load_mirrors", lambda: mirrors)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    result = CliRunner().invoke(cli.app, ["mirrors", "--probe", "--variant", "cu121", "--timeout", "2"])
    assert result.exit_code == 1, result.output
    assert "✓" not in result.stdout and "torch's default build only, no cu121 index" in result.stdout
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("envkit:")]
    assert line.startswith("envkit: cu121 torch wheels: no mirror served them (pytorch: ")
    assert "pypi answers, but PyPI carries only torch's default build, not cu121" in line
    as_json = json.loads(
        CliRunner().invoke(cli.app, ["mirrors", "--probe", "--variant", "cu121", "--json"]).stdout
    )
    assert as_json["verdict"]["ok"] is False and as_json["verdict"]["answers"] == []
    # A torch-wheels index that serves it: exit 0, and the line names it.
    wheels = serve({"/whl/cu121/torch/": WHEELS})
    mirrors[0] = dataclasses.replace(rows["pytorch"], url=wheels.base + "/whl")
    served = CliRunner().invoke(cli.app, ["mirrors", "--probe", "--variant", "cu121", "--timeout", "2"])
    assert served.exit_code == 0, served.output
    assert "envkit: cu121 torch wheels: served by pytorch (" in served.stderr
