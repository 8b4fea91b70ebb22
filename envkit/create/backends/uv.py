"""The ``uv`` backend: ``uv venv`` (uv fetches the plan's Python when it is not installed), then
``uv pip install`` as the venv backend's pip does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Optional

from envkit.create.backends._base import VENV_TIMEOUT_S, Job, Laid, Step
from envkit.create.backends.pip import pip_steps

if TYPE_CHECKING:
    from envkit.system import System

__all__ = ["UV", "Uv"]


class Uv:
    conda: Final = False

    def locate(self, system: System) -> Optional[str]:
        return system.which("uv")

    def missing(self) -> str:
        return "install uv (https://docs.astral.sh/uv/), or use --backend venv"

    def prepare(self, system: System, job: Job) -> Laid:
        version = str(job.plan.python) if job.plan.python else None
        create = [job.exe, "venv", str(job.prefix), "--seed"] + (["--python", version] if version else [])
        install = [job.exe, "pip", "install", "--python", str(job.python)]
        return Laid(
            (Step("create the environment", tuple(create), VENV_TIMEOUT_S), *pip_steps(job, install, "uv"))
        )


UV: Final = Uv()
