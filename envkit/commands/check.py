"""``envkit check --project DIR`` (and ``envkit spec --check`` on a pyproject.toml or pixi.toml):
whether the project as written gets a torch that runs on the target, per manifest and platform,
judged by the same checks as ``spec --check`` (envkit.specs.check) on what each manifest installs
there (envkit.project reads it), each failure's fix led by the ``envkit add`` that makes it right.

SpecCheck, the record both verbs return (``spec --check`` of any file, envkit.commands.spec, and
``check --project``), lives here, where both find it: spec's check hands a project manifest to
check_project, so this module is the lower one of the two.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from envkit.errors import EXIT_CHECK_FAILED, EXIT_OK
from envkit.report import CheckResult, Status

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.project.find import Manifested
    from envkit.resolve import Plan
    from envkit.resolve.plan import PlanFlags
    from envkit.system import System

__all__ = ["SPEC_CHECK_SCHEMA", "SpecCheck", "check_project"]

SPEC_CHECK_SCHEMA = "envkit.spec-check/1"


@dataclass(frozen=True)
class SpecCheck:
    """``envkit spec --check FILE`` or ``envkit check --project DIR``: the findings and the exit code
    they give."""

    path: str
    results: tuple[CheckResult, ...] = field(default_factory=tuple)
    strict: bool = False
    # What the checks were made for, where the file asks for more than the target shows ("asks for
    # CUDA 12.1, and this machine has no NVIDIA driver or GPU …", with the flags for the GPU nodes).
    notes: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        bad = {Status.FAIL, Status.WARN} if self.strict else {Status.FAIL}
        return EXIT_CHECK_FAILED if any(r.status in bad for r in self.results) else EXIT_OK

    def to_json(self) -> dict[str, Any]:
        from envkit._serial import to_jsonable

        return {
            "schema": SPEC_CHECK_SCHEMA,
            "file": self.path,
            "checks": [to_jsonable(r) for r in self.results],
            "notes": list(self.notes),
            "exit_code": self.exit_code,
        }


def _fixed(result: CheckResult, command: str) -> CheckResult:
    """A failure's or warning's fix led by ``command`` (empty: the manifest already asks for the
    build ``envkit add`` would write, so the fix is elsewhere: the driver, the GPU)."""
    if result.status not in (Status.FAIL, Status.WARN) or not command:
        return result
    fix = f"{command}" + (f"\n(or by hand: {result.fix})" if result.fix else "")
    return dataclasses.replace(result, fix=fix)


def _labelled(result: CheckResult, label: str) -> CheckResult:
    return dataclasses.replace(result, summary=f"{label}: {result.summary}")


def check_project(
    system: System,
    project: str,
    flags: PlanFlags,
    *,
    platforms: Sequence[str] = (),
    strict: bool = False,
) -> SpecCheck:
    """The checks of every manifest of ``project`` that names torch, on each platform."""
    from envkit.commands.add import add_command, kept_cuda
    from envkit.knowledge import CUDA_PLATFORMS, load_knowledge
    from envkit.planning import make_target
    from envkit.project.find import find_manifests
    from envkit.project.manifest import shape_error
    from envkit.specs.check import check_specfile
    from envkit.specs.intent import intent_of

    found, _notes = find_manifests(project)
    k = load_knowledge()
    naming = [m for m in found if m.found.torch is not None]
    results: list[CheckResult] = []
    if not naming:
        command = add_command(["torch"], project, flags, platforms)
        names = ", ".join(m.path.name for m in found)
        results.append(CheckResult("project.torch", Status.SKIP, f"{names}: names no torch", fix=command))
        return SpecCheck(project, tuple(results), strict)
    python = flags.python or next((m.found.python for m in naming if m.found.python), None)
    flags = dataclasses.replace(flags, python=python)
    base = make_target(system, dataclasses.replace(flags, platform=platforms[0] if platforms else None))
    for m in naming:
        chosen = tuple(platforms) or m.found.platforms or (base.platform,)
        command = add_command(_packages(m), str(m.path) if len(naming) > 1 else project, flags, chosen)
        plans = _plans(system, m, flags, chosen, kept_cuda(m, k, base, flags))
        for platform, plan in zip(chosen, plans):
            target = dataclasses.replace(base, platform=platform)
            if platform not in CUDA_PLATFORMS:
                target = dataclasses.replace(target, driver=None, gpus=())
            try:
                view = m.kind.view(m.path, m.text, platform, str(target.python) if target.python else None)
            except (TypeError, AttributeError, KeyError, ValueError) as exc:
                raise shape_error(m.path, exc) from None
            intent = intent_of(view, k, target)
            rng = m.found.torch_range
            asks_the_plan = (
                plan is not None
                and intent.variant == plan.variant
                and rng is not None
                and rng.contains(plan.torch)
                and len(list(rng.filter(str(r.torch) for r in k.releases))) == 1
            )
            label = m.path.name if len(chosen) == 1 and len(naming) == 1 else f"{m.path.name} on {platform}"
            fix = "" if asks_the_plan else command
            results += [_labelled(_fixed(r, fix), label) for r in check_specfile(view, k, target)]
    return SpecCheck(project, tuple(results), strict)


def _plans(
    system: System, m: Manifested, flags: PlanFlags, platforms: Sequence[str], cudas: Sequence[str]
) -> list[Optional[Plan]]:
    """What ``envkit add`` would write for each platform (None where nothing fits)."""
    from envkit.commands.add import plan_manifest
    from envkit.errors import EnvkitError

    torch = flags.torch or (str(m.found.torch_range) if m.found.torch_range is not None else None)
    asked = dataclasses.replace(flags, torch=torch, channel=m.found.channel)
    try:
        return list(plan_manifest(system, asked, platforms, cudas))
    except EnvkitError:
        return [None] * len(platforms)


def _packages(m: Manifested) -> list[str]:
    return list(m.found.packages) or ["torch"]
