"""envkit create: the exact commands of every backend, refusal to touch an existing environment,
and all-or-nothing on failure (real venvs, real pip)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Optional

import pytest

from envkit.commands.create import prepare
from envkit.create.install import CreateFailed, execute
from envkit.create.prepare import CreateRequest
from envkit.errors import InputError
from envkit.resolve.plan import PlanFlags
from envkit.system import System
from tests.conftest import write_program

CPU_213 = PlanFlags(torch="2.13.0", cuda="cpu", python="3.11", platform="linux-x86_64", no_gpu=True)
GPU_550 = PlanFlags(driver="550.54.15", gpus=("sm_80",), python="3.11", platform="linux-x86_64")


def fake_tools(tmp_path: Path, *names: str) -> System:
    """A System whose PATH has stand-in installers (and this interpreter as python3.11)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        write_program(bin_dir, name, "")
    (bin_dir / "python3.11").symlink_to(sys.executable)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "ENVKIT_ENVS_DIR": str(tmp_path / "envs"),
    }
    return System(env=env)


@pytest.mark.parametrize(
    ("backend", "verb"),
    [
        ("conda", "env create"),
        ("mamba", "env create"),
        ("micromamba", "create --yes"),
    ],
)
def test_conda_family_dry_run_commands(tmp_path: Path, backend: str, verb: str) -> None:
    system = fake_tools(tmp_path, backend)
    prefix = tmp_path / "envs" / "pt2"
    install = prepare(system, CreateRequest(name="pt2", prefix=str(prefix), flags=GPU_550, backend=backend))
    exe = tmp_path / "bin" / backend
    spec = tmp_path / "envs" / ".pt2.envkit-spec" / "environment.yml"
    assert [s.shown() for s in install.steps] == [f"{exe} {verb} --prefix {prefix} --file {spec}"]
    assert install.backend == backend
    env_yml = install.spec_files["environment.yml"]
    # The newest conda-forge build for driver 550 (CUDA 12.4): which release that is, is the knowledge
    # base's business (tests/unit/resolve/test_resolve.py); here the spec installs the plan's build.
    cuda = install.plan.cuda
    assert cuda is not None and install.plan.variant == f"cu{cuda.major}{cuda.minor}"
    assert f"pytorch={install.plan.torch}={install.plan.variant.replace('cu', 'cuda')}*" in env_yml
    assert f"cuda-version={cuda}" in env_yml


def test_conda_route_for_cuda_12_1_is_the_pytorch_channel(tmp_path: Path) -> None:
    system = fake_tools(tmp_path, "micromamba")
    flags = PlanFlags(
        driver="550.54.15", gpus=("sm_80",), python="3.11", platform="linux-x86_64", cuda="12.1"
    )
    install = prepare(
        system, CreateRequest(name="old", prefix=str(tmp_path / "old"), flags=flags, backend="micromamba")
    )
    env_yml = install.spec_files["environment.yml"]
    assert "pytorch-cuda=12.1" in env_yml
    assert "- pytorch\n" in env_yml and "- nvidia\n" in env_yml


@pytest.mark.parametrize("backend", ["venv", "micromamba", "rattler"])
def test_the_activate_line_pastes_into_a_shell(tmp_path: Path, backend: str) -> None:
    """A prefix with a space: 'conda activate /x/my env' activated /x/my (and failed on env)."""
    import shlex

    from envkit.commands.create import Created

    system = fake_tools(tmp_path, "micromamba")
    prefix = tmp_path / "my env ü"
    flags = CPU_213 if backend == "venv" else GPU_550
    install = prepare(system, CreateRequest(prefix=str(prefix), flags=flags, backend=backend))
    words = shlex.split(Created(install, None).activate.partition(" (")[0])
    assert words == (
        ["source", f"{prefix}/bin/activate"] if backend == "venv" else ["conda", "activate", str(prefix)]
    )
    if backend == "rattler":
        assert shlex.split(Created(install, None).activate)[-1] == f"PATH={prefix}/bin:$PATH)"


