"""``envkit spec``: render a template and a resolved plan into spec files, and write them whole.

Formats: ``conda`` (environment.yml), ``pip`` (requirements.txt), ``uv`` (pyproject.toml) and
``conda-lock`` (environment.yml with ``platforms`` + virtual-packages.yml) and ``pixi`` (pixi.toml,
either route: envkit.specs.pixi). The renderers are
envkit.specs.pip and envkit.specs.conda; this module is the entry point, plus the two edges around
it: the resolve flags a template implies (``spec_flags``) and the mirrors named on the command line
(``spec_mirrors``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Optional, Union

from envkit.errors import InputError
from envkit.knowledge import load_knowledge
from envkit.mirrors.choose import Mirror, default_cache_path, load_mirrors, resolve_mirror
from envkit.resolve import parse_torch_spec
from envkit.specs.conda import render_environment, render_virtual_packages
from envkit.specs.container import (
    CONTAINER_FORMATS,
    choose_image,
    choose_os_image,
    image_kind,
    render_apptainer,
    render_dockerfile,
)
from envkit.specs.pip import (
    GENERATED_MARK,
    extension_specs,
    pip_source,
    pypi_source,
    regen_command,
    render_requirements,
    render_uv,
)
from envkit.specs.pixi import render_pixi

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.knowledge import Knowledge
    from envkit.resolve import Plan
    from envkit.resolve.plan import PlanFlags
    from envkit.specs.template import Template

__all__ = [
    "FORMATS",
    "default_format",
    "refuse_foreign",
    "render_specs",
    "spec_flags",
    "spec_mirrors",
    "write_specs",
]

FORMATS: Final = ("conda", "pip", "uv", "conda-lock", "pixi", *CONTAINER_FORMATS)
CONDA_FORMATS: Final = ("conda", "conda-lock")
_KIND_PREFIX: Final = re.compile(r"^(torch-wheels|pypi|conda)=(.+)$")


def default_format(template: Template) -> str:
    """The format when none is asked for: the template's channel preference, else pip."""
    return "conda" if template.channel == "conda" else "pip"


def _check_format(fmt: str, pip_in_conda: bool) -> None:
    if fmt not in FORMATS:
        raise InputError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")
    if pip_in_conda and fmt not in CONDA_FORMATS:
        raise InputError("--pip-in-conda applies to --format conda and conda-lock only")


def spec_flags(template: Template, flags: PlanFlags, fmt: str, *, pip_in_conda: bool = False) -> PlanFlags:
    """The resolve flags for rendering ``template`` as ``fmt``: the template's torch range and the
    command line's both hold, the template's Python is the default, and the format picks the channel
    (conda formats need a conda route unless torch comes through pip)."""
    _check_format(fmt, pip_in_conda)
    ranges = [str(template.torch)] if template.torch else []
    if flags.torch:
        ranges.append(str(parse_torch_spec(flags.torch)))  # a bad --torch fails with its own message
    python = flags.python
    if python is None and flags.env_name is None and template.python is not None:
        python = str(template.python)
    channel = "conda" if fmt in CONDA_FORMATS and not pip_in_conda else "pip"
    if fmt == "pixi":  # both routes: --channel says which (envkit.commands.spec: conda by default)
        channel = flags.channel
    # The command line's --with wins over the template's entry for the same extension.
    given = {_ext_name(e) for e in flags.extensions}
    extensions = (*flags.extensions, *(e for e in template.extensions if _ext_name(e) not in given))
    return dataclasses.replace(
        flags, torch=",".join(ranges) or None, python=python, channel=channel, extensions=extensions
    )


def _ext_name(text: str) -> str:
    from packaging.utils import canonicalize_name

    return canonicalize_name(re.split(r"[\s\[<>=!~;@]", text.strip(), maxsplit=1)[0])


def _kind(value: str) -> tuple[str, str]:
    """``--mirror`` values: ``KIND=URL``, a URL (``…/simple`` is a PyPI index, anything else a torch
    wheel index), ``auto`` (torch wheels), or a NAME from the table, whose row says its kind."""
    prefixed = _KIND_PREFIX.match(value)
    if prefixed:
        return prefixed.group(1), prefixed.group(2)
    if "://" in value:
        return ("pypi" if value.rstrip("/").endswith("/simple") else "torch-wheels"), value
    row = next((m for m in load_mirrors() if m.name == value), None)
    return (row.kind if row else "torch-wheels"), value


