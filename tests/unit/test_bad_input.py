"""Hostile and broken input: every file a user names, and every output path, ends in a clear one-line
error and exit 2 (or a normal verdict), never an internal error (70) and never a traceback.

Each case is provoked for real: the YAML alias bomb, a 100,000-deep ``[[[[``, a file past the size
cap (sparse, so the test does not write 64 MiB), thousand-digit versions, non-UTF-8 bytes, JSON's
lone surrogates, terminal escape sequences in a GPU name, output paths that are folders, too long,
under a file or read-only.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from envkit import cli
from envkit._files import MAX_INPUT_BYTES, MAX_NESTING, parse_json, parse_toml, parse_yaml, read_text
from envkit.checks import CHECKS
from envkit.errors import InputError
from envkit.versions import MAX_VERSION_CHARS, NvVersion, parse_compute_capability, parse_spec, parse_version

REPORT = Path(__file__).parents[1] / "data" / "reports" / "h200-580-torch2.11-cu130.json"
runner = CliRunner()
# preflight and doctor look at a fake machine, never this one (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("cli_machine")

BOMB = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
dependencies: [*i]
"""


def envkit(*args: str) -> Any:
    return runner.invoke(cli.app, list(args))


def assert_input_error(result: Any, *words: str) -> None:
    """Exit 2, one line on stderr (plus an optional hint line), no traceback, nothing on stdout."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert lines and lines[0].startswith("envkit: "), result.stderr
    assert len(lines) <= 2 and all(ln.startswith("  hint:") for ln in lines[1:]), result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])


def saved_report(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(REPORT.read_text(encoding="utf-8"))
    data["facts"]["gpus"][0].update(changes)
    return data


# -- input bombs ---------------------------------------------------------------------------------


def test_yaml_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    env = tmp_path / "environment.yml"
    env.write_text(BOMB, encoding="utf-8")
    assert len(BOMB) < 600  # 9^10 list items once expanded
    start = time.monotonic()
    result = envkit("spec", "--check", str(env))
    assert time.monotonic() - start < 20  # was 68 s and 2.3 GB for a smaller one; generous bound
    assert_input_error(result, str(env), "alias")


def test_yaml_anchors_without_aliases_still_read(tmp_path: Path) -> None:
    assert parse_yaml("a: &x 1\nb: [2]\n", "f.yml") == {"a": 1, "b": [2]}
    with pytest.raises(InputError, match="alias"):
        parse_yaml("base: &b {x: 1}\nother:\n  <<: *b\n", "f.yml")  # a merge key is an alias too


@pytest.mark.parametrize("kind", ["from", "fleet", "diff", "expect", "template", "check-yml", "check-txt"])
def test_files_past_the_cap_are_input_errors(tmp_path: Path, kind: str) -> None:
    suffix = {"expect": ".toml", "template": ".toml", "check-yml": ".yml", "check-txt": ".txt"}.get(
        kind, ".json"
    )
    big = tmp_path / f"big{suffix}"
    with big.open("wb") as fh:  # sparse: the size is real, the disk is not used
        fh.truncate(MAX_INPUT_BYTES + 1)
    args = {
        "from": ["doctor", "--from", str(big)],
        "fleet": ["fleet", str(big)],
        "diff": ["diff", str(REPORT), str(big)],
        "expect": ["preflight", "--expect", str(big)],
        "template": ["spec", str(big), "--cuda", "cpu", "--stdout", "--format", "pip"],
        "check-yml": ["spec", "--check", str(big)],
        "check-txt": ["spec", "--check", str(big)],
    }[kind]
    # doctor --from reads at most 10 MiB (a report, a paste or a log); the others 64 MiB.
    assert_input_error(envkit(*args), str(big), "10 MiB" if kind == "from" else "64 MiB")


def test_a_stream_past_the_cap_is_cut_off_not_read_whole() -> None:
    # /dev/zero says size 0 and never ends: the reader stops one byte past the cap.
    with pytest.raises(InputError, match="up to 64 MiB"):
        read_text("/dev/zero", label="--from /dev/zero")


def test_files_that_say_size_0_are_read_to_their_end(tmp_path: Path) -> None:
    import os
    import threading

    from envkit._files import read_bytes

    assert read_bytes("/proc/self/cmdline") == Path("/proc/self/cmdline").read_bytes()  # fstat: 0
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    data = bytes(range(256)) * 12_289  # 3 MiB and a bit: more than one read's piece

    def feed() -> None:
        with open(fifo, "wb") as fh:
            fh.write(data)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        assert read_bytes(str(fifo)) == data
    finally:
        writer.join(timeout=10)


def test_a_pipe_whose_size_is_what_it_holds_now_is_read_to_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # macOS and FreeBSD's fstat give a pipe's st_size as the bytes waiting in it, not 0: the first
    # read gets those, and the rest (written later) must still be read (`--from <(ssh node ...)`).
    import contextlib
    import os
    import threading

    from envkit._files import read_bytes

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    first, rest = b"x" * 1000, b"y" * 5000
    sent = threading.Event()
    real_fstat = os.fstat

    def fstat(fd: int) -> os.stat_result:
        st = real_fstat(fd)
        sent.wait(10)  # the first piece is in the pipe
        return os.stat_result((st.st_mode, *st[1:6], len(first), *st[7:]))

    def feed() -> None:
        with open(fifo, "wb", buffering=0) as fh:
            fh.write(first)
            sent.set()
            time.sleep(0.2)
            with contextlib.suppress(BrokenPipeError):  # the reader stopped at the first piece
                fh.write(rest)

    monkeypatch.setattr(os, "fstat", fstat)
    writer = threading.Thread(target=feed)
    writer.start()
    try:
        assert read_bytes(str(fifo)) == first + rest
    finally:
        writer.join(timeout=10)


# -- deep nesting, long numbers, bad bytes ---------------------------------------------------------

DEEP_JSON = "[" * 100_000
DEEP_TOML = "a = " + "[" * 100_000


@pytest.mark.parametrize(
    ("kind", "text", "suffix"),
    [
        ("from", DEEP_JSON, ".json"),
        ("fleet", DEEP_JSON, ".json"),
        ("diff", DEEP_JSON, ".json"),
        ("expect", DEEP_TOML, ".toml"),
        ("expect-tables", "a = " + "{b = " * 20_000, ".toml"),
        ("template", DEEP_TOML, ".toml"),
        ("check-yml", "dependencies: " + "[" * 100_000, ".yml"),
    ],
)
def test_deep_nesting_is_an_input_error(tmp_path: Path, kind: str, text: str, suffix: str) -> None:
    path = tmp_path / f"deep{suffix}"
    path.write_text(text, encoding="utf-8")
    args = {
        "from": ["doctor", "--from", str(path)],
        "fleet": ["fleet", str(path)],
        "diff": ["diff", str(path), str(REPORT)],
        "expect": ["preflight", "--expect", str(path)],
        "expect-tables": ["preflight", "--expect", str(path)],
        "template": ["spec", str(path), "--stdout", "--format", "pip"],
        "check-yml": ["spec", "--check", str(path)],
    }[kind]
    assert_input_error(envkit(*args), "nested more than")


def test_nesting_just_under_the_cap_is_read_and_over_it_is_not() -> None:
    ok = "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1)
    assert parse_json(ok, "f") is not None
    with pytest.raises(InputError, match="nested more than"):
        parse_json("[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1), "f")
    with pytest.raises(InputError, match="nested more than"):
        parse_toml("a = " + "[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1), "f")
    # YAML: flow and block levels alike (the loader stops composing past the cap, _clean decides).
    for deepest in ("[" * MAX_NESTING + "]" * MAX_NESTING, "- " * MAX_NESTING + "x"):
        assert parse_yaml(deepest, "f") is not None
        with pytest.raises(InputError, match="nested more than"):
            parse_yaml(f"a: {deepest}" if deepest[0] == "[" else f"- {deepest}", "f")


def test_thousand_digit_versions_are_not_versions(tmp_path: Path) -> None:
    digits = "1" * 5000
    assert parse_version(digits) is None
    assert parse_version("1." + "2" * MAX_VERSION_CHARS) is None
    assert parse_spec(f"=={digits}") is None
    assert parse_spec(f">={digits}") is None
    assert parse_compute_capability("sm_" + digits) is None
    with pytest.raises(ValueError, match="not a version"):
        NvVersion(digits)
    expect = tmp_path / "node.toml"
    for key in ("min_driver", "min_nccl", "cuda", "torch", "python"):
        expect.write_text(f'{key} = "{digits}"\n', encoding="utf-8")
        assert_input_error(envkit("preflight", "--expect", str(expect)), key)
    expect.write_text(f"gpu_count = {digits}\n", encoding="utf-8")  # int() past its digit limit
    assert_input_error(envkit("preflight", "--expect", str(expect)), "not valid TOML")
    report = tmp_path / "r.json"
    data = saved_report()
    data["facts"]["driver"]["version"] = digits
    report.write_text(json.dumps(data), encoding="utf-8")
    assert_input_error(envkit("doctor", "--from", str(report)), "driver.version")


def test_thousand_digit_pins_in_spec_files_do_not_crash(tmp_path: Path) -> None:
    digits = "9" * 5000
    req = tmp_path / "requirements.txt"
    req.write_text(
        f"torch=={digits}\ntorchvision>={digits}\n"
        f"torch @ https://download.pytorch.org/whl/cu121/torch-{digits}%2Bcu121-cp311-cp311-linux_x86_64.whl\n",
        encoding="utf-8",
    )
    env = tmp_path / "environment.yml"
    env.write_text(f"dependencies:\n  - pytorch={digits}\n  - pytorch-cuda {digits}\n", encoding="utf-8")
    for path in (req, env):
        result = envkit("spec", "--check", str(path), "--driver", "550.54.15", "--gpu", "sm_90")
        assert result.exit_code in (0, 1, 2, 3), result.stderr
        assert "Traceback" not in result.stderr and "internal error" not in result.stderr


def test_a_non_utf8_template_names_the_file(tmp_path: Path) -> None:
    template = tmp_path / "mine.toml"
    template.write_bytes(b'name = "mine"\ndescription = "caf\xe9"\n')
    assert_input_error(envkit("spec", str(template), "--stdout", "--format", "pip"), str(template), "UTF-8")


def test_lone_surrogates_in_a_report_are_read(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    text = json.dumps(saved_report(name="NVIDIA H200 \ud800"), ensure_ascii=True)
    assert "\\ud800" in text  # the JSON escape a hostile or broken writer produces
    report.write_text(text, encoding="utf-8")
    for args in (["doctor", "--from", str(report)], ["doctor", "--from", str(report), "--json"]):
        result = envkit(*args)
        assert result.exit_code in (0, 1), result.stderr
        assert "\ufffd" in result.stdout  # replaced, so every UTF-8 output can carry it
    result = envkit("fleet", str(report), str(REPORT), "--json")
    assert result.exit_code in (0, 1), result.stderr


# -- --expect values that would mean "anything" ------------------------------------------------------


@pytest.mark.parametrize(
    "line", ['torch = ""', 'python = ""', 'python = "  "', 'gpu_model = ""', 'cuda = ""']
)
def test_empty_expectations_are_errors(tmp_path: Path, line: str) -> None:
    expect = tmp_path / "node.toml"
    expect.write_text(line + "\n", encoding="utf-8")
    key = line.split()[0]
    assert_input_error(envkit("preflight", "--expect", str(expect)), f"{expect}:1", f"{key} is empty")


# -- terminal escape sequences in untrusted reports --------------------------------------------------

HOSTILE = "H200\x1b[2J\x1b[H\x9b32m healthy [bold red]X[/] \u202eevil\x07"


def hostile_report(tmp_path: Path) -> Path:
    data = saved_report(name=HOSTILE)
    data["host"] = "node\x1b]0;owned\x07-1"
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("command", ["doctor", "fleet", "diff"])
def test_escape_sequences_are_shown_not_obeyed(tmp_path: Path, command: str) -> None:
    path = hostile_report(tmp_path)
    args = {
        "doctor": ["doctor", "--from", str(path), "--verbose"],
        "fleet": ["fleet", str(path), str(REPORT)],
        "diff": ["diff", str(REPORT), str(path)],
    }[command]
    result = envkit(*args)
    assert result.exit_code in (0, 1), result.stderr
    out = result.stdout
    assert "H200␛[2J␛[H" in out  # visible, as control pictures
    assert "[bold red]X[/]" in out  # rich markup in a fact is text, not style
    for raw in ("\x1b", "\x9b", "\x07", "\u202e"):
        assert raw not in out, repr(raw)


def test_escape_sequences_reach_json_escaped(tmp_path: Path) -> None:
    result = envkit("doctor", "--from", str(hostile_report(tmp_path)), "--json")
    assert result.exit_code in (0, 1), result.stderr
    assert "\x1b" not in result.stdout and "\\u001b[2J" in result.stdout
    assert json.loads(result.stdout)["facts"]["gpus"][0]["name"] == HOSTILE  # faithful


def test_escape_sequences_in_file_names_are_shown_not_obeyed(tmp_path: Path) -> None:
    # A fleet folder is filled by the nodes: a file name is as untrusted as a report's content.
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "node-1.json").write_text(REPORT.read_text(encoding="utf-8"), encoding="utf-8")
    (folder / "\x1b[2J\x1b[32mall healthy.json").write_text("{", encoding="utf-8")
    result = envkit("fleet", str(folder))
    assert result.exit_code == 1, result.stderr
    assert "␛[2J␛[32mall healthy.json" in result.stdout and "␛[2J" in result.stderr
    assert "\x1b" not in result.stdout and "\x1b" not in result.stderr
    missing = tmp_path / "\x1b[2Jgone.json"
    result = envkit("doctor", "--from", str(missing))  # a control character in a path is refused
    assert_input_error(result, "\\x1b[2Jgone.json", "holds the control character '\\x1b'")
    assert "\x1b" not in result.stderr


# -- fleet: one bad report among many -------------------------------------------------------------


def fleet_folder(tmp_path: Path, good: int = 5) -> Path:
    folder = tmp_path / "reports"
    folder.mkdir()
    for i in range(good):
        data = json.loads(REPORT.read_text(encoding="utf-8"))
        data["host"] = f"node-{i}"
        data["facts"]["host"]["hostname"] = f"node-{i}"
        (folder / f"node-{i}.json").write_text(json.dumps(data), encoding="utf-8")
    (folder / "node-9.json").write_text('{"schema": "envkit.report/1", "facts": {', encoding="utf-8")
    return folder


def test_fleet_shows_the_good_reports_and_lists_the_bad_one(tmp_path: Path) -> None:
    folder = fleet_folder(tmp_path)
    result = envkit("fleet", str(folder))
    assert result.exit_code == 1, result.stderr
    assert "envkit fleet — 5 nodes" in result.stdout
    assert "Reports that cannot be read (1)" in result.stdout
    assert "node-9.json: not an envkit report (invalid JSON" in result.stdout
    assert "1 unreadable report — " in result.stdout and "unhealthy" in result.stdout
    assert result.stderr.count("\n") == 1 and "node-9.json" in result.stderr

    data = json.loads(envkit("fleet", str(folder), "--json").stdout)
    assert [n["name"] for n in data["nodes"]] == [f"node-{i}" for i in range(5)]
    assert data["unreadable"] == [
        {"path": str(folder / "node-9.json"), "error": data["unreadable"][0]["error"]}
    ]
    assert data["summary"]["unreadable"] == 1 and data["summary"]["exit_code"] == 1

    strict = envkit("fleet", str(folder), "--strict", "--json")
    assert strict.exit_code == 2
    assert json.loads(strict.stdout)["summary"]["exit_code"] == 2  # the view still comes out

    html = tmp_path / "fleet.html"
    assert envkit("fleet", str(folder), "--html", str(html)).exit_code == 1
    assert "Reports that cannot be read (1)" in html.read_text(encoding="utf-8")


def test_fleet_of_only_bad_reports_is_an_input_error(tmp_path: Path) -> None:
    folder = fleet_folder(tmp_path, good=0)
    (folder / "node-8.json").write_text("[" * 100_000, encoding="utf-8")
    assert_input_error(envkit("fleet", str(folder)), "none of the 2 reports can be read")


# -- output paths -----------------------------------------------------------------------------------


def unwritable_places(tmp_path: Path) -> dict[str, str]:
    """Output paths that cannot be written, each for its own reason."""
    a_file = tmp_path / "a-file"
    a_file.write_text("x", encoding="utf-8")
    return {
        "a folder": str(tmp_path),
        "too long": str(tmp_path / ("x" * 300 + ".xml")),
        "under a file": str(a_file / "out.xml"),
        "read-only": "/proc/envkit-test/out.xml",  # procfs: read-only even for root
    }


@pytest.mark.parametrize("why", ["a folder", "too long", "under a file", "read-only"])
def test_fleet_html_paths_that_cannot_be_written(tmp_path: Path, why: str) -> None:
    path = unwritable_places(tmp_path)[why]
    assert_input_error(envkit("fleet", str(REPORT), "--html", path), f"--html {path[:100]}")


@pytest.mark.parametrize("why", ["too long", "under a file", "read-only"])
def test_spec_output_folders_that_cannot_be_written(tmp_path: Path, why: str) -> None:
    path = unwritable_places(tmp_path)[why]
    result = envkit("spec", "pt2", "--cuda", "cpu", "--python", "3.11", "--format", "pip", "-o", path)
    assert_input_error(result)
    assert path[:100] in result.stderr


def test_read_only_folder(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running as root: a 0555 folder is still writable (the /proc case covers it)")
        assert_input_error(envkit("fleet", str(REPORT), "--html", str(folder / "f.html")), "cannot write in")
    finally:
        folder.chmod(0o755)


def everything_ignored(tmp_path: Path) -> Path:
    """An --expect file that ignores every check: a verdict of healthy on any machine."""
    expect = tmp_path / "all-ignored.toml"
    expect.write_text(f"ignore = {json.dumps(sorted(CHECKS))}\n", encoding="utf-8")
    return expect


@pytest.mark.parametrize("why", ["a folder", "too long", "under a file", "read-only"])
def test_preflight_junit_that_cannot_be_written_keeps_the_verdict(tmp_path: Path, why: str) -> None:
    path = unwritable_places(tmp_path)[why]
    # Healthy: the verdict (the JSON) still comes out, and the exit code is 2: the file is missing.
    result = envkit("preflight", "--expect", str(everything_ignored(tmp_path)), "--json", "--junit", path)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert json.loads(result.stdout)["summary"]["status"] == "healthy"
    assert f"--junit {path}" in result.stderr and "the checks passed" in result.stderr
    assert "internal error" not in result.stderr
    # Unhealthy stays 1, with its drain reason on stderr, and the JUnit error beside it.
    expect = tmp_path / "impossible.toml"
    expect.write_text("gpu_count = 4096\n", encoding="utf-8")
    result = envkit("preflight", "--expect", str(expect), "--junit", path)
    assert result.exit_code == 1, result.stderr
    assert "expect.gpu_count" in result.stderr or "4096" in result.stderr
    assert f"--junit {path}" in result.stderr and "internal error" not in result.stderr


def test_junit_into_a_missing_folder_is_made(tmp_path: Path) -> None:
    path = tmp_path / "reports" / "ci" / "preflight.xml"
    result = envkit("preflight", "--expect", str(everything_ignored(tmp_path)), "--junit", str(path))
    assert result.exit_code == 0, result.stderr
    assert path.read_text(encoding="utf-8").startswith("<?xml")


# -- output paths that are not regular files: written in place or refused, never replaced --------


def char_device(tmp_path: Path, minor: int = 3) -> Path:
    """A copy of /dev/null (minor 3) or /dev/full (minor 7) in the test's folder: what `--junit
    /dev/null` meets in a CI container run as root, without touching the machine's own."""
    import stat

    path = tmp_path / ("null" if minor == 3 else "full")
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a device node here ({exc}); only root in a container can")
    return path


def test_a_character_device_is_written_in_place_not_replaced(tmp_path: Path) -> None:
    import stat

    null = char_device(tmp_path)
    result = envkit("preflight", "--expect", str(everything_ignored(tmp_path)), "--junit", str(null))
    assert result.exit_code == 0, result.stderr
    assert stat.S_ISCHR(null.lstat().st_mode)  # was replaced by a regular file before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left
    full = char_device(tmp_path, minor=7)
    result = envkit("fleet", str(REPORT), "--html", str(full))
    assert_input_error(result, f"--html {full}", "No space left on device")
    assert stat.S_ISCHR(full.lstat().st_mode)


def test_a_fifo_gets_the_file_and_stays_a_fifo(tmp_path: Path) -> None:
    import stat
    import threading

    fifo = tmp_path / "fleet.html"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as fh:
            got.append(fh.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    result = envkit("fleet", str(REPORT), "--html", str(fifo))
    reader.join(timeout=10)
    if reader.is_alive():  # the FIFO was replaced: nothing ever reaches its reader; unblock it
        with open(fifo, "wb"):
            pass
    assert result.exit_code == 0, result.stderr
    assert got and got[0].startswith(b"<!DOCTYPE html>"), got
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_fifo_nobody_reads_is_refused_in_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import stat

    from envkit import _files

    monkeypatch.setattr(_files, "FIFO_WAIT_S", 0.15)
    fifo = tmp_path / "fleet.html"
    os.mkfifo(fifo)
    start = time.monotonic()
    result = envkit("fleet", str(REPORT), "--html", str(fifo))
    assert time.monotonic() - start < 10
    assert_input_error(result, f"--html {fifo}", "no process is reading this FIFO")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_socket_or_a_link_loop_is_refused_and_left_alone(tmp_path: Path) -> None:
    import socket
    import stat

    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        result = envkit("preflight", "--expect", str(everything_ignored(tmp_path)), "--junit", str(path))
        assert result.exit_code == 2, result.stderr
        assert f"--junit {path}: is a socket" in result.stderr
        assert stat.S_ISSOCK(path.lstat().st_mode)
    loop = tmp_path / "loop.html"
    loop.symlink_to(loop.name)
    assert_input_error(envkit("fleet", str(REPORT), "--html", str(loop)), "symbolic links")
    assert loop.is_symlink()


def test_a_link_to_a_file_replaces_the_file_and_keeps_the_link(tmp_path: Path) -> None:
    real = tmp_path / "real.html"
    real.write_text("old", encoding="utf-8")
    link = tmp_path / "link.html"
    link.symlink_to(real.name)
    assert envkit("fleet", str(REPORT), "--html", str(link)).exit_code == 0
    assert link.is_symlink() and real.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_spec_files_that_are_fifos_are_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "requirements.txt")
    result = envkit(
        "spec", "pt2", "--cuda", "cpu", "--python", "3.11", "--no-gpu", "--format", "pip", "-o", str(tmp_path)
    )
    assert_input_error(result, "requirements.txt is not a regular file")


# -- reads have the run's deadline ----------------------------------------------------------------


def test_doctor_from_a_fifo_with_no_writer_answers_within_its_timeout(tmp_path: Path) -> None:
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    start = time.monotonic()
    result = envkit("doctor", "--from", str(fifo), "--timeout", "0.2")  # blocked forever before
    assert time.monotonic() - start < 5
    assert_input_error(result, f"--from {fifo}: nothing arrived before the run's --timeout ran out")


def test_doctor_from_a_slow_pipe_answers_within_its_timeout(tmp_path: Path) -> None:
    import threading

    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    done = threading.Event()

    def slow_writer() -> None:
        with open(fifo, "wb", buffering=0) as fh:
            fh.write(b'{"schema": "envkit.report/1",')
            done.wait(10)  # never finishes the document while envkit waits

    writer = threading.Thread(target=slow_writer, daemon=True)
    writer.start()
    try:
        start = time.monotonic()
        result = envkit("doctor", "--from", str(fifo), "--timeout", "0.25")
        assert time.monotonic() - start < 5
    finally:
        done.set()
        writer.join(timeout=10)
    assert_input_error(result, "the input did not end (29 bytes arrived) before the run's --timeout ran out")


def test_preflight_expect_from_a_fifo_answers_within_its_timeout(tmp_path: Path) -> None:
    from envkit.commands.preflight import preflight
    from envkit.system import System

    fifo = tmp_path / "node.toml"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(InputError, match=f"--expect {fifo}: nothing arrived"):
        preflight(System(env={}, root=tmp_path), expect_path=str(fifo), timeout=0.2)
    assert time.monotonic() - start < 5


# -- values at the edge: one check per kind ------------------------------------------------------


@pytest.mark.parametrize(
    "mirror",
    [
        "https://example.org/whl\n--extra-index-url http://elsewhere",
        "https://example.org/whl --extra-index-url http://elsewhere",
        "torch-wheels=https://example.org/whl\n--extra-index-url http://elsewhere",
        "https://example.org/\u202ewhl",
    ],
    ids=["newline", "space", "kind-newline", "bidi"],
)
def test_a_mirror_url_with_a_line_of_its_own_is_refused(tmp_path: Path, mirror: str) -> None:
    # The bare URL form wrote `--extra-index-url http://elsewhere` into requirements.txt (exit 0).
    args = ["spec", "pt2", "--format", "pip", "--cuda", "cpu", "--python", "3.11", "--no-gpu"]
    for out in (["--stdout"], ["-o", str(tmp_path)]):
        result = envkit(*args, *out, "--mirror", mirror)
        assert_input_error(result, "--mirror")
        assert "elsewhere" not in result.stdout
    assert list(tmp_path.iterdir()) == []
    from envkit.mirrors.choose import resolve_mirror  # the Python API meets the same check

    with pytest.raises(InputError, match="--mirror"):
        resolve_mirror(mirror.split("=", 1)[-1] if mirror.startswith("torch") else mirror, "cpu")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["spec", "x" * 300, "--stdout"], "TEMPLATE"),  # was 70: File name too long
        (["create", "x" * 300, "--dry-run"], "NAME"),
        (["doctor", "--env", "x" * 300], "--env"),
        (["doctor", "--from", "/a" * 3000], "--from"),
        (["spec", "pt2", "--stdout", "--format", "conda", "--name", "x\nchannels: [evil]"], "--name"),
        (["fleet", "reports\n.json"], "REPORT|FOLDER..."),
    ],
    ids=["template", "create-name", "env", "from-past-path-max", "spec-name", "fleet-path"],
)
def test_over_long_and_control_character_values_are_one_line(args: list[str], words: str) -> None:
    assert_input_error(envkit(*args), words)


def test_a_link_loop_in_a_fleet_folder_is_one_unreadable_report(tmp_path: Path) -> None:
    # One self-referencing link among the reports failed the whole fleet ("cannot list this folder").
    folder = fleet_folder(tmp_path, good=2)
    (folder / "node-9.json").unlink()
    (folder / "loop.json").symlink_to("loop.json")
    (folder / "gone.json").symlink_to("nowhere.json")
    result = envkit("fleet", str(folder))
    assert result.exit_code == 1, result.stderr
    assert "envkit fleet — 2 nodes" in result.stdout
    assert "loop.json: cannot read it (Too many levels of symbolic links)" in result.stdout
    assert "gone.json: cannot read it (No such file or directory)" in result.stdout