def test_venv_and_uv_dry_run_commands(tmp_path: Path) -> None:
    system = fake_tools(tmp_path, "uv")
    prefix = tmp_path / "envs" / "pt2"
    uv = prepare(system, CreateRequest(name="pt2", flags=CPU_213, backend="uv"))
    assert [s.shown() for s in uv.steps] == [
        f"{tmp_path}/bin/uv venv {prefix} --seed --python 3.11",
        (
            f"{tmp_path}/bin/uv pip install --python {prefix}/bin/python torch==2.13.0+cpu torchvision==0.28.0 "
            "torchaudio==2.11.0 --index-url https://download.pytorch.org/whl/cpu"
        ),
    ]
    venv = prepare(
        system, CreateRequest(name="pt2-train", flags=CPU_213, backend="venv", wheelhouse=str(tmp_path))
    )
    prefix = tmp_path / "envs" / "pt2-train"
    shown = [s.shown() for s in venv.steps]
    assert shown[0] == f"{tmp_path}/bin/python3.11 -m venv {prefix}"
    assert shown[1].endswith(f"--index-url https://download.pytorch.org/whl/cpu --find-links {tmp_path}")
    assert shown[2].startswith(
        f"{prefix}/bin/python -m pip install 'lightning>=2.2' 'torchmetrics>=1.3' 'tensorboard>=2.15' --constraint "
    )
    assert (
        venv.spec_files["constraints.txt"] == "torch==2.13.0+cpu\ntorchvision==0.28.0\ntorchaudio==2.11.0\n"
    )


def test_torch_installs_from_where_the_written_spec_says(tmp_path: Path) -> None:
    """create runs the spec's decision (envkit.specs.pip.pip_source), with the real credentials."""
    system = fake_tools(tmp_path)
    # A torch mirror other than pytorch's: PyPI beside it for the nvidia-* dependencies, as in the spec.
    sjtu = prepare(system, CreateRequest(name="a", flags=CPU_213, backend="venv", mirrors=("sjtu",)))
    assert sjtu.steps[1].argv[-4:] == (
        "--index-url",
        "https://mirror.sjtu.edu.cn/pytorch-wheels/cpu",
        "--extra-index-url",
        "https://pypi.org/simple",
    )
    assert "--extra-index-url https://pypi.org/simple\n" in sjtu.spec_files["requirements.txt"]
    # Only a PyPI mirror, and PyPI's torch of this release is the planned build: torch from the mirror.
    flags = PlanFlags(
        torch="2.8.0",
        cuda="12.8",
        driver="580.65.06",
        gpus=("sm_90",),
        python="3.11",
        platform="linux-x86_64",
    )
    tuna = prepare(system, CreateRequest(name="b", flags=flags, backend="venv", mirrors=("tuna",)))
    assert tuna.steps[1].argv[4:] == (
        "torch==2.8.0",
        "torchvision==0.23.0",
        "torchaudio==2.8.0",
        "--index-url",
        "https://pypi.tuna.tsinghua.edu.cn/simple",
    )
    assert tuna.spec_files["constraints.txt"].startswith("torch==2.8.0\n")
    # Credentials reach the installer, never the files or what is shown ...
    private = ("https://me:s3cret@wheels.example.org/whl", "pypi=https://u:p@pypi.example.org/simple")
    own = prepare(system, CreateRequest(name="c", flags=CPU_213, backend="venv", mirrors=private))
    # ... through the installer's environment, not its argv (which `ps` shows everybody).
    assert "--index-url" not in own.steps[1].argv and "s3cret" not in " ".join(own.steps[1].argv)
    assert dict(own.steps[1].env) == {"PIP_INDEX_URL": "https://me:s3cret@wheels.example.org/whl/cpu"}
    assert own.steps[1].shown().startswith("PIP_INDEX_URL=https://***@wheels.example.org/whl/cpu ")
    assert "s3cret" not in own.steps[1].shown() + repr(own.steps[1])
    assert not any("s3cret" in text for text in own.spec_files.values())


