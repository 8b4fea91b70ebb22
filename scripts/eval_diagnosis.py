"""How often ``envkit doctor --from`` names the confirmed cause of real setups (a measurement).

Every case of ``tests/data/diagnosis/cases/`` (see tests/data/diagnosis/README.md) is written to a
temporary file as the text a user pastes (scripts/diagnosis_corpus.py: a rendered collect_env report,
or an error-only / mixed case's own excerpted text) and given to the real CLI,
``python -m envkit doctor --from FILE --json``, in a subprocess with a timeout. Then:

- right cause: the expected cause id is among the checks that warn or fail;
- cause ranked first: the report's ``summary.cause`` is that id (counted as not first while the field is
  absent);
- false alarm: a healthy case where a check warns or fails that the case does not allow.

It prints one table of the misses, a line per input kind (collect_env, error-only, mixed) and the
closing line ``right cause N/M, cause ranked first N/M, false alarms K/H``; ``--json`` prints the same
as JSON;
``--case SLUG`` runs one case, ``--held-out`` only the cases marked ``held_out = true`` (gathered by
someone who did not write the reader, and run before any change made for them: a measure of
generality). The exit status is 0 whatever the figures (it measures, it does not gate);
2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import diagnosis_corpus as corpus  # a sibling script, not a package

TIMEOUT_S = 120
KIND_LABELS = {"collect_env": "collect_env", "error": "error-only", "mixed": "mixed"}
BAD = ("warn", "fail")


@dataclass
class Outcome:
    slug: str
    klass: str
    kind: str
    cause: Optional[str]
    healthy: bool
    flagged: list[str] = field(default_factory=list)
    summary_cause: Optional[str] = None
    missing: list[str] = field(default_factory=list)  # expected `flagged` ids that did not warn or fail
    error: Optional[str] = None

    @property
    def right(self) -> bool:
        return self.cause is not None and self.cause in self.flagged

    @property
    def first(self) -> bool:
        return self.cause is not None and self.summary_cause == self.cause

    def false_alarms(self, allowed: tuple[str, ...]) -> list[str]:
        return [cid for cid in self.flagged if cid not in allowed] if self.healthy else []


def run_case(case: corpus.Case, text: str) -> Outcome:
    outcome = Outcome(case.slug, case.klass, case.kind, case.expect.cause, case.expect.healthy)
    with tempfile.TemporaryDirectory(prefix="envkit-diag-") as tmp:
        paste = Path(tmp) / f"{case.slug}.txt"
        paste.write_bytes(text.encode("utf-8"))
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "envkit", "doctor", "--from", str(paste), "--json"],
                capture_output=True,
                timeout=TIMEOUT_S,
                cwd=corpus.ROOT,
                env={**os.environ, "NO_COLOR": "1"},
                check=False,
            )
        except subprocess.TimeoutExpired:
            outcome.error = f"doctor did not answer in {TIMEOUT_S} s"
            return outcome
    if proc.returncode == 2 and b"found no error or report envkit knows" in proc.stderr:
        return outcome  # nothing envkit knows in the text: nothing flagged (right for a healthy case)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        last = (proc.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        outcome.error = f"exit {proc.returncode}: {last[:120]}"
        return outcome
    checks = report.get("checks", []) if isinstance(report, dict) else []
    outcome.flagged = [c["id"] for c in checks if isinstance(c, dict) and c.get("status") in BAD]
    summary = report.get("summary", {}) if isinstance(report, dict) else {}
    cause = summary.get("cause") if isinstance(summary, dict) else None
    # summary.cause is the check id; accept an object carrying it as `id` as well.
    outcome.summary_cause = cause.get("id") if isinstance(cause, dict) else cause
    outcome.missing = [cid for cid in case.expect.flagged if cid not in outcome.flagged]
    return outcome


def _figures(outcomes: list[Outcome], by_slug: dict[str, corpus.Case]) -> dict[str, Any]:
    broken = [o for o in outcomes if not o.healthy and o.cause]
    healthy = [o for o in outcomes if o.healthy]
    alarms = [o for o in healthy if o.error or o.false_alarms(by_slug[o.slug].expect.allowed)]
    return {
        "right_cause": sum(o.right for o in broken),
        "ranked_first": sum(o.first for o in broken),
        "broken": len(broken),
        "false_alarms": len(alarms),
        "healthy": len(healthy),
    }


def evaluate(cases: list[corpus.Case]) -> tuple[list[Outcome], dict[str, Any]]:
    # torch renders the collect_env cases; the error and mixed ones are text already.
    module = corpus._collect_env() if any(c.kind == "collect_env" for c in cases) else None
    texts = [corpus.render(case, module) for case in cases]
    # Two at a time: each doctor is a Python start-up plus a knowledge load; more would crowd the machine.
    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(run_case, cases, texts))
    by_slug = {case.slug: case for case in cases}
    figures = _figures(outcomes, by_slug)
    figures["by_kind"] = {
        kind: _figures([o for o in outcomes if o.kind == kind], by_slug)
        for kind in corpus.KINDS
        if any(o.kind == kind for o in outcomes)
    }
    return outcomes, figures


def closing_line(f: dict[str, Any]) -> str:
    return (
        f"right cause {f['right_cause']}/{f['broken']}, "
        f"cause ranked first {f['ranked_first']}/{f['broken']}, "
        f"false alarms {f['false_alarms']}/{f['healthy']}"
    )


def misses(outcomes: list[Outcome], cases: dict[str, corpus.Case]) -> list[Outcome]:
    out = []
    for o in outcomes:
        allowed = cases[o.slug].expect.allowed
        if (
            o.error
            or (o.healthy and o.false_alarms(allowed))
            or (not o.healthy and not (o.right and o.first))
        ):
            out.append(o)
    return out


def table(rows: list[Outcome]) -> str:
    header = ("case", "kind", "expected cause", "envkit flagged", "summary.cause")
    body = [
        (
            o.slug,
            o.kind,
            o.cause or "(healthy)",
            o.error or (", ".join(o.flagged) or "-"),
            o.summary_cause or "-",
        )
        for o in rows
    ]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
    parser.add_argument("--case", metavar="SLUG", help="run one case")
    parser.add_argument(
        "--held-out", action="store_true", help="run only the held-out cases (`held_out = true`)"
    )
    args = parser.parse_args(argv)
    try:
        cases = corpus.load_cases()
    except corpus.CaseError as exc:
        print(f"eval_diagnosis.py: {exc}", file=sys.stderr)
        return 2
    if args.case:
        cases = [c for c in cases if c.slug == args.case]
        if not cases:
            print(f"eval_diagnosis.py: no case {args.case!r} in {corpus.CASES_DIR}", file=sys.stderr)
            return 2
    if args.held_out:
        cases = [c for c in cases if c.held_out]
    outcomes, figures = evaluate(cases)
    by_slug = {c.slug: c for c in cases}
    missed = misses(outcomes, by_slug)
    if args.json:
        doc = {
            "figures": figures,
            "summary": closing_line(figures),
            "cases": [
                {
                    **asdict(o),
                    "right": o.right,
                    "first": o.first,
                    "false_alarms": o.false_alarms(by_slug[o.slug].expect.allowed),
                }
                for o in outcomes
            ],
            "misses": [o.slug for o in missed],
        }
        print(json.dumps(doc, indent=2))
        return 0
    if missed:
        print(table(missed))
        print()
    for kind, by_kind in figures["by_kind"].items():
        print(f"{KIND_LABELS.get(kind, kind):12s} {closing_line(by_kind)}")
    print(closing_line(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
