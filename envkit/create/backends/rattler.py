"""The ``rattler`` backend: a conda environment without a conda binary.

py-rattler (the conda library behind pixi; ``pip install 'torch-envkit[conda]'``) solves the plan's
environment.yml and installs the answer into the prefix. It runs in a child process
(``rattler_worker.py``, through envkit._proc like every installer), so that Ctrl-C, SIGTERM and the
step's timeout stop it like any other installer, and the rollback in envkit.create.install removes
the half-made prefix. An in-process solve would hold the GIL in Rust and could not be cut short.

What the child is given (``rattler-request.json``, kept in ``<prefix>/envkit/`` as a record):

- the channels of environment.yml, each where the user's .condarc says it lives
  (envkit.mirrors.condarc: ``channel_alias``, ``custom_channels``, ``default_channels``; a conda
  ``--mirror`` is already in environment.yml's URLs). URLs with credentials reach the child only
  through its environment (``ENVKIT_RATTLER_CHANNELS``); the file and the shown command hold them
  redacted;
- the specs, channel-qualified ones (``pytorch::pytorch``) pointed at that channel's URL;
- the target's virtual packages: ``__cuda`` from the target driver (or the plan's CUDA, or
  ``CONDA_OVERRIDE_CUDA`` as conda honours it), ``__glibc``, ``__linux``, ``__unix`` and
  ``__archspec`` of this machine.

A ``pip:`` section of environment.yml (the template's pip-only packages) is a second step: the new
environment's pip with those lines as a requirements file (pip expands its ``${VAR}`` credentials
from the environment, as conda's pip step does).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import os
import platform
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Optional

from envkit.create.backends._base import INSTALL_TIMEOUT_S, Job, Laid, Step
from envkit.errors import CreateFailed, EnvkitError, InputError, SolveFailed
from envkit.knowledge import load_knowledge
from envkit.mirrors.condarc import CondaConfig, read_condarc
from envkit.redact import redact
from envkit.specs.conda import SUBDIRS, virtual_packages

if TYPE_CHECKING:
    from collections.abc import Mapping

    from envkit._proc import ProcResult
    from envkit.system import System

__all__ = [
    "HINTS",
    "RATTLER",
    "WORKER",
    "CondaInputs",
    "CondaSetup",
    "Rattler",
    "conda_inputs",
    "host_virtual_packages",
    "rattler_cache",
    "read_result",
]

WORKER: Final = Path(__file__).with_name("rattler_worker.py")
REQUEST_FILE: Final = "rattler-request.json"
PIP_FILE: Final = "pip-requirements.txt"
REQUEST_SCHEMA: Final = "envkit.rattler-request/1"
RESULT_MARKER: Final = "ENVKIT-RATTLER-RESULT"  # the worker's answer lies between two of these lines
CHANNELS_VARIABLE: Final = "ENVKIT_RATTLER_CHANNELS"


@dataclass(frozen=True)
class CondaSetup:
    """What the solve is given, shown by --dry-run and --json (credentials redacted)."""

    channels: tuple[str, ...]
    specs: tuple[str, ...]
    virtual_packages: tuple[tuple[str, str], ...]
    cuda_why: str
    condarc: str  # which .condarc files said where the channels live
    cache: str

    def to_json(self) -> dict[str, Any]:
        return {
            "channels": [redact(c) for c in self.channels],
            "specs": list(self.specs),
            "virtual_packages": dict(self.virtual_packages),
            "virtual_cuda": self.cuda_why,
            "condarc": self.condarc,
            "package_cache": self.cache,
        }


def rattler_cache(env: Mapping[str, str]) -> Path:
    """rattler's cache folder, as rattler finds it: $RATTLER_CACHE_DIR, else the user cache
    folder's rattler/cache ($XDG_CACHE_HOME or ~/.cache; rattler_cache::default_cache_dir)."""
    if env.get("RATTLER_CACHE_DIR"):
        return Path(env["RATTLER_CACHE_DIR"])
    base = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME", "~"), ".cache")
    return Path(base) / "rattler" / "cache"


