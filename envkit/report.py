"""Check results and the report: the ``envkit.report/1`` JSON contract.

A report is the facts of one machine plus one result per check. Its JSON form is published
(README "JSON reports"): fields keep their meaning once published; new ones are added beside them.
"""

from __future__ import annotations

import datetime
import enum
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Optional, Protocol

from envkit import __version__
from envkit._serial import decode_json, from_jsonable, share, to_jsonable
from envkit.errors import EXIT_CHECK_FAILED, EXIT_OK, InputError
from envkit.facts import (
    DriverFacts,
    Facts,
    PythonFacts,
    SharedLib,
    ToolkitFacts,
    TorchFacts,
    facts_from_json,
    facts_to_json,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "CAUSE_RANK",
    "CHECK_BROKEN",
    "EXPLAINED_BY",
    "NO_PROGRESS",
    "REPORT_SCHEMA",
    "CheckResult",
    "NoProgress",
    "Report",
    "RunProgress",
    "Status",
    "cause_rank",
    "decode_report",
    "rank_causes",
    "report_from_json",
]

REPORT_SCHEMA: Final = "envkit.report/1"


class Status(str, enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


# How a status is shown: on a terminal (render.py), in HTML (fleet_html.py); ASCII where UTF-8 is not.
GLYPHS: Final = {Status.PASS: "✓", Status.WARN: "!", Status.FAIL: "✗", Status.SKIP: "–"}
ASCII_GLYPHS: Final = {Status.PASS: "ok", Status.WARN: "!!", Status.FAIL: "XX", Status.SKIP: "--"}


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict: a one-line summary, why (detail), and the exact fix."""

    id: str
    status: Status
    summary: str
    detail: str = ""
    fix: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def area(self) -> str:
        return self.id.split(".", 1)[0]


# The most likely cause (README "doctor", `summary.cause`): the one place that ranks check ids.
# A report leads with its first flagged (warn or fail) result, ordered by
#   1. not explained by another flagged result (EXPLAINED_BY: a cause beats its consequences),
#   2. fail before warn,
#   3. this order: a container started without the GPUs, then a driver that does not answer,
#      before everything GPU-side; the installed build judged against this machine (torch's own
#      warnings, its metadata) before inferences from tables about releases in general; those
#      before symptoms (an import that fails, a smoke test) and before what only matters for some
#      work (NCCL, /dev/shm, a compiler for extensions).
# An entry ending in ".*" covers an area ("verify.*"); ids not listed rank after every listed one.
CAUSE_RANK: Final[tuple[str, ...]] = (
    # a container started without the GPUs or without 'compute': the driver and CUDA are absent
    # inside it because of how it was started (the NVIDIA Container Toolkit's --gpus, CDI, --nv)
    "container.gpus",
    "container.capabilities",
    "driver.loaded",  # no working driver: nothing GPU-side can work
    "driver.amd",  # the AMD GPUs' kernel driver (KFD) or its ROCm release against the build's
    "driver.intel",  # no Level Zero (or no xe / i915) for the Intel GPU
    "gpu.health",  # a GPU NVML reports broken (ECC, fallen off the bus, not answering)
    "expect.*",  # drift from the fleet's expectations file (preflight)
    "torch.driver_compat",  # the driver cannot run the build's CUDA
    "container.cuda_driver",  # the host's driver cannot run the image's CUDA
    "torch.cpu_build_on_gpu",  # a CPU-only build beside NVIDIA GPUs
    "torch.gpu_vendor",  # a build for another vendor's GPUs (ROCm torch on NVIDIA, CUDA on AMD)
    "torch.cuda_available",  # a CUDA build that cannot use CUDA (no driver, not initialized)
    "torch.gpu_arch",  # the build has no code for the GPU
    "torch.gfx_arch",  # the ROCm build has no code for the AMD GPU
    "torch.duplicates",  # two torch installs, or CUDA wheels of two CUDA majors
    "torch.cuda_libs",  # CUDA libraries on LD_LIBRARY_PATH shadowing the wheel's
    "torch.companions",  # torchvision/torchaudio/triton made for another torch
    "torch.extension_load",  # a compiled extension that does not load (an error text says so)
    "torch.extensions",  # flash-attn, xformers, vllm, … made for another torch, CUDA or GPU
    "torch.compile_toolchain",  # torch.compile's compiler, Python.h, libcuda.so
    "gpu.memory",  # out of memory, and whose memory it was (an error text's figures)
    "nccl.failure",  # an NCCL error in the text, with NCCL's reason
    "nccl.version",  # the build's NCCL against the GPUs and the driver
    "gpu.mig",  # MIG slices: a process sees one
    "driver.support",  # the driver against the GPUs and current releases (from the tables)
    "torch.installed",  # not installed, does not import, cannot see the GPU: mostly consequences
    "verify.*",  # a smoke test that fails: a symptom of the above
    "nccl.env",
    "python.shm",
    "toolkit.nvcc",  # a compiler: only needed to build CUDA extensions
)
_CONTAINER_CAUSES: Final = ("container.gpus", "container.capabilities")
_SYSTEM_CAUSES: Final = (*_CONTAINER_CAUSES, "driver.loaded", "gpu.health", "gpu.mig")
_BUILD_CAUSES: Final = (
    "torch.driver_compat",
    "torch.cuda_available",
    "torch.duplicates",
    "torch.cuda_libs",
    "torch.companions",
    "container.cuda_driver",
)
# consequence -> the flagged results that explain it (and so come first, whatever their status).
EXPLAINED_BY: Final[dict[str, tuple[str, ...]]] = {
    # inside a container started without GPUs, "no driver" is how it looks, not what to fix
    "driver.loaded": _CONTAINER_CAUSES,
    # "does not import" (torch.installed's fix says: see torch.cuda_libs and torch.duplicates
    # first) and "cannot use the GPU" (is_available() is False) follow from these.
    "torch.installed": (*_SYSTEM_CAUSES, *_BUILD_CAUSES, "torch.extension_load"),
    "torch.cuda_available": (*_SYSTEM_CAUSES, "torch.driver_compat", "container.cuda_driver"),
    "verify.*": (*_SYSTEM_CAUSES, "torch.*", "nccl.env", "python.shm"),
    # NCCL's error is the symptom of a setting, a /dev/shm, a driver or a build that does not fit
    "nccl.failure": (
        *_SYSTEM_CAUSES,
        "nccl.env",
        "python.shm",
        "torch.driver_compat",
        "torch.gpu_arch",
        "nccl.version",
    ),
}
_SEVERITY: Final = {Status.FAIL: 0, Status.WARN: 1}
# How a check that raised is reported (checks.run_checks): a bug in envkit, no evidence about the
# machine, so it is never the cause while anything else warns or fails.
CHECK_BROKEN: Final = "envkit could not run this check"


def _covers(pattern: str, check_id: str) -> bool:
    return check_id.startswith(pattern[:-1]) if pattern.endswith(".*") else check_id == pattern


def cause_rank(check_id: str) -> int:
    """The position of ``check_id`` in CAUSE_RANK; ``len(CAUSE_RANK)`` for an id it does not list."""
    return next((i for i, p in enumerate(CAUSE_RANK) if _covers(p, check_id)), len(CAUSE_RANK))


def rank_causes(checks: Sequence[CheckResult]) -> list[CheckResult]:
    """The results that warn or fail, the most likely cause first (see CAUSE_RANK)."""
    flagged = [c for c in checks if c.status in _SEVERITY]
    evidence = [c for c in flagged if not c.summary.startswith(CHECK_BROKEN)]
    order = {id(c): i for i, c in enumerate(flagged)}  # ties keep the report's order

    def explained(result: CheckResult) -> bool:
        causes = next((v for k, v in EXPLAINED_BY.items() if _covers(k, result.id)), ())
        return any(o.id != result.id and any(_covers(p, o.id) for p in causes) for o in evidence)

    def key(result: CheckResult) -> tuple[bool, bool, int, int, int]:
        broken = result.summary.startswith(CHECK_BROKEN)
        return (broken, explained(result), _SEVERITY[result.status], cause_rank(result.id), order[id(result)])

    return sorted(flagged, key=key)


@dataclass(frozen=True)
class Report:
    facts: Facts
    checks: tuple[CheckResult, ...]
    host: Optional[str] = None
    created: str = ""
    duration_s: Optional[float] = None
    envkit_version: str = __version__
    # Where the facts came from when they were not detected here (doctor --from FILE).
    source: Optional[str] = None

    @classmethod
    def new(
        cls,
        facts: Facts,
        checks: Sequence[CheckResult],
        *,
        duration_s: Optional[float] = None,
        source: Optional[str] = None,
    ) -> Report:
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        return cls(
            facts=facts,
            checks=tuple(checks),
            host=facts.host.hostname or (None if source else socket.gethostname()),
            created=now.isoformat(),
            duration_s=duration_s,
            source=source,
        )

    def counts(self) -> dict[str, int]:
        return {s.value: sum(1 for c in self.checks if c.status is s) for s in Status}

    @property
    def cause(self) -> Optional[CheckResult]:
        """The most likely cause: the first of rank_causes; None when nothing warns or fails."""
        ranked = rank_causes(self.checks)
        return ranked[0] if ranked else None

    def exit_code(self, *, strict: bool = False) -> int:
        bad = {Status.FAIL, Status.WARN} if strict else {Status.FAIL}
        return EXIT_CHECK_FAILED if any(c.status in bad for c in self.checks) else EXIT_OK

    def to_json(self, *, strict: bool = False) -> dict[str, Any]:
        code = self.exit_code(strict=strict)
        return {
            "schema": REPORT_SCHEMA,
            "envkit_version": self.envkit_version,
            "host": self.host,
            "created": self.created,
            "duration_s": self.duration_s,
            "source": self.source,
            "facts": facts_to_json(self.facts),
            "checks": [to_jsonable(c) for c in self.checks],
            "summary": {
                **self.counts(),
                "status": "healthy" if code == EXIT_OK else "unhealthy",
                "strict": strict,
                "exit_code": code,
                "cause": cause.id if (cause := self.cause) is not None else None,
            },
        }


@dataclass(frozen=True)
class _Saved:
    """A saved report as decode_json reads it; what report_from_json is lenient about is Any here."""

    schema: Any
    facts: Facts
    checks: Optional[tuple[CheckResult, ...]] = None
    host: Any = None
    created: Any = None
    envkit_version: Any = None


# What the nodes of a fleet have in common, decoded once per distinct text (envkit._serial.share):
# one image or one provisioning run gives every node the same torch, Python, toolkits, CUDA
# libraries, driver and mostly the same verdicts, while the GPUs (UUIDs, temperatures), the host
# name and its variables differ per node and are decoded per report.
share(TorchFacts, PythonFacts, DriverFacts, tuple[ToolkitFacts, ...], tuple[SharedLib, ...], CheckResult)


def decode_report(raw: bytes, where: str) -> Optional[Report]:
    """A saved ``envkit.report/1`` straight from its bytes (one pass, envkit._serial.decode_json);
    None when the file needs the slow path (parse_json, then report_from_json), which gives the
    same report or says what is wrong. doctor --from, diff and fleet all read reports this way."""
    saved = decode_json(_Saved, raw)
    if saved is None or saved.schema != REPORT_SCHEMA:
        return None
    return Report(
        facts=saved.facts,
        checks=saved.checks or (),
        host=saved.host if isinstance(saved.host, str) else None,
        created=str(saved.created or ""),
        envkit_version=str(saved.envkit_version or "unknown"),
        source=where,
    )


def report_from_json(data: object, where: str) -> Report:
    """Read a saved ``envkit.report/1`` document; InputError says what is wrong and where."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: not an envkit report (a JSON object was expected)")
    schema = data.get("schema")
    if schema != REPORT_SCHEMA:
        raise InputError(
            f"{where}: schema is {schema!r}, expected {REPORT_SCHEMA!r}",
            hint="save a report with `envkit doctor --json > report.json`",
        )
    if "facts" not in data:
        raise InputError(f"{where}: the report has no 'facts'")
    facts = facts_from_json(data["facts"], f"{where}: facts")
    saved = data.get("checks") or []
    if not isinstance(saved, list):  # `"checks": 5` was an internal error (TypeError), exit 70
        raise InputError(f"{where}: checks: expected a list of check results, got {type(saved).__name__}")
    checks = tuple(from_jsonable(CheckResult, c, f"{where}: checks[{i}]") for i, c in enumerate(saved))
    return Report(
        facts=facts,
        checks=checks,
        host=data.get("host") if isinstance(data.get("host"), str) else None,
        created=str(data.get("created") or ""),
        envkit_version=str(data.get("envkit_version") or "unknown"),
        source=where,
    )


# -- while a run runs ----------------------------------------------------------------------------
# Where a long run (``verify``, ``doctor --deep``, ``preflight --verify``) says what it is doing.
# Core code calls a ``RunProgress`` as it goes; the face gives it one that shows a live line on a
# terminal (envkit.render.progress) or none at all (``NO_PROGRESS``: not a terminal, ``--quiet``,
# ``--json``, the Python API). Its methods may be called from the threads the probes run in.
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
