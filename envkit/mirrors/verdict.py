"""The one-line answer of ``envkit mirrors --probe``: does any mirror serve what was asked?

The question a variant probe asks is whether the torch wheels of that variant can be had: only a
torch-wheels index answers it. PyPI and its mirrors carry torch's default build alone, with no
``+cu121`` local versions and no variant folders (tuna/issues#1050), so a PyPI that answers is no
yes to ``--variant cu121``: it is shown, and left out of the verdict. Where only PyPI or conda
mirrors are probed (``--kind pypi``), they answer for themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

__all__ = ["ProbeVerdict", "probe_verdict"]

_SHOWN: Final = 3  # failures named in the line


@dataclass(frozen=True)
class ProbeVerdict:
    ok: bool  # some mirror of the kind that answers the question served it
    summary: str  # one line, for stderr and the JSON's "verdict"
    answers: tuple[str, ...] = ()  # the mirrors that served it, fastest first

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "summary": self.summary, "answers": list(self.answers)}


def probe_verdict(rows: list[dict[str, Any]], variant: str) -> ProbeVerdict:
    """The verdict over ``envkit.mirrors/1`` rows that carry a ``probe``."""
    probed = [r for r in rows if r.get("probe") is not None]
    wheels = [r for r in probed if r["kind"] == "torch-wheels"]
    judged = wheels or probed
    what = f"{variant} torch wheels" if wheels else f"{judged[0]['kind']} mirrors" if judged else "mirrors"
    good = sorted((r for r in judged if r["probe"]["ok"]), key=lambda r: r["probe"]["elapsed_s"])
    if good:
        names = ", ".join(f"{r['name']} ({r['probe']['elapsed_s']:.2f} s)" for r in good)
        return ProbeVerdict(True, f"{what}: served by {names}", tuple(r["name"] for r in good))
    failed = "; ".join(f"{r['name']}: {r['probe']['error']}" for r in judged[:_SHOWN])
    more = f"; and {len(judged) - _SHOWN} more" if len(judged) > _SHOWN else ""
    summary = f"{what}: no mirror served them ({failed}{more})"
    if wheels:
        pypi = [r["name"] for r in probed if r["kind"] == "pypi" and r["probe"]["ok"]]
        if pypi:
            summary += f"; {pypi[0]} answers, but PyPI carries only torch's default build, not {variant}"
        summary += (
            f"; next: a torch-wheels index you can reach (--mirror URL), or a folder of {variant} "
            "wheels (--wheelhouse DIR)"
        )
    return ProbeVerdict(False, summary)
