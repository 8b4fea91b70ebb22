"""``envkit fleet``: many nodes' saved reports side by side, and the odd node out.

Each node is one ``envkit.report/1`` file (``envkit doctor --json > $(hostname).json`` on every
node). The fleet view holds every check's status on every node, the most common value of each key
fact (driver, GPU model and count, MIG, torch build and its CUDA, cuDNN, NCCL, triton, nvcc, Python,
OS, kernel, NCCL_* variables), and every node that differs from it.

What counts as failure (the exit code):

- a node with a failing check: 1;
- a node that differs in GPU count, GPU model or MIG mode: 1. It cannot run the job shape the rest
  runs (torchrun --nproc-per-node, memory per rank), and 7 of 8 GPUs usually means one fell off
  the bus; DCGM's diag fails on a GPU count mismatch too (``dcgmi diag -n gpu:N``);
- a fleet split evenly on one of those (no majority to tell which nodes are odd): 1;
- any other difference (driver, torch, NCCL, kernel, …) is reported but fails only with
  ``strict``, as warnings do: a rolling driver update is a normal state of a fleet;
- a report that cannot be read (truncated by a node that died mid-write, not JSON, not an
  ``envkit.report/1``): the others are still compared and shown, the bad one is listed with the
  reason, and the exit code is 1 (that node's health is unknown, so the fleet is not known
  healthy). With ``strict`` it is 2 instead, an input error, as it would be for a single report.
  When no report at all can be read there is nothing to compare: an input error (2).

Ties are reported as ties: with 50 nodes on one driver and 50 on another, no node is "the odd one".

Reports are read one at a time and only what the views show is kept of each (its fleet key facts,
and each check's id, status, summary and fix): memory grows with the fleet's summary, not with
the reports' size. Equal texts are kept once for the whole fleet.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Optional

from envkit import __version__
from envkit._files import decode_text, parse_json, read_bytes
from envkit.errors import EXIT_CHECK_FAILED, EXIT_OK, EXIT_USAGE, InputError
from envkit.fleet.fingerprint import ASPECTS, FLEET_ENV, aspect, fleet_fingerprint, order, show
from envkit.report import CheckResult, Report, Status, decode_report, report_from_json

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

__all__ = [
    "FLEET_SCHEMA",
    "Deviation",
    "Failure",
    "Fleet",
    "Majority",
    "Node",
    "Unreadable",
    "build_fleet",
    "collector_paused",
    "load_fleet",
    "natural_key",
    "read_report",
    "report_paths",
]

FLEET_SCHEMA: Final = "envkit.fleet/1"
# Reports' own result objects remembered by identity (_Summaries._result), at most: results
# that differ on every node (a reading in the detail) must not make memory grow with the fleet.
_SEEN_MAX: Final = 4096
_HINT: Final = "save one on each node with `envkit doctor --json > $(hostname).json`"


@dataclass(frozen=True)
class Node:
    """One node: what the fleet views show of its report, and its fleet key facts (key -> value,
    None where not found). Nodes with the same values share one ``facts`` dict (and one ``checks``
    tuple): read it, do not edit it, or every node alike changes too; ``dict(node.facts)`` is one's own."""

    name: str
    host: Optional[str]
    source: Optional[str]
    created: str
    envkit_version: str
    # Each check's id, status, summary and fix (detail and metrics are not kept).
    checks: tuple[CheckResult, ...]
    facts: dict[str, Optional[str]]

    def status(self, check_id: str) -> Optional[Status]:
        """The check's status on this node; None where its report has no such check."""
        result = self.result(check_id)
        return None if result is None else result.status

    def result(self, check_id: str) -> Optional[CheckResult]:
        return next((c for c in self.checks if c.id == check_id), None)

    def exit_code(self, *, strict: bool = False) -> int:
        """What ``envkit doctor`` on this node exits with (envkit.report.Report.exit_code)."""
        bad = {Status.FAIL, Status.WARN} if strict else {Status.FAIL}
        return EXIT_CHECK_FAILED if any(c.status in bad for c in self.checks) else EXIT_OK


