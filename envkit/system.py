"""The machine as detectors see it: environment variables, a filesystem root, a process runner,
an NVML factory and a deadline.

This is envkit's one seam for tests. A test builds a ``System`` whose root is a recorded machine's
file tree, whose PATH holds stand-in programs (real executables printing recorded output), and
whose NVML answers from a recording, and the whole doctor runs against it unchanged.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from envkit import _proc
from envkit.detect.nvml import NvmlApi

__all__ = ["System"]


@dataclass(frozen=True)
class System:
    """Where detectors read from; ``System()`` is the real machine."""

    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    root: Path = Path("/")
    run: _proc.Runner = _proc.run
    # None: the real NVML, asked in a child process (detect.nvml.ask_nvml); tests pass a recording.
    nvml: Optional[Callable[[], NvmlApi]] = None
    # time.monotonic() value after which every subprocess gets only a token timeout.
    deadline: Optional[float] = None

    def path(self, absolute: str) -> Path:
        """``/proc/...`` under this system's root."""
        return self.root / absolute.lstrip("/")

    def read_text(self, absolute: str) -> str:
        """Read a file under the root; raises OSError like open() does."""
        return self.path(absolute).read_text(encoding="utf-8", errors="replace")

    def which(self, name: str) -> Optional[str]:
        """``name`` on this system's PATH (or None)."""
        return shutil.which(name, path=self.env.get("PATH", os.defpath))

    def run_within(
        self, argv: Sequence[str], *, timeout: float, env: Optional[Mapping[str, str]] = None
    ) -> _proc.ProcResult:
        """``run`` with ``timeout`` cut to what is left before the deadline (detectors, probes)."""
        return self.run(argv, timeout=self.timeout(timeout), env=env)

    def timeout(self, wanted: float) -> float:
        """``wanted`` seconds, or what is left before the deadline if that is less."""
        if self.deadline is None:
            return wanted
        return max(0.05, min(wanted, self.deadline - time.monotonic()))

    def remaining(self) -> Optional[float]:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def with_deadline(self, seconds: Optional[float]) -> System:
        if seconds is None:
            return self
        return dataclasses.replace(self, deadline=time.monotonic() + seconds)
