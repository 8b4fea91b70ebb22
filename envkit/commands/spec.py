"""``envkit spec``: the glue between the command line and templates, plans, mirrors and specs.

Kept out of cli.py so that the command there stays parse → call → return; this module prints
through the consoles it is given (the CLI's), never on its own.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Optional

from envkit.commands.resolve import PlanFlags
from envkit.errors import EXIT_CHECK_FAILED, EXIT_OK, InputError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["check", "plan_flags", "print_templates", "render"]

SPEC_CHECK_SCHEMA = "envkit.spec-check/1"


def plan_flags(
    torch: Optional[str],
    cuda: str,
    driver: Optional[str],
    gpus: Optional[Sequence[str]],
    no_gpu: bool,
    platform: Optional[str],
    python: Optional[str],
    env: Optional[str],
) -> PlanFlags:
    return PlanFlags(driver, tuple(gpus or ()), no_gpu, platform, python, env, torch, cuda, "pip")


def print_templates(console: Any) -> None:
    from envkit.specs.template import list_templates

    for template in list_templates():
        console.print(f"{template.name:14s} {template.description}", markup=False)


def render(
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
    console: Any,
    errors: Any,
) -> int:
    from envkit.commands.resolve import make_plan
    from envkit.specs.render import default_format, render_specs, spec_flags, spec_mirrors, write_specs
    from envkit.specs.template import load_template
    from envkit.system import System

    template = load_template(template_name)
    chosen = fmt or default_format(template)
    plan = make_plan(System(), spec_flags(template, flags, chosen, pip_in_conda=pip_in_conda))
    chosen_mirrors = spec_mirrors(mirrors, plan.variant) if mirrors else None
    files = render_specs(
        plan, template, chosen, mirror=chosen_mirrors, pip_in_conda=pip_in_conda, env_name=name
    )
    for warning in plan.warnings:
        errors.print(f"envkit: warning: {warning}", markup=False)
    if to_stdout:
        if len(files) != 1:
            raise InputError(f"--stdout: --format {chosen} makes {len(files)} files; write them with -o DIR")
        sys.stdout.write(next(iter(files.values())))
        return EXIT_OK
    for path in write_specs(files, out, force=force):
        errors.print(f"wrote {path}", markup=False)
    return EXIT_OK


def check(path: str, flags: PlanFlags, console: Any, *, json_out: bool, strict: bool) -> int:
    from envkit._serial import to_jsonable
    from envkit.commands.resolve import make_target
    from envkit.knowledge import load_knowledge
    from envkit.report import Status
    from envkit.specs.check import check_spec
    from envkit.system import System

    results = check_spec(path, load_knowledge(), make_target(System(), flags))
    bad = {Status.FAIL, Status.WARN} if strict else {Status.FAIL}
    code = EXIT_CHECK_FAILED if any(r.status in bad for r in results) else EXIT_OK
    if json_out:
        from envkit.render.jsonout import print_json

        data = {
            "schema": SPEC_CHECK_SCHEMA,
            "file": path,
            "checks": [to_jsonable(r) for r in results],
            "exit_code": code,
        }
        print_json(data)
        return code
    from envkit.render.console import render_checks

    render_checks(results, console, title=f"envkit spec --check {path}")
    return code
