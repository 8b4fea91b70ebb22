"""Edges a hostile review found past the first safety pass (issue 20's review): click's own output
(--help, --version, completion) on a full stdout, and more below. Each test failed before its fix.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path

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


# A marker whose quoted string holds a newline: written as the two characters backslash and n
# (a TOML literal string), which packaging reads as an escape, and as a real newline (TOML's \n).
HIDDEN_LINE = 'foo; python_version == "3{nl}--extra-index-url http://elsewhere.example/simple{nl}"'
EVIL_TEMPLATES = {
    "escaped": f"pip_packages = ['{HIDDEN_LINE.format(nl=chr(92) + 'n')}']",
    "newline": f"pip_packages = [{json.dumps(HIDDEN_LINE.format(nl=chr(10)))}]",
}


@pytest.mark.parametrize("fmt", ["pip", "pixi"])
@pytest.mark.parametrize("how", sorted(EVIL_TEMPLATES))
def test_a_template_requirement_with_a_newline_is_refused(tmp_path: Path, fmt: str, how: str) -> None:
    # requirements.txt got a line of its own, '--extra-index-url http://elsewhere.example/simple'
    # (exit 0; str(Requirement) writes packaging's escape as a newline); pixi was exit 70.
    template = tmp_path / "evil.toml"
    head = 'name = "evil"\ndescription = "a requirement that hides a line"\n'
    template.write_text(head + EVIL_TEMPLATES[how] + "\n", encoding="utf-8")
    out = tmp_path / "out"
    args = ["spec", str(template), "--format", fmt, "--cuda", "cpu", "--no-gpu", "--python", "3.11"]
    result = invoke([*args, "--platform", "linux-x86_64", "-o", str(out)])
    assert result.code == 2, result.stderr
    assert "field 'pip_packages'" in result.stderr and "control character '\\n'" in result.stderr, (
        result.stderr
    )
    assert not out.exists()


def test_a_fifo_nobody_reads_waits_no_longer_than_preflights_timeout(
    tmp_path: Path, cli_machine: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --timeout is preflight's hard budget, but a FIFO without a reader held it FIFO_WAIT_S (10 s)
    # whatever --timeout said (`--timeout 2 --junit FIFO` took 10.7 s).
    import os
    import stat
    import time

    from envkit import _files
    from envkit.checks import CHECKS

    monkeypatch.setattr(_files, "FIFO_WAIT_S", 60.0)
    expect = tmp_path / "all-ignored.toml"
    expect.write_text(f"ignore = {json.dumps(sorted(CHECKS))}\n", encoding="utf-8")
    fifo = tmp_path / "junit.xml"
    os.mkfifo(fifo)
    start = time.monotonic()
    result = invoke(["preflight", "--expect", str(expect), "--timeout", "1", "--junit", str(fifo)])
    assert time.monotonic() - start < 20
    assert result.code == 2 and "no process is reading this FIFO" in result.stderr, result.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_links_at_output_paths_stay_links(tmp_path: Path) -> None:
    # A link to nothing at --html (write_atomic) was replaced by the file, the user's link deleted,
    # and spec -o (write_specs) replaced a requirements.txt linking to a shared file the same way; a
    # shell's `>`, and write_atomic for a link to a file, write where the link points and keep it.
    from envkit._files import write_atomic
    from envkit.errors import InputError
    from envkit.specs.render import write_specs

    dangling = tmp_path / "fleet.html"
    dangling.symlink_to("site/fleet.html")
    write_atomic(dangling, "<!DOCTYPE html>")
    assert dangling.is_symlink() and (tmp_path / "site" / "fleet.html").read_text() == "<!DOCTYPE html>"
    shared = tmp_path / "shared.txt"
    shared.write_text("numpy\n", encoding="utf-8")
    for name, to in (("linked", "../shared.txt"), ("dangling", "nowhere.txt"), ("loop", "requirements.txt")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "requirements.txt").symlink_to(to)
        try:
            write_specs({"requirements.txt": "torch\n"}, tmp_path / name, force=True)
        except InputError:
            assert name == "loop"  # a link to itself is refused, and stays
        assert (tmp_path / name / "requirements.txt").is_symlink()
        assert sorted(p.name for p in (tmp_path / name).iterdir() if p.name.startswith(".")) == []
    assert shared.read_text(encoding="utf-8") == "torch\n"
    assert (tmp_path / "dangling" / "nowhere.txt").read_text(encoding="utf-8") == "torch\n"


@pytest.mark.parametrize("key", ["channel_alias", "custom_channels", "CONDA_CHANNEL_ALIAS"])
def test_a_condarc_url_with_a_control_character_is_refused(tmp_path: Path, key: str) -> None:
    # create's plan printed 'channels: https://evil.example/<newline><ESC>[31m…' and the worker
    # got the URL as written; a channel URL holds no control character or whitespace.
    from envkit.errors import InputError
    from envkit.mirrors.condarc import read_condarc

    url = "https://mirror.example/\n--x"
    env = {"HOME": str(tmp_path)}
    if key == "CONDA_CHANNEL_ALIAS":
        env[key] = url
    else:
        value = {"pytorch": url} if key == "custom_channels" else url
        (tmp_path / ".condarc").write_text(json.dumps({key: value}), encoding="utf-8")  # JSON is YAML
    with pytest.raises(InputError, match="control character"):
        read_condarc(env)


def test_force_refuses_a_mount_point_before_it_starts() -> None:
    # A venv that is a mount point (a container's volume): --force resolved, laid out, then failed
    # moving it aside ("Device or resource busy", exit 4); --dry-run said it would replace it.
    import os

    from envkit.create.place import check_target
    from envkit.errors import InputError

    if not os.path.ismount("/proc"):
        pytest.skip("no /proc mount here")
    with pytest.raises(InputError, match="is a mount point"):
        check_target(Path("/proc"), force=True)


# The signal arrives while envkit.cli is being imported: a finder that sends it to its own process
# when the import starts (a real signal, at the one moment a timer would hit only by chance).
SIGNAL_DURING_IMPORT = """
import os, signal, sys
class Finder:
    def find_spec(self, name, path=None, target=None):
        if name == "envkit.cli":
            os.kill(os.getpid(), getattr(signal, sys.argv[1]))
        return None
sys.meta_path.insert(0, Finder())
from envkit.__main__ import main
main()
"""


@pytest.mark.parametrize(("sig", "code"), [("SIGINT", 130), ("SIGTERM", 130), ("SIGHUP", 129)])
def test_a_signal_while_the_command_line_is_imported_is_one_line(sig: str, code: int) -> None:
    # Before, the entry point was envkit.cli:main, whose module imports typer and rich first (~0.1 s):
    # Ctrl-C then was a KeyboardInterrupt traceback, SIGTERM and SIGHUP a silent death (-15, -1).
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", SIGNAL_DURING_IMPORT, sig], capture_output=True, text=True, timeout=60
    )
    said = "envkit: interrupted\n" if sig == "SIGINT" else f"envkit: interrupted ({sig})\n"  # as cli's
    assert (result.returncode, result.stderr) == (code, said)