def spec_mirrors(values: Sequence[str], variant: str, **options: Any) -> tuple[Mirror, ...]:
    """Resolve each ``--mirror`` value (envkit.mirrors.choose.resolve_mirror; ``options`` are passed
    on) to the mirror of its kind: at most one torch-wheels, one PyPI, one conda mirror. ``auto``
    remembers its choice in the user's cache (``cache_path``) unless told otherwise."""
    options.setdefault("cache_path", default_cache_path())
    mirrors = []
    for value in values:
        kind, spec = _kind(value.strip())
        mirrors.append(resolve_mirror(spec, variant, kind=kind, **options).mirror)
    _by_kind(mirrors)
    return tuple(mirrors)


def _by_kind(mirror: Union[Mirror, Sequence[Mirror], None]) -> dict[str, Mirror]:
    items = [] if mirror is None else [mirror] if isinstance(mirror, Mirror) else list(mirror)
    found: dict[str, Mirror] = {}
    for m in items:
        if m.kind in found:
            raise InputError(
                f"--mirror {found[m.kind].name} and {m.name} are both {m.kind} mirrors; give one"
            )
        found[m.kind] = m
    return found


def render_specs(
    plan: Plan,
    template: Template,
    fmt: str,
    *,
    mirror: Union[Mirror, Sequence[Mirror], None] = None,
    pip_in_conda: bool = False,
    env_name: Optional[str] = None,
    knowledge: Optional[Knowledge] = None,
) -> dict[str, str]:
    """File name -> content for ``fmt``. ``mirror``: one mirror or several of different kinds (the
    torch wheels' index, a PyPI mirror, a conda channel mirror). No credentials are written."""
    _check_format(fmt, pip_in_conda)
    k = knowledge or load_knowledge()
    mirrors = _by_kind(mirror)
    if "conda" in mirrors and fmt not in (*CONDA_FORMATS, "pixi"):
        raise InputError(
            f"--mirror {mirrors['conda'].name} is a conda channel mirror: for conda formats only"
        )
    name = env_name or template.name
    regen = regen_command(plan, template, fmt, pip_in_conda=pip_in_conda, mirrors=tuple(mirrors.values()))
    native_conda = (fmt in CONDA_FORMATS and not pip_in_conda) or (fmt == "pixi" and plan.conda is not None)
    if native_conda and "torch-wheels" in mirrors:
        raise InputError(
            f"--mirror {mirrors['torch-wheels'].name} serves pip wheels; this conda environment takes torch "
            "from conda",
            hint="add --pip-in-conda to install torch with pip from that mirror, or give a conda mirror",
        )
    extras = tuple(template.pip_packages) if native_conda else (*template.packages, *template.pip_packages)
    ext_requirements, ext_options, ext_notes = extension_specs(plan, by_version="pypi" in mirrors)
    extras = (*extras, *ext_requirements)
    if native_conda:
        source = pypi_source(extras, mirrors.get("pypi"))
    else:
        source = pip_source(
            plan,
            template,
            k,
            torch_mirror=mirrors.get("torch-wheels"),
            pypi_mirror=mirrors.get("pypi"),
            extras=extras,
        )
    source = dataclasses.replace(source, ext_options=ext_options, notes=source.notes + ext_notes)
    if fmt == "pip":
        return {"requirements.txt": render_requirements(plan, template, source, regen)}
    if fmt in CONTAINER_FORMATS:
        # ROCm, XPU and CPU wheels bring their GPU user space (or need none): a plain OS image.
        want = image_kind(template)
        image = choose_os_image(plan) if plan.cuda is None else choose_image(plan, k, want=want)
        pip_regen = regen_command(plan, template, "pip", mirrors=tuple(mirrors.values()))
        files = {"requirements.txt": render_requirements(plan, template, source, pip_regen)}
        if fmt == "docker":
            files["Dockerfile"] = render_dockerfile(plan, template, source, regen, image)
        else:
            files["Apptainer.def"] = render_apptainer(plan, template, source, regen, image)
        return files
    if fmt == "uv":
        return {"pyproject.toml": render_uv(plan, template, source, name, regen)}
    if fmt == "pixi":
        if "conda" in mirrors:
            raise InputError(
                f"--mirror {mirrors['conda'].name}: pixi maps channels through its own config "
                "(mirrors in pixi's config.toml), not pixi.toml"
            )
        return {"pixi.toml": render_pixi(plan, template, k, source, name, regen)}
    environment = render_environment(
        plan,
        template,
        k,
        source,
        env_name=name,
        regen=regen,
        pip_in_conda=pip_in_conda,
        conda_mirror=mirrors.get("conda"),
        lock=fmt == "conda-lock",
    )
    if fmt == "conda":
        return {"environment.yml": environment}
    return {
        "environment.yml": environment,
        "virtual-packages.yml": render_virtual_packages(plan, k, template.name, regen),
    }