@dataclass(frozen=True)
class Majority:
    """The most common value of one key fact; ``tie`` when two or more values share the top count."""

    key: str
    value: Optional[str]  # None also when tie is True: there is no single most common value
    nodes: int  # how many nodes have the value (the top count when tied)
    total: int
    tie: bool
    values: tuple[tuple[Optional[str], int], ...]  # every value seen, most common first


@dataclass(frozen=True)
class Deviation:
    """A node whose value of a key fact differs from the fleet's most common one."""

    node: str
    key: str
    expected: Optional[str]
    actual: Optional[str]
    severity: Status  # FAIL for GPU count / model / MIG, WARN for the rest


@dataclass(frozen=True)
class Failure:
    node: str
    check: CheckResult


@dataclass(frozen=True)
class Unreadable:
    """A report file that could not be read, and why (the one-line message, naming the file)."""

    path: str
    error: str


@dataclass(frozen=True)
class Group:
    """The nodes of a mixed fleet that share a GPU vendor and architecture ("amd gfx942"): each is
    compared with the rest of its group, not with nodes of another kind of GPU."""

    label: str
    nodes: tuple[str, ...]
    majorities: tuple[Majority, ...]


@dataclass(frozen=True)
class Fleet:
    nodes: tuple[Node, ...]
    check_ids: tuple[str, ...]
    majorities: tuple[Majority, ...]
    deviations: tuple[Deviation, ...]
    failures: tuple[Failure, ...]
    notes: tuple[str, ...] = ()
    unreadable: tuple[Unreadable, ...] = ()
    # A mixed fleet's groups by GPU vendor and architecture; empty when every node has the same.
    groups: tuple[Group, ...] = ()

    def check_counts(self, check_id: str) -> dict[str, int]:
        """pass / warn / fail / skip counts of one check across nodes, and ``missing`` reports."""
        statuses = self._statuses.get(check_id, Counter())
        counts = {s.value: statuses.get(s, 0) for s in Status}
        counts["missing"] = len(self.nodes) - sum(statuses.values())
        return counts

    @functools.cached_property
    def _statuses(self) -> dict[str, Counter[Status]]:
        # One pass over every node's checks (a check id twice in one report counts once, its first).
        found: dict[str, Counter[Status]] = {}
        # Nodes share their checks tuple where their verdicts are equal (_Summaries): each distinct
        # tuple is counted once, times the nodes that hold it.
        shared = Counter(id(n.checks) for n in self.nodes)
        for node in {id(n.checks): n for n in self.nodes}.values():
            seen = set()
            for c in node.checks:
                if c.id not in seen:
                    seen.add(c.id)
                    counts = found.get(c.id)
                    if counts is None:
                        counts = found[c.id] = Counter()
                    counts[c.status] += shared[id(node.checks)]
        return found

    def failing_nodes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.node for f in self.failures))

    def deviating_nodes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d.node for d in self.deviations))

    def splits(self) -> tuple[Majority, ...]:
        if self.groups:
            return tuple(m for g in self.groups for m in g.majorities if m.tie)
        return tuple(m for m in self.majorities if m.tie)

    def exit_code(self, *, strict: bool = False) -> int:
        """1 for a failing check, a GPU count / model / MIG difference or split, or an unreadable
        report (2 for that with ``strict``); see the module doc."""
        if self.unreadable:
            return EXIT_USAGE if strict else EXIT_CHECK_FAILED
        bad = {Status.FAIL, Status.WARN} if strict else {Status.FAIL}
        if any(c.status in bad for n in self.nodes for c in n.checks):
            return EXIT_CHECK_FAILED
        if any(d.severity in bad for d in self.deviations):
            return EXIT_CHECK_FAILED
        if any(_severity(m.key) in bad for m in self.splits()):
            return EXIT_CHECK_FAILED
        return EXIT_OK

    def summary(self, *, strict: bool = False) -> dict[str, Any]:
        """The counts and the verdict (the JSON's "summary"; the terminal and HTML views say the same)."""
        code = self.exit_code(strict=strict)
        odd = set(self.failing_nodes()) | set(self.deviating_nodes())
        return {
            "nodes": len(self.nodes),
            "healthy": sum(1 for n in self.nodes if n.name not in odd),
            "failing": len(self.failing_nodes()),
            "deviating": len(self.deviating_nodes()),
            "splits": [m.key for m in self.splits()],
            "unreadable": len(self.unreadable),
            "status": "healthy" if code == EXIT_OK else "unhealthy",
            "strict": strict,
            "exit_code": code,
        }

    def to_json(self, *, strict: bool = False, lazy: bool = False) -> dict[str, Any]:
        """The envkit.fleet/1 document; with ``lazy``, "nodes" is a generator of the node entries,
        for a writer that streams them (envkit.render.jsonout.print_json): a 100,000-node fleet's
        entries are then never all in memory at once."""
        verdicts: dict[int, tuple[int, dict[str, str]]] = {}  # per distinct checks tuple

        def verdict(n: Node) -> tuple[int, dict[str, str]]:
            found = verdicts.get(id(n.checks))
            if found is None:
                found = verdicts[id(n.checks)] = (
                    n.exit_code(strict=strict),
                    {c.id: c.status.value for c in n.checks},
                )
            return found

        # Nodes with the same verdicts share one "checks" dict: the entries are for writing out
        # (print_json), not for editing one node's.
        def entries() -> Iterator[dict[str, Any]]:
            for n in self.nodes:
                code, checks = verdict(n)
                yield {
                    "name": n.name,
                    "host": n.host,
                    "source": n.source,
                    "created": n.created,
                    "envkit_version": n.envkit_version,
                    "exit_code": code,
                    "checks": checks,
                    "facts": n.facts,
                }

        nodes = entries()
        return {
            "schema": FLEET_SCHEMA,
            "envkit_version": __version__,
            "nodes": nodes if lazy else list(nodes),
            "checks": [{"id": cid, **self.check_counts(cid)} for cid in self.check_ids],
            "facts": [
                {
                    "key": m.key,
                    "label": aspect(m.key).label,
                    "majority": m.value,
                    "nodes": m.nodes,
                    "of": m.total,
                    "tie": m.tie,
                    "values": [{"value": v, "nodes": n} for v, n in m.values],
                }
                for m in self.majorities
            ],
            "deviations": [
                {
                    "node": d.node,
                    "key": d.key,
                    "expected": d.expected,
                    "actual": d.actual,
                    "severity": d.severity.value,
                    "why": aspect(d.key).why,
                }
                for d in self.deviations
            ],
            "failures": [
                {"node": f.node, "check": f.check.id, "summary": f.check.summary, "fix": f.check.fix}
                for f in self.failures
            ],
            "notes": list(self.notes),
            "unreadable": [{"path": u.path, "error": u.error} for u in self.unreadable],
            "groups": [{"gpus": g.label, "nodes": list(g.nodes)} for g in self.groups],
            "summary": self.summary(strict=strict),
        }


