"""``envkit lock``: the one adapter to conda-lock (house style: conda-lock's own code mixes its CLI
with its core and runs conda without timeouts, so envkit calls it as a program, bounded).

envkit renders the conda-lock inputs (environment.yml with ``platforms``, and virtual-packages.yml
with ``__cuda`` from the target driver: conda-lock otherwise assumes ``__cuda=11.4`` and locks the
wrong builds on a GPU-less login node), checks that the channels answer, then runs
``conda-lock lock``. Without a network it fails within seconds with a clear message instead of
conda's retry loop.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Final, Optional

from envkit.errors import InputError, LockFailed
from envkit.specs.conda import SUBDIRS

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from envkit.resolve.plan import Plan
    from envkit.specs.template import Template
    from envkit.system import System

__all__ = ["LockFailed", "conda_lock_command", "lock", "lock_job"]

REACH_TIMEOUT_S: Final = 5.0
LOCK_TIMEOUT_S: Final = 1800.0


@dataclass(frozen=True)
class LockJob:
    argv: tuple[str, ...]
    lockfile: Path
    channels: tuple[str, ...]
    inputs: dict[str, str]
    platforms: tuple[str, ...] = ()  # the conda subdirs locked


def conda_lock_command(system: System) -> list[str]:
    """conda-lock as a program: on PATH, or the module in envkit's own interpreter."""
    exe = system.which("conda-lock")
    if exe:
        return [exe]
    import importlib.util

    if importlib.util.find_spec("conda_lock") is not None:
        return [sys.executable, "-m", "conda_lock"]
    raise LockFailed(
        "conda-lock is not installed",
        hint="pip install 'torch-envkit[lock]' (conda-lock needs Python ≥ 3.10), or put conda-lock on PATH",
    )


def _channels(environment_yml: str) -> tuple[str, ...]:
    import importlib

    yaml: Any = importlib.import_module("yaml")  # a runtime dependency without type stubs
    data = yaml.safe_load(environment_yml) or {}
    return tuple(str(c) for c in data.get("channels", []) if str(c) not in ("nodefaults", "defaults"))


def _check_reachable(channels: Sequence[str], env: Mapping[str, str]) -> None:
    """Every channel must answer within seconds; otherwise say so rather than let conda retry.
    A channel name is where the user's .condarc puts it (channel_alias, custom_channels), as for
    the conda, mamba or micromamba conda-lock runs."""
    from envkit.mirrors.choose import probe
    from envkit.mirrors.condarc import read_condarc

    config = read_condarc(env)
    urls = [config.channel_urls(c)[0] + "/" for c in channels]
    results = probe(urls, timeout=REACH_TIMEOUT_S, total=REACH_TIMEOUT_S + 1)
    down = [r for r in results if not r.ok]
    if down:
        what = "; ".join(f"{r.url}: {r.error}" for r in down)
        raise LockFailed(
            f"cannot lock: the conda channels do not answer ({what})",
            hint="conda-lock needs the channels (and downloads a solver if none is installed); "
            "run it where they are reachable, or point --mirror at a conda mirror that is",
        )


def lock_job(
    system: System,
    plan: Plan,
    template: Template,
    *,
    platforms: Sequence[str] = (),
    out_dir: str = ".",
    mirrors: Sequence[str] = (),
) -> LockJob:
    """conda-lock's inputs and command line for a resolved plan (nothing is run or written)."""
    from envkit.specs.render import render_specs, spec_mirrors

    subdirs = list(platforms) or [SUBDIRS.get(plan.platform, "linux-64")]
    unknown = [p for p in subdirs if p not in SUBDIRS.values()]
    if unknown:
        raise InputError(f"--lock-platform {', '.join(unknown)}: one of {', '.join(SUBDIRS.values())}")
    chosen = spec_mirrors(list(mirrors), plan.variant) if mirrors else None
    inputs = render_specs(plan, template, "conda-lock", mirror=chosen)
    lockfile = Path(out_dir).absolute() / "conda-lock.yml"
    argv = [
        *conda_lock_command(system),
        "lock",
        "--file",
        "environment.yml",
        "--virtual-package-spec",
        "virtual-packages.yml",
        "--lockfile",
        str(lockfile),
    ]
    for subdir in subdirs:
        argv += ["--platform", subdir]
    return LockJob(tuple(argv), lockfile, _channels(inputs["environment.yml"]), inputs, tuple(subdirs))


def lock(system: System, job: LockJob, *, on_line: Optional[Callable[[str], None]] = None) -> Path:
    """Write the inputs to a temporary folder and run conda-lock there; returns the lock file.
    Where conda-lock has no conda, mamba or micromamba to solve with, py-rattler solves and
    conda-lock's own code writes the file (envkit.create.rattler_lock)."""
    from envkit.create.rattler_lock import conda_lock_solver, rattler_lock, rattler_lockable

    if conda_lock_solver(system) is None:
        if rattler_lockable():
            return rattler_lock(system, job, on_line=on_line)
        raise LockFailed(
            "conda-lock needs conda, mamba or micromamba to solve, and none is installed (none on PATH, "
            "none in ensureconda's folder); conda-lock would try to download micromamba",
            hint="pip install 'torch-envkit[conda]' (envkit then solves with py-rattler), or install "
            "micromamba (https://mamba.readthedocs.io)",
        )
    _check_reachable(job.channels, system.env)
    workdir = Path(tempfile.mkdtemp(prefix="envkit-lock-"))
    try:
        for name, content in job.inputs.items():
            (workdir / name).write_text(content, encoding="utf-8")
        result = system.run(job.argv, timeout=LOCK_TIMEOUT_S, cwd=str(workdir), on_line=on_line)
        if not result.ok:
            tail = "\n".join(result.stdout.strip().splitlines()[-12:])
            raise LockFailed(f"conda-lock failed: {result.describe()}\n{tail}".rstrip())
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return job.lockfile
