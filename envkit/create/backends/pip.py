"""The ``venv`` backend: ``python -m venv``, then pip installs torch from the plan's index and the
template's other packages with torch held to the plan (constraints.txt)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Final, Optional

from envkit.create.backends._base import BUILD_TIMEOUT_S, INSTALL_TIMEOUT_S, VENV_TIMEOUT_S, Job, Laid, Step
from envkit.create.backends.pip_args import hide_credentials, index_args
from envkit.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.system import System

__all__ = ["VENV", "Venv", "base_python", "pip_steps"]


class Venv:
    conda: Final = False

    def locate(self, system: System) -> Optional[str]:
        return ""

    def missing(self) -> str:
        return ""

    def prepare(self, system: System, job: Job) -> Laid:
        version = str(job.plan.python) if job.plan.python else None
        venv = (base_python(system, version), "-m", "venv", str(job.prefix))
        create = Step("create the environment", venv, VENV_TIMEOUT_S)
        return Laid((create, *pip_steps(job, [str(job.python), "-m", "pip", "install"], "pip")))


VENV: Final = Venv()


def pip_steps(job: Job, install: Sequence[str], installer: str) -> list[Step]:
    """torch from its index, then the template's other packages and the extensions' wheels under
    the constraints, then each extension built from source (pip or uv)."""
    plan = job.plan
    index = index_args(job.torch_index, wheelhouse=job.wheelhouse, offline=job.offline)
    constraints = str(job.staging / "constraints.txt")
    steps = [
        install_step(
            f"install torch {plan.torch}+{plan.variant}",
            [*install, *job.torch_requirements, *index],
            installer,
        )
    ]
    extra_index = index_args(job.extra_index, wheelhouse=job.wheelhouse, offline=job.offline)
    if job.extra_pip:
        extra = [*install, *job.extra_pip, "--constraint", constraints, *extra_index]
        if not job.offline:
            extra += job.extra_options
        what = "the extensions and other packages" if plan.extensions else "the template's other packages"
        steps.append(install_step(f"install {what} (torch held by constraints.txt)", extra, installer))
    for pick in job.builds:
        assert pick.build is not None
        b = pick.build
        settings = (*b.env, (b.arch_env or "TORCH_CUDA_ARCH_LIST", b.arch_list))
        tail = ["--constraint", constraints, *extra_index]
        if b.requires:
            steps.append(
                install_step(
                    f"install what {pick.name}'s build needs", [*install, *b.requires, *tail], installer
                )
            )
        argv = [*install, "--no-build-isolation", pick.requirement, *tail]
        argv += [f"--config-settings={c}" for c in b.config_settings]
        step = install_step(f"build {pick.name} {pick.version} from source ({b.time})", argv, installer)
        steps.append(dataclasses.replace(step, settings=settings, timeout=BUILD_TIMEOUT_S))
    return steps


def install_step(title: str, argv: Sequence[str], installer: str) -> Step:
    hidden, env = hide_credentials(argv, installer)
    return Step(title, hidden, INSTALL_TIMEOUT_S, env)


def base_python(system: System, version: Optional[str]) -> str:
    """An interpreter of the plan's Python for ``python -m venv``."""
    if version:
        for name in (f"python{version}", f"python{version.split('.')[0]}", "python3", "python"):
            exe = system.which(name)
            if exe and _version_of(system, exe) == version:
                return exe
        raise InputError(
            f"no Python {version} found on PATH for the new environment",
            hint=f"install Python {version}, use --backend uv (it fetches Pythons), or pass --python",
        )
    exe = system.which("python3") or system.which("python")
    if exe is None:
        raise InputError("no python3 on PATH for the new environment")
    return exe


def _version_of(system: System, exe: str) -> Optional[str]:
    result = system.run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], timeout=20)
    return result.stdout.strip() if result.ok else None