def natural_key(name: str) -> list[Any]:
    """Sort node-2 before node-10: digit runs compare as numbers.

    >>> sorted(["node-10", "node-2", "Node-1"], key=natural_key)
    ['Node-1', 'node-2', 'node-10']
    """
    # re.split with a group alternates text and digit runs, so equal positions hold equal types.
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", name)]


def _severity(key: str) -> Status:
    """How much a node that differs in ``key`` matters: FAIL for the job-shape facts, else WARN."""
    return aspect(key).fleet or Status.WARN


def _majority(key: str, values: Sequence[Optional[str]]) -> Majority:
    counts = Counter(values)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0] is None, item[0] or ""))
    top_value, top = ranked[0]
    tie = len(ranked) > 1 and ranked[1][1] == top
    return Majority(key, None if tie else top_value, top, len(values), tie, tuple(ranked))


def _fleet_keys(prints: Iterable[dict[str, Optional[str]]]) -> list[str]:
    keys = [a.key for a in ASPECTS.values() if a.fleet is not None]
    prefixes = tuple(f"env.{e}" for e in FLEET_ENV)
    # A node's fingerprint has the fixed keys and then its variables: only longer ones have any.
    env = {k for p in prints if len(p) > len(keys) for k in p if k.startswith(prefixes)}
    return keys + sorted(env, key=order)


