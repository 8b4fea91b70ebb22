"""envkit create never destroys what it did not make: --force replaces only an environment, NAME is
a name, one create of a place at a time (a real flock), a left-over backup of a killed run is put
back, signals wait while an environment is put back, and a read-only file system is exit 2.

Fast: the installer is a stand-in ``uv`` on PATH that makes a real venv without pip (no ensurepip);
the slow signal tests against a real ``envkit create`` process are in
tests/integration/test_create_signals.py and use the same stand-ins.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envkit._signals import deferred_signals
from envkit.commands.create import prepare
from envkit.create.install import CreateFailed, execute
from envkit.create.place import MARKER, check_target, is_environment, locked
from envkit.create.prepare import CreateRequest
from envkit.errors import InputError
from envkit.resolve.plan import PlanFlags
from envkit.system import System
from tests.conftest import make_venv

CPU = PlanFlags(torch="2.13.0", cuda="cpu", python="3.11", platform="linux-x86_64", no_gpu=True)
CLI_FLAGS = (
    *("--template", "pt2-minimal", "--backend", "uv", "--torch", "2.13.0", "--cuda", "cpu"),
    *("--no-gpu", "--python", "3.11", "--platform", "linux-x86_64"),
)


# ---------------------------------------------------------------- stand-ins, shared with the slow tests


def standin_uv(bin_dir: Path, install: str = "exit 0") -> Path:
    """A real ``uv`` program: ``uv venv PREFIX`` makes a real venv without pip (fast); ``uv pip
    install --python PY ...`` runs the shell text ``install`` (``$4`` is the new interpreter)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "uv"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = venv ]; then exec {sys.executable} -m venv --without-pip "$2"; fi\n'
        f"{install}\n",
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


def sleeping_install(state: Path, tag: str, seconds: float = 120) -> str:
    """Installer text that says it started (``state/installing``) and waits in a grandchild whose
    command line carries ``tag`` (to find survivors by)."""
    return f"touch {state}/installing\n{sys.executable} -c 'import time; time.sleep({seconds})' {tag} &\nwait"