def _ours(path: Path) -> bool:
    """Whether an existing file was written by envkit (its first line says so)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            return GENERATED_MARK in fh.readline()
    except OSError:
        return False


def _dangling(path: Path) -> bool:
    """A link to nothing (not a link to itself: that is refused)."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return path.is_symlink()
    except OSError:
        return False
    return False


def refuse_foreign(targets: Sequence[Path], *, force: bool = False) -> None:
    """InputError for a target that is not a regular file, or one envkit did not write (its first
    line lacks GENERATED_MARK) unless ``force``: checked before anything is made or written."""
    # A folder, FIFO, device or socket under a spec file's name is never replaced (--force or not),
    # nor opened to see whether envkit wrote it (a FIFO would block that read).
    special = [p for p in targets if os.path.lexists(p) and not p.is_file() and not _dangling(p)]
    if special:
        raise InputError(
            f"{special[0]} is not a regular file; envkit replaces only files", hint="-o another folder"
        )
    foreign = [p for p in targets if p.exists() and not (force or _ours(p))]
    if foreign:
        what = "exists and was not written by envkit"
        raise InputError(f"{foreign[0]} {what}", hint="pass --force to replace it, or -o another folder")


def write_specs(files: dict[str, str], out_dir: Union[str, Path], *, force: bool = False) -> list[Path]:
    """Write every file into ``out_dir``, all or nothing (DESIGN: "Nothing is written half"): each is
    written to a temporary name in the same folder, then renamed over its target; a target that is
    replaced is kept aside until every file is in place, and put back if any rename fails. A file
    envkit did not write is replaced only with ``force``."""
    out = Path(out_dir)
    for name in files:
        if not name or Path(name).name != name or name.startswith("."):
            raise InputError(f"{name!r}: not a plain file name")
    targets = [out / name for name in files]
    refuse_foreign(targets, force=force)
    temps: list[tuple[str, Path]] = []
    placed: list[tuple[Path, Optional[str]]] = []  # (target, where its old content waits)
    try:
        out.mkdir(parents=True, exist_ok=True)
        # A link (to a file, or to nothing yet) is the user's: the file it points to is written and
        # the link stays, as envkit._files.write_atomic does (the link was replaced and deleted).
        places = [Path(os.path.realpath(t)) if t.is_symlink() else t for t in targets]
        for (name, text), target in zip(files.items(), places):
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=target.parent)
            temps.append((tmp, target))
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
            # mkstemp makes the file private (0600); a spec file is meant to be read and shared.
            os.chmod(tmp, target.stat().st_mode & 0o777 if target.exists() else 0o644)
        for tmp, target in temps:
            backup = None
            if target.exists():
                fd, backup = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent)
                os.close(fd)
                os.replace(target, backup)
            placed.append((target, backup))
            os.replace(tmp, target)
    except OSError as exc:
        for target, backup in reversed(placed):
            with contextlib.suppress(OSError):
                if backup is not None:
                    os.replace(backup, target)
                else:
                    os.unlink(target)
        raise InputError(f"{out}: cannot write the spec files: {exc.strerror or exc}") from None
    finally:
        for leftover in [t for t, _ in temps] + [b for _, b in placed if b]:
            with contextlib.suppress(OSError):
                os.unlink(leftover)
    return targets