def test_auto_backend(tmp_path: Path) -> None:
    assert prepare(fake_tools(tmp_path / "a", "uv"), CreateRequest(name="x", flags=CPU_213)).backend == "uv"
    assert prepare(fake_tools(tmp_path / "b"), CreateRequest(name="x", flags=CPU_213)).backend == "venv"


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (CreateRequest(flags=CPU_213), "give the environment a NAME or a --prefix PATH"),
        (CreateRequest(name="x", flags=CPU_213, offline=True), "--offline needs --wheelhouse"),
        (
            CreateRequest(name="x", flags=CPU_213, backend="conda"),
            "--backend conda: `conda` is not installed",
        ),
        (CreateRequest(name="x", flags=CPU_213, backend="pixi"), "--backend 'pixi': one of"),
        (
            CreateRequest(name="x", flags=CPU_213, wheelhouse="/nonexistent"),
            "--wheelhouse /nonexistent: not a folder",
        ),
    ],
)
def test_bad_requests(tmp_path: Path, request_: CreateRequest, message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        prepare(fake_tools(tmp_path), request_)


def test_an_existing_environment_is_never_touched(tmp_path: Path) -> None:
    system = fake_tools(tmp_path)
    prefix = tmp_path / "taken"
    prefix.mkdir()
    (prefix / "keep.txt").write_text("mine")
    install = prepare(system, CreateRequest(prefix=str(prefix), flags=CPU_213, backend="venv"))
    with pytest.raises(InputError, match="already exists; envkit never touches an existing environment"):
        execute(system, install)
    assert (prefix / "keep.txt").read_text() == "mine"


def broken_wheelhouse(folder: Path) -> Path:
    """A wheelhouse that holds the planned torch by name (so the plan fits it) but whose wheel is no
    zip: pip, offline, then fails for real with its own ERROR line."""
    folder.mkdir()
    (folder / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"not a zip")
    return folder


@pytest.mark.slow  # a real venv with ensurepip (~6 s); tests/unit/create/test_create_safety.py has fast stand-ins
def test_a_failed_install_leaves_nothing_behind(tmp_path: Path) -> None:
    system = fake_tools(tmp_path)
    wheelhouse = broken_wheelhouse(tmp_path / "broken-wheelhouse")
    prefix = tmp_path / "envs" / "doomed"
    install = prepare(
        system,
        CreateRequest(
            prefix=str(prefix), flags=CPU_213, backend="venv", wheelhouse=str(wheelhouse), offline=True
        ),
    )
    with pytest.raises(CreateFailed) as info:
        execute(system, install)
    assert "install torch 2.13.0+cpu failed" in info.value.message
    assert "exited with 1" in info.value.message
    assert "ERROR: " in info.value.message.split("\n", 1)[1]  # pip's last lines follow the summary
    assert not prefix.exists()
    assert not install.staging.exists()
    assert f"removed the half-made {prefix}" in info.value.hint


@pytest.mark.slow  # a real venv with ensurepip (~6 s)
def test_force_puts_the_old_environment_back_when_the_new_one_fails(tmp_path: Path) -> None:
    system = fake_tools(tmp_path)
    prefix = tmp_path / "envs" / "precious"
    prefix.mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")  # an environment: what --force may replace
    (prefix / "share").mkdir()
    (prefix / "share" / "old.txt").write_text("old env")
    install = prepare(
        system,
        CreateRequest(
            prefix=str(prefix),
            flags=CPU_213,
            backend="venv",
            wheelhouse=str(broken_wheelhouse(tmp_path / "broken-wheelhouse")),
            offline=True,
        ),
    )
    with pytest.raises(CreateFailed):
        execute(system, install, force=True)
    assert (prefix / "share" / "old.txt").read_text() == "old env"
    assert [p.name for p in prefix.parent.iterdir()] == ["precious"]  # no backup left behind


@pytest.mark.slow  # a real venv with ensurepip (~6 s)
def test_ctrl_c_cleans_up(tmp_path: Path) -> None:
    system = fake_tools(tmp_path)
    prefix = tmp_path / "envs" / "interrupted"
    install = prepare(system, CreateRequest(prefix=str(prefix), flags=CPU_213, backend="venv"))

    def interrupt(step: object) -> None:
        if "install" in str(getattr(step, "title", "")):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute(system, install, on_step=interrupt)
    assert not prefix.exists()


def test_cli_dry_run_json(tmp_path: Path) -> None:
    import subprocess

    env = {**os.environ, "ENVKIT_ENVS_DIR": str(tmp_path)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "envkit",
            "create",
            "demo",
            "--dry-run",
            "--json",
            "--backend",
            "venv",
            "--torch",
            "2.13.0",
            "--cuda",
            "cpu",
            "--no-gpu",
            "--python",
            "3.11",
            "--platform",
            "linux-x86_64",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["schema"] == "envkit.create/1"
    assert data["status"] == "dry-run"
    assert data["prefix"] == str(tmp_path / "demo")
    assert not (tmp_path / "demo").exists()  # a dry run changes nothing


# Credentials: in the installer's environment, never on its argv, in a message or in JSON ----------

TOKEN = "tok-9f3a7c"


class _Index(ThreadingHTTPServer):
    """A private index on 127.0.0.1 behind basic auth: it records the Authorization headers."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _IndexHandler)
        self.authorization: list[Optional[str]] = []

    @property
    def url(self) -> str:
        return f"http://user:{TOKEN}@127.0.0.1:{self.server_address[1]}/simple"


class _IndexHandler(BaseHTTPRequestHandler):
    server: _Index

    def do_GET(self) -> None:
        self.server.authorization.append(self.headers.get("Authorization"))
        wanted = "Basic " + base64.b64encode(f"user:{TOKEN}".encode()).decode()
        self.send_response(404 if self.headers.get("Authorization") == wanted else 401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def private_index(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Index]:
    for var in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    server = _Index()
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


# A stand-in uv: it records its argv and the index variables, asks the index for torch with the
# credentials of UV_INDEX_URL (as uv would), then fails echoing the URL, as installers do.
STAND_IN_UV = """\
import base64, json, os, sys, urllib.error, urllib.parse, urllib.request
with open(os.environ["RECORD"], "a") as fh:
    fh.write(json.dumps({"argv": sys.argv, "cmdline": open("/proc/self/cmdline").read(),
                         "env": {k: v for k, v in os.environ.items() if k.startswith(("UV_", "PIP_"))}}) + "\\n")
if sys.argv[1] == "venv":
    os.makedirs(os.path.join(sys.argv[2], "bin"))
    sys.exit(0)
url = os.environ.get("UV_INDEX_URL", "")
parts = urllib.parse.urlsplit(url)
request = urllib.request.Request(urllib.parse.urlunsplit(parts._replace(netloc=parts.hostname + ":" + str(parts.port))) + "/torch/")
if parts.username:
    login = base64.b64encode((parts.username + ":" + parts.password).encode()).decode()
    request.add_header("Authorization", "Basic " + login)
try:
    urllib.request.urlopen(request, timeout=10)
except urllib.error.HTTPError as exc:
    print("error: %s/torch/ answered %d: no matching distribution for torch" % (url, exc.code))
sys.exit(1)
"""


def _envkit(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envkit", *args], capture_output=True, text=True, env=env, timeout=120
    )


# PyPI's torch 2.8.0 is the cu128 build: a PyPI mirror (``…/simple``) serves torch itself.
PYPI_TORCH_FLAGS = (
    "--torch",
    "2.8.0",
    "--cuda",
    "12.8",
    "--driver",
    "580.65.06",
    "--gpu",
    "sm_90",
    "--python",
    "3.11",
    "--platform",
    "linux-x86_64",
)


@pytest.mark.slow  # three real envkit runs (~3 s); test_redact's properties cover the hiding in-process
def test_mirror_credentials_reach_the_installer_only_through_its_environment(
    tmp_path: Path, private_index: _Index
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    uv = bin_dir / "uv"
    uv.write_text(f"#!{sys.executable}\n{STAND_IN_UV}", encoding="utf-8")
    uv.chmod(0o755)
    record = tmp_path / "record.jsonl"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "ENVKIT_ENVS_DIR": str(tmp_path / "envs"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "RECORD": str(record),
        "NO_PROXY": "127.0.0.1",
    }
    args = (
        "create",
        "private",
        "--backend",
        "uv",
        "--mirror",
        private_index.url,
        "--no-verify",
        *PYPI_TORCH_FLAGS,
    )

    dry = _envkit(*args, "--dry-run", "--json", env=env)
    assert dry.returncode == 0, dry.stderr
    assert TOKEN not in dry.stdout + dry.stderr
    commands = json.loads(dry.stdout)["commands"]
    assert commands[1].startswith(
        f"UV_INDEX_URL=http://***@127.0.0.1:{private_index.server_address[1]}/simple "
    )

    for extra in ((), ("--json",)):
        proc = _envkit(*args, *extra, env=env)
        assert proc.returncode == 4, proc.stderr  # CreateFailed: EXIT_STEP_FAILED
        assert TOKEN not in proc.stdout + proc.stderr
        assert "answered 404" in proc.stderr  # the installer's own lines, redacted
        assert f"http://***@127.0.0.1:{private_index.server_address[1]}/simple/torch/" in proc.stderr
        assert not (tmp_path / "envs" / "private").exists()
    runs = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    installs = [r for r in runs if r["argv"][1:3] == ["pip", "install"]]
    assert len(installs) == 2
    for run in installs:
        # What `ps` shows (the argv, /proc/PID/cmdline) has no credentials; the environment has them.
        assert TOKEN not in " ".join(run["argv"]) and TOKEN not in run["cmdline"]
        assert "--index-url" not in run["argv"]
        assert run["env"]["UV_INDEX_URL"] == private_index.url
    # The index got them from the installer's environment.
    assert private_index.authorization == ["Basic " + base64.b64encode(f"user:{TOKEN}".encode()).decode()] * 2


@pytest.mark.slow  # a real venv with ensurepip (~6 s), then real pip against the index
def test_real_pip_takes_the_credentials_from_pip_index_url(tmp_path: Path, private_index: _Index) -> None:
    env = {
        **os.environ,
        "ENVKIT_ENVS_DIR": str(tmp_path / "envs"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "NO_PROXY": "127.0.0.1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    proc = _envkit(
        "create",
        "private",
        "--backend",
        "venv",
        "--mirror",
        private_index.url,
        "--no-verify",
        *PYPI_TORCH_FLAGS,
        env=env,
    )
    assert proc.returncode == 4, proc.stderr  # CreateFailed: EXIT_STEP_FAILED
    assert TOKEN not in proc.stdout + proc.stderr
    assert "install torch 2.8.0+cu128 failed" in proc.stderr
    # pip sent the credentials of PIP_INDEX_URL (they were nowhere else).
    basic = "Basic " + base64.b64encode(f"user:{TOKEN}".encode()).decode()
    assert basic in private_index.authorization


def test_conda_gets_the_spec_files_placeholders_in_its_environment(tmp_path: Path) -> None:
    """environment.yml's pip: section holds ${ENVKIT_PYPI_INDEX_*} (no credentials in files); the
    conda-family installer, whose pip expands them, gets their values in its environment only."""
    template = tmp_path / "mine.toml"
    template.write_text(
        'name = "mine"\ndescription = "mine"\npython = "3.11"\ntorch = ">=2.0"\ncompanions = []\npip_packages = ["einops"]\n',
        encoding="utf-8",
    )
    system = fake_tools(tmp_path, "micromamba")
    mirror = f"pypi=https://alice:{TOKEN}@pypi.corp.example/simple"
    install = prepare(
        system,
        CreateRequest(
            prefix=str(tmp_path / "e"),
            template=str(template),
            flags=GPU_550,
            backend="micromamba",
            mirrors=(mirror,),
        ),
    )
    env_yml = install.spec_files["environment.yml"]
    assert "${ENVKIT_PYPI_INDEX_USERNAME}:${ENVKIT_PYPI_INDEX_PASSWORD}@pypi.corp.example" in env_yml
    (step,) = install.steps
    assert dict(step.env) == {"ENVKIT_PYPI_INDEX_USERNAME": "alice", "ENVKIT_PYPI_INDEX_PASSWORD": TOKEN}
    assert TOKEN not in " ".join(step.argv) + step.shown() + json.dumps(install.to_json())
    assert "alice" not in step.shown()  # a user name is shown as *** too
    # The real installer run: a stand-in micromamba that records what it got.
    record = tmp_path / "got.json"
    (tmp_path / "bin" / "micromamba").write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"json.dump({{'argv': sys.argv, 'env': dict(os.environ)}}, open({str(record)!r}, 'w'))\n"
        "sys.exit(1)\n",
        encoding="utf-8",
    )
    with pytest.raises(CreateFailed) as info:
        execute(system, install)
    got = json.loads(record.read_text(encoding="utf-8"))
    assert got["env"]["ENVKIT_PYPI_INDEX_PASSWORD"] == TOKEN and TOKEN not in " ".join(got["argv"])
    assert got["env"]["PATH"] == system.env["PATH"]  # on top of the System's environment
    assert TOKEN not in info.value.message + info.value.hint
