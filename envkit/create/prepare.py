"""Decide everything ``envkit create`` will do before doing any of it: the template, the plan, the
backend, the place, the spec files and the exact command lines (``--dry-run`` prints just this)."""

from __future__ import annotations

import ast
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Optional

from envkit.create.backends import (
    INSTALLERS,
    Backend,
    Job,
    backend_exe,
    choose_backend,
    conda_installer,
    default_prefix,
    lay_steps,
    parse_backend,
)
from envkit.create.install import Installation
from envkit.create.place import check_name, check_prefix
from envkit.errors import InputError
from envkit.knowledge import load_knowledge
from envkit.knowledge.mirrors import MirrorKind
from envkit.mirrors.choose import pip_args
from envkit.resolve.available import Available, read_wheelhouse
from envkit.resolve.plan import PlanFlags
from envkit.specs.pip import extension_specs, pip_source, placeholder_values
from envkit.specs.render import render_specs, spec_mirrors
from envkit.specs.template import Template, builtin_dir, load_template

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.resolve.plan import Plan
    from envkit.system import System

__all__ = [
    "CreateRequest",
    "check_request",
    "choose_format",
    "choose_template",
    "configured_wheelhouse",
    "lay_out",
    "local_builds",
]


@dataclass(frozen=True)
class CreateRequest:
    name: Optional[str] = None
    prefix: Optional[str] = None
    template: Optional[str] = None
    flags: PlanFlags = field(default_factory=PlanFlags)  # what the plan is for (resolve flags)
    backend: str = "auto"
    mirrors: tuple[str, ...] = ()
    wheelhouse: Optional[str] = None
    offline: bool = False
    from_lock: Optional[str] = None  # --from-lock: a hashed pip lock envkit lock --channel pip made
    # --channel as given: pip, conda or auto; None: the template's (pip when it names none). The
    # flags' channel is what the plan is resolved for, decided by choose_format.
    channel: Optional[str] = None


CHANNELS: Final = ("pip", "conda", "auto")


def choose_template(request: CreateRequest) -> Template:
    """``--template``, else the built-in template named like the environment, else pt2."""
    if request.template:
        return load_template(request.template)
    if request.name and (builtin_dir() / f"{request.name}.toml").is_file():
        return load_template(request.name)
    return load_template("pt2")


def choose_format(system: System, request: CreateRequest, template: Template) -> tuple[str, str]:
    """(``conda`` or ``pip``, why): what the environment is made of. Never silently pip: a conda
    installer (``--backend``) or ``--channel conda`` or a conda template means conda, and only
    ``--channel auto`` falls back to pip, saying so.

    InputError where the request contradicts itself (``--backend uv --channel conda``)."""
    channel = request.channel
    if channel is not None and channel not in CHANNELS:
        raise InputError(f"--channel {channel!r}: one of {', '.join(CHANNELS)}")
    backend = parse_backend(request.backend)
    if backend is not Backend.AUTO:
        conda = INSTALLERS[backend].conda
        if channel == ("pip" if conda else "conda"):
            verb = (
                "drop --channel pip"
                if conda
                else "drop --channel conda, or use --backend rattler / micromamba"
            )
            raise InputError(f"--backend {backend} installs {'conda' if conda else 'pip'} packages: {verb}")
        return (
            ("conda", f"--backend {backend} installs conda packages")
            if conda
            else (
                "pip",
                f"--backend {backend} installs pip packages",
            )
        )
    if channel == "conda":
        return "conda", "--channel conda"
    if channel == "pip":
        return "pip", "--channel pip"
    if channel is None:
        if template.channel == "conda":
            return "conda", f'the template {template.name} asks for conda (channel = "conda")'
        return (
            "pip",
            f"pip, the default (the template {template.name} names no channel)"
            if template.channel is None
            else f"the template {template.name} asks for pip",
        )
    found = conda_installer(system)
    if found is not None:
        return "conda", f"--channel auto: conda, with {found[0]}"
    return "pip", (
        "--channel auto fell back to pip: no conda installer here (no conda, mamba or micromamba on "
        "PATH, no py-rattler in envkit's Python)"
    )


def check_request(system: System, request: CreateRequest) -> None:
    """The refusals that need no plan: a bad name, no place, a wheelhouse that is not there, an
    unknown or missing installer (before the resolver runs)."""
    if request.name is not None:
        check_name(request.name)  # a name, never a path: `create ../envs --force` must not exist
    if not request.name and not request.prefix:
        raise InputError("give the environment a NAME or a --prefix PATH")
    if request.offline and not request.wheelhouse:
        raise InputError(
            "--offline needs --wheelhouse DIR: the wheels have to come from somewhere",
            hint="nor does pip's configuration name a find-links folder envkit could find (pip config list)",
        )
    if request.wheelhouse and not Path(request.wheelhouse).is_dir():
        raise InputError(f"--wheelhouse {request.wheelhouse}: not a folder")
    backend_exe(system, request.backend)  # an unknown or missing installer fails before resolving


