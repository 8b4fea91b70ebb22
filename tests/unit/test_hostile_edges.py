"""Edges a hostile review found past the first safety pass (issue 20's review): click's own output
(--help, --version, completion) on a full stdout, and more below. Each test failed before its fix.
"""

from __future__ import annotations

import errno

import pytest

from tests.hostile.invoke import Sink, invoke

FULL = "envkit: cannot write to standard output (No space left on device)\n"


@pytest.mark.parametrize(
    "args", [["--help"], ["doctor", "--help"], ["--version"], ["--show-completion", "bash"]]
)
def test_clicks_own_output_on_a_full_stdout_is_one_line_and_exit_2(args: list[str]) -> None:
    # `envkit --help > /dev/full` was a traceback (exit 1), `envkit doctor --help > /dev/full` exit 70
    # with a crash log, `envkit --version > /dev/full` exit 0 with nothing written.
    result = invoke(args, stdout=Sink(limit=0, error=errno.ENOSPC))
    assert (result.code, result.stderr) == (2, FULL)
    assert invoke(args, stdout=Sink(limit=0)).code == 0  # a reader that left: quietly, the work's code


@pytest.mark.parametrize("url", ["http://[::1", "https://[zz]/simple", "http://h.example:99999/simple"])
def test_a_mirror_url_python_cannot_split_is_an_input_error(url: str) -> None:
    # urlsplit raises ValueError on an unclosed '[' and .port on a port past 65535: exit 70 before.
    result = invoke(
        ["spec", "pt2", "--cuda", "cpu", "--no-gpu", "--python", "3.11", "--stdout", "--mirror", url]
    )
    assert result.code == 2, result.stderr
    assert result.stderr.startswith(f"envkit: --mirror {url}: not an http(s) URL"), result.stderr