def cli_env(tmp_path: Path, bin_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "ENVKIT_ENVS_DIR": str(tmp_path / "envs"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }


def envkit_cli(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m envkit ARGS`` in its own process."""
    return subprocess.run(
        [sys.executable, "-m", "envkit", *args], capture_output=True, text=True, env=env, timeout=timeout
    )


def envkit_here(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The same command line through typer's runner in this process (no interpreter start-up: the
    fast tests stay fast); the exit code and both streams as a CompletedProcess."""
    from typer.testing import CliRunner

    from envkit import cli

    result = CliRunner().invoke(cli.app, list(args), env=env)
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def tree_digest(root: Path) -> dict[str, str]:
    """Every path under ``root`` with its bytes' hash (links by target, folders as such)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def old_venv(prefix: Path) -> Path:
    """An environment --force may replace (a venv's pyvenv.cfg), with a file to recognise it by."""
    prefix.mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (prefix / "share").mkdir()  # where a venv holds data files: nothing a venv would not hold
    (prefix / "share" / "old.txt").write_text("the old environment")
    return prefix


def side_files(parent: Path, name: str) -> list[str]:
    """envkit's own files beside an environment (staging, backups, trash, lock)."""
    return sorted(p.name for p in parent.glob(f".{name}.envkit-*"))


def survivors(tag: str) -> list[str]:
    """Command lines of live processes that carry ``tag``."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if tag in cmdline and int(proc.name) != os.getpid():
            found.append(f"{proc.name}: {cmdline}")
    return found


def no_survivors(tag: str, within: float = 5.0) -> list[str]:
    deadline = time.monotonic() + within
    while (left := survivors(tag)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


# ---------------------------------------------------------------- in-process helpers


def uv_system(tmp_path: Path, install: str = "exit 0") -> System:
    bin_dir = tmp_path / "bin"
    standin_uv(bin_dir, install)
    return System(env={"PATH": f"{bin_dir}:/usr/bin:/bin", "ENVKIT_ENVS_DIR": str(tmp_path / "envs")})


def uv_install(system: System, prefix: Path) -> object:
    return prepare(system, CreateRequest(prefix=str(prefix), flags=CPU, backend="uv", template="pt2-minimal"))


# ---------------------------------------------------------------- --force replaces only an environment


def test_force_never_replaces_a_project_folder(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (project / "src").mkdir()
    (project / "src" / "train.py").write_bytes(b"import torch\nprint('my work')\n")
    before = tree_digest(project)
    env = cli_env(tmp_path, tmp_path / "bin")
    standin_uv(tmp_path / "bin")
    for extra in ((), ("--dry-run",), ("--dry-run", "--json")):
        proc = envkit_here("create", "x", "--prefix", str(project), "--force", *extra, *CLI_FLAGS, env=env)
        assert proc.returncode == 2, proc.stderr
        assert f"{project} is not an environment; refusing to replace it" in " ".join(proc.stderr.split())
        assert "Traceback" not in proc.stderr
        if "--json" in extra:  # the failure as JSON (envkit.error/1), not the plan
            assert json.loads(proc.stdout)["schema"] == "envkit.error/1"
        else:
            assert proc.stdout == ""
    assert tree_digest(project) == before
    assert side_files(tmp_path, "project") == []


@pytest.mark.parametrize(
    ("layout", "why"),
    [
        ({"notes.txt": "mine"}, "is not an environment"),
        ({".git/HEAD": "x", "pyvenv.cfg": "home = /usr"}, "is a git work tree"),
        ({"conda-meta/history": "", "condabin/conda": ""}, "conda installation"),
        ({"conda-meta/history": "", "envs/other/conda-meta/history": ""}, "conda installation"),
    ],
)
def test_what_force_refuses(tmp_path: Path, layout: dict[str, str], why: str) -> None:
    target = tmp_path / "t"
    for rel, text in layout.items():
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_text(text)
    with pytest.raises(InputError, match="is not an environment; refusing to replace it") as info:
        check_target(target, force=True)
    assert why in info.value.message


def test_force_never_replaces_a_project_with_a_venv_in_its_root(tmp_path: Path) -> None:
    # `python -m venv .` in a project without .git, then `create x --prefix . --force`: wiped src/.
    project = tmp_path / "project"
    project.mkdir()
    make_venv(project)  # what `python -m venv --without-pip .` writes
    (project / "src").mkdir()
    (project / "src" / "train.py").write_text("print('my work')\n")
    (project / "README.md").write_text("mine\n")
    before = tree_digest(project)
    env = cli_env(tmp_path, tmp_path / "bin")
    standin_uv(tmp_path / "bin")
    for extra in ((), ("--dry-run",)):
        proc = envkit_here("create", "x", "--prefix", str(project), "--force", *extra, *CLI_FLAGS, env=env)
        text = " ".join(proc.stderr.split())
        assert proc.returncode == 2, text
        assert (
            f"{project} is not an environment; refusing to replace it ({project} holds README.md, src,"
            in text
        )
    assert tree_digest(project) == before
    shutil.rmtree(project / "src")
    (project / "README.md").unlink()
    assert is_environment(project)  # the venv alone (python -m venv's own layout) may be replaced


def test_force_names_the_first_foreign_entries(tmp_path: Path) -> None:
    target = tmp_path / "env"
    (target / "conda-meta").mkdir(parents=True)
    record = {"name": "python", "files": ["bin/python3.11", "lib/libpython3.11.so", "compiler_compat/README"]}
    (target / "conda-meta" / "python-3.11.9-h0.json").write_text(json.dumps(record))
    for name in ("bin", "lib", "compiler_compat", "a", "b", "c", "d"):
        (target / name).mkdir()
    with pytest.raises(InputError, match=r"holds a, b, c and 1 more, which no environment's layout"):
        check_target(target, force=True)
    for name in ("a", "b", "c", "d"):
        (target / name).rmdir()
    assert check_target(target, force=True).replace  # what its packages installed, and conda-meta/


@pytest.mark.slow  # a real uv venv (~0.5 s)
def test_a_uv_venv_may_be_replaced(tmp_path: Path) -> None:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed")
    subprocess.run(
        [uv, "venv", "-q", str(tmp_path / "uv")], check=True, env={**os.environ, "UV_OFFLINE": "1"}
    )
    assert is_environment(tmp_path / "uv"), os.listdir(tmp_path / "uv")  # CACHEDIR.TAG, .gitignore, lib64


def test_force_refuses_a_file_and_a_link(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    old_venv(tmp_path / "real")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(InputError, match="is not a folder"):
        check_target(tmp_path / "file", force=True)
    with pytest.raises(InputError, match="is a symbolic link"):
        check_target(tmp_path / "link", force=True)


@pytest.mark.parametrize("layout", ["pyvenv.cfg", "conda-meta/history", str(MARKER)])
def test_what_force_replaces(tmp_path: Path, layout: str) -> None:
    target = tmp_path / "env"
    (target / layout).parent.mkdir(parents=True, exist_ok=True)
    (target / layout).write_text("")
    assert is_environment(target)
    assert check_target(target, force=True).replace
    with pytest.raises(InputError, match="already exists"):
        check_target(target, force=False)


def test_dry_run_says_what_force_would_replace(tmp_path: Path) -> None:
    prefix = old_venv(tmp_path / "envs" / "demo")
    standin_uv(tmp_path / "bin")
    env = cli_env(tmp_path, tmp_path / "bin")
    proc = envkit_here("create", "demo", "--force", "--dry-run", "--json", *CLI_FLAGS, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["will"] == [
        f"replaces the environment {prefix} (--force; put back if anything fails)"
    ]
    assert (prefix / "share" / "old.txt").read_text() == "the old environment"


# ---------------------------------------------------------------- NAME is a name


@pytest.mark.parametrize("name", ["..", ".", "../x", "a/b", "/abs", "", ".hidden", "a b", "x\n"])
def test_name_is_a_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(InputError, match="use letters, digits") as info:
        prepare(uv_system(tmp_path), CreateRequest(name=name, flags=CPU, backend="uv"))
    assert "--prefix" in info.value.hint


def test_create_dotdot_force_deletes_nothing(tmp_path: Path) -> None:
    envs = tmp_path / "envs"
    old_venv(envs / "other")
    standin_uv(tmp_path / "bin")
    before = tree_digest(tmp_path)
    for name in ("..", ".", "../envs"):
        proc = envkit_here("create", name, "--force", *CLI_FLAGS, env=cli_env(tmp_path, tmp_path / "bin"))
        assert proc.returncode == 2, proc.stderr
        assert "use letters, digits" in proc.stderr and "--prefix" in proc.stderr
    after = tree_digest(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("cache")} == before


def test_prefix_dotdot_is_folded_and_root_refused(tmp_path: Path) -> None:
    system = uv_system(tmp_path)
    install = prepare(system, CreateRequest(prefix=f"{tmp_path}/a/..", flags=CPU, backend="uv"))
    assert install.prefix == tmp_path  # not a folder called ".."
    with pytest.raises(InputError, match="not a place for an environment"):
        prepare(system, CreateRequest(prefix="/", flags=CPU, backend="uv"))


# ---------------------------------------------------------------- the lock


def test_a_second_create_of_a_locked_place_fails_at_once(tmp_path: Path) -> None:
    prefix = old_venv(tmp_path / "envs" / "busy")
    standin_uv(tmp_path / "bin")
    env = cli_env(tmp_path, tmp_path / "bin")
    with locked(prefix) as lock_file:
        assert lock_file == tmp_path / "envs" / ".busy.envkit-lock"
        for extra in ((), ("--dry-run",)):
            proc = envkit_here("create", "busy", "--force", *extra, *CLI_FLAGS, env=env)
            assert proc.returncode == 2, proc.stderr
            text = " ".join(proc.stderr.split())
            assert f"another envkit create (pid {os.getpid()}) is creating {prefix} right now" in text
    assert (prefix / "share" / "old.txt").read_text() == "the old environment"
    assert side_files(prefix.parent, "busy") == []  # the lock file goes with its holder


def test_the_lock_decides_before_any_left_over_is_judged(tmp_path: Path) -> None:
    # Another create is replacing `busy` with --force: the old one moved aside, the new one half-made.
    # A second create used to call that "an interrupted envkit create left ..." and suggest
    # `rm -rf busy && mv .busy.envkit-old-... busy`, destroying the running create's work.
    envs = tmp_path / "envs"
    old_venv(envs / ".busy.envkit-old-1700000000")
    prefix = old_venv(envs / "busy")
    standin_uv(tmp_path / "bin")
    env = cli_env(tmp_path, tmp_path / "bin")
    with locked(prefix):
        before = (tree_digest(prefix), sorted(os.listdir(envs)))
        for extra in ((), ("--dry-run",), ("--force",), ("--force", "--dry-run")):
            proc = envkit_here("create", "busy", *extra, *CLI_FLAGS, env=env)
            text = " ".join(proc.stderr.split())
            assert proc.returncode == 2, text
            assert f"another envkit create (pid {os.getpid()}) is creating {prefix} right now" in text
            assert "interrupted" not in text and "rm -rf" not in text
        assert (tree_digest(prefix), sorted(os.listdir(envs))) == before


def test_the_installers_temporary_files_live_beside_the_prefix_and_go(tmp_path: Path) -> None:
    # pip, ensurepip and uv write their downloads and unpacked wheels under $TMPDIR: a folder beside
    # the environment that envkit removes (rollback or success), never the user's /tmp for good.
    seen = tmp_path / "tmpdir-seen"
    system = uv_system(tmp_path, f'echo "$TMPDIR|$TEMP|$TMP" > {seen}; touch "$TMPDIR/pip-unpack-x.whl"')
    prefix = tmp_path / "envs" / "fresh"
    execute(system, uv_install(system, prefix))
    scratch = prefix.parent / ".fresh.envkit-tmp"
    assert seen.read_text().strip() == "|".join([str(scratch)] * 3)
    assert not scratch.exists()
    assert side_files(prefix.parent, "fresh") == []
    failing = uv_system(tmp_path, f'touch "$TMPDIR/partial.whl"; echo "$TMPDIR" > {seen}; exit 1')
    with pytest.raises(CreateFailed):
        execute(failing, uv_install(failing, tmp_path / "envs" / "other"))
    assert seen.read_text().strip() == str(tmp_path / "envs" / ".other.envkit-tmp")
    assert side_files(prefix.parent, "other") == []


def test_the_lock_is_released_and_taken_again(tmp_path: Path) -> None:
    prefix = tmp_path / "p" / "env"
    with locked(prefix) as path:
        assert path.read_text() == f"{os.getpid()}\n"
    assert not path.exists()
    with locked(prefix), pytest.raises(InputError, match="another envkit create"), locked(prefix):
        pass


# ---------------------------------------------------------------- building, failing, restoring


def test_a_made_environment_is_marked(tmp_path: Path) -> None:
    system = uv_system(tmp_path)
    prefix = tmp_path / "envs" / "fresh"
    execute(system, uv_install(system, prefix))
    marker = json.loads((prefix / MARKER).read_text())
    assert marker["schema"] == "envkit.created/1"
    assert (marker["backend"], marker["torch"], marker["variant"]) == ("uv", "2.13.0", "cpu")
    assert marker["envkit"] and marker["created"].endswith("+00:00")
    assert side_files(prefix.parent, "fresh") == []
    # It is an environment envkit made, so --force may replace it, and nothing is left beside it.
    execute(system, uv_install(system, prefix), force=True)
    assert side_files(prefix.parent, "fresh") == []


def test_a_failed_install_leaves_nothing_and_puts_the_old_env_back(tmp_path: Path) -> None:
    system = uv_system(tmp_path, "echo 'ERROR: no matching distribution for torch'; exit 1")
    prefix = old_venv(tmp_path / "envs" / "precious")
    with pytest.raises(CreateFailed) as info:
        execute(system, uv_install(system, prefix), force=True)
    assert "ERROR: no matching distribution" in info.value.message
    assert f"restored the previous {prefix}" in info.value.hint
    assert (prefix / "share" / "old.txt").read_text() == "the old environment"
    assert sorted(p.name for p in prefix.parent.iterdir()) == ["precious"]


def test_ctrl_c_in_the_installer_cleans_up(tmp_path: Path) -> None:
    system = uv_system(tmp_path)
    prefix = old_venv(tmp_path / "envs" / "interrupted")

    def interrupt(step: object) -> None:
        if "install" in str(getattr(step, "title", "")):
            os.kill(os.getpid(), signal.SIGINT)  # a real signal, not a raised exception

    with pytest.raises(KeyboardInterrupt):
        execute(system, uv_install(system, prefix), force=True, on_step=interrupt)
    assert (prefix / "share" / "old.txt").read_text() == "the old environment"
    assert sorted(p.name for p in prefix.parent.iterdir()) == ["interrupted"]


def test_a_left_over_backup_is_put_back_when_the_name_is_free(tmp_path: Path) -> None:
    system = uv_system(tmp_path)
    prefix = tmp_path / "envs" / "pt"
    backup = old_venv(tmp_path / "envs" / ".pt.envkit-old-1700000000")
    notes: list[str] = []
    with pytest.raises(InputError, match="already exists"):
        execute(system, uv_install(system, prefix), on_note=notes.append)
    assert notes == [f"restored {prefix} from {backup}, left by an interrupted envkit create"]
    assert (prefix / "share" / "old.txt").read_text() == "the old environment"
    assert not backup.exists()


def test_a_left_over_backup_beside_a_present_env_is_refused_with_the_commands(tmp_path: Path) -> None:
    system = uv_system(tmp_path)
    prefix = tmp_path / "envs" / "pt"
    (prefix / "bin").mkdir(parents=True)  # what a killed installer left
    backup = old_venv(tmp_path / "envs" / ".pt.envkit-old-1700000000")
    with pytest.raises(
        InputError, match="an interrupted envkit create left the previous environment"
    ) as info:
        execute(system, uv_install(system, prefix), force=True)
    assert info.value.hint.endswith(f"rm -rf {prefix} && mv {backup} {prefix}")
    assert f"rm -rf {backup}" in info.value.hint
    assert (backup / "share" / "old.txt").exists() and (prefix / "bin").is_dir()
    # The command it gives works, and then create goes ahead.
    subprocess.run(info.value.hint.rsplit(": ", 1)[1], shell=True, check=True)
    assert (prefix / "share" / "old.txt").exists()
    execute(system, uv_install(system, prefix), force=True)
    assert (prefix / MARKER).is_file() and not (prefix / "share" / "old.txt").exists()


def test_a_killed_runs_trash_and_staging_are_removed(tmp_path: Path) -> None:
    system = uv_system(tmp_path)
    prefix = tmp_path / "envs" / "pt"
    for side in (".pt.envkit-trash-1700000000", ".pt.envkit-spec"):
        (tmp_path / "envs" / side / "lib").mkdir(parents=True)
    execute(system, uv_install(system, prefix))
    assert side_files(prefix.parent, "pt") == []


# ---------------------------------------------------------------- signals wait while things are put back


def test_deferred_signals_arrive_once_afterwards() -> None:
    reached: list[str] = []

    def block() -> None:
        with deferred_signals():
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)  # a second Ctrl-C changes nothing
            time.sleep(0.05)
            reached.append("the end of the block")

    with pytest.raises(KeyboardInterrupt):
        block()
    assert reached == ["the end of the block"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# ---------------------------------------------------------------- a read-only file system


def _readonly_mount_works(where: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount --bind {where} {where} && mount -o remount,bind,ro {where}"],
        capture_output=True,
        timeout=10,
    )
    return probe.returncode == 0


@pytest.mark.parametrize("below", ["env", "new/deeper/env"])
def test_create_onto_a_read_only_file_system(tmp_path: Path, below: str) -> None:
    ro = tmp_path / "ro"
    (ro / "keep").mkdir(parents=True)
    (ro / "keep" / "data.txt").write_text("untouched")
    if not _readonly_mount_works(ro):
        pytest.skip("no user+mount namespace here (unshare -rm) to make a read-only file system")
    before = tree_digest(ro)
    standin_uv(tmp_path / "bin")
    argv = [sys.executable, "-m", "envkit", "create", "x", "--prefix", str(ro / below), *CLI_FLAGS]
    script = f'mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} && exec "$@"'
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, "sh", *argv],
        capture_output=True,
        text=True,
        env=cli_env(tmp_path, tmp_path / "bin"),
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    text = " ".join(proc.stderr.split())
    assert f"cannot create {ro / below}: Read-only file system" in text
    assert "writable file system" in text and "Traceback" not in text
    assert tree_digest(ro) == before
