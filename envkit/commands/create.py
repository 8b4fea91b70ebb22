"""``envkit create``: the command's flow (prepare, show, execute, verify) and its progress display.

Progress goes to stderr (a spinner with the installer's latest line); only the requested data (the
envkit.create/1 JSON with --json) goes to stdout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from envkit.errors import EXIT_CHECK_FAILED, EXIT_OK

if TYPE_CHECKING:
    from pathlib import Path

    from envkit.commands.resolve import PlanFlags
    from envkit.create.install import Installation, Step
    from envkit.report import Report

__all__ = ["run"]

# What create verifies: the device and what torch does first (compile, AMP); dist and perf belong to
# the cluster (envkit verify / preflight).
CREATE_CHECKS = ("device", "compile", "amp")


def _show(install: Installation, console: Any) -> None:
    plan = install.plan
    console.print(f"envkit create — {install.name} at {install.prefix} ({install.backend})", markup=False)
    cuda = f"CUDA {plan.cuda}" if plan.cuda else "CPU only"
    console.print(
        f"  torch {plan.torch} + {plan.variant} ({cuda}) for {plan.target.describe()}", markup=False
    )
    for warning in plan.warnings:
        console.print(f"  ! {warning}", markup=False, style="yellow")
    for step in install.steps:
        console.print(f"  $ {step.shown()}", markup=False)
    for name in install.spec_files:
        console.print(f"  writes {install.prefix / 'envkit' / name}", markup=False)


def run(
    *,
    name: Optional[str],
    prefix: Optional[str],
    template: Optional[str],
    flags: PlanFlags,
    backend: str,
    mirrors: tuple[str, ...],
    wheelhouse: Optional[str],
    offline: bool,
    dry_run: bool,
    force: bool,
    verify: bool,
    json_out: bool,
    console: Any,
    errors: Any,
) -> int:
    from envkit.create.install import CONDA_FAMILY, check_place, execute
    from envkit.create.prepare import CreateRequest, prepare
    from envkit.redact import redact
    from envkit.system import System

    system = System()
    request = CreateRequest(name, prefix, template, flags, backend, mirrors, wheelhouse, offline)
    install = prepare(system, request)
    # The refusals (not an environment, taken, left-overs) come before the plan is shown, and the
    # same for --dry-run; execute() decides again under the lock.
    will = check_place(install, force=force)
    if dry_run:
        if json_out:
            _json({**install.to_json(), "status": "dry-run", "will": will})
        else:
            _show(install, console)
            for line in will:
                console.print(f"  {line}", markup=False)
        return EXIT_OK
    _show(install, errors)
    verifier = _verifier(system) if verify else None
    from rich.markup import escape

    with errors.status("starting…") as status:

        def on_step(step: Step) -> None:
            errors.print(f"→ {step.title}", markup=False)
            status.update(step.title)

        def on_line(line: str) -> None:
            # The installer's own line, shown live: redacted (pip and uv may echo an index URL) and
            # escaped (rich reads a status as markup).
            if line.strip():
                status.update(escape(redact(line.strip())[:120]))  # redact, then cut: a cut URL hides less

        def on_note(note: str) -> None:
            errors.print(f"envkit: {note}", markup=False)

        report = execute(
            system, install, force=force, on_step=on_step, on_line=on_line, on_note=on_note, verify=verifier
        )
    code = EXIT_OK if report is None else report.exit_code()
    if json_out:
        _json({**install.to_json(), "status": "created", "verify": report.to_json() if report else None})
    elif report is not None:
        from envkit.render.console import render_report

        render_report(report, console, title="envkit verify")
    where = (
        f"conda activate {install.prefix}"
        if install.backend in CONDA_FAMILY
        else f"source {install.prefix}/bin/activate"
    )
    errors.print(f"created {install.prefix}; use it with: {where}", markup=False)
    return EXIT_CHECK_FAILED if code else EXIT_OK


def _verifier(system: Any) -> Any:
    def verify_env(python: Path) -> Report:
        from envkit.verify import verify

        return verify(system, python=str(python), checks=CREATE_CHECKS)

    return verify_env


def _json(data: dict[str, Any]) -> None:
    from envkit.render.jsonout import print_json

    print_json(data)