def host_virtual_packages() -> dict[str, str]:
    """This machine's ``__glibc``, ``__linux`` and ``__archspec`` (conda's own detection reads the
    same: the C library's version, the kernel release's leading numbers, the machine), for the
    environment that is made here. ``__archspec`` is the generic architecture: a microarchitecture
    build (x86_64_v3) is never chosen for a machine that may not run it."""
    found: dict[str, str] = {}
    if sys.platform.startswith("linux"):
        libc = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None
        match = re.match(r"glibc (\d+(?:\.\d+)*)", libc or "")
        if match:
            found["__glibc"] = match.group(1)
        kernel = re.match(r"\d+(?:\.\d+){0,3}", platform.release())
        if kernel:
            found["__linux"] = kernel.group(0)
    machine = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    if arch:
        found["__archspec"] = f"1 {arch}"
    return found


@dataclass(frozen=True)
class CondaInputs:
    """What a solve of an environment.yml is given: its channels where .condarc says they live
    (with any credentials: for the child's environment only), its specs (a channel-qualified one
    pointed at that channel's redacted URL), and its ``pip:`` lines."""

    channels: tuple[str, ...]
    specs: tuple[str, ...]
    pip: tuple[str, ...]
    config: CondaConfig


def conda_inputs(text: str, env: Mapping[str, str]) -> CondaInputs:
    """The solve's inputs from an environment.yml envkit rendered (``nodefaults`` dropped,
    ``defaults`` as .condarc's default_channels)."""
    yaml: Any = importlib.import_module("yaml")
    data = yaml.safe_load(text) or {}
    config = read_condarc(env)
    channels: list[str] = []
    where: dict[str, str] = {}  # channel as written -> its first URL
    for name in (str(c) for c in data.get("channels") or []):
        if name == "nodefaults":
            continue
        urls = config.channel_urls(name)
        where[name] = urls[0]
        channels += [u for u in urls if u not in channels]
    specs: list[str] = []
    pip: list[str] = []
    for dep in data.get("dependencies") or []:
        if isinstance(dep, dict):
            pip += [str(line) for line in dep.get("pip") or []]
            continue
        qualifier, sep, rest = str(dep).partition("::")
        if not sep:
            specs.append(str(dep))
            continue
        if qualifier not in where:  # a channel only a spec names: conda searches it too, last
            where[qualifier] = config.channel_urls(qualifier)[0]
            channels += [where[qualifier]] if where[qualifier] not in channels else []
        # pytorch::pytorch -> <where the pytorch channel lives>::pytorch (the worker puts the
        # credentials back into a redacted URL)
        specs.append(f"{redact(where[qualifier])}::{rest}")
    return CondaInputs(tuple(channels), tuple(specs), tuple(pip), config)


