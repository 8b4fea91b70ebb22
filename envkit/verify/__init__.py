"""``envkit verify``: run the real thing (a kernel on every GPU, torch.compile, AMP training steps,
collectives with exact values, and optionally matmul / copy throughput) in the target interpreter.

Each check is a probe script (envkit/probes/verify_*.py, stdlib + torch) run in its own subprocess
and process group with its own timeout; independent checks run side by side, and the throughput
check runs alone afterwards so nothing else competes for the GPU. A crash, hang or garbage answer
becomes that check's failure with the tail of its stderr; the others still report.
"""

from __future__ import annotations

import dataclasses
import functools
import tempfile
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Final, Optional

from envkit.detect import begin_run, detect_for_plan, run_bounded
from envkit.detect.host import host_identity
from envkit.errors import InputError
from envkit.report import NO_PROGRESS, Report
from envkit.system import ProbeOutcome, run_probe
from envkit.verify.interpret import interpret, interpret_missing_extensions

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.facts import Facts
    from envkit.report import CheckResult, RunProgress
    from envkit.system import System

__all__ = [
    "ALL_CHECKS",
    "COMPILE_DEVICES",
    "DEFAULT_CHECKS",
    "DEFAULT_TIMEOUT_S",
    "ProbeSpec",
    "compile_devices",
    "parse_checks",
    "parse_compile_devices",
    "probe_specs",
    "run_probes",
    "run_verify_checks",
    "verify",
]

# Seconds each check may take at most (the whole run is also bounded by --timeout).
CHECK_TIMEOUTS: Final = {
    "device": 120.0,
    "compile": 420.0,
    "amp": 180.0,
    "dist": 180.0,
    "perf": 300.0,
    "extensions": 180.0,
}
ALL_CHECKS: Final = tuple(CHECK_TIMEOUTS)
DEFAULT_CHECKS: Final = ("device", "compile", "amp", "dist")
DEFAULT_TIMEOUT_S: Final = 600.0
# Checks that must have the GPUs to themselves run after the others.
ALONE: Final = frozenset({"perf"})
# Where verify.compile can compile (torch device types; inductor's CPU backend writes C++, its CUDA
# backend Triton kernels).
COMPILE_DEVICES: Final = ("cpu", "cuda")


@dataclass(frozen=True)
class ProbeSpec:
    check: str  # "compile" -> verify.compile
    script: str  # a file in envkit/probes, or an absolute path
    config: dict[str, Any]
    timeout: float
    env: Optional[dict[str, str]] = None


