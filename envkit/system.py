"""The machine as detectors see it: environment variables, a filesystem root, a process runner,
an NVML factory and a deadline; and envkit's probes, run in another interpreter through it.

This is envkit's one seam for tests. A test builds a ``System`` whose root is a recorded machine's
file tree, whose PATH holds stand-in programs (real executables printing recorded output), and
whose NVML answers from a recording, and the whole doctor runs against it unchanged.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Final, Optional, Protocol

from envkit import _proc

__all__ = ["PROBES_DIR", "NvmlApi", "ProbeOutcome", "System", "run_probe"]


class NvmlApi(Protocol):
    """What envkit asks of NVML (envkit.detect.nvml_worker.PynvmlApi, or a recording in tests).
    Every method may raise envkit.detect.nvml_worker.NvmlError."""

    def init(self) -> None: ...

    def shutdown(self) -> None: ...

    def driver_version(self) -> str: ...

    def cuda_driver_version(self) -> int: ...

    def device_count(self) -> int: ...

    def gpu_field(self, index: int, field: str) -> Any:
        """One of GPU_FIELDS for GPU ``index`` (NVML order), as JSON-ready data."""
        ...


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


# -- probes ------------------------------------------------------------------------------------
# Run a probe script (envkit/probes/*.py) in another interpreter and read its JSON answer.
#
# Probes are stdlib (+ torch) scripts that import nothing from envkit; they print one JSON object
# between a random marker given on their command line (python-discovery's pattern), so stray output
# from the interpreter or torch never corrupts the answer. A crash, a hang or garbage becomes an
# ``error`` that says which, with the tail of stderr.

PROBES_DIR: Final = Path(__file__).parent / "probes"


@dataclass(frozen=True)
class ProbeOutcome:
    data: Optional[dict[str, Any]]
    error: Optional[str]
    result: _proc.ProcResult


def run_probe(
    system: System,
    python: str,
    script: str,
    *args: str,
    timeout: float,
    env: Optional[dict[str, str]] = None,
) -> ProbeOutcome:
    """Run ``python probes/<script> <marker> *args`` and parse the JSON between the markers."""
    marker = f"@@envkit-{secrets.token_hex(8)}@@"
    result = system.run_within(
        [python, str(PROBES_DIR / script), marker, *args],
        timeout=timeout,
        env=env if env is not None else dict(system.env),
    )
    return ProbeOutcome(*parse_probe_output(result, marker), result)


def parse_probe_output(
    result: _proc.ProcResult, marker: str
) -> tuple[Optional[dict[str, Any]], Optional[str]]:
    """The probe's JSON object, or why there is none."""
    parts = result.stdout.split(marker)
    if len(parts) >= 3:
        try:
            data = json.loads(parts[1])
        except ValueError:
            return None, f"{result.describe()} and printed invalid JSON"
        if isinstance(data, dict):
            return data, None
        return None, f"{result.describe()} and printed {type(data).__name__}, not an object"
    tail = result.tail(6)
    return None, result.describe() + (f":\n{tail}" if tail else " and printed no answer")
