"""What to run next when an installer could not get torch from its index: the mirror probe's
one-line verdict, a mirror, a wheelhouse. An unreachable index otherwise ends ``envkit create`` in
pip's retry noise, with nothing but "removed the half-made …".

The installers' own words are read: pip's ("Failed to establish a new connection", "Temporary
failure in name resolution", "Max retries exceeded", "No matching distribution found for torch")
and uv's ("error sending request for url", "dns error", "was not found in the package registry").
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final, Optional

if TYPE_CHECKING:
    from envkit.create.install import Installation

__all__ = ["index_next_step"]

# The index did not answer (pip's urllib3 and uv's reqwest, as they word it).
_UNREACHABLE: Final = re.compile(
    r"Temporary failure in name resolution|Name or service not known|NewConnectionError|"
    r"Failed to establish a new connection|Max retries exceeded|Connection refused|"
    r"Network is unreachable|ConnectTimeoutError|Read timed out|Could not fetch URL|"
    r"error sending request for url|dns error|tcp connect error|failed to lookup address|"
    r"Could not connect to",
    re.IGNORECASE,
)
# The index answered but has no such torch (or pip saw none, having reached nothing).
_NOT_THERE: Final = re.compile(
    r"No matching distribution found for torch|Could not find a version that satisfies the "
    r"requirement torch|torch[=\w.+]* was not found in the package registry|no version of torch",
    re.IGNORECASE,
)


def index_next_step(output: str, install: Installation) -> Optional[str]:
    """The next step after a failed install whose ``output`` says the index did not answer or had
    no such torch; None when it says neither. What the run already used (``--mirror``, a
    wheelhouse) is not suggested again."""
    unreachable = bool(_UNREACHABLE.search(output))
    if not unreachable and not _NOT_THERE.search(output):
        return None
    plan = install.plan
    argv = " ".join(" ".join(step.argv) for step in install.steps)
    what = "the index did not answer" if unreachable else f"the index has no torch {plan.candidate}"
    steps = [f"`envkit mirrors --probe --variant {plan.variant}` says in one line which index serves it"]
    if plan.index_url is None or plan.index_url not in argv:
        pass  # a mirror was given (--mirror): probing says whether it serves the variant
    else:
        steps.append("--mirror URL for a torch-wheels index you can reach")
    if "--find-links" not in argv and "--no-index" not in argv:
        steps.append(f"--wheelhouse DIR with the {plan.variant} wheels")
    return f"{what}: " + "; or ".join(steps)
