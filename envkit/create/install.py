"""``envkit create``'s installation, all or nothing: the spec files, the installer's steps
(envkit.create.backends), the verify, and the way back.

The environment is built in place (venvs and conda environments are not relocatable), so "nothing"
is done by removal: when a step fails, or Ctrl-C arrives, the half-made environment is deleted, and
an environment that ``--force`` replaced is put back from where it was moved aside. An existing
environment is never touched without ``--force``.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Final, Optional

from envkit._files import write_atomic
from envkit._signals import deferred_signals
from envkit.create.backends import Backend, Step
from envkit.create.place import (
    MARKER,
    Target,
    check_not_busy,
    check_target,
    leftover_backup,
    leftovers,
    locked,
    side_path,
)
from envkit.errors import CreateFailed, EnvkitError
from envkit.resolve import Plan

if TYPE_CHECKING:
    from envkit.report import Report
    from envkit.system import System

__all__ = ["CREATE_SCHEMA", "CreateFailed", "Installation", "check_place", "execute"]


CREATE_SCHEMA: Final = "envkit.create/1"
MARKER_SCHEMA: Final = "envkit.created/1"


@dataclass(frozen=True)
class Installation:
    """Everything ``envkit create`` will do, decided before anything is done (``--dry-run`` shows it)."""

    name: Optional[str]
    prefix: Path
    backend: Backend  # never AUTO: the one chosen
    plan: Plan
    steps: tuple[Step, ...]
    spec_files: dict[str, str]  # file name -> content, written into <prefix>/envkit/
    staging: Path  # where the specs live while the installer reads them
    python: Path  # the new environment's interpreter
    notes: tuple[str, ...] = field(default_factory=tuple)
    # What a conda solve is given (the rattler backend: channels, specs, virtual packages), or None.
    conda: Optional[Mapping[str, Any]] = None

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": CREATE_SCHEMA,
            "name": self.name,
            "prefix": str(self.prefix),
            "backend": self.backend.value,
            "python": str(self.python),
            "plan": self.plan.to_json(),
            "commands": [s.shown() for s in self.steps],
            "spec_files": [str(self.prefix / "envkit" / n) for n in self.spec_files],
            "notes": list(self.notes),
            "conda": None if self.conda is None else dict(self.conda),
        }


@dataclass
class _Undo:
    """How to put things back: remove what was made, restore what --force moved aside.

    Each part is marked done as it is done, so running it again (after a signal that landed before
    the signals were deferred) changes nothing: the restored environment is never removed.
    """

    prefix: Path
    staging: Path
    backup: Optional[Path] = None
    created: bool = False
    scratch: Optional[Path] = None  # the installers' TMPDIR: their downloads and unpacked wheels

    def rollback(self) -> list[str]:
        done = []
        if self.created:
            if os.path.lexists(self.prefix):
                # Under the lock, and with the old environment moved aside, all that is there was
                # made by this run's installer.
                shutil.rmtree(self.prefix, ignore_errors=True)
                done.append(f"removed the half-made {self.prefix}")
            self.created = False
        if self.backup is not None:
            if self.backup.exists() and not os.path.lexists(self.prefix):
                os.replace(self.backup, self.prefix)
                done.append(f"restored the previous {self.prefix}")
            self.backup = None
        shutil.rmtree(self.staging, ignore_errors=True)
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
        return done

    def rollback_uninterrupted(self) -> list[str]:
        """rollback() with SIGINT/SIGTERM held until it is over (then they arrive, once)."""
        done: list[str] = []
        while True:
            try:
                with deferred_signals():
                    done += self.rollback()
                return done
            except KeyboardInterrupt:
                # A signal that landed before they were deferred: finish the job, then let it out.
                if self.created or self.backup is not None:
                    continue
                raise


def _write_staging(staging: Path, files: dict[str, str]) -> None:
    staging.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        tmp = staging / f".{name}.tmp"
        tmp.write_text(content, encoding="utf-8")
        os.replace(tmp, staging / name)


def check_place(install: Installation, *, force: bool, lock_held: bool = False) -> list[str]:
    """What ``execute`` would do to what is at the prefix, or InputError when it would refuse: the
    same decision, taken under the lock (``lock_held``) or, for ``--dry-run``, after asking whether
    another create holds it."""
    if not lock_held:
        check_not_busy(install.prefix)
    return check_target(install.prefix, force=force).notes()


def execute(
    system: System,
    install: Installation,
    *,
    force: bool = False,
    on_step: Callable[[Step], None] = lambda _s: None,
    on_line: Callable[[str], None] = lambda _l: None,
    on_note: Callable[[str], None] = lambda _n: None,
    verify: Optional[Callable[[Path], Report]] = None,
    lock_held: bool = False,
) -> Optional[Report]:
    """Carry out ``install``; on any failure (or Ctrl-C, SIGTERM, SIGHUP) leave things as they were.
    ``lock_held``: the caller holds the place's lock already (envkit.create.place.locked), and
    judged the place under it.

    Raises:
        InputError: the target exists and ``force`` is off, or it is not an environment, or another
            ``create`` of it is running, or its place cannot be written.
        CreateFailed: a step failed (the message ends with the installer's last lines).
    """
    prefix = install.prefix
    with contextlib.nullcontext() if lock_held else locked(prefix):
        # What a killed run left that is envkit's own by its name: the staging folder, the
        # installers' scratch folder, and the replaced environment it was deleting when it died.
        for trash in (*leftovers(prefix, "trash"), install.staging, side_path(prefix, "tmp")):
            shutil.rmtree(trash, ignore_errors=True)
        restore = leftover_backup(prefix)  # a run killed outright (SIGKILL) while it had moved it aside
        if restore is not None:
            with deferred_signals():
                os.replace(restore, prefix)
            on_note(f"restored {prefix} from {restore}, left by an interrupted envkit create")
        target = check_target(prefix, force=force)
        return _build(system, install, target, on_step=on_step, on_line=on_line, verify=verify)


def _build(
    system: System,
    install: Installation,
    target: Target,
    *,
    on_step: Callable[[Step], None],
    on_line: Callable[[str], None],
    verify: Optional[Callable[[Path], Report]],
) -> Optional[Report]:
    prefix = install.prefix
    undo = _Undo(prefix, install.staging, scratch=side_path(prefix, "tmp"))
    try:
        if target.replace:  # --force: move it aside, put it back if anything fails
            with deferred_signals():
                undo.backup = side_path(prefix, f"old-{int(time.time())}")
                os.replace(prefix, undo.backup)
        undo.created = True
        _write_staging(install.staging, install.spec_files)
        assert undo.scratch is not None
        undo.scratch.mkdir(mode=0o700, exist_ok=True)
        for step in install.steps:
            on_step(step)
            result = system.run(
                step.argv, timeout=step.timeout, env=_in_scratch(step, system, undo.scratch), on_line=on_line
            )
            if not result.ok:
                specific = step.explain(result) if step.explain is not None else None
                if specific is not None:
                    raise specific
                tail = "\n".join(result.stdout.strip().splitlines()[-15:])
                raise CreateFailed(f"{step.title} failed: {result.describe()}\n{tail}".rstrip())
        if not install.python.exists():
            raise CreateFailed(f"the installer finished but {install.python} does not exist")
        report = verify(install.python) if verify is not None else None
        if report is not None and any(
            c.id == "verify.device" and c.status.value == "fail" for c in report.checks
        ):
            device = next(c for c in report.checks if c.id == "verify.device")
            raise CreateFailed(
                f"the new environment's torch does not work: {device.summary}\n{device.detail}"
            )
        _keep_specs(install)
    except BaseException as exc:
        done = undo.rollback_uninterrupted()
        if isinstance(exc, OSError):  # a full disk, a folder that became read-only
            where = f" ({exc.filename})" if exc.filename else ""
            failed = CreateFailed(f"could not write the environment: {exc.strerror or exc}{where}")
            failed.hint = "; ".join(done)
            raise failed from None
        if isinstance(exc, EnvkitError) and done:
            exc.hint = "; ".join(part for part in (exc.hint, *done) if part)
        raise
    # The new environment is complete: from here on it stays. What it replaced is renamed out of
    # the way in one step, then deleted; a run killed during the deletion leaves only a
    # .NAME.envkit-trash-<ts> folder, which the next run removes.
    with deferred_signals():
        trash = None
        if undo.backup is not None:
            trash = side_path(prefix, f"trash-{int(time.time())}")
            os.replace(undo.backup, trash)
        undo.backup = None
        undo.created = False
    if trash is not None:
        shutil.rmtree(trash, ignore_errors=True)
    shutil.rmtree(install.staging, ignore_errors=True)
    shutil.rmtree(side_path(prefix, "tmp"), ignore_errors=True)
    return report


# The variables Python's tempfile (pip, ensurepip, venv), uv (Rust's std::env::temp_dir) and conda
# read for their temporary files: all of them point into the scratch folder beside the prefix, which
# envkit removes whatever happens (on Windows tempfile reads TEMP and TMP).
_TEMP_VARIABLES: Final = ("TMPDIR", "TEMP", "TMP")


def _in_scratch(step: Step, system: System, scratch: Path) -> dict[str, str]:
    """The step's environment with the installers' temporary files in ``scratch``: a wheel of
    several GB half-downloaded when Ctrl-C came goes with the rollback, not into $TMPDIR for good."""
    env = dict(step.child_env(system.env) or system.env)
    env.update(dict.fromkeys(_TEMP_VARIABLES, str(scratch)))
    return env


def _keep_specs(install: Installation) -> None:
    """The specs and the plan go into <prefix>/envkit/, so the environment says how it was made;
    envkit/created.json marks it as one envkit made (what --force may replace)."""
    target = install.prefix / "envkit"
    target.mkdir(parents=True, exist_ok=True)
    files = dict(install.spec_files)
    files["plan.json"] = json.dumps(install.plan.to_json(), indent=2) + "\n"
    files["commands.txt"] = "\n".join(s.shown() for s in install.steps) + "\n"
    _write_staging(target, files)
    write_atomic(install.prefix / MARKER, json.dumps(_marker(install), indent=2) + "\n")


def _marker(install: Installation) -> dict[str, Any]:
    from envkit import __version__

    plan = install.plan
    return {
        "schema": MARKER_SCHEMA,
        "envkit": __version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "backend": install.backend.value,
        "torch": str(plan.torch),
        "variant": plan.variant,
        "python": str(plan.python) if plan.python else None,
    }
