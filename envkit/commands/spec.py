"""``envkit spec``: render a template and the plan into spec files, or check a spec people have.

Each function returns a record; the face (cli.py) prints it, so nothing here writes to a terminal.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from packaging.specifiers import SpecifierSet

from envkit.commands.check import SpecCheck, check_project
from envkit.errors import EnvkitError, InputError, NoBuildError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.knowledge import Knowledge
    from envkit.resolve.plan import Plan, PlanFlags, Request
    from envkit.resolve.target import Target
    from envkit.specs.template import Template
    from envkit.system import System

__all__ = ["SpecFiles", "check", "render"]


@dataclass(frozen=True)
class SpecFiles:
    """What ``envkit spec`` made: the files by name, where they were written (none with
    ``--stdout``), and the plan's warnings."""

    files: dict[str, str]
    written: tuple[Path, ...] = ()
    warnings: tuple[str, ...] = ()
    fmt: str = ""

    def single(self) -> str:
        """The one file ``--stdout`` prints; InputError when the format makes several."""
        if len(self.files) != 1:
            raise InputError(
                f"--stdout: --format {self.fmt} makes {len(self.files)} files; write them with -o DIR"
            )
        return next(iter(self.files.values()))


def render(
    system: System,
    template_name: str,
    flags: PlanFlags,
    *,
    fmt: Optional[str],
    out: str,
    mirrors: Sequence[str],
    pip_in_conda: bool,
    name: Optional[str],
    to_stdout: bool,
    force: bool,
    channel: Optional[str] = None,
) -> SpecFiles:
    """Resolve the plan for the template, render its files, and write them into ``out`` unless
    ``to_stdout`` (then the caller prints ``SpecFiles.single()``).

    The format decides the channel (conda formats resolve for conda unless ``pip_in_conda``);
    ``channel`` (``--channel``), when given, picks the format left open and must agree with one given.
    """
    from envkit.planning import make_plan
    from envkit.specs.container import CONTAINER_FORMATS
    from envkit.specs.render import (
        CONDA_FORMATS,
        default_format,
        render_specs,
        spec_flags,
        spec_mirrors,
        write_specs,
    )
    from envkit.specs.template import load_template

    if channel is not None and channel not in ("pip", "conda"):
        raise InputError(f"--channel {channel!r}: pip or conda")
    template = load_template(template_name)
    chosen = fmt or (channel if channel is not None else default_format(template))
    if chosen == "pixi":  # pixi.toml has both routes: conda-forge (pixi's own advice) unless asked
        flags = dataclasses.replace(flags, channel=channel or template.channel or "conda")
    elif channel is not None:
        resolves_for = "conda" if chosen in CONDA_FORMATS and not pip_in_conda else "pip"
        if channel != resolves_for:
            raise InputError(
                f"--channel {channel} and --format {chosen} disagree: --format {chosen} "
                f"{'takes torch from conda' if resolves_for == 'conda' else 'installs torch with pip'}",
                hint="leave one of them out"
                + ("; --pip-in-conda puts torch from pip into a conda env" if channel == "pip" else ""),
            )
    plan_flags = spec_flags(template, flags, chosen, pip_in_conda=pip_in_conda)
    if chosen in CONTAINER_FORMATS:
        plan = _container_plan(
            system,
            plan_flags,
            template,
            python_given=flags.python is not None,
            torch_given=flags.torch is not None or flags.cuda != "auto",
        )
    else:
        plan = make_plan(system, plan_flags)
    chosen_mirrors = spec_mirrors(mirrors, plan.variant) if mirrors else None
    files = render_specs(
        plan, template, chosen, mirror=chosen_mirrors, pip_in_conda=pip_in_conda, env_name=name
    )
    made = SpecFiles(files, warnings=tuple(plan.warnings), fmt=chosen)
    if to_stdout:
        made.single()  # refuse before anything is printed
        return made
    written = tuple(write_specs(files, out, force=force))
    return SpecFiles(files, written=written, warnings=made.warnings, fmt=chosen)


def _container_plan(
    system: System, flags: PlanFlags, template: Template, *, python_given: bool, torch_given: bool
) -> Plan:
    """The plan for an image, not for the machine envkit runs on: a Linux platform (this one's
    when it is Linux, else linux-x86_64), and the Python of the base image's OS (its python3 is what
    the image's venv is made of). A --python the user gave must match an image; the template's
    Python, or this machine's, is taken where an image has it, and else gives way to the picked
    image's, with a warning: a laptop's Python 3.11 says nothing about the container's."""
    from envkit.knowledge import load_knowledge
    from envkit.knowledge.containers import ImageKind
    from envkit.planning import make_request, make_target
    from envkit.resolve import resolve
    from envkit.specs.container import choose_image, image_kind

    k = load_knowledge()
    request = make_request(flags)
    target = make_target(system, flags)
    if not target.platform.startswith("linux-"):
        if flags.platform is not None:  # a Windows plan's wheels in a Linux image answer nothing asked
            raise InputError(
                f"--platform {flags.platform}: --format docker/apptainer builds a Linux image",
                hint="leave --platform out, or pass linux-x86_64 or linux-aarch64",
            )
        target = dataclasses.replace(
            target, platform="linux-x86_64", assumed=(*target.assumed, "linux-x86_64: the image's platform")
        )
    want = image_kind(template)
    missing: EnvkitError
    try:
        plan = resolve(k, target, request)
    except NoBuildError as error:
        # The template's (or this machine's) Python may have no build at all (3.7 for torch 2):
        # an image's Python may still have one, as when it merely has no image.
        if python_given or want is not ImageKind.CUDA_RUNTIME:
            raise
        missing, plan = error, None
    if plan is not None and want is ImageKind.PYTORCH and not torch_given and plan.cuda is not None:
        return _pytorch_image_plan(k, target, request, plan, template)
    if plan is not None and plan.cuda is None:
        return _os_image_plan(k, target, request, plan, python_given=python_given)
    if plan is not None:
        if python_given or want is not ImageKind.CUDA_RUNTIME:
            return plan  # an NGC / pytorch image brings its own Python
        try:
            choose_image(plan, k, want=want)
            return plan  # an image has this Python
        except InputError as error:
            missing = error
    # Else the Python of an image that fits, the one that gets the newest torch (a torch release
    # may have left a Python behind), then the newest CUDA patch.
    options = []
    for python in sorted({i.python for i in k.images if i.kind is want and i.python is not None}):
        try:
            moved = resolve(k, dataclasses.replace(target, python=python), request)
            image = choose_image(moved, k, want=want)
        except InputError as error:
            if "starts on driver" in error.message:  # an image of this Python the driver cannot start
                missing = error
            continue
        except NoBuildError:
            continue
        options.append((moved.torch, image.cuda, python, moved, image))
    if not options:
        raise missing
    *_, moved, image = max(options, key=lambda o: o[:3])
    wanted = f"the template's Python {template.python}" if template.python else f"Python {target.python}"
    why = (
        f"{wanted} is no base image's python3: planned for Python {image.python}, the python3 of "
        f"{image.ref} (pass --python to insist, with a --cuda whose image has it)"
    )
    return dataclasses.replace(moved, warnings=(*moved.warnings, why))


