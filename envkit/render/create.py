"""``envkit create`` for people: the installation it will make, live progress on stderr, the end."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Optional

from rich.markup import escape
from rich.text import Text

from envkit.redact import redact
from envkit.render.console import safe_console
from envkit.render.terminal import printable

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from rich.console import Console

    from envkit.commands.create import Created
    from envkit.create.backends import Step
    from envkit.create.install import Installation

__all__ = ["InstallProgress", "install_progress", "render_created", "render_installation"]

# The installer's line in the spinner: enough to see what it is doing, never a screenful.
LINE_WIDTH = 120


def render_installation(install: Installation, console: Console, *, will: Sequence[str] = ()) -> None:
    """The plan and the exact commands (what ``--dry-run`` prints, and the real run first)."""
    console = safe_console(console)
    plan = install.plan
    console.print(Text(f"envkit create — {install.name} at {install.prefix} ({install.backend})"))
    cuda = f"CUDA {plan.cuda}" if plan.cuda else "CPU only"
    console.print(Text(f"  torch {plan.torch} + {plan.variant} ({cuda}) for {plan.target.describe()}"))
    for note in install.notes:
        if note.startswith("channel: "):
            console.print(Text(f"  {note}"))
    if plan.conda is not None:
        route = "the pytorch channel" if plan.conda.route.value == "pytorch-channel" else "conda-forge"
        console.print(Text(f"  conda route: {route}: {' '.join(plan.conda.dependencies)}"))
    if install.conda is not None:
        console.print(Text(f"  channels: {', '.join(install.conda.get('channels', ()))}"))
        virtual = install.conda.get("virtual_packages") or {}
        console.print(Text("  virtual packages: " + ", ".join(f"{n}={v}" for n, v in virtual.items())))
    for warning in plan.warnings:
        console.print(Text(f"  ! {warning}", style="yellow"))
    for note in plan.notes:
        console.print(Text(f"  {note}", style="dim"))
    for step in install.steps:
        console.print(Text(f"  $ {step.shown()}"))
    for name in install.spec_files:
        console.print(Text(f"  writes {install.prefix / 'envkit' / name}"))
    for line in will:
        console.print(Text(f"  {line}"))


class InstallProgress:
    """envkit.commands.create.Progress on a rich status line: each step as it starts, the
    installer's latest line (redacted: pip and uv may echo an index URL), then "verifying"."""

    def __init__(self, console: Console, status: Any) -> None:
        self._console = safe_console(console)
        self._status = status

    def step(self, step: Step) -> None:
        self._console.print(Text(f"→ {step.title}"))
        self._status.update(escape(printable(step.title)))

    def line(self, line: str) -> None:
        if line.strip():
            # redact, then cut: a cut URL hides less; escape: rich reads a status as markup
            self._status.update(escape(printable(redact(line.strip())[:LINE_WIDTH])))

    def note(self, note: str) -> None:
        self._console.print(Text(f"envkit: {note}"))

    def verifying(self) -> None:
        self._console.print(Text("→ verifying the new environment (envkit verify: device, compile, amp)"))
        self._status.update("verifying…")


@contextlib.contextmanager
def install_progress(console: Console) -> Iterator[InstallProgress]:
    """A live status on ``console`` (stderr) for the length of the install."""
    with console.status("starting…") as status:
        yield InstallProgress(console, status)


def render_created(
    created: Created, console: Optional[Console], errors: Console, *, verbose: bool = False
) -> None:
    """The verify report on ``console`` (stdout; None with --json, which carries it) and where the
    environment is, with how to enter it (stderr)."""
    if created.report is not None and console is not None:
        from envkit.render.console import render_report

        render_report(created.report, console, title="envkit verify", verbose=verbose)
    safe_console(errors).print(Text(f"created {created.install.prefix}; use it with: {created.activate}"))
