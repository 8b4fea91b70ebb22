"""Small text helpers shared by the checks."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from envkit.report import CheckResult, Status

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from envkit.facts import Facts


def join_lines(*parts: object) -> str:
    """The non-empty parts, one per line."""
    return "\n".join(str(p) for p in parts if p)


def headline(findings: Sequence[str]) -> str:
    """A check's summary line: the first finding, and how many more.

    >>> headline(["a"]), headline(["a", "b", "c"])
    ('a', 'a (+2 more)')
    """
    more = len(findings) - 1
    return findings[0] + (f" (+{more} more)" if more else "")


def fix_lines(fixes: Iterable[str]) -> str:
    """The fixes, one per line, each once (two GPUs or two findings often share one)."""
    return "\n".join(dict.fromkeys(fixes))


def plural(count: int, word: str) -> str:
    """``plural(1, "GPU")`` -> "1 GPU"; ``plural(4, "GPU")`` -> "4 GPUs"."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def and_list(items: Sequence[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


# Where a fix for an externally managed interpreter puts torch instead (PEP 668's own advice: a venv).
VENV_FOR_FIXES = "~/.venvs/torch"


def pip_command(facts: Facts, *, installs: bool = True) -> str:
    """How to run pip for the inspected interpreter (uv's venvs have no pip). For an externally
    managed one (PEP 668) pip refuses to install or uninstall, so a command that ``installs``
    first makes a venv from it and runs that venv's pip (uv's, when uv is there); ``pip show``
    and the like still run in the interpreter itself (``installs=False``)."""
    python = facts.python
    if python is None:
        return "python -m pip"
    if installs and python.externally_managed:
        venv = VENV_FOR_FIXES
        if "uv" in python.installers:
            return f"uv venv {venv} --python {python.executable} && uv pip --python {venv}/bin/python"
        return f"{python.executable} -m venv {venv} && {venv}/bin/python -m pip"
    if "pip" in python.installers:
        return python.installers["pip"]
    if "uv" in python.installers:
        return f"uv pip --python {python.executable}"
    return f"{python.executable} -m pip"


def deep_hint(facts: Facts, what: str) -> str:
    """Where ``what`` (torch's own answer: its architecture list, is_available()) would come from,
    never the command just run: ``envkit doctor --deep`` here; where --deep ran and did not say, its
    error; for a pasted report, the same run on the machine it came from."""
    deep = facts.torch.deep
    if deep is not None:
        why = deep.error or "torch answered without it"
        return f"the --deep probe ran and did not report {what} ({why})"
    if facts.python is not None and facts.python.selected_by in ("collect_env", "error text"):
        return f"`envkit doctor --deep` on the machine the text came from reads {what} from torch itself"
    return f"`envkit doctor --deep` reads {what} from torch itself"


def torch_absent(facts: Facts) -> str:
    """Why a check about torch skips when torch is not seen: not installed, or (a text that shows
    neither torch's version nor its package list) not known."""
    if facts.reported("torch.version") or facts.reported("torch.distributions"):
        return "torch is not installed"
    return "the text shows neither torch's version nor its packages"


def cuda_seen_working(facts: Facts) -> str:
    """What shows CUDA working on the machine the facts describe ("" when nothing does): torch said
    ``torch.cuda.is_available()`` is True (the --deep probe, or a paste's "Is CUDA available: True")
    and printed no CUDA initialization error. Observation outranks a table: installers have shipped
    drivers below NVIDIA's own published floors, and the machine is right about itself."""
    deep = facts.torch.deep
    if facts.torch.cuda_init_error:
        return ""
    if deep is not None and deep.ok and deep.cuda_available is True:
        devices = f" with {plural(deep.device_count, 'device')}" if deep.device_count else ""
        return f"torch.cuda.is_available() is True{devices}"
    oom = facts.errors.oom
    if oom is not None and oom.total_mib is not None:
        # torch's caching allocator reported the GPU's memory: CUDA was up and allocating.
        return f"torch allocated memory on GPU {oom.gpu} (its out-of-memory report)"
    return ""


def outranked_by_evidence(result: CheckResult, facts: Facts) -> CheckResult:
    """A table's "cannot work" (a failure from a driver floor or a branch rule) where the facts show
    CUDA working: a warning that names the disagreement, never a failure (DESIGN.md, "What was
    observed outranks what a table predicts")."""
    seen = cuda_seen_working(facts)
    if result.status is not Status.FAIL or not seen:
        return result
    return dataclasses.replace(
        result,
        status=Status.WARN,
        summary=f"{result.summary}; yet {seen} here",
        detail=join_lines(
            f"envkit's tables say this cannot work, but {seen} on this machine: the tables are right "
            "about releases in general and the machine about itself (installers have shipped drivers "
            "below NVIDIA's published floors). Kernels that need the newer driver (PTX JIT, "
            "torch.compile) may still fail.",
            result.detail,
        ),
    )