class Rattler:
    conda: Final = True

    def locate(self, system: System) -> Optional[str]:
        """envkit's own interpreter runs the worker: it has rattler, or there is no rattler."""
        return sys.executable if importlib.util.find_spec("rattler") is not None else None

    def missing(self) -> str:
        return "pip install 'torch-envkit[conda]' (py-rattler; Python ≥ 3.10), or install micromamba"

    def prepare(self, system: System, job: Job) -> Laid:
        if "environment.yml" not in job.spec_files:
            raise InputError("--backend rattler needs a conda plan (--channel conda)")
        if job.offline:
            raise InputError(
                "--offline: the rattler backend reads its conda channels",
                hint="point .condarc's channel_alias at a local channel (file:///…), or use a pip backend",
            )
        inputs = conda_inputs(job.spec_files["environment.yml"], system.env)
        channels, specs, pip, config = (
            list(inputs.channels),
            list(inputs.specs),
            list(inputs.pip),
            inputs.config,
        )
        host = host_virtual_packages()
        packages, why = virtual_packages(job.plan, load_knowledge(), host=host)
        override = system.env.get("CONDA_OVERRIDE_CUDA")
        if override is not None:  # conda's own override (docs.conda.io manage-virtual); "" means none
            why = f"__cuda={override or 'none'}: CONDA_OVERRIDE_CUDA says so"
            packages.pop("__cuda", None)
            if override:
                packages["__cuda"] = override
        cache = rattler_cache(system.env)
        setup = CondaSetup(
            channels=tuple(redact(c) for c in channels),
            specs=tuple(specs),
            virtual_packages=tuple(packages.items()),
            cuda_why=why,
            condarc=config.describe(),
            cache=str(cache),
        )
        request = {
            "schema": REQUEST_SCHEMA,
            "prefix": str(job.prefix),
            "channels": list(setup.channels),
            "specs": specs,
            "platform": SUBDIRS[job.plan.platform],
            "virtual_packages": [[n, *v.split(" ", 1)] for n, v in packages.items()],
            "package_cache": str(cache / "pkgs"),
            "repodata_cache": str(cache / "repodata"),
            "history": {"cmd": "envkit create (rattler backend)", "specs": specs},
            "marker": RESULT_MARKER,
        }
        files = {REQUEST_FILE: json.dumps(request, indent=2) + "\n"}
        hidden = any(redact(c) != c for c in channels)
        secret: tuple[tuple[str, str], ...] = ((CHANNELS_VARIABLE, json.dumps(channels)),) if hidden else ()
        argv = (job.exe, str(WORKER), str(job.staging / REQUEST_FILE))
        why_failed = functools.partial(explain, virtual=dict(packages), cuda_why=why)
        steps = [
            Step(
                "rattler: solve and install the conda packages",
                argv,
                INSTALL_TIMEOUT_S,
                secret,
                explain=why_failed,
            )
        ]
        if pip:
            files[PIP_FILE] = "\n".join(pip) + "\n"
            env = tuple((n, v) for n, v in job.placeholders if f"${{{n}}}" in files[PIP_FILE])
            install = (str(job.python), "-m", "pip", "install", "-r", str(job.staging / PIP_FILE))
            steps.append(Step("pip: install the template's pip packages", install, INSTALL_TIMEOUT_S, env))
        return Laid(tuple(steps), files, setup.to_json())


RATTLER: Final = Rattler()


def read_result(stdout: str) -> Optional[dict[str, Any]]:
    """The worker's answer: the JSON object between its two marker lines; None when there is none
    (it was killed, or crashed before it could say)."""
    parts = stdout.split(RESULT_MARKER)
    if len(parts) < 3:
        return None
    try:
        data = json.loads(parts[-2])
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


# What each kind of failure the worker reports means for the user, and its class: an unsolvable
# request is exit 3 (no build satisfies it, as the resolver's own refusal); the rest are the
# installer's failures (exit 4), with the prefix removed by the rollback.
HINTS: Final = {
    "unreachable": (
        "check the network or the proxy, or point .condarc's channel_alias / custom_channels at a "
        "mirror that answers (envkit mirrors --kind conda)"
    ),
    "channel": "check the channel's URL in .condarc (channel_alias, custom_channels), or --mirror",
    "missing": (
        "a mirror may carry only part of a channel: point .condarc (channel_alias, custom_channels) or "
        "--mirror at one that has the package, or add the channel that does"
    ),
    "corrupt": (
        "the download did not match its checksum in the channel's repodata.json: run again; if it "
        "persists, the channel or mirror serves a damaged file"
    ),
    "disk": (
        "free space where the environment and rattler's package cache are (--prefix, "
        "RATTLER_CACHE_DIR), then run again"
    ),
    "install": "run again; if it persists, the message above names the package",
}


def explain(result: ProcResult, *, virtual: Mapping[str, str], cuda_why: str) -> Optional[EnvkitError]:
    """The error a failed worker run means (None: no answer from it, the generic message).
    ``virtual``: the virtual packages it solved for, ``cuda_why``: why __cuda was what it was."""
    answer = read_result(result.stdout)
    if answer is None or answer.get("ok"):
        return None
    error = answer.get("error") or {}
    kind = str(error.get("kind") or "install")
    message = str(error.get("message") or "").strip()
    if kind == "unsolvable":
        from envkit.create.backends.conflict import explain_conflict

        summary, hint = explain_conflict(message, virtual, cuda_why)
        return SolveFailed(summary, hint=hint)
    if kind == "missing":
        return SolveFailed(f"the conda solve has no answer: {message}", hint=HINTS["missing"])
    failed = CreateFailed(f"rattler: {message or result.describe()}")
    failed.hint = HINTS.get(kind, "")
    return failed
