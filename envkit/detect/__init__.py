"""Detection: every probe of the machine, run side by side under one deadline, into Facts.

Each detector runs in its own daemon thread. When the deadline passes, whatever has not answered
is recorded as "timed out" and the rest is reported: a wedged GPU that hangs NVML, or an
nvidia-smi that never returns, cannot stop ``envkit doctor`` from answering in time. Subprocesses
carry their own timeouts, capped by the same deadline, and the children of a detector that did
not answer are stopped before the run returns (``envkit._proc.Scope``): nothing outlives the run.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Optional

from envkit import _proc
from envkit.detect.container import detect_container
from envkit.detect.deep import deep_budget, deep_unanswered, detect_deep
from envkit.detect.driver import detect_driver, driver_from_files, smi_gpus
from envkit.detect.host import host_from
from envkit.detect.host import host_readers as detect_host_readers
from envkit.detect.jetson import read_l4t
from envkit.detect.nvml import NO_ANSWER, ask_nvml
from envkit.detect.plausible import cap_notes, plausible_gpu
from envkit.detect.pyenv import Interpreter, detect_python
from envkit.detect.toolkit import detect_toolkits
from envkit.detect.vendors import VENDORS, unanswered
from envkit.detect.visibility import apply_visibility
from envkit.facts import (
    ContainerFacts,
    DriverFacts,
    Facts,
    GpuFacts,
    HostFacts,
    PythonFacts,
    TorchFacts,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from envkit.system import System

__all__ = ["begin_run", "detect_all", "detect_for_plan", "run_bounded", "stragglers"]

# Detector threads a run gave up on at its deadline. Their children are stopped (a Scope), so most
# end at once; one stuck in the kernel (a read of a wedged driver's /proc file) runs on, and
# `preflight --every` waits for it rather than start another beside it (envkit.commands.watch).
_ABANDONED: list[threading.Thread] = []
_ABANDONED_LOCK = threading.Lock()


def stragglers() -> list[threading.Thread]:
    """The detector threads earlier runs gave up on that are still running."""
    with _ABANDONED_LOCK:
        _ABANDONED[:] = [t for t in _ABANDONED if t.is_alive()]
        return list(_ABANDONED)


class _Outcome:
    __slots__ = ("error", "value")

    def __init__(self) -> None:
        self.value: Any = None
        self.error: Optional[BaseException] = None


def run_bounded(
    tasks: Mapping[str, Callable[[], Any]],
    deadline: Optional[float],
    *,
    then: Optional[Callable[[], None]] = None,
) -> tuple[dict[str, Any], list[str]]:
    """Run tasks in daemon threads until they finish or the deadline passes; ``then`` is called once
    every task's thread has started.

    Returns the values of the tasks that finished and a note for each one that did not
    (timed out, or raised: a detector bug must not take the whole report down). The children of a
    task that did not finish in time are stopped (SIGTERM, then SIGKILL) before this returns, and
    it may start no more; the same on Ctrl-C or any exception while waiting.
    """
    outcomes = {name: _Outcome() for name in tasks}
    scopes = {name: _proc.Scope(name) for name in tasks}
    threads = {}
    for name, task in tasks.items():

        def body(task: Callable[[], Any] = task, out: _Outcome = outcomes[name]) -> None:
            try:
                out.value = task()
            except BaseException as exc:  # noqa: BLE001 -- reported as a note
                out.error = exc

        # Each thread runs in its own copy of the context, inside its task's Scope.
        context = contextvars.copy_context()
        context.run(_proc.enter_scope, scopes[name])
        thread = threading.Thread(target=context.run, args=(body,), name=f"envkit-{name}", daemon=True)
        thread.start()
        threads[name] = thread
    values: dict[str, Any] = {}
    notes: list[str] = []
    abandoned: list[_proc.Scope] = []
    try:
        if then is not None:
            then()
        for name, thread in threads.items():
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            outcome = outcomes[name]
            if thread.is_alive():
                abandoned.append(scopes[name])
                with _ABANDONED_LOCK:
                    _ABANDONED.append(thread)
                notes.append(f"{name}: no answer before the time limit; reported as unknown")
            elif outcome.error is not None:
                error = _proc.short(str(outcome.error), 300)
                notes.append(f"{name}: detector failed: {type(outcome.error).__name__}: {error}")
            else:
                values[name] = outcome.value
    except BaseException:
        _proc.cancel_scopes([scopes[n] for n, t in threads.items() if t.is_alive()])
        raise
    _proc.cancel_scopes(abandoned)
    return values, notes


def _nvidia(system: System) -> tuple[DriverFacts, tuple[GpuFacts, ...]]:
    reading = ask_nvml(system)
    driver = detect_driver(system, reading)
    gpus = reading.gpus
    notes = list(driver.notes)
    left = system.remaining()
    # nvidia-smi's GPU list where NVML failed, with time left: an nvidia-smi that hung until the
    # deadline in detect_driver would hang again, and two of them per run stacked up in watch mode.
    if reading.error is not None and not gpus and (left is None or left > 0):
        smi, _version, smi_notes = smi_gpus(system)
        gpus = tuple(smi)
        notes += smi_notes
    # Whatever the source, a value no GPU can have is not a fact (nvidia-smi's are checked as parsed).
    checked = []
    for gpu in gpus:
        gpu, gpu_notes = plausible_gpu(gpu, gpu.source)
        checked.append(gpu)
        notes += gpu_notes
    gpus, vis_notes = apply_visibility(tuple(checked), system.env.get("CUDA_VISIBLE_DEVICES"))
    notes += vis_notes
    return dataclasses.replace(driver, notes=tuple(cap_notes(notes, "nvidia"))), gpus


def detect_all(
    system: System, interp: Interpreter, *, deep: bool = False, then: Optional[Callable[[], None]] = None
) -> Facts:
    """Detect everything about this machine and the interpreter ``interp``; ``then`` is called once
    every detector has started (run_bounded).

    Every detector (and every host fact) runs on its own under the deadline: one that hangs costs
    its own facts only, each named in a note, never the others'.
    """
    host_readers = {f"host.{name}": read for name, read in detect_host_readers(system).items()}
    tasks: dict[str, Callable[[], Any]] = {
        # The longest first: the environment probe (a Python child: the run waits for it) starts
        # before the threads of the quick readers queue for the GIL.
        # The loader's view needs torch's folder, which the environment probe finds: it follows
        # in the same task, while NVML's worker still runs.
        "python": lambda: _python_and_loader(system, interp),
        "nvidia": lambda: _nvidia(system),
        "toolkits": lambda: detect_toolkits(system, interp.path),
        **host_readers,
        # The version files need no NVML and no nvidia-smi: a wedged GPU that hangs both must
        # not turn a known driver into "install the driver".
        "driver.files": lambda: driver_from_files(system),
        "container": lambda: detect_container(system),
        **_vendor_tasks(system),
    }
    budget = deep_budget(system)
    if deep:
        tasks["deep"] = lambda: detect_deep(system, interp, budget=budget)
    values, notes = run_bounded(tasks, system.deadline, then=then)
    host = host_from(
        {name[5:]: values[name] for name in host_readers if name in values},
        [name[5:] for name in host_readers if name not in values],
    )
    driver, gpus = values.get("nvidia") or (_unanswered_driver(values.get("driver.files")), ())
    python, torch, loader_notes = values.get(
        "python",
        (
            PythonFacts(interp.path, interp.selected_by, error="the environment probe did not answer"),
            TorchFacts(error="not inspected"),
            (),
        ),
    )
    notes += loader_notes
    if deep:
        torch = dataclasses.replace(torch, deep=values.get("deep") or deep_unanswered(budget))
        # torch's own warnings, caught by the probe, say why CUDA is unusable (torch_messages; its
        # patterns are read only here: a run without --deep has no warnings to read).
        from envkit.detect.torch_messages import read_torch_messages, with_messages

        torch = with_messages(torch, read_torch_messages(torch.deep.warnings if torch.deep else ()))
    return Facts(
        host=host,
        driver=driver,
        gpus=gpus,
        toolkits=values.get("toolkits", ()),
        python=python,
        torch=torch,
        container=values.get("container", ContainerFacts()),
        **_vendor_facts(values),
        notes=tuple(notes),
        # A detector that did not answer leaves "unknown", not "absent" (no container, no AMD GPU).
        unknown=tuple(name for name in ("container", *(v.name for v in VENDORS)) if name not in values),
    )


def _vendor_tasks(system: System) -> dict[str, Callable[[], Any]]:
    """One task per GPU vendor besides NVIDIA (envkit.detect.vendors), named as its Facts field."""
    tasks: dict[str, Callable[[], Any]] = {}
    for vendor in VENDORS:
        tasks[vendor.name] = functools.partial(vendor.detect, system)
    return tasks


def _vendor_facts(values: Mapping[str, Any]) -> dict[str, Any]:
    return {v.name: values.get(v.name) or unanswered(v.name) for v in VENDORS}


def _python_and_loader(
    system: System, interp: Interpreter
) -> tuple[PythonFacts, TorchFacts, tuple[str, ...]]:
    """The environment probe's facts, with the loader's view of a CUDA build's libraries
    (envkit.detect.loader) and its notes."""
    python, torch = detect_python(system, interp)
    if torch.location:
        # The compiled extensions' files as the loader sees them (envkit.detect.extensions).
        torch = _with_extension_binaries(system, torch, python)
    if torch.cuda is None or not torch.location:
        return python, torch, ()
    from envkit.detect.loader import loader_view

    libs, notes = loader_view(system, torch, python)
    return python, dataclasses.replace(torch, loader=libs), notes


def _with_extension_binaries(system: System, torch: TorchFacts, python: Optional[PythonFacts]) -> TorchFacts:
    """torch with its compiled extensions' .so files as the loader sees them
    (envkit.detect.extensions); only extensions envkit knows, each run bounded."""
    from envkit.knowledge.extensions import load_extension

    # The installed distributions' knowledge alone (one file each), not the whole table's ~25 files.
    known = [load_extension(d.name) for d in torch.distributions]
    compiled = frozenset(e.name for e in known if e is not None and e.kind in ("compiled", "pinned"))
    if not compiled:
        return torch
    from envkit.detect.extensions import extension_binaries

    return dataclasses.replace(torch, extension_binaries=extension_binaries(system, torch, python, compiled))


def _unanswered_driver(files: Optional[DriverFacts]) -> DriverFacts:
    """The driver when NVML / nvidia-smi did not answer in time: the version files' answer (if
    any), with NVML's error saying that it hung."""
    base = files or DriverFacts()
    return dataclasses.replace(
        base,
        nvml_error=f"{NO_ANSWER}: NVML and nvidia-smi did not answer before the time limit",
        notes=(*base.notes, "nvidia: no answer from NVML or nvidia-smi before the time limit"),
    )


def detect_for_plan(system: System, interp: Interpreter | None, *, gpus: bool = True) -> Facts:
    """Only what a plan needs: the driver and GPUs (unless flags describe them) and the
    interpreter's Python and platform (when ``interp`` is given). Quicker than detect_all."""
    tasks: dict[str, Callable[[], Any]] = {}
    if gpus:
        tasks["nvidia"] = lambda: _nvidia(system)
        tasks.update(_vendor_tasks(system))
        tasks["l4t"] = lambda: read_l4t(system)
    if interp is not None:
        tasks["python"] = lambda: detect_python(system, interp)
    values, notes = run_bounded(tasks, system.deadline)
    driver, gpu_facts = values.get("nvidia", (DriverFacts(), ()))
    python, torch = values.get("python", (None, TorchFacts()))
    vendors = _vendor_facts(values) if gpus else {}
    return Facts(
        host=HostFacts(l4t_release=values.get("l4t")),
        driver=driver,
        gpus=gpu_facts,
        python=python,
        torch=torch,
        notes=tuple(notes),
        **vendors,
    )


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
