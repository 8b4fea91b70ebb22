"""``envkit add`` for people: the plan per platform, each file's edit as a unified diff (the data,
on stdout), and what was written or would be (stderr)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from envkit.render.console import safe_console

if TYPE_CHECKING:
    from rich.console import Console

    from envkit.commands.add import Added

__all__ = ["render_added"]


def _plans(added: Added, errors: Console) -> None:
    for want in added.wants:
        for source in want.sources:
            plan = source.plan
            where = source.index_url or "the project's default index (PyPI)"
            if plan.conda is not None and plan.channel.value == "conda":
                where = f"conda ({', '.join(plan.conda.channels)}: {' '.join(plan.conda.dependencies)})"
            also = f" (and {', '.join(source.platforms[1:])})" if len(source.platforms) > 1 else ""
            what = f"torch {plan.torch} ({plan.variant}) for {plan.target.describe()}{also}"
            errors.print(Text(f"envkit: {what}: from {where}"))
        for extra, source in want.extras:
            errors.print(Text(f"envkit: extra {extra}: torch {source.plan.torch} ({source.variant})"))
    for warning in added.warnings:
        errors.print(Text(f"envkit: warning: {warning}"))
    for note in added.notes:
        errors.print(Text(f"envkit: note: {note}"))


def render_added(added: Added, out: Console, errors: Console, *, quiet: bool = False) -> None:
    out, errors = safe_console(out), safe_console(errors)
    if not quiet:
        _plans(added, errors)
    changed = [e for e in added.edits if e.changed]
    for edit in changed:
        out.print(Text(edit.diff().rstrip("\n")))
    if quiet:
        return
    if not changed:
        names = ", ".join(e.path.name for e in added.edits)
        verb = "says" if len(added.edits) == 1 else "say"
        errors.print(Text(f"envkit: {names} already {verb} this: nothing to change"))
        return
    verb = "would edit" if added.dry_run else "edited"
    for edit in changed:
        errors.print(Text(f"envkit: {verb} {edit.path} ({edit.kind})"))
