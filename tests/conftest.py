"""Shared test seams: stand-in programs (real executables that print recorded output), fake
machine roots, recorded NVML, and a System that ties them together."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, Callable, Optional

import pytest

import envkit.knowledge._table as table
from envkit import _proc
from envkit.detect.nvml import NvmlError, RecordedNvml
from envkit.knowledge import load_knowledge
from envkit.system import System

DATA = Path(__file__).parent / "data"


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """The whole default suite runs on up to 4 pytest-xdist workers (2 on the 2-core CI machine:
    ~50 s instead of ~86 s, a third of the suite waits on real timeouts). Not when files or folders
    are named (one process starts faster), nor for -m slow (the end-to-end job runs serially: real
    venvs, torchrun and signal tests that read /proc), nor with -n given, --pdb, or one CPU.

    Never in a worker: xdist runs this hook in each worker too, and a worker that started workers of
    its own would do so without end. ENVKIT_TESTS_XDIST, set here and inherited by the workers, says
    so even where ``workerinput`` would not."""
    if hasattr(config, "workerinput") or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if os.environ.get("ENVKIT_TESTS_XDIST"):
        return
    affinity = getattr(os, "sched_getaffinity", None)
    cpus = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
    if (
        not config.pluginmanager.hasplugin("xdist")
        or config.getoption("numprocesses", None) is not None
        or config.args_source is not pytest.Config.ArgsSource.TESTPATHS
        or config.getoption("markexpr", "") != "not slow"
        or config.getoption("usepdb", False)
        or cpus < 2
    ):
        return
    os.environ["ENVKIT_TESTS_XDIST"] = "1"
    config.option.numprocesses = min(cpus, 4)


def pytest_configure(config: pytest.Config) -> None:
    _bytecode_outside_the_tree()


def _bytecode_outside_the_tree() -> None:
    """Where PYTHONDONTWRITEBYTECODE is set (this machine kind sets it), pytest rewrites the asserts of
    every test module on every run and each ``python -m envkit`` a test starts compiles envkit from
    source: ~3-6 s of a run of the default suite. The compiled files go to a folder of this user's
    outside the tree instead (sys.pycache_prefix, PYTHONPYCACHEPREFIX for the children), so the tree
    stays free of __pycache__ as the setting wants. ENVKIT_TESTS_NO_PYCACHE=1 turns this off."""
    if not sys.dont_write_bytecode or sys.pycache_prefix or os.environ.get("ENVKIT_TESTS_NO_PYCACHE"):
        return
    getuid = getattr(os, "getuid", None)
    if getuid is None:
        return
    folder = Path(tempfile.gettempdir()) / f"envkit-tests-pycache-{getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()
    except OSError:
        return
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != getuid() or info.st_mode & 0o077:
        return  # not this user's alone: never load bytecode someone else could have written
    sys.pycache_prefix = str(folder)
    sys.dont_write_bytecode = False
    os.environ["PYTHONPYCACHEPREFIX"] = str(folder)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def torch_collect_env() -> ModuleType:
    """torch's own ``torch/utils/collect_env.py`` (the formatter of the pastes people post), loaded from
    the installed torch without importing torch itself: importing torch into pytest costs ~3 s, and
    the formatter (SystemEnv, pretty_str) does not use it. Skips where torch is not installed."""
    global _COLLECT_ENV
    if _COLLECT_ENV is not None:
        return _COLLECT_ENV
    if "torch" in sys.modules:  # already paid for: the real module
        import torch.utils.collect_env as real

        _COLLECT_ENV = real
        return real
    spec = importlib.util.find_spec("torch")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torch is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "utils" / "collect_env.py"
    loader_spec = importlib.util.spec_from_file_location("envkit_tests_torch_collect_env", path)
    assert loader_spec is not None and loader_spec.loader is not None
    module = importlib.util.module_from_spec(loader_spec)
    # Its `try: import torch` fails while it loads; then it gets what its formatter asks of torch
    # (pretty_str: torch.cuda.is_available(), to print "No CUDA"), as the CPU test wheel answers it.
    # Its probing functions (get_env_info) would fail loudly on the stand-in: they read this machine.
    sys.modules["torch"] = None  # type: ignore[assignment]
    try:
        loader_spec.loader.exec_module(module)
    finally:
        del sys.modules["torch"]
    module.torch = SimpleNamespace(cuda=SimpleNamespace(is_available=lambda: False))  # type: ignore[attr-defined]
    module.TORCH_AVAILABLE = True  # type: ignore[attr-defined]
    _COLLECT_ENV = module
    return module


_COLLECT_ENV: Optional[ModuleType] = None


def write_program(
    folder: Path, name: str, stdout: str = "", *, rc: int = 0, sleep: float = 0, stderr: str = ""
) -> Path:
    """A real executable that prints ``stdout`` (and ``stderr``), sleeps, then exits with ``rc``."""
    folder.mkdir(parents=True, exist_ok=True)
    out_file = folder / f".{name}.stdout"
    err_file = folder / f".{name}.stderr"
    out_file.write_text(stdout, encoding="utf-8")
    err_file.write_text(stderr, encoding="utf-8")
    script = folder / name
    lines = [
        "#!/bin/sh",
        f"cat {shlex.quote(str(out_file))}",
        f"cat {shlex.quote(str(err_file))} >&2",
    ]
    if sleep:
        lines.append(f"sleep {sleep}")
    lines.append(f"exit {rc}")
    script.write_text("\n".join(lines) + "\n", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


def write_file(root: Path, absolute: str, text: str) -> Path:
    path = root / absolute.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def no_nvml() -> RecordedNvml:
    return RecordedNvml({"init_error": "LibraryNotFound"})


def recorded(name: str) -> dict[str, Any]:
    with (DATA / "nvml" / f"{name}.json").open(encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


class MachineBuilder:
    """A fake machine: a root folder, a bin folder on PATH, environment and NVML answers."""

    def __init__(self, base: Path) -> None:
        self.root = base / "root"
        self.bin = base / "bin"
        self.root.mkdir()
        self.bin.mkdir()
        self.env: dict[str, str] = {"PATH": f"{self.bin}:/usr/bin:/bin", "HOME": str(base / "home")}
        self.nvml: Callable[[], Any] = no_nvml

    def program(self, name: str, stdout: str = "", **kwargs: Any) -> Path:
        return write_program(self.bin, name, stdout, **kwargs)

    def file(self, absolute: str, text: str) -> Path:
        return write_file(self.root, absolute, text)

    def nvml_data(self, data: dict[str, Any]) -> None:
        self.nvml = lambda: RecordedNvml(data)

    def system(self, **overrides: Any) -> System:
        return System(env=self.env, root=self.root, nvml=self.nvml, **overrides)


@pytest.fixture
def machine(tmp_path: Path) -> MachineBuilder:
    return MachineBuilder(tmp_path)


@pytest.fixture
def cli_machine(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> MachineBuilder:
    """The in-process CLI (typer's CliRunner) sees a fake machine instead of this one: no driver, no
    GPU, no toolkit, and the test interpreter as ``python`` on PATH. Add to it before invoking."""
    import dataclasses

    import envkit.system

    built = MachineBuilder(tmp_path_factory.mktemp("cli-machine"))
    (built.bin / "python").symlink_to(sys.executable)

    # The CLI's commands import System when they run and call System() for "this machine": a
    # subclass whose defaults are the fake machine (built.nvml is read when System() is called).
    @dataclasses.dataclass(frozen=True)
    class FakeMachine(System):
        env: Mapping[str, str] = dataclasses.field(default_factory=lambda: dict(built.env))
        root: Path = built.root
        nvml: Optional[Callable[[], Any]] = dataclasses.field(default_factory=lambda: built.nvml)

    monkeypatch.setattr(envkit.system, "System", FakeMachine)
    return built


@pytest.fixture
def python_exe() -> str:
    return sys.executable


def examples(fast: int, slow: int) -> pytest.MarkDecorator:
    """Run a property test (see ``check_property``) with ``fast`` examples in the default suite and
    ``slow`` examples under ``-m slow``: the long run moves to CI's slow job, a short one stays."""
    return pytest.mark.parametrize(
        "max_examples",
        [
            pytest.param(fast, id=f"{fast}-examples"),
            pytest.param(slow, id=f"{slow}-examples", marks=pytest.mark.slow),
        ],
    )


def check_property(max_examples: int, body: Callable[..., None], *strategies: Any, **overrides: Any) -> None:
    """Run ``body`` under hypothesis with these strategies and ``max_examples`` examples (built afresh
    each call: a settings object cannot be applied twice to the same test)."""
    from hypothesis import HealthCheck, given, settings

    options: dict[str, Any] = {
        "max_examples": max_examples,
        "deadline": None,
        "suppress_health_check": [HealthCheck.too_slow],
        **overrides,
    }
    settings(**options)(given(*strategies)(body))()


def raise_nvml(name: str) -> Callable[[], Any]:
    def factory() -> Any:
        raise NvmlError(name, "replayed")

    return factory


def _app_shape(app: Any) -> tuple[Any, ...]:
    """What typer builds a click command from: the app's commands, groups and callback (by identity,
    so a test that registers a command of its own gets a fresh build)."""
    callback = app.registered_callback
    return (
        id(app),
        tuple((c.name, id(c.callback)) for c in app.registered_commands),
        tuple((g.name, _app_shape(g.typer_instance)) for g in app.registered_groups),
        None if callback is None else id(callback.callback),
    )


@pytest.fixture(autouse=True, scope="session")
def _cli_built_once() -> Iterator[None]:
    # typer's CliRunner.invoke builds the whole click command tree from the app on every call
    # (typer.main.get_command: ~0.1 s for envkit's commands, several hundred invocations in the suite);
    # the tree is the same each time, so it is built once per shape of the app. The real CLI builds
    # it once per process, as before.
    import typer.main
    import typer.testing

    built: dict[tuple[Any, ...], tuple[Any, Any]] = {}
    get_command = typer.main.get_command

    def cached(app: Any) -> Any:
        key = _app_shape(app)
        if key not in built:
            built[key] = (app, get_command(app))  # the app is kept so that its id is not reused
        return built[key][1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(typer.testing, "_get_command", cached)
        yield


@pytest.fixture(autouse=True)
def _no_user_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # Crash logs and caches go to a temporary folder, never to the developer's home.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def make_venv(folder: Path) -> Path:
    """A real virtual environment without pip (fast); returns its site-packages folder.

    venv's own EnvBuilder in this process, as ``python -m venv --without-pip`` runs it (symlinks
    on POSIX, its default there): the same files, without an interpreter start (~4 ms, not ~0.2 s;
    ~30 tests make one)."""
    import venv

    venv.EnvBuilder(with_pip=False, symlinks=os.name != "nt").create(str(folder))
    (site,) = folder.glob("lib/python*/site-packages")
    return site


def add_dist(site: Path, name: str, version: str) -> None:
    """Install the metadata of a distribution (no code) into ``site``."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def add_fake_torch(
    site: Path, version: str, *, cuda: str | None, init: str = "", dist_version: str | None = None
) -> Path:
    """A torch package with a real version.py as the wheels ship it, and optional __init__ code.
    ``dist_version``: the metadata's version where it differs (PyPI's wheels drop the local tag)."""
    add_dist(site, "torch", dist_version or version)
    pkg = site / "torch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(init)
    cuda_text = repr(cuda)
    (pkg / "version.py").write_text(
        "from typing import Optional\n\n"
        "__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'xpu']\n"
        f"__version__ = '{version}'\n"
        "debug = False\n"
        f"cuda: Optional[str] = {cuda_text}\n"
        "git_version = 'a8d6afb511a69687bbb2b7e88a3cf67917e1697e'\n"
        "hip: Optional[str] = None\n"
        "xpu: Optional[str] = None\n"
    )
    return pkg


@pytest.fixture
def data_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the knowledge base's TOML files that load_knowledge() reads instead (edit freely)."""
    for path in table.DATA_DIR.glob("*.toml"):
        shutil.copy(path, tmp_path / path.name)
    monkeypatch.setattr(table, "DATA_DIR", tmp_path)
    load_knowledge.cache_clear()
    yield tmp_path
    load_knowledge.cache_clear()


# --- Guards: no test spawns the host's own tools by accident -------------------------------------
#
# Every child envkit starts goes through envkit._proc.run, which starts it in _proc._spawn; the guards
# wrap that one function, so they also catch System's default runner (bound when the class was made).
#
# - host_tools_guard (autouse for tests/unit): a program outside the test's temporary folders, the
#   test interpreter's prefix (python, its venv's tools) and the repository, and not a plain POSIX
#   utility (sh, sleep, ...), is refused: a detector that finds the host's nvcc, nvidia-smi, ldconfig
#   or conda makes the test depend on this machine. Opt out with @pytest.mark.host_tools.
# - no_real_processes (autouse in the test folders of the packages whose code never runs a process,
#   PURE_PACKAGES: checks, knowledge, resolve, specs, fleet): any child at all is refused. Opt out
#   with @pytest.mark.real_processes.
#
# host_tools_guard also keeps tests/unit offline (OFFLINE_PROXY); @pytest.mark.host_tools lifts it too.
#
# A refused start raises HostProcessError where it happens and, since a detector may turn that into a
# note, fails the test at teardown too, naming the program.

# Utilities that behave the same on every POSIX machine; tests use them as tiny real children.
POSIX_UTILITIES = frozenset(
    {"sh", "bash", "sleep", "cat", "true", "false", "yes", "echo", "env", "kill", "timeout", "printf"}
)
REPO = Path(__file__).resolve().parents[1]
# Nothing listens on the discard port: a request through this proxy is refused at once.
OFFLINE_PROXY = "http://127.0.0.1:9"
# The test folders of envkit's packages whose code never runs a process (no_real_processes is autouse).
PURE_PACKAGES = frozenset({"checks", "knowledge", "resolve", "specs", "fleet"})


class HostProcessError(AssertionError):
    """A test made envkit start a process it may not start (see the guards above)."""


def _program(argv0: str, env: Optional[Mapping[str, str]]) -> Optional[str]:
    if os.sep in argv0:
        return os.path.abspath(argv0) if os.path.exists(argv0) else None
    path = (env if env is not None else os.environ).get("PATH", os.defpath)
    return shutil.which(argv0, path=path)


def _within(path: str, folders: tuple[str, ...]) -> bool:
    return any(path == f or path.startswith(f.rstrip(os.sep) + os.sep) for f in folders)


def host_allows(program: Optional[str], basetemp: str) -> bool:
    """Whether host_tools_guard lets envkit start ``program`` (a resolved path; None: not found)."""
    if program is None:  # not found: _proc reports it without starting anything
        return True
    folders = (
        basetemp,
        os.path.abspath(sys.prefix),
        str(REPO),
        # Stand-ins outside pytest's basetemp: tempfile.mkdtemp() in a test.
        os.path.abspath(os.environ.get("TMPDIR", "/tmp")),
    )
    executables = {
        os.path.realpath(sys.executable),
        os.path.realpath(getattr(sys, "_base_executable", sys.executable)),
    }
    if _within(program, folders) or os.path.realpath(program) in executables:
        return True
    return os.path.basename(program) in POSIX_UTILITIES


def _guard_spawn(
    monkeypatch: pytest.MonkeyPatch, allowed: Callable[[tuple[str, ...], Optional[str]], bool], why: str
) -> list[str]:
    refused: list[str] = []
    spawn = _proc._spawn

    def guarded(args: tuple[str, ...], env: Optional[Mapping[str, str]], *rest: Any) -> Any:
        current = _proc._SCOPE.get()
        if _proc._CLOSED or (current is not None and current.cancelled):
            # _spawn starts nothing here ("not started: ... was abandoned"): a detector thread an
            # earlier test gave up on, still running, is no process of this test.
            return spawn(args, env, *rest)
        program = _program(args[0], env) if args else None
        if not allowed(args, program):
            shown = " ".join(args)[:200]
            refused.append(f"{shown} ({program or 'not found'})")
            raise HostProcessError(f"{why}: {shown}")
        return spawn(args, env, *rest)

    monkeypatch.setattr(_proc, "_spawn", guarded)
    return refused


def _fail_if(refused: list[str], why: str, marker: str) -> None:
    if refused:
        pytest.fail(f"{why} (mark the test @pytest.mark.{marker} if it must): " + "; ".join(refused))


@pytest.fixture
def no_real_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """envkit may start no process at all during the test."""
    why = "this test may start no process"
    refused = _guard_spawn(monkeypatch, lambda args, program: False, why)
    yield
    _fail_if(refused, why, "real_processes")


@pytest.fixture(autouse=True)
def host_tools_guard(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """envkit may start only stand-ins (under the test's temporary folders), the test interpreter and
    its environment's tools, the repository's own files and POSIX utilities; never the host's tools."""
    try:
        where = request.node.path.relative_to(REPO / "tests" / "unit").parts
    except ValueError:  # tests/integration: end-to-end on this machine by design
        where = None
    if where is None or request.node.get_closest_marker("host_tools"):
        yield
        return
    # Offline: HTTP(S) requests (envkit's urllib opener, pip and uv in children) go through a proxy on
    # a closed local port, so none reaches the internet; 127.0.0.1 (the tests' servers) stays direct.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, OFFLINE_PROXY)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, "127.0.0.1,localhost,::1")
    if where[0] in PURE_PACKAGES and not request.node.get_closest_marker("real_processes"):
        request.getfixturevalue("no_real_processes")
        yield
        return
    basetemp = str(tmp_path_factory.getbasetemp())

    def allowed(args: tuple[str, ...], program: Optional[str]) -> bool:
        return host_allows(program, basetemp)

    why = "this test started a program of the host"
    refused = _guard_spawn(monkeypatch, allowed, why)
    yield
    _fail_if(refused, why, "host_tools")
