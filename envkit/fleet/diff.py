"""``envkit diff``: why the same code works on one machine and not on the other.

Two saved reports are compared fact by fact (envkit.fleet.fingerprint) and check by check. Differences
come most-likely-cause first: driver, CUDA, GPU architecture and the torch build; then library
versions (cuDNN, NCCL, nvidia-* wheels, triton); toolkits; Python; environment variables; host
settings; paths last. Checks whose verdict differs come worst first.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Optional

from envkit.fleet.aggregate import read_report
from envkit.fleet.fingerprint import DEEP_KEYS, TIERS, aspect, fingerprint, order, show
from envkit.report import CheckResult, Status

if TYPE_CHECKING:
    from envkit.report import Report

__all__ = ["DIFF_SCHEMA", "CheckChange", "Diff", "Difference", "diff_files", "diff_reports"]

DIFF_SCHEMA: Final = "envkit.diff/1"
# Worst first: a check that fails on one side explains more than one that was skipped.
_SEVERITY: Final = {Status.FAIL: 3, Status.WARN: 2, Status.SKIP: 1, Status.PASS: 0}


@dataclass(frozen=True)
class Difference:
    """One fact that differs: its key, both values (None: not found), its rank and why it matters."""

    key: str
    a: Optional[str]
    b: Optional[str]
    rank: int  # 1 matters most; a key of envkit.fleet.fingerprint.TIERS
    why: str

    @property
    def label(self) -> str:
        return aspect(self.key).label

    @property
    def tier(self) -> str:
        return TIERS[self.rank]

    def shown(self) -> tuple[str, str]:
        """Both values as people read them ("unset", "not installed" for the missing ones)."""
        return (show(self.key, self.a), show(self.key, self.b))


@dataclass(frozen=True)
class CheckChange:
    """A check whose status differs; a side is None when its report has no such check."""

    id: str
    a: Optional[CheckResult]
    b: Optional[CheckResult]

    @property
    def severity(self) -> int:
        return max(_SEVERITY[r.status] for r in (self.a, self.b) if r is not None)

    @property
    def worse(self) -> CheckResult:
        """The side with the worse verdict (B when equal): its summary and fix explain the change."""
        sides = [r for r in (self.b, self.a) if r is not None]
        return max(sides, key=lambda r: _SEVERITY[r.status])


@dataclass(frozen=True)
class Diff:
    a_name: str
    b_name: str
    differences: tuple[Difference, ...]
    checks: tuple[CheckChange, ...]
    notes: tuple[str, ...] = ()

    @property
    def identical(self) -> bool:
        return not self.differences and not self.checks

    def to_json(self) -> dict[str, Any]:
        def side(r: Optional[CheckResult]) -> Optional[dict[str, str]]:
            return None if r is None else {"status": r.status.value, "summary": r.summary, "fix": r.fix}

        return {
            "schema": DIFF_SCHEMA,
            "a": self.a_name,
            "b": self.b_name,
            "differences": [
                {
                    "key": d.key,
                    "label": d.label,
                    "a": d.a,
                    "b": d.b,
                    "rank": d.rank,
                    "tier": d.tier,
                    "why": d.why,
                }
                for d in self.differences
            ],
            "checks": [{"id": c.id, "a": side(c.a), "b": side(c.b)} for c in self.checks],
            "notes": list(self.notes),
            "summary": {
                "differences": len(self.differences),
                "checks": len(self.checks),
                "identical": self.identical,
            },
        }


def _name(report: Report, fallback: str) -> str:
    if report.host:
        return report.host
    return Path(report.source).stem if report.source else fallback


def diff_reports(a: Report, b: Report, *, a_name: Optional[str] = None, b_name: Optional[str] = None) -> Diff:
    """Every fact and check verdict that differs between two reports, most likely cause first."""
    fa, fb = fingerprint(a.facts), fingerprint(b.facts)
    notes = []
    if (a.facts.torch.deep is None) != (b.facts.torch.deep is None):
        # Import-time facts measured on one side only would all "differ"; they are left out.
        only = "A" if a.facts.torch.deep is not None else "B"
        notes.append(f"only {only} imported torch (doctor --deep); what torch saw at import is not compared")
    differences = []
    for key in sorted(fa.keys() | fb.keys(), key=order):
        if key in DEEP_KEYS and not (key in fa and key in fb):
            continue
        va, vb = fa.get(key), fb.get(key)
        if va != vb:
            about = aspect(key)
            differences.append(Difference(key, va, vb, about.tier, about.why))
    results_a = {c.id: c for c in a.checks}
    results_b = {c.id: c for c in b.checks}
    ids = list(dict.fromkeys([*results_a, *results_b]))
    changes = [
        CheckChange(cid, results_a.get(cid), results_b.get(cid))
        for cid in ids
        if _status(results_a.get(cid)) != _status(results_b.get(cid))
    ]
    # Worst verdict first; within one severity, the reports' own check order (sorted is stable).
    changes.sort(key=lambda c: -c.severity)
    names = (a_name or _name(a, "A"), b_name or _name(b, "B"))
    if names[0] == names[1] and a.source and b.source and a.source != b.source:
        # One machine before and after a change: the files tell the two apart.
        names = (a_name or a.source, b_name or b.source)
    return Diff(names[0], names[1], tuple(differences), tuple(changes), tuple(notes))


def _status(result: Optional[CheckResult]) -> Optional[Status]:
    return None if result is None else result.status


def diff_files(a_path: str, b_path: str) -> Diff:
    """Compare two saved ``envkit.report/1`` files; InputError names a file that is not one."""
    return diff_reports(read_report(a_path), read_report(b_path))
