"""The conda family: ``conda`` / ``mamba`` (``env create``) and ``micromamba`` (``create --yes``),
each from the plan's environment.yml, where users have them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Optional

from envkit.create.backends._base import INSTALL_TIMEOUT_S, Job, Laid, Step
from envkit.errors import InputError

if TYPE_CHECKING:
    from envkit.system import System

__all__ = ["CondaFamily"]

# conda and mamba set these in an activated shell (conda's activate scripts, mamba's shell hook):
# the one in use, even where another is first on PATH.
_EXE_VARIABLE: Final = {"conda": "CONDA_EXE", "mamba": "MAMBA_EXE"}


class CondaFamily:
    conda: Final = True

    def __init__(self, name: str) -> None:
        self.name = name

    def locate(self, system: System) -> Optional[str]:
        variable = _EXE_VARIABLE.get(self.name)
        return (system.env.get(variable) if variable else None) or system.which(self.name)

    def missing(self) -> str:
        return "use --backend rattler (pip install 'torch-envkit[conda]'), or install micromamba"

    def prepare(self, system: System, job: Job) -> Laid:
        if "environment.yml" not in job.spec_files:
            raise InputError(f"--backend {self.name} needs a conda plan (--channel conda)")
        spec = str(job.staging / "environment.yml")
        verb = ["create", "--yes"] if self.name == "micromamba" else ["env", "create"]
        argv = [job.exe, *verb, "--prefix", str(job.prefix), "--file", spec]
        if job.offline:
            argv.append("--offline")
        text = job.spec_files["environment.yml"]
        env = tuple((n, v) for n, v in job.placeholders if f"${{{n}}}" in text)
        return Laid((Step(f"{self.name}: create the environment", tuple(argv), INSTALL_TIMEOUT_S, env),))
