"""``envkit spec`` for people: the template list, the plan's warnings and the files written."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from envkit.render.console import safe_console

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.console import Console

    from envkit.commands.spec import SpecFiles
    from envkit.specs.template import Template

__all__ = ["render_spec_files", "render_templates"]


def render_templates(templates: Sequence[Template], console: Console) -> None:
    """One line per template: its name and what it is for (descriptions come from user files too)."""
    console = safe_console(console)
    for template in templates:
        console.print(Text(f"{template.name:14s} {template.description}"))


def render_spec_files(made: SpecFiles, errors: Console) -> None:
    """The plan's warnings and each file written, on stderr (stdout stays for ``--stdout``)."""
    errors = safe_console(errors)
    for warning in made.warnings:
        errors.print(Text(f"envkit: warning: {warning}"))
    for path in made.written:
        errors.print(Text(f"wrote {path}"))
