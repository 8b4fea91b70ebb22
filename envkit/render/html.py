"""The fleet view as one self-contained HTML page: a heat map of nodes × checks, the fleet's facts
and the nodes that differ. Inline CSS, no scripts, no external assets: the page is mailed,
attached to tickets and opened on air-gapped login nodes. Every value is escaped (node names,
check summaries and environment variables come from the machines, not from envkit).
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Final

from envkit import __version__
from envkit.checks._common import plural
from envkit.fleet.aggregate import FLEET_SCHEMA
from envkit.fleet.fingerprint import aspect, show
from envkit.report import GLYPHS, Status

if TYPE_CHECKING:
    from envkit.fleet.aggregate import Fleet, Node

__all__ = ["render_html"]

# How many values of one fact are listed before "and N more" (a kernel can differ on every node).
_MAX_VALUES: Final = 8
_CSS: Final = """
body{font:13px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em;margin:0}h2{font-size:1.1em;margin:1.6em 0 .4em}
.verdict{font-weight:600}.ok{color:#1b5e20}.bad{color:#b71c1c}
table{border-collapse:collapse}th,td{text-align:left;vertical-align:top}
.list td,.list th{padding:2px 8px;border-bottom:1px solid #eee}
.list th{background:#f5f5f5}.dim{color:#777}code{font-size:12px}
.map{font-size:11px;line-height:14px}
.map td{width:14px;min-width:14px;height:14px;padding:0;text-align:center;border:1px solid #fff}
.map th.node{padding:0 6px 0 0;font-weight:normal;white-space:nowrap}
.map thead th{padding:0 1px;font-weight:normal}
.map thead th.check{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;
 vertical-align:bottom}
.map .count td{font-size:9px}
.pass{background:#a5d6a7}.warn{background:#ffcc80}.fail{background:#e57373;color:#fff}
.skip{background:#e0e0e0;color:#777}.missing{background:#fafafa;color:#bbb}
.legend span{display:inline-block;padding:0 6px;margin-right:6px}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _table(head: tuple[str, ...], rows: list[str]) -> str:
    cells = "".join(f"<th>{_e(h)}</th>" for h in head)
    return f'<table class="list"><thead><tr>{cells}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _facts(fleet: Fleet) -> str:
    rows = []
    for m in fleet.majorities:
        about = aspect(m.key)
        if m.tie:
            value = '<span class="bad">no majority</span>'
        else:
            value = f"<code>{_e(show(m.key, m.value))}</code>"
        others = [(v, n) for v, n in m.values if m.tie or v != m.value]
        shown = ", ".join(f"<code>{_e(show(m.key, v))}</code> on {n}" for v, n in others[:_MAX_VALUES])
        if len(others) > _MAX_VALUES:
            shown += f" and {len(others) - _MAX_VALUES} more"
        rows.append(
            f'<tr><td title="{_e(about.why)}">{_e(about.label)} <span class="dim">{_e(m.key)}</span></td>'
            f"<td>{value}</td><td>{m.nodes} of {m.total}</td><td>{shown}</td></tr>"
        )
    return _table(("fact", "fleet value", "nodes", "other values"), rows)


def _deviations(fleet: Fleet, anchors: dict[str, str]) -> str:
    rows = [
        f'<tr><td><a href="#{anchors[d.node]}">{_e(d.node)}</a></td>'
        f'<td class="{d.severity.value}">{_e(d.severity.value)}</td>'
        f"<td>{_e(aspect(d.key).label)} <span class='dim'>{_e(d.key)}</span></td>"
        f"<td><code>{_e(show(d.key, d.actual))}</code></td>"
        f"<td><code>{_e(show(d.key, d.expected))}</code></td>"
        f'<td class="dim">{_e(aspect(d.key).why)}</td></tr>'
        for d in fleet.deviations
    ]
    return _table(("node", "", "fact", "this node", "the fleet", "why it matters"), rows)


def _failures(fleet: Fleet, anchors: dict[str, str]) -> str:
    rows = [
        f'<tr><td><a href="#{anchors[f.node]}">{_e(f.node)}</a></td><td><code>{_e(f.check.id)}</code></td>'
        f"<td>{_e(f.check.summary)}</td><td><code>{_e(f.check.fix)}</code></td></tr>"
        for f in fleet.failures
    ]
    return _table(("node", "check", "summary", "fix"), rows)


def _cell(node: Node, check_id: str) -> str:
    result = node.result(check_id)
    if result is None:
        return f'<td class="missing" title="{_e(node.name)} · {_e(check_id)}: not in this report">·</td>'
    status = result.status
    title = f"{node.name} · {check_id}: {status.value} — {result.summary}"
    return f'<td class="{status.value}" title="{_e(title)}">{GLYPHS[status]}</td>'


def _idle(fleet: Fleet) -> list[str]:
    """The checks every node skipped (an NVIDIA fleet's AMD and Intel checks): a column of dashes
    says nothing, so they are named once under the map instead."""
    return [cid for cid in fleet.check_ids if fleet.check_counts(cid)["skip"] == len(fleet.nodes) > 0]


def _heatmap(fleet: Fleet, anchors: dict[str, str]) -> str:
    idle = set(_idle(fleet))
    shown = [c for c in fleet.check_ids if c not in idle]
    heads = "".join(f'<th class="check" title="{_e(c)}">{_e(c)}</th>' for c in shown)
    counts = []
    for cid in shown:
        c = fleet.check_counts(cid)
        bad = f"{c['fail']}✗" if c["fail"] else f"{c['warn']}!" if c["warn"] else ""
        counts.append(
            f'<td title="{_e(cid)}: {_e(", ".join(f"{n} {s}" for s, n in c.items() if n))}">{bad}</td>'
        )
    by_node: dict[str, list[str]] = {}
    for d in fleet.deviations:
        by_node.setdefault(d.node, []).append(
            f"{d.key}: {show(d.key, d.actual)} (fleet: {show(d.key, d.expected)})"
        )
    worst = {d.node: d.severity for d in reversed(fleet.deviations)}
    rows = []
    for node in fleet.nodes:
        cells = "".join(_cell(node, cid) for cid in shown)
        if node.name in by_node:
            title = node.name + " differs: " + "; ".join(by_node[node.name])
            cells += f'<td class="{worst[node.name].value}" title="{_e(title)}">≠</td>'
        else:
            cells += f'<td class="pass" title="{_e(node.name)}: facts agree with the fleet"></td>'
        rows.append(
            f'<tr><th class="node" scope="row" id="{anchors[node.name]}">{_e(node.name)}</th>{cells}</tr>'
        )
    skipped = ""
    if idle:
        first = fleet.nodes[0]
        named = [
            f"{cid} ({r.summary})" if (r := first.result(cid)) else cid
            for cid in fleet.check_ids
            if cid in idle
        ]
        skipped = f'<p class="dim">skipped on every node: {_e("; ".join(named))}</p>'
    return (
        '<table class="map"><thead>'
        f'<tr><th></th>{heads}<th class="check">facts</th></tr>'
        f'<tr class="count"><th class="node dim">problems</th>{"".join(counts)}<td></td></tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table>{skipped}"
    )


def render_html(fleet: Fleet, *, strict: bool = False) -> str:
    """The whole page as one string (UTF-8 text); ``strict`` as for the exit code."""
    # Node names can be anything a report says; ids derived from the position are always valid.
    anchors = {node.name: f"node-{i}" for i, node in enumerate(fleet.nodes)}
    s = fleet.summary(strict=strict)
    verdict = (
        f'<p class="verdict {"ok" if s["exit_code"] == 0 else "bad"}">{s["status"]}: '
        f"{plural(s['nodes'], 'node')}, {s['healthy']} without findings, {s['failing']} with a failing "
        f"check, {s['deviating']} that {'differs' if s['deviating'] == 1 else 'differ'} from the fleet"
        + (f", {plural(s['unreadable'], 'unreadable report')}" if s["unreadable"] else "")
        + "</p>"
    )
    legend = "".join(f'<span class="{s.value}">{GLYPHS[s]} {s.value}</span>' for s in Status)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>envkit fleet: {len(fleet.nodes)} nodes</title><style>{_CSS}</style></head><body>",
        f"<h1>envkit fleet</h1>{verdict}",
    ]
    if fleet.notes:
        parts.append("<ul>" + "".join(f"<li>{_e(n)}</li>" for n in fleet.notes) + "</ul>")
    if fleet.unreadable:
        rows = [
            f"<tr><td><code>{_e(u.path)}</code></td><td>{_e(u.error)}</td></tr>" for u in fleet.unreadable
        ]
        parts.append(f"<h2>Reports that cannot be read ({len(rows)})</h2>{_table(('file', 'why'), rows)}")
    parts.append(f"<h2>Fleet facts (the most common value)</h2>{_facts(fleet)}")
    if fleet.groups:
        rows = [f"<tr><td>{_e(g.label)}</td><td>{len(g.nodes)}</td></tr>" for g in fleet.groups]
        parts.append("<h2>GPU groups (each compared within itself)</h2>" + _table(("GPUs", "nodes"), rows))
    if fleet.deviations:
        parts.append(f"<h2>Nodes that differ ({s['deviating']})</h2>{_deviations(fleet, anchors)}")
    if fleet.failures:
        parts.append(f"<h2>Failing checks ({s['failing']} nodes)</h2>{_failures(fleet, anchors)}")
    parts.append(
        f'<h2>Checks on every node</h2><p class="legend">{legend}'
        '<span class="missing">· not reported</span><span class="dim">hover a cell for its summary</span></p>'
        f"{_heatmap(fleet, anchors)}"
    )
    parts.append(f'<p class="dim">{FLEET_SCHEMA} · envkit {_e(__version__)}</p>')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