class _Summaries:
    """Turns reports into Nodes (not yet named), keeping one copy of each equal text or result."""

    def __init__(self) -> None:
        self._texts: dict[Optional[str], Optional[str]] = {}
        self._facts: dict[tuple[tuple[str, Optional[str]], ...], dict[str, Optional[str]]] = {}
        self._results: dict[tuple[str, Status, str, str], CheckResult] = {}
        # The reports' own results are often the same objects (envkit.report shares them): by
        # identity first, holding each so that its id is not reused.
        self._seen: dict[int, tuple[CheckResult, CheckResult]] = {}
        self._checks: dict[tuple[int, ...], tuple[CheckResult, ...]] = {}

    def _text(self, value: Optional[str]) -> Optional[str]:
        return self._texts.setdefault(value, value)

    def _result(self, c: CheckResult) -> CheckResult:
        seen = self._seen.get(id(c))
        if seen is not None and seen[0] is c:
            return seen[1]
        key = (c.id, c.status, c.summary, c.fix)
        found = self._results.get(key)
        if found is None:
            found = self._results[key] = CheckResult(c.id, c.status, c.summary, fix=c.fix)
        if len(self._seen) < _SEEN_MAX:
            self._seen[id(c)] = (c, found)
        return found

    def _verdicts(self, report: Report) -> tuple[CheckResult, ...]:
        """The node's kept results; nodes with equal ones share one tuple (Fleet._statuses)."""
        results = tuple(self._result(c) for c in verdicts(report))
        return self._checks.setdefault(tuple(map(id, results)), results)

    def node(self, path: str, report: Report) -> tuple[str, Node]:
        texts = self._texts
        # The keys need no interning: _build gives every node the fleet's own key objects.
        facts = {k: texts.setdefault(v, v) for k, v in fleet_fingerprint(report.facts).items()}
        facts = self._facts.setdefault(tuple(facts.items()), facts)  # nodes alike share one dict
        node = Node(
            name="",
            host=self._text(report.host),
            source=report.source,
            created=self._text(report.created) or "",
            envkit_version=self._text(report.envkit_version) or "",
            checks=self._verdicts(report),
            facts=facts,
        )
        return path, node


def verdicts(report: Report) -> tuple[CheckResult, ...]:
    """The report's verdicts as this envkit gives them, so fleet and ``doctor --from`` agree on one
    file: a report made by this version keeps its own (the same facts give the same verdicts);
    another version's doctor checks are run again on its facts, and what needed the machine itself
    (verify.*, expect.*) is kept as it was recorded."""
    if report.envkit_version == __version__:
        return report.checks
    from envkit.checks import CHECKS, run_checks

    if not any(c.id in CHECKS for c in report.checks):
        return report.checks  # a verify report: nothing to recompute
    return (*run_checks(report.facts), *(c for c in report.checks if c.id not in CHECKS))


def build_fleet(reports: Sequence[tuple[str, Report]]) -> Fleet:
    """The fleet view of ``(path, report)`` pairs; a node is named by its report's host, else its file."""
    summaries = _Summaries()
    return _build([summaries.node(path, report) for path, report in reports])


