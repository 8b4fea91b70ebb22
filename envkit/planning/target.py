"""The target a command plans for: what the flags say, and this machine where they are silent (its
GPUs and driver, the interpreter's Python and platform)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable

from envkit.detect import detect_for_plan, run_bounded
from envkit.detect.pyenv import select_interpreter
from envkit.detect.python_version import is_python_version
from envkit.knowledge import load_knowledge
from envkit.resolve.target import Target, target_from_facts, target_from_flags, this_platform

if TYPE_CHECKING:
    from envkit.resolve.plan import PlanFlags
    from envkit.system import System

__all__ = ["DETECT_TIMEOUT_S", "make_target"]

DETECT_TIMEOUT_S = 20.0


def make_target(system: System, flags: PlanFlags) -> Target:
    """Detect what the flags leave open (the GPU side, the interpreter's Python and platform).

    The knowledge base loads in parallel with the detection (the interpreter probe is a
    subprocess: its wait is the knowledge base's time).
    """
    gpu_side_given = flags.no_gpu or flags.driver is not None or bool(flags.gpus)
    # --python takes a version (3.11) or an interpreter (a path, python3.11), as uv's does: an
    # interpreter's version and platform are read from it, as for --env.
    interpreter = flags.python if flags.python and not is_python_version(flags.python) else None
    if interpreter is not None:
        flags = dataclasses.replace(flags, python=None)
    need_python = flags.python is None or flags.platform is None
    facts = knowledge = None
    if not gpu_side_given or need_python:
        system = system.with_deadline(DETECT_TIMEOUT_S)
        interp = (
            select_interpreter(system, python=interpreter, env_name=flags.env_name) if need_python else None
        )
        tasks: dict[str, Callable[[], Any]] = {
            "facts": lambda: detect_for_plan(system, interp, gpus=not gpu_side_given),
            "knowledge": load_knowledge,
        }
        values, _notes = run_bounded(tasks, system.deadline)
        facts, knowledge = values.get("facts"), values.get("knowledge")
    knowledge = knowledge or load_knowledge()  # a failed parallel load raises its error here
    here = this_platform()
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
