"""Where a long run (``verify``, ``doctor --deep``, ``preflight --verify``) says what it is doing.

Core code calls a ``RunProgress`` as it goes; the face gives it one that shows a live line on a
terminal (envkit.render.progress) or none at all (``NO_PROGRESS``: not a terminal, ``--quiet``,
``--json``, the Python API). Its methods may be called from the threads the probes run in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.report import CheckResult

__all__ = ["NO_PROGRESS", "NoProgress", "RunProgress"]


class RunProgress(Protocol):
    """What a run reports while it runs."""

    def stage(self, text: str) -> None: ...  # a step begins ("detecting this machine", …)

    def running(self, check_ids: Sequence[str]) -> None: ...  # these checks' probes have started

    def landed(self, result: CheckResult) -> None: ...  # a check's verdict, as soon as it is known


class NoProgress:
    """A RunProgress that shows nothing."""

    def stage(self, text: str) -> None:
        pass

    def running(self, check_ids: Sequence[str]) -> None:
        pass

    def landed(self, result: CheckResult) -> None:
        pass


NO_PROGRESS: Final[RunProgress] = NoProgress()