def _build(entries: Sequence[tuple[str, Node]]) -> Fleet:
    if not entries:
        raise InputError("no reports to compare", hint=_HINT)
    notes: list[str] = []
    named: dict[str, tuple[str, Node]] = {}
    for path, entry in entries:
        name = entry.host or Path(path).stem
        if name in named:
            # The same host twice (a report saved twice, or two runs): both count, under distinct names.
            notes.append(f"{name}: more than one report ({named[name][0]}, {path}); each counts as a node")
            name = f"{name} ({path})"
        named[name] = (path, entry)
    keys = _fleet_keys(entry.facts for _, entry in named.values())
    names = sorted(named, key=natural_key)
    alike: dict[Any, dict[str, Optional[str]]] = {}  # a node's values -> the dict nodes alike share
    nodes = tuple(_named(named[n][1], n, keys, alike) for n in names)
    majorities = tuple(_majority(k, [n.facts[k] for n in nodes]) for k in keys)
    groups = _groups(nodes, keys)
    deviations = [
        d
        for members, compared in (
            [(nodes, majorities)] if not groups else [(g[0], g[1].majorities) for g in groups]
        )
        for d in _deviations(members, compared)
    ]
    rank = {n.name: i for i, n in enumerate(nodes)}
    deviations.sort(key=lambda d: (d.severity is not Status.FAIL, order(d.key), rank[d.node]))
    # Nodes with equal verdicts share one checks tuple (_Summaries): each is looked at once.
    distinct = list({id(n.checks): n.checks for n in nodes}.values())
    check_ids = tuple(dict.fromkeys(c.id for checks in distinct for c in checks))
    failing = {id(t) for t in distinct if any(c.status is Status.FAIL for c in t)}
    failures = tuple(
        Failure(n.name, c)
        for n in nodes
        if id(n.checks) in failing
        for c in n.checks
        if c.status is Status.FAIL
    )
    for label, compared in (
        [("", majorities)] if not groups else [(g[1].label, g[1].majorities) for g in groups]
    ):
        for m in compared:
            if m.tie:
                split = ", ".join(f"{show(m.key, v)} on {c}" for v, c in m.values)
                within = f" among the {label} nodes" if label else ""
                notes.append(f"{m.key}: no majority{within} ({split}); no node is singled out")
    return Fleet(
        nodes,
        check_ids,
        majorities,
        tuple(deviations),
        failures,
        tuple(notes),
        groups=tuple(g[1] for g in groups),
    )


# What sorts a mixed fleet into groups: nodes with other GPUs run other builds and other job shapes.
_GROUP_KEYS: Final = ("gpu.vendor", "gpu.arch")


def _group_label(node: Node) -> str:
    vendor, arch = (node.facts.get(k) for k in _GROUP_KEYS)
    return " ".join(v for v in (vendor or "no GPU", arch) if v)


def _groups(nodes: Sequence[Node], keys: Sequence[str]) -> list[tuple[list[Node], Group]]:
    """A mixed fleet's groups (largest first), each with its own majorities; [] for one kind of GPU."""
    by: dict[str, list[Node]] = {}
    for n in nodes:
        by.setdefault(_group_label(n), []).append(n)
    if len(by) < 2:
        return []
    ordered = sorted(by.items(), key=lambda item: (-len(item[1]), item[0]))
    return [
        (
            members,
            Group(
                label,
                tuple(n.name for n in members),
                tuple(_majority(k, [n.facts[k] for n in members]) for k in keys),
            ),
        )
        for label, members in ordered
    ]


def _deviations(nodes: Sequence[Node], majorities: Sequence[Majority]) -> list[Deviation]:
    return [
        Deviation(n.name, m.key, m.value, n.facts[m.key], _severity(m.key))
        for m in majorities
        if not m.tie
        for n in nodes
        if n.facts[m.key] != m.value
    ]


