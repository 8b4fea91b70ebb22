"""``envkit create``: the command's flow - prepare (resolve and lay out), then execute and verify.

Nothing here prints: ``prepare`` returns the Installation (``--dry-run`` shows just that), ``run``
reports its progress through the ``Progress`` it is given and returns a ``Created`` record; the
face renders both (envkit.render.create).
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Protocol

from envkit.create.backends import INSTALLERS, Backend, Step
from envkit.create.conda_meta import CondaRecord
from envkit.create.install import Installation
from envkit.errors import EXIT_CHECK_FAILED, EXIT_OK, CreateFailed
from envkit.report import Report

if TYPE_CHECKING:
    import contextlib
    from pathlib import Path

    from envkit.create.prepare import CreateRequest
    from envkit.system import System

__all__ = ["CREATE_CHECKS", "Created", "Progress", "prepare", "run"]

# What create verifies: the device and what torch does first (compile, AMP); dist and perf belong to
# the cluster (envkit verify / preflight).
CREATE_CHECKS = ("device", "compile", "amp")


class Progress(Protocol):
    """Where ``run`` says what it is doing (the CLI shows it on stderr)."""

    def step(self, step: Step) -> None: ...

    def line(self, line: str) -> None: ...  # the installer's own output, line by line

    def note(self, note: str) -> None: ...

    def verifying(self) -> None: ...


class NoProgress:
    """A Progress that shows nothing (the Python API's default)."""

    def step(self, step: Step) -> None:
        pass

    def line(self, line: str) -> None:
        pass

    def note(self, note: str) -> None:
        pass

    def verifying(self) -> None:
        pass


@dataclass(frozen=True)
class Created:
    """A finished ``envkit create``: the installation, the verify report unless ``--no-verify``,
    and for a conda environment the packages it holds (from its conda-meta records)."""

    install: Installation
    report: Optional[Report]
    packages: Optional[tuple[CondaRecord, ...]] = None

    @property
    def exit_code(self) -> int:
        return EXIT_CHECK_FAILED if self.report is not None and self.report.exit_code() else EXIT_OK

    @property
    def activate(self) -> str:
        """The command that enters the new environment."""

        # Quoted for the shell it is pasted into: a prefix may hold spaces.
        prefix, bin_dir = (shlex.quote(str(p)) for p in (self.install.prefix, self.install.prefix / "bin"))
        if self.install.backend is Backend.RATTLER:
            # A conda environment made without conda: conda activates it where conda is installed.
            return f"conda activate {prefix} (without conda: export PATH={bin_dir}:$PATH)"
        if INSTALLERS[self.install.backend].conda:
            return f"conda activate {prefix}"
        return f"source {shlex.quote(str(self.install.prefix / 'bin' / 'activate'))}"

    def to_json(self) -> dict[str, Any]:
        report = self.report.to_json() if self.report is not None else None
        packages = None if self.packages is None else [p.to_json() for p in self.packages]
        return {**self.install.to_json(), "status": "created", "verify": report, "packages": packages}


def prepare(system: System, request: CreateRequest) -> Installation:
    """Resolve the plan for the request and lay out the installation; nothing is written or run."""
    from envkit.create.prepare import (
        check_request,
        choose_format,
        choose_template,
        configured_wheelhouse,
        lay_out,
        local_builds,
    )
    from envkit.errors import NoBuildError
    from envkit.planning import make_plan
    from envkit.specs.render import spec_flags

    if request.offline and not request.wheelhouse:
        found = configured_wheelhouse(system)  # pip.conf's find-links, where pip would look
        if found is not None:
            request = dataclasses.replace(request, wheelhouse=found)
    check_request(system, request)
    if request.from_lock is not None:
        from envkit.create.from_lock import lay_out_lock

        return lay_out_lock(system, request, request.from_lock)
    template = choose_template(request)
    fmt, why = choose_format(system, request, template)
    flags = spec_flags(template, request.flags, fmt)  # fmt decides the channel
    notes = [f"channel: {fmt} ({why})"]
    try:
        plan = make_plan(system, flags, available=local_builds(request))
    except NoBuildError as error:
        if request.channel != "auto" or fmt != "conda":
            raise
        # --channel auto: conda publishes no build that fits; pip may (the conda routes end
        # sooner: the pytorch channel at 2.5.1, conda-forge at its newest feedstock release).
        fmt = "pip"
        notes = [
            f"channel: pip (--channel auto fell back to pip: conda has no build that fits: {error.summary})"
        ]
        plan = make_plan(system, spec_flags(template, request.flags, fmt), available=local_builds(request))
    from envkit.create.build_check import check_build_toolkit

    check_build_toolkit(system, plan)
    return lay_out(system, request, template, fmt, plan, notes)


def holding(install: Installation) -> contextlib.AbstractContextManager[Path]:
    """The place's lock (envkit.create.place.locked), for a real run to take before ``will`` judges
    the place and to hold until ``run(..., lock_held=True)`` is over: the lock decides first. What a
    running create of the same place has moved aside is its work, not an interrupted run's left-over,
    and a second create must say "busy", never suggest an ``rm -rf`` of it."""
    from envkit.create.place import locked

    return locked(install.prefix)


def will(install: Installation, *, force: bool, dry_run: bool = False) -> list[str]:
    """What the run will do to the place (refusing first: taken, not an environment, left-overs).
    A real run calls it holding the place's lock (``holding``); ``--dry-run`` takes none, and
    asks whether another create holds it before anything else.

    A previous environment that a killed run left moved aside goes back first in a real run (under
    the lock, with a note), and only then is the place judged: refusing here, before it is back,
    would leave it aside for good."""
    from envkit.create.install import check_place
    from envkit.create.place import check_not_busy, leftover_backup

    if dry_run:
        check_not_busy(install.prefix)
    backup = leftover_backup(install.prefix)
    if backup is not None and not dry_run:
        return [f"puts back {install.prefix} from {backup}, left by an interrupted envkit create"]
    return check_place(install, force=force, lock_held=not dry_run)


def run(
    system: System,
    install: Installation,
    *,
    force: bool,
    verify: bool = True,
    progress: Optional[Progress] = None,
    lock_held: bool = False,
) -> Created:
    """Install, then verify in the new environment; all or nothing (envkit.create.install.execute).
    ``lock_held``: the caller holds the place's lock (``holding``)."""
    from envkit.create.install import execute

    shown = progress or NoProgress()

    def verify_env(python: Path) -> Report:
        from envkit.verify import verify as run_verify

        shown.verifying()
        checks = (*CREATE_CHECKS, "extensions") if install.plan.extensions else CREATE_CHECKS
        return run_verify(system, python=str(python), checks=checks)

    try:
        report = execute(
            system,
            install,
            force=force,
            on_step=shown.step,
            on_line=shown.line,
            on_note=shown.note,
            verify=verify_env if verify else None,
            lock_held=lock_held,
        )
    except CreateFailed as failed:
        # An index that did not answer (or had no such torch): the next step comes last, after
        # what was undone, never only pip's retry noise and "removed the half-made …".
        from envkit.create.next_step import index_next_step

        step = index_next_step(failed.message, install)
        if step is not None:
            failed.hint = "; ".join(part for part in (failed.hint, f"next: {step}") if part)
        raise
    packages = None
    if INSTALLERS[install.backend].conda:
        from envkit.create.conda_meta import installed_packages

        packages = installed_packages(install.prefix)
    return Created(install, report, packages)
