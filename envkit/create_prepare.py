"""Decide everything ``envkit create`` will do before doing any of it: the template, the plan, the
backend, the place, the spec files and the exact command lines (``--dry-run`` prints just this)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from envkit.create import (
    BACKENDS,
    CONDA_FAMILY,
    Installation,
    build_steps,
    choose_backend,
    default_prefix,
    find_tool,
)
from envkit.errors import InputError
from envkit.knowledge import load_knowledge
from envkit.planning import PlanFlags, make_plan
from envkit.specs import render_specs, spec_flags, spec_mirrors
from envkit.templates import Template, builtin_dir, load_template

if TYPE_CHECKING:
    from envkit.mirrors import Mirror
    from envkit.system import System

__all__ = ["CreateRequest", "prepare"]


@dataclass(frozen=True)
class CreateRequest:
    name: Optional[str] = None
    prefix: Optional[str] = None
    template: Optional[str] = None
    flags: PlanFlags = field(default_factory=PlanFlags)
    backend: str = "auto"
    mirrors: tuple[str, ...] = ()
    wheelhouse: Optional[str] = None
    offline: bool = False


def _template(request: CreateRequest) -> Template:
    """``--template``, else the built-in template named like the environment, else pt2."""
    if request.template:
        return load_template(request.template)
    if request.name and (builtin_dir() / f"{request.name}.toml").is_file():
        return load_template(request.name)
    return load_template("pt2")


def _format(system: System, request: CreateRequest, template: Template) -> str:
    """conda for the conda family, pip otherwise; ``auto`` follows the template and --channel."""
    if request.backend in CONDA_FAMILY:
        return "conda"
    if request.backend in ("uv", "venv"):
        return "pip"
    wants_conda = request.flags.channel == "conda" or template.channel == "conda"
    installed = any(system.which(n) for n in CONDA_FAMILY) or "CONDA_EXE" in system.env
    return "conda" if wants_conda and installed else "pip"


def _mirror_args(mirrors: tuple[Mirror, ...], variant: str) -> tuple[list[str], list[str]]:
    """(the torch index options, the options for everything else) from the chosen mirrors."""
    from envkit.mirrors import pip_args

    torch_index: list[str] = []
    extra: list[str] = []
    for mirror in mirrors:
        if mirror.kind == "torch-wheels":
            torch_index = list(pip_args(mirror, variant, reveal_credentials=True))
        elif mirror.kind == "pypi":
            extra = list(pip_args(mirror, variant, reveal_credentials=True))
    return torch_index, extra


def prepare(system: System, request: CreateRequest) -> Installation:
    """Resolve and lay out the installation; nothing is written or run."""
    if not request.name and not request.prefix:
        raise InputError("give the environment a NAME or a --prefix PATH")
    if request.offline and not request.wheelhouse:
        raise InputError("--offline needs --wheelhouse DIR: the wheels have to come from somewhere")
    if request.wheelhouse and not Path(request.wheelhouse).is_dir():
        raise InputError(f"--wheelhouse {request.wheelhouse}: not a folder")
    if request.backend not in BACKENDS:
        raise InputError(f"--backend {request.backend!r}: one of {', '.join(BACKENDS)}")
    if request.backend not in ("auto", "venv") and find_tool(system, request.backend) is None:
        raise InputError(f"--backend {request.backend}: `{request.backend}` is not installed (not on PATH)")
    template = _template(request)
    fmt = _format(system, request, template)
    flags = dataclasses.replace(request.flags, channel="conda" if fmt == "conda" else "pip")
    plan = make_plan(system, spec_flags(template, flags, fmt))
    backend, exe = choose_backend(system, request.backend, plan)
    name = request.name or Path(str(request.prefix)).name
    prefix = (
        Path(request.prefix).expanduser().absolute()
        if request.prefix
        else default_prefix(system, name, backend)
    )
    mirrors = spec_mirrors(list(request.mirrors), plan.variant) if request.mirrors else ()
    spec_files = render_specs(
        plan, template, fmt, mirror=mirrors or None, env_name=name, knowledge=load_knowledge()
    )
    pins = plan.requirements(template.torch_packages)
    # The template's other packages come from PyPI (or its mirror) with torch held to the plan, so
    # nothing can swap the build (a dependency that pins another torch then fails loudly).
    spec_files["constraints.txt"] = "\n".join(pins) + "\n"
    torch_index, extra_index = _mirror_args(mirrors, plan.variant)
    if not torch_index and plan.index_url:
        torch_index = ["--index-url", plan.index_url]
    staging = prefix.with_name(f".{prefix.name}.envkit-spec")
    python, steps = build_steps(
        system,
        backend=backend,
        exe=exe,
        prefix=prefix,
        plan=plan,
        torch_requirements=pins,
        extra_pip=(*template.packages, *template.pip_packages),
        staging=staging,
        spec_files=spec_files,
        torch_index=torch_index,
        extra_index=extra_index,
        wheelhouse=str(Path(request.wheelhouse).absolute()) if request.wheelhouse else None,
        offline=request.offline,
    )
    notes = [f"template {template.name} ({template.source})"]
    return Installation(
        name=name,
        prefix=prefix,
        backend=backend,
        plan=plan,
        steps=steps,
        spec_files=spec_files,
        staging=staging,
        python=python,
        notes=tuple(notes),
    )