def parse_checks(text: Optional[str], *, option: str = "--checks") -> tuple[str, ...]:
    """A comma list of check names ("verify." optional, repeats dropped); none -> the defaults."""
    if not text:
        return DEFAULT_CHECKS
    names = tuple(dict.fromkeys(n.strip().removeprefix("verify.") for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in CHECK_TIMEOUTS]
    if unknown or not names:
        raise InputError(
            f"{option} {text!r}: unknown {', '.join(unknown) or 'list'}; choose from {', '.join(ALL_CHECKS)}"
        )
    return names


def parse_compile_devices(text: Optional[str]) -> Optional[tuple[str, ...]]:
    """``--compile-devices cpu,cuda``: the devices verify.compile compiles for; None (not given):
    chosen from the machine (compile_devices)."""
    if text is None:
        return None
    names = tuple(dict.fromkeys(n.strip().lower() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in COMPILE_DEVICES]
    if unknown or not names:
        raise InputError(
            f"--compile-devices {text!r}: unknown {', '.join(unknown) or 'list'}; "
            f"choose from {', '.join(COMPILE_DEVICES)}"
        )
    return names


def compile_devices(facts: Facts, requested: Optional[Sequence[str]] = None) -> tuple[str, ...]:
    """The devices verify.compile compiles for: those asked for; else the GPU path alone where the
    machine has a GPU this torch can use (a CUDA build and a visible NVIDIA GPU), the CPU otherwise.

    On a GPU node the CPU compile is the slow half (inductor's C++ codegen and a host compiler:
    55 of 83 s on an H200, envkit issue #13) and says nothing about the GPU path a job runs, so it
    runs only where there is no GPU, or when asked (``--compile-devices cpu,cuda``)."""
    if requested:
        return tuple(requested)
    gpu = facts.torch.cuda is not None and facts.torch.hip is None and bool(facts.visible_gpus)
    return ("cuda",) if gpu else ("cpu",)


def installed_extensions(facts: Facts) -> list[dict[str, Any]]:
    """The extensions envkit knows among the inspected environment's distributions, each with its
    module and the smoke kernel the probe runs for it (envkit/knowledge/extensions/*.toml)."""
    from envkit.knowledge.extensions import load_extension

    found: list[dict[str, Any]] = []
    for dist in facts.torch.distributions:
        ext = load_extension(dist.name)
        if ext is not None and dist.name not in {f["name"] for f in found}:
            found.append({"name": ext.name, "module": ext.module, "kernel": ext.kernel})
    return found


def run_probes(
    system: System,
    python: str,
    specs: Sequence[ProbeSpec],
    *,
    on_done: Optional[Callable[[str, ProbeOutcome], None]] = None,
) -> dict[str, ProbeOutcome]:
    """Run the probes side by side, each bounded by its own timeout and the system's deadline;
    ``on_done(check, outcome)`` is called (in the probe's thread) as each one answers."""

    def task(spec: ProbeSpec) -> ProbeOutcome:
        import json

        outcome = run_probe(
            system, python, spec.script, json.dumps(spec.config), timeout=spec.timeout, env=spec.env
        )
        if on_done is not None:
            on_done(spec.check, outcome)
        return outcome

    tasks: dict[str, Callable[[], Any]] = {spec.check: functools.partial(task, spec) for spec in specs}
    values, _notes = run_bounded(tasks, None)
    return values


def probe_specs(
    system: System,
    facts: Facts,
    checks: Sequence[str],
    cache_dir: str,
    *,
    devices: Optional[Sequence[str]] = None,
) -> list[ProbeSpec]:
    """``devices``: verify.compile's (--compile-devices); None: compile_devices chooses."""
    env = dict(system.env)
    # A fresh inductor / Triton cache: the first compile is cold, the second one warm.
    compile_env = {
        **env,
        "TORCHINDUCTOR_CACHE_DIR": f"{cache_dir}/inductor",
        "TRITON_CACHE_DIR": f"{cache_dir}/triton",
    }
    visible = len(facts.visible_gpus) if facts.driver.version is not None else None
    configs: dict[str, dict[str, Any]] = {
        "device": {"nvml_gpus": visible},
        "compile": {"devices": list(compile_devices(facts, devices))},
        "amp": {},
        # The probe gives up on missing ranks before it is killed, so it can name them.
        "dist": {"timeout_s": max(5.0, system.timeout(CHECK_TIMEOUTS["dist"]) - 10.0)},
        "perf": {},
        "extensions": {"extensions": installed_extensions(facts)},
    }
    return [
        ProbeSpec(
            check,
            f"verify_{check}.py",
            configs[check],
            CHECK_TIMEOUTS[check],
            compile_env if check == "compile" else env,
        )
        for check in checks
    ]


def verify(
    system: System,
    *,
    python: Optional[str] = None,
    env_name: Optional[str] = None,
    checks: Sequence[str] = DEFAULT_CHECKS,
    timeout: float = DEFAULT_TIMEOUT_S,
    progress: RunProgress = NO_PROGRESS,
    compile_on: Optional[Sequence[str]] = None,
) -> Report:
    """Run the verify checks in the chosen interpreter and report them (envkit.report/1);
    ``compile_on``: verify.compile's devices (--compile-devices; None: compile_devices chooses)."""
    system, interp, start = begin_run(system, timeout=timeout, python=python, env_name=env_name)
    progress.stage(f"inspecting {interp.path}")
    facts = detect_for_plan(system, interp)
    # Which host ran it, so a fleet of verify reports has a majority to compare with.
    facts = dataclasses.replace(facts, host=host_identity(system))
    if tuple(checks) == DEFAULT_CHECKS and installed_extensions(facts):
        checks = (*checks, "extensions")  # the stack above torch is verified where it is installed
    results = run_verify_checks(system, interp.path, facts, checks, progress=progress, compile_on=compile_on)
    return Report.new(facts, results, duration_s=round(time.monotonic() - start, 3))


def run_verify_checks(
    system: System,
    python: str,
    facts: Facts,
    checks: Sequence[str],
    *,
    progress: RunProgress = NO_PROGRESS,
    compile_on: Optional[Sequence[str]] = None,
) -> list[CheckResult]:
    """The checks' probes in ``python``: side by side, then the ones in ALONE, one results each;
    ``progress`` hears each verdict as its probe answers."""
    landed: dict[str, CheckResult] = {}

    def done(check: str, outcome: ProbeOutcome) -> None:
        landed[check] = interpret(check, outcome, facts)
        progress.landed(landed[check])

    if "extensions" in checks and not installed_extensions(facts):
        landed["extensions"] = interpret_missing_extensions(facts)
        checks = [c for c in checks if c != "extensions"]
    with tempfile.TemporaryDirectory(prefix="envkit-verify-") as cache_dir:
        specs = probe_specs(system, facts, checks, cache_dir, devices=compile_on)
        for batch in ([s for s in specs if s.check not in ALONE], [s for s in specs if s.check in ALONE]):
            if batch:
                progress.stage(f"verifying {python}")
                progress.running([f"verify.{s.check}" for s in batch])
                run_probes(system, python, batch, on_done=done)
    # A probe that did not answer by the deadline never called ``done``: interpreted as missing.
    results = [landed.get(spec.check) or interpret(spec.check, None, facts) for spec in specs]
    return results + ([landed["extensions"]] if "extensions" in landed and "extensions" not in checks else [])
