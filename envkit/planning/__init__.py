"""What a command plans for, before the resolver (envkit.resolve, which never looks at the host)
picks a build: the request from the flags (request.py) and the target, the flags over this
machine's detected facts (target.py). resolve, spec, lock, create, add and check plan alike, and so
does the Python API (envkit.make_plan).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from envkit.knowledge import load_knowledge
from envkit.planning.request import make_request
from envkit.planning.target import make_target
from envkit.resolve import Plan, resolve

if TYPE_CHECKING:
    from envkit.resolve.available import Available
    from envkit.resolve.plan import PlanFlags
    from envkit.system import System

__all__ = ["make_plan", "make_request", "make_target"]


def make_plan(system: System, flags: PlanFlags, *, available: Optional[Available] = None) -> Plan:
    """The plan for ``flags``; ``available``: only among the builds a local source holds."""
    request = make_request(flags, available=available)  # bad flags fail before anything is detected
    target = make_target(system, flags)
    return resolve(load_knowledge(), target, request)
