"""``envkit resolve``: describe the target (detected and/or from flags), then resolve a plan."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from envkit.detect import detect_for_plan, run_bounded
from envkit.detect.pyenv import select_interpreter
from envkit.errors import InputError
from envkit.knowledge import load_knowledge
from envkit.resolve import Plan, Request, parse_cuda_request, parse_torch_spec, resolve
from envkit.resolve.plan import Channel, PlanFlags
from envkit.resolve.target import Target, target_from_facts, target_from_flags

if TYPE_CHECKING:
    from envkit.system import System

__all__ = ["PlanFlags", "make_plan", "make_request", "make_target"]

DETECT_TIMEOUT_S = 20.0


def make_request(flags: PlanFlags) -> Request:
    try:
        channel = Channel(flags.channel)
    except ValueError:
        raise InputError(f"--channel {flags.channel!r}: pip or conda") from None
    return Request(
        torch=parse_torch_spec(flags.torch) if flags.torch else None,
        cuda=parse_cuda_request(flags.cuda),
        channel=channel,
    )


def _this_platform() -> Optional[str]:
    """The platform of the machine envkit runs on (what the detected facts describe when the
    interpreter probe could not say); None for one envkit has no wheels for."""
    import platform

    machine = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    system = platform.system()
    if system == "Darwin":
        return "macos-arm64" if arch == "aarch64" else "macos-x86_64"
    if system == "Windows":
        return "windows-x86_64" if arch == "x86_64" else None
    if system == "Linux" and arch in ("x86_64", "aarch64"):
        return f"linux-{arch}"
    return None


def make_target(system: System, flags: PlanFlags) -> Target:
    """Detect what the flags leave open (the GPU side, the interpreter's Python and platform).

    The knowledge base loads in parallel with the detection (the interpreter probe is a
    subprocess: its wait is the knowledge base's time).
    """
    gpu_side_given = flags.no_gpu or flags.driver is not None or bool(flags.gpus)
    need_python = flags.python is None or flags.platform is None
    facts = knowledge = None
    if not gpu_side_given or need_python:
        system = system.with_deadline(DETECT_TIMEOUT_S)
        interp = select_interpreter(system, env_name=flags.env_name) if need_python else None
        tasks: dict[str, Callable[[], Any]] = {
            "facts": lambda: detect_for_plan(system, interp, gpus=not gpu_side_given),
            "knowledge": load_knowledge,
        }
        values, _notes = run_bounded(tasks, system.deadline)
        facts, knowledge = values.get("facts"), values.get("knowledge")
    knowledge = knowledge or load_knowledge()  # a failed parallel load raises its error here
    here = _this_platform()
    base = (
        target_from_facts(facts, knowledge, local_platform=here)
        if facts is not None
        else Target(platform=here or "linux-x86_64")
    )
    return target_from_flags(
        knowledge,
        base=base,
        driver=flags.driver,
        gpus=flags.gpus,
        no_gpu=flags.no_gpu,
        platform=flags.platform,
        python=flags.python,
    )


def make_plan(system: System, flags: PlanFlags) -> Plan:
    request = make_request(flags)  # bad flags fail before anything is detected
    target = make_target(system, flags)
    return resolve(load_knowledge(), target, request)
