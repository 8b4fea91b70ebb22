"""The fleet view and the two-report diff for people (rich). Like render.py, a rendering module:
core modules never print. Long lists are cut to a few names: a thousand-node fleet still fits a
screen, and --json / --html carry everything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Optional

from rich.text import Text

from envkit.checks._common import plural
from envkit.fleet.fingerprint import TIERS, aspect, show
from envkit.render.console import STYLES, glyphs_for, safe_console
from envkit.report import Status

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.console import Console

    from envkit.fleet.aggregate import Fleet
    from envkit.fleet.diff import Diff

__all__ = ["render_diff", "render_fleet"]

# Node names listed before "and N more".
MAX_NAMES: Final = 8
# Two values longer than this together go on lines of their own.
INLINE: Final = 60


def _names(names: Sequence[str], most: int = MAX_NAMES) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def render_fleet(
    fleet: Fleet, console: Console, *, strict: bool = False, verbose: bool = False, quiet: bool = False
) -> None:
    """Fleet facts, the nodes that differ (grouped by what differs), failing checks, per-check tallies.

    ``quiet``: only the closing tally; ``verbose``: every node named, no list cut short."""
    console = safe_console(console)  # every value shown comes from reports made elsewhere
    if quiet:
        _fleet_tally(fleet, console, strict=strict)
        return
    most = 1 << 30 if verbose else MAX_NAMES
    glyphs = glyphs_for(console)
    header = Text("envkit fleet", style="bold")
    header.append(
        f" — {plural(len(fleet.nodes), 'node')}, {plural(len(fleet.check_ids), 'check')}", style="dim"
    )
    console.print(header)
    width = max((len(aspect(m.key).label) for m in fleet.majorities), default=0) + 2
    values = max((len(show(m.key, m.value)) for m in fleet.majorities if not m.tie), default=0) + 2
    for m in fleet.majorities:
        line = Text(f"  {aspect(m.key).label:<{width}}")
        if m.tie:
            split = ", ".join(f"{show(m.key, v)} on {n}" for v, n in m.values[:most])
            line.append(f"no majority: {split}", style="yellow")
        else:
            line.append(f"{show(m.key, m.value):<{values}}")
            line.append(f"{m.nodes} of {m.total}", style="dim" if m.nodes == m.total else "yellow")
        console.print(line)
    for note in fleet.notes:
        console.print(Text(f"  note: {note}", style="yellow"))
    if fleet.groups:
        # A mixed fleet: each node is compared with the nodes of its own GPU vendor and architecture.
        console.print()
        console.print(Text("GPU groups (each compared within itself)", style="bold underline"))
        for group in fleet.groups:
            line = Text(f"  {group.label}: ")
            line.append(f"{plural(len(group.nodes), 'node')} ({_names(group.nodes, most)})", style="dim")
            console.print(line)

    if fleet.unreadable:
        console.print()
        console.print(Text(f"Reports that cannot be read ({len(fleet.unreadable)})", style="bold underline"))
        for bad in fleet.unreadable[:most]:
            line = Text("  ")
            line.append(f"{glyphs[Status.FAIL]} ", style=STYLES[Status.FAIL])
            line.append(bad.error)
            console.print(line)
        if len(fleet.unreadable) > most:
            console.print(
                Text(f"    and {len(fleet.unreadable) - most} more (--json lists all)", style="dim")
            )

    if fleet.deviations:
        console.print()
        console.print(Text(f"Nodes that differ ({len(fleet.deviating_nodes())})", style="bold underline"))
        groups: dict[tuple[str, Optional[str], Optional[str]], list[str]] = {}
        for d in fleet.deviations:
            groups.setdefault((d.key, d.actual, d.expected), []).append(d.node)
        severity = {d.key: d.severity for d in fleet.deviations}
        for (key, actual, expected), nodes in groups.items():
            line = Text("  ")
            line.append(f"{glyphs[severity[key]]} ", style=STYLES[severity[key]])
            line.append(f"{aspect(key).label} {show(key, actual)}", style="bold")
            line.append(
                f" (fleet: {show(key, expected)}) on {plural(len(nodes), 'node')}: {_names(nodes, most)}"
            )
            line.append(f"\n      {aspect(key).why}", style="dim")
            console.print(line)

    if fleet.failures:
        console.print()
        console.print(
            Text(f"Failing checks ({plural(len(fleet.failing_nodes()), 'node')})", style="bold underline")
        )
        by_check: dict[str, list[tuple[str, str, str]]] = {}
        for f in fleet.failures:
            by_check.setdefault(f.check.id, []).append((f.node, f.check.summary, f.check.fix))
        for cid, rows in by_check.items():
            for node, summary, _ in rows[:most]:
                line = Text("  ")
                line.append(f"{glyphs[Status.FAIL]} ", style=STYLES[Status.FAIL])
                line.append(f"{node}  {cid}", style="bold")
                line.append(f"  {summary}")
                console.print(line)
            if len(rows) > most:
                more = len(rows) - most
                console.print(
                    Text(
                        f"    and {more} more {_nodes(more)} {_verb(more, 'fail')} {cid}",
                        style="dim",
                    )
                )
            fixes = list(dict.fromkeys(fix for _, _, fix in rows if fix))
            for fix in fixes[:1]:
                console.print(Text(f"      fix: {fix.splitlines()[0]}", style="cyan"))

    console.print()
    console.print(Text("Checks", style="bold underline"))
    id_width = max((len(c) for c in fleet.check_ids), default=0) + 2
    for cid in fleet.check_ids:
        counts = fleet.check_counts(cid)
        worst = next((s for s in (Status.FAIL, Status.WARN) if counts[s.value]), Status.PASS)
        line = Text("  ")
        line.append(f"{glyphs[worst]} ", style=STYLES[worst])
        line.append(f"{cid:<{id_width}}")
        line.append(", ".join(f"{n} {s}" for s, n in counts.items() if n))
        if worst is not Status.PASS:
            odd = [n.name for n in fleet.nodes if n.status(cid) is worst]
            line.append(f": {_names(odd, most)}", style=STYLES[worst])
        console.print(line)

    console.print()
    _fleet_tally(fleet, console, strict=strict)


def _fleet_tally(fleet: Fleet, console: Console, *, strict: bool) -> None:
    totals = fleet.summary(strict=strict)
    tally = Text(
        f"{plural(totals['nodes'], 'node')}: {totals['healthy']} without findings, "
        f"{totals['failing']} with a failing check, {totals['deviating']} that "
        f"{_verb(totals['deviating'], 'differ')}"
        + (f", {plural(totals['unreadable'], 'unreadable report')}" if totals["unreadable"] else "")
        + " — "
    )
    healthy = totals["exit_code"] == 0
    tally.append("healthy" if healthy else "unhealthy", style="green" if healthy else "bold red")
    step = "" if healthy else _next_step(fleet)
    if step:
        tally.append(f"; next: {step}", style="cyan")
    console.print(tally)


def _next_step(fleet: Fleet) -> str:
    """The command that shows why the fleet is unhealthy: the first failing node's own report
    through doctor (its cause and fix), else a node that differs beside one that does not."""
    by_name = {n.name: n for n in fleet.nodes}
    for name in fleet.failing_nodes():
        node = by_name.get(name)
        if node is not None and node.source:
            return f"envkit doctor --from {node.source} (its cause and fix)"
    odd = [by_name[n] for n in fleet.deviating_nodes() if n in by_name and by_name[n].source]
    plain = [n for n in fleet.nodes if n.name not in fleet.deviating_nodes() and n.source]
    if odd and plain:
        return f"envkit diff {plain[0].source} {odd[0].source} (what sets it apart)"
    return ""


def render_diff(diff: Diff, console: Console, *, verbose: bool = False, quiet: bool = False) -> None:
    """Differences by rank (likeliest cause first), then the checks whose verdict differs.

    ``quiet``: only the closing line (how many differ, where to look first); ``verbose``: each
    differing check's detail too."""
    console = safe_console(console)  # every value shown comes from reports made elsewhere
    if quiet:
        _diff_tally(diff, console)
        return
    glyphs = glyphs_for(console)
    header = Text("envkit diff", style="bold")
    header.append(f" — A: {diff.a_name}  B: {diff.b_name}", style="dim")
    console.print(header)
    for note in diff.notes:
        console.print(Text(f"  note: {note}", style="yellow"))
    if diff.identical:
        console.print(Text("  no differences in the facts or the checks", style="green"))
        return
    tier = 0
    for d in diff.differences:
        if d.rank != tier:
            tier = d.rank
            console.print()
            console.print(Text(TIERS[tier], style="bold underline"))
        a, b = d.shown()
        line = Text("  ")
        line.append(d.key, style="bold")
        if len(a) + len(b) <= INLINE:
            line.append(f"  {a} → {b}")
        else:
            line.append(f"\n      A: {a}\n      B: {b}")
        line.append(f"\n      {d.why}", style="dim")
        console.print(line)
    if diff.checks:
        console.print()
        console.print(Text("Checks that differ", style="bold underline"))
        for c in diff.checks:
            line = Text("  ")
            line.append(f"{c.id}  ", style="bold")
            for i, side in enumerate((c.a, c.b)):
                if i:
                    line.append(" → ")
                if side is None:
                    line.append("not run", style="dim")
                else:
                    line.append(f"{glyphs[side.status]} {side.status.value}", style=STYLES[side.status])
            worse = c.worse
            line.append(f"\n      {worse.summary}")
            if verbose and worse.detail:
                line.append("".join(f"\n      {d}" for d in worse.detail.splitlines()), style="dim")
            if worse.fix and worse.status in (Status.FAIL, Status.WARN):
                line.append(f"\n      fix: {worse.fix.splitlines()[0]}", style="cyan")
            console.print(line)
    console.print()
    _diff_tally(diff, console)


def _diff_tally(diff: Diff, console: Console) -> None:
    if diff.identical:
        console.print(Text("no differences in the facts or the checks", style="green"))
        return
    first = diff.differences[0].key if diff.differences else (diff.checks[0].id if diff.checks else "")
    console.print(
        Text(
            f"{plural(len(diff.differences), 'fact')} and {plural(len(diff.checks), 'check')} differ; "
            f"look first at {first}"
        )
    )


def _nodes(count: int) -> str:
    return "node" if count == 1 else "nodes"


def _verb(count: int, verb: str) -> str:
    """A verb agreeing with its count: "1 that differs", "2 that differ"."""
    return f"{verb}s" if count == 1 else verb