def _named(
    entry: Node,
    name: str,
    keys: Sequence[str],
    alike: dict[tuple[Optional[str], ...], dict[str, Optional[str]]],
) -> Node:
    """``entry`` under its name, with every fleet key (None where its report has none). Nodes with
    the same values share one facts dict (``alike``): read-only, like the rest of a Node; 9,900
    healthy nodes of 10,000 are then one dict, and writing them out redacts it once."""
    facts = entry.facts
    if len(facts) != len(keys) or any(a != b for a, b in zip(facts, keys)):
        facts = {k: facts.get(k) for k in keys}  # else it has them all, in the fleet's order
    facts = alike.setdefault(tuple(facts.values()), facts)
    return Node(  # not dataclasses.replace, which walks the fields again for every node
        name=name,
        host=entry.host,
        source=entry.source,
        created=entry.created,
        envkit_version=entry.envkit_version,
        checks=entry.checks,
        facts=facts,
    )


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused, then enabled again: while thousands of reports
    are decoded and their nodes kept, its passes walk the growing set of kept objects again and
    again, about a tenth of the time of ``envkit fleet`` at 10,000 reports. Decoded JSON and the
    records make no reference cycles; what they free, reference counting frees at once."""
    if not gc.isenabled():
        yield  # paused by a caller already
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def report_paths(args: Sequence[str]) -> list[str]:
    """The report files named: files as given, folders as their ``*.json`` files (sorted)."""
    if not args:
        raise InputError("give the report files (or folders of them) to compare", hint=_HINT)
    paths: list[str] = []
    for arg in args:
        folder = Path(arg)
        if folder.is_dir():
            found = sorted(_json_files(folder, arg))
            if not found:
                raise InputError(f"{arg}: no *.json reports in this folder", hint=_HINT)
            paths += found
        else:
            paths.append(arg)
    return paths


def _a_report(entry: os.DirEntry[str]) -> bool:
    """A ``*.json`` entry of a fleet folder to read: a file, or a link that cannot be followed (to
    itself, or to nothing), which is then listed with the others that cannot be read. One such link
    among 10,000 reports failed the whole fleet ("cannot list this folder")."""
    try:
        return entry.is_file() or entry.is_symlink()
    except OSError:  # ELOOP: a link to itself
        return True


# Path.glob("*.json") matched names as the platform does: without case on Windows.
_SUFFIX: Final = str.lower if os.name == "nt" else str


def _json_files(folder: Path, arg: str) -> Iterator[str]:
    # os.scandir, not Path.glob: the kind of each entry comes with the listing (no stat per file,
    # 10,000 of them in a fleet's folder). Hidden files count, as Path.glob("*.json") has them.
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if _SUFFIX(entry.name).endswith(".json") and _a_report(entry):
                    yield os.path.join(str(folder), entry.name)
    except OSError as exc:
        raise InputError(f"{arg}: cannot list this folder ({exc.strerror or exc})", hint=_HINT) from None


def read_report(path: str) -> Report:
    """Read one saved ``envkit.report/1`` file; InputError names the file and what is wrong with it.

    msgspec decodes a well-formed report in one pass (envkit.report.decode_report); any other file
    takes the slow path, which says what is wrong with it."""
    raw = read_bytes(path, hint=_HINT)
    fast = decode_report(raw, path)
    if fast is not None:
        return fast
    text = decode_text(raw, path, hint=_HINT)
    try:
        data = parse_json(text, path)
    except ValueError as exc:
        raise InputError(f"{path}: not an envkit report (invalid JSON: {exc})", hint=_HINT) from None
    return report_from_json(data, path)


def load_fleet(args: Sequence[str]) -> Fleet:
    """Read every report named (files or folders) and build the fleet view of those that can be
    read; the others are listed in ``Fleet.unreadable``. InputError when none can be read."""
    paths = report_paths(args)
    summaries = _Summaries()
    good: list[tuple[str, Node]] = []
    bad: list[Unreadable] = []
    with collector_paused():
        for path in paths:
            try:
                report = read_report(path)
            except InputError as exc:
                bad.append(Unreadable(path, exc.message))
            else:
                good.append(summaries.node(path, report))  # the report itself is not kept
    if not good:
        if len(bad) == 1:
            raise InputError(bad[0].error, hint=_HINT)
        raise InputError(f"none of the {len(bad)} reports can be read; the first: {bad[0].error}", hint=_HINT)
    return dataclasses.replace(_build(good), unreadable=tuple(bad))
