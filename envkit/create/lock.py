"""``envkit lock``: the one adapter to conda-lock (house style: conda-lock's own code mixes its CLI
with its core and runs conda without timeouts, so envkit calls it as a program, bounded).

envkit.create.lock_job makes the job (the inputs and conda-lock's command line); this module checks
that the channels answer, then runs ``conda-lock lock``. Without a network it fails within seconds
with a clear message instead of conda's retry loop.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Final, Optional

from envkit.errors import LockFailed

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from envkit.create.lock_job import LockJob
    from envkit.system import System

__all__ = ["LockFailed", "lock"]

REACH_TIMEOUT_S: Final = 5.0
LOCK_TIMEOUT_S: Final = 1800.0


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
