"""Detection: every probe of the machine, run side by side under one deadline, into Facts.

Each detector runs in its own daemon thread. When the deadline passes, whatever has not answered
is recorded as "timed out" and the rest is reported: a wedged GPU that hangs NVML, or an
nvidia-smi that never returns, cannot stop ``envkit doctor`` from answering in time. (Subprocesses
also carry their own timeouts, capped by the same deadline, so nothing outlives the run.)
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Optional

from envkit.detect.deep import detect_deep
from envkit.detect.driver import detect_driver, smi_gpus
from envkit.detect.host import detect_host
from envkit.detect.nvml import read_nvml
from envkit.detect.pyenv import Interpreter, detect_python
from envkit.detect.toolkit import detect_toolkits
from envkit.detect.visibility import apply_visibility
from envkit.facts import DriverFacts, Facts, GpuFacts, HostFacts, PythonFacts, TorchFacts

if TYPE_CHECKING:
    from collections.abc import Mapping

    from envkit.system import System

__all__ = ["begin_run", "detect_all", "detect_for_plan", "run_bounded"]


class _Outcome:
    __slots__ = ("error", "value")

    def __init__(self) -> None:
        self.value: Any = None
        self.error: Optional[BaseException] = None


def run_bounded(
    tasks: Mapping[str, Callable[[], Any]], deadline: Optional[float]
) -> tuple[dict[str, Any], list[str]]:
    """Run tasks in daemon threads until they finish or the deadline passes.

    Returns the values of the tasks that finished and a note for each one that did not
    (timed out, or raised: a detector bug must not take the whole report down).
    """
    outcomes = {name: _Outcome() for name in tasks}
    threads = {}
    for name, task in tasks.items():

        def body(task: Callable[[], Any] = task, out: _Outcome = outcomes[name]) -> None:
            try:
                out.value = task()
            except BaseException as exc:  # noqa: BLE001 -- reported as a note
                out.error = exc

        thread = threading.Thread(target=body, name=f"envkit-{name}", daemon=True)
        thread.start()
        threads[name] = thread
    values: dict[str, Any] = {}
    notes: list[str] = []
    for name, thread in threads.items():
        thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        outcome = outcomes[name]
        if thread.is_alive():
            notes.append(f"{name}: no answer before the time limit; reported as unknown")
        elif outcome.error is not None:
            notes.append(f"{name}: detector failed: {type(outcome.error).__name__}: {outcome.error}")
        else:
            values[name] = outcome.value
    return values, notes


def _nvidia(system: System) -> tuple[DriverFacts, tuple[GpuFacts, ...]]:
    reading = read_nvml(system.nvml)
    driver = detect_driver(system, reading)
    gpus = reading.gpus
    notes = list(driver.notes)
    if reading.error is not None and not gpus:
        smi, _version, smi_notes = smi_gpus(system)
        gpus = tuple(smi)
        notes += smi_notes
    gpus, vis_notes = apply_visibility(gpus, system.env.get("CUDA_VISIBLE_DEVICES"))
    notes += vis_notes
    return dataclasses.replace(driver, notes=tuple(notes)), gpus


def detect_all(system: System, interp: Interpreter, *, deep: bool = False) -> Facts:
    """Detect everything about this machine and the interpreter ``interp``."""
    tasks: dict[str, Callable[[], Any]] = {
        "host": lambda: detect_host(system),
        "nvidia": lambda: _nvidia(system),
        "toolkits": lambda: detect_toolkits(system, interp.path),
        "python": lambda: detect_python(system, interp),
    }
    if deep:
        tasks["deep"] = lambda: detect_deep(system, interp)
    values, notes = run_bounded(tasks, system.deadline)
    driver, gpus = values.get("nvidia", (DriverFacts(notes=("not detected",)), ()))
    python, torch = values.get(
        "python",
        (
            PythonFacts(interp.path, interp.selected_by, error="the environment probe did not answer"),
            TorchFacts(error="not inspected"),
        ),
    )
    if "deep" in values:
        torch = dataclasses.replace(torch, deep=values["deep"])
    return Facts(
        host=values.get("host", HostFacts()),
        driver=driver,
        gpus=gpus,
        toolkits=values.get("toolkits", ()),
        python=python,
        torch=torch,
        notes=tuple(notes),
    )


def detect_for_plan(system: System, interp: Interpreter | None, *, gpus: bool = True) -> Facts:
    """Only what a plan needs: the driver and GPUs (unless flags describe them) and the
    interpreter's Python and platform (when ``interp`` is given). Quicker than detect_all."""
    tasks: dict[str, Callable[[], Any]] = {}
    if gpus:
        tasks["nvidia"] = lambda: _nvidia(system)
    if interp is not None:
        tasks["python"] = lambda: detect_python(system, interp)
    values, notes = run_bounded(tasks, system.deadline)
    driver, gpu_facts = values.get("nvidia", (DriverFacts(), ()))
    python, torch = values.get("python", (None, TorchFacts()))
    return Facts(driver=driver, gpus=gpu_facts, python=python, torch=torch, notes=tuple(notes))


def begin_run(
    system: System, *, timeout: float, python: Optional[str] = None, env_name: Optional[str] = None
) -> tuple[System, Interpreter, float]:
    """What every bounded run starts with: a valid timeout, the deadline, the interpreter to inspect
    and the start time (doctor, verify and preflight)."""
    from envkit.detect.pyenv import select_interpreter
    from envkit.errors import InputError

    if timeout <= 0:
        raise InputError(f"--timeout {timeout:g}: give a positive number of seconds")
    start = time.monotonic()
    system = system.with_deadline(timeout)
    return system, select_interpreter(system, python=python, env_name=env_name), start