def _os_image_plan(k: Knowledge, target: Target, request: Request, plan: Plan, *, python_given: bool) -> Plan:
    """A ROCm, XPU or CPU plan's image is a plain OS one (its wheels bring their GPU user space):
    where none has the plan's Python and --python did not insist, the plan moves to the Python of
    one that has a build, with a warning, as for CUDA runtime images."""
    from envkit.knowledge.containers import load_os_images
    from envkit.resolve import resolve
    from envkit.specs.container import choose_os_image, container_warnings

    extra = tuple(container_warnings(plan))
    try:
        choose_os_image(plan)
        return dataclasses.replace(plan, warnings=(*plan.warnings, *extra))
    except InputError:
        if python_given:
            raise
    for image in sorted(load_os_images(), key=lambda i: i.python, reverse=True):
        try:
            moved = resolve(k, dataclasses.replace(target, python=image.python), request)
        except NoBuildError:
            continue
        why = (
            f"Python {plan.python} is no base image's python3: planned for Python {image.python}, the "
            f"python3 of {image.ref} (pass --python to insist)"
        )
        return dataclasses.replace(moved, warnings=(*moved.warnings, why, *extra))
    choose_os_image(plan)  # raises, naming the images there are
    return plan


def _pytorch_image_plan(
    k: Knowledge, target: Target, request: Request, plan: Plan, template: Template
) -> Plan:
    """A pytorch/pytorch image brings its torch: when none has the plan's (the newest torch for the
    target is often newer than the newest image envkit knows), the plan is for the newest image's
    torch and CUDA that the driver runs and the template admits, with a warning; --torch or
    --cuda insists instead."""
    from envkit.knowledge.containers import ImageKind
    from envkit.resolve import parse_cuda_request, resolve
    from envkit.specs.container import choose_image, image_fits

    try:
        choose_image(plan, k, want=ImageKind.PYTORCH)
        return plan
    except InputError as error:
        missing = error
    driver = target.checked_driver
    images = sorted(
        (
            i
            for i in k.images
            if i.kind is ImageKind.PYTORCH
            and i.torch is not None
            and (template.torch is None or template.torch.contains(i.torch, prereleases=True))
            and image_fits(k, i, driver, target.gpus)
        ),
        key=lambda i: (i.torch, i.cuda, i.ref),
        reverse=True,
    )
    for image in images:
        wanted = dataclasses.replace(
            request, torch=SpecifierSet(f"=={image.torch}"), cuda=parse_cuda_request(str(image.cuda))
        )
        try:
            moved = resolve(k, target, wanted)
            choose_image(moved, k, want=ImageKind.PYTORCH)
        except (InputError, NoBuildError):
            continue
        why = (
            f"no pytorch/pytorch image envkit knows has torch {plan.torch} ({plan.variant}): planned "
            f"for torch {moved.torch} ({moved.variant}), the torch of {image.ref} (pass --torch or --cuda "
            "to insist)"
        )
        return dataclasses.replace(moved, warnings=(*moved.warnings, why))
    raise missing


def _project_manifest(path: str) -> bool:
    """Whether ``path`` is a manifest only envkit.project reads (pyproject.toml, pixi.toml)."""
    name = Path(path).name
    return path != "-" and name in ("pyproject.toml", "pixi.toml") and Path(path).is_file()


def check(system: System, path: str, flags: PlanFlags, *, strict: bool = False) -> SpecCheck:
    """Check an environment.yml, requirements.txt, container file or project manifest (uv or
    Poetry pyproject.toml, pixi.toml) against the knowledge base and the target."""
    from envkit.knowledge import load_knowledge
    from envkit.planning import make_target
    from envkit.specs.check import check_spec_noted

    if _project_manifest(path):  # a pyproject.toml or pixi.toml: what the project installs
        platforms = (flags.platform,) if flags.platform else ()
        checked = check_project(system, path, dataclasses.replace(flags, platform=None), platforms=platforms)
        return SpecCheck(path, checked.results, strict)
    results, notes = check_spec_noted(path, load_knowledge(), make_target(system, flags))
    return SpecCheck(path, tuple(results), strict, tuple(notes))