def configured_wheelhouse(system: System) -> Optional[str]:
    """The local folder pip is configured to find wheels in (``find-links``, from PIP_FIND_LINKS or
    a pip.conf: what `pip config list` shows), for ``create --offline`` without ``--wheelhouse``:
    an air-gapped cluster's pip.conf already says where its wheels are, and uv reads no pip.conf.

    pip is asked itself, so that its own rules decide which file and section win (the variable
    over the files, [install] over [global]: https://pip.pypa.io/en/stable/topics/configuration/).
    None when pip is not there, says nothing, or names only URLs or folders that do not exist."""
    pip = [sys.executable, "-m", "pip"] if importlib.util.find_spec("pip") else None
    if pip is None:
        found = system.which("pip3") or system.which("pip")
        pip = [found] if found else None
    if pip is None:
        return None
    result = system.run_within([*pip, "config", "list"], timeout=_PIP_CONFIG_TIMEOUT_S, env=system.env)
    if not result.ok:
        return None
    values: dict[str, str] = {}
    for line in result.stdout.splitlines():
        key, _, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if name == "find-links" and section in _FIND_LINKS_ORDER:
            try:  # pip shows it as a Python string literal: '\nhttps://…\n/opt/wheels'
                values[section] = str(ast.literal_eval(value.strip()))
            except (ValueError, SyntaxError):
                values[section] = value.strip()
    for section in _FIND_LINKS_ORDER:
        for entry in values.get(section, "").split():
            folder = _local_folder(entry)
            if folder is not None:
                return folder
    return None


def _local_folder(entry: str) -> Optional[str]:
    """A find-links entry as pip reads it, where it is a folder here: a path, its leading ``~``
    expanded (pip 23.2.1 src/pip/_internal/models/search_scope.py, SearchScope.create), or a
    file: URL without a host or with localhost, %-escapes decoded (src/pip/_internal/utils/urls.py,
    url_to_path); None for any other URL."""
    if entry.startswith("file:"):
        import urllib.parse
        import urllib.request

        parts = urllib.parse.urlsplit(entry)
        if parts.netloc not in ("", "localhost"):
            return None  # another machine's share
        entry = urllib.request.url2pathname(parts.path)  # Windows: /C:/wheels -> C:\wheels
    elif "://" in entry:
        return None
    elif entry.startswith("~"):
        entry = os.path.expanduser(entry)
    return entry if os.path.isdir(entry) else None


# Which `pip config list` section wins for `pip install`: the variable, then [install], then [global].
_FIND_LINKS_ORDER: Final = (":env:", "install", "global")
_PIP_CONFIG_TIMEOUT_S: Final = 20.0


def local_builds(request: CreateRequest) -> Optional[Available]:
    """The torch builds the plan must come from: the wheelhouse's, when it holds torch wheels or
    ``--offline`` leaves pip nothing else (pip install --no-index reads only --find-links); None
    when torch may come from an index."""
    if not request.wheelhouse:
        return None
    available = read_wheelhouse(Path(request.wheelhouse).absolute())
    return available if available.builds or request.offline else None


def lay_out(
    system: System,
    request: CreateRequest,
    template: Template,
    fmt: str,
    plan: Plan,
    notes: Sequence[str] = (),
) -> Installation:
    """The installation of ``plan``: backend, place, spec files and command lines; nothing is
    written or run. ``notes``: what the run says besides (why the channel is what it is)."""
    backend, exe = choose_backend(system, request.backend, plan)
    # abspath, not Path.absolute(): it folds `..` away, so `--prefix envs/..` names `.`'s parent's
    # child, not a folder called "..".
    given = Path(os.path.abspath(Path(request.prefix).expanduser())) if request.prefix else None
    if given is not None:
        check_prefix(given)
    name = request.name or (given.name if given is not None else "")
    prefix = given if given is not None else default_prefix(system, name, backend)
    mirrors = spec_mirrors(list(request.mirrors), plan.variant) if request.mirrors else ()
    k = load_knowledge()
    spec_files = render_specs(plan, template, fmt, mirror=mirrors or None, env_name=name, knowledge=k)
    # torch comes from where the written spec says (the same decision, with the real credentials).
    by_kind = {m.kind: m for m in mirrors}
    pypi_mirror = by_kind.get(MirrorKind.PYPI)
    source = pip_source(
        plan,
        template,
        k,
        torch_mirror=by_kind.get(MirrorKind.TORCH_WHEELS),
        pypi_mirror=pypi_mirror,
        reveal_credentials=True,
    )
    pins = list(source.pins)
    # The template's other packages come from PyPI (or its mirror) with torch held to the plan, so
    # nothing can swap the build (a dependency that pins another torch then fails loudly).
    spec_files["constraints.txt"] = "\n".join(pins) + "\n"
    extra_index = list(pip_args(pypi_mirror, plan.variant, reveal_credentials=True)) if pypi_mirror else []
    # The extensions' wheels join the packages installed with torch held (constraints.txt), so that
    # pip fails rather than replaces the planned torch; source builds are steps of their own.
    torch_args = source.argv()
    torch_index = torch_args[torch_args.index("--index-url") + 1] if "--index-url" in torch_args else None
    ext_requirements, ext_options, _notes = extension_specs(
        plan, offline=request.offline, by_version=pypi_mirror is not None, torch_index=torch_index
    )
    staging = prefix.with_name(f".{prefix.name}.envkit-spec")
    python = prefix / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    job = Job(
        exe=exe,
        prefix=prefix,
        python=python,
        plan=plan,
        staging=staging,
        spec_files=spec_files,
        torch_requirements=pins,
        extra_pip=(*template.packages, *template.pip_packages, *ext_requirements),
        torch_index=source.argv(),
        extra_index=extra_index,
        wheelhouse=str(Path(request.wheelhouse).absolute()) if request.wheelhouse else None,
        offline=request.offline,
        placeholders=placeholder_values(by_kind.get(MirrorKind.TORCH_WHEELS), pypi_mirror),
        extra_options=ext_options,
        builds=[p for p in plan.extensions if p.build is not None],
    )
    laid = lay_steps(system, backend, job)
    spec_files.update(laid.files)
    return Installation(
        name=name,
        prefix=prefix,
        backend=backend,
        plan=plan,
        steps=laid.steps,
        spec_files=spec_files,
        staging=staging,
        python=python,
        notes=(f"template {template.name} ({template.source})", *notes),
        conda=laid.conda,
    )
