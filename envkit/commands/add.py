"""``envkit add torch [torchvision …] --project DIR``: resolve the build for each of the project's
platforms, then edit the project's manifests in place (envkit.project) so that its own installer
(uv, Poetry, pip, conda, pixi) gets that build. Returns a record; the face prints it.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from packaging.utils import canonicalize_name

from envkit.errors import InputError
from envkit.knowledge import CUDA_PLATFORMS, PLATFORMS
from envkit.project.manifest import shape_error
from envkit.project.want import TORCH_PACKAGES, Want, make_want

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.knowledge import Knowledge
    from envkit.project.find import Manifested
    from envkit.resolve import Plan
    from envkit.resolve.plan import PlanFlags
    from envkit.resolve.target import Target
    from envkit.specs.intent import SpecIntent
    from envkit.system import System

__all__ = [
    "ADD_SCHEMA",
    "Added",
    "Edit",
    "add",
    "add_command",
    "kept_cuda",
    "plan_manifest",
    "plan_platforms",
    "write_edits",
]

ADD_SCHEMA = "envkit.add/1"


@dataclass(frozen=True)
class Edit:
    path: Path
    kind: str
    before: str
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        """The edit as a unified diff (``a/NAME`` -> ``b/NAME``), empty when nothing changes."""
        lines = difflib.unified_diff(
            self.before.splitlines(keepends=True),
            self.after.splitlines(keepends=True),
            fromfile=f"a/{self.path.name}",
            tofile=f"b/{self.path.name}",
        )
        return "".join(
            line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
        )


@dataclass(frozen=True)
class Added:
    """What ``envkit add`` did (or, ``dry_run``, would do)."""

    edits: tuple[Edit, ...]
    wants: tuple[Want, ...]
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": ADD_SCHEMA,
            "dry_run": self.dry_run,
            "files": [
                {"path": str(e.path), "kind": e.kind, "changed": e.changed, "diff": e.diff()}
                for e in self.edits
            ],
            "plans": [s.plan.to_json() for w in self.wants for s in w.sources],
            "command": self.wants[0].command if self.wants else None,
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }


def add_command(packages: Sequence[str], project: str, flags: PlanFlags, platforms: Sequence[str]) -> str:
    """The ``envkit add`` line that makes these edits again (written into nothing: shown and kept
    in ``--json``)."""
    parts = ["envkit add", *packages]
    if project != ".":
        parts += ["--project", project]
    if flags.torch:
        parts += ["--torch", f"'{flags.torch}'"]
    if flags.cuda != "auto":
        parts += ["--cuda", flags.cuda]
    if flags.driver:
        parts += ["--driver", flags.driver]
    parts += [f"--gpu '{g}'" if " " in g else f"--gpu {g}" for g in flags.gpus]
    if flags.no_gpu:
        parts.append("--no-gpu")
    parts += [f"--platform {p}" for p in platforms]
    if flags.python:
        parts += ["--python", flags.python]
    parts += [f"--with '{e}'" if any(c in e for c in "<>=!~ ") else f"--with {e}" for e in flags.extensions]
    return " ".join(parts)


def _on(target: Target, platform: str) -> Target:
    """``target`` moved to ``platform``: a platform without CUDA builds (macOS) has no GPU side."""
    moved = dataclasses.replace(target, platform=platform)
    if platform not in CUDA_PLATFORMS:
        moved = dataclasses.replace(moved, driver=None, gpus=())
    return moved


def plan_platforms(
    system: System, flags: PlanFlags, platforms: Sequence[str], cudas: Sequence[str] = ()
) -> list[Plan]:
    """One plan per platform (or, ``cudas``, per build on the first platform), all of one torch
    release: the newest every one of them has (a project pins one torch everywhere)."""
    from envkit.knowledge import load_knowledge
    from envkit.planning import make_target

    bad = [p for p in platforms if p not in PLATFORMS]
    if bad:
        raise InputError(f"--platform {bad[0]}: one of {', '.join(PLATFORMS)}")
    k = load_knowledge()
    first = platforms[0] if platforms else None
    target = make_target(system, dataclasses.replace(flags, platform=first))
    jobs: list[tuple[Target, PlanFlags]] = []
    if cudas:
        jobs = [(target, dataclasses.replace(flags, cuda=c)) for c in cudas]
    else:
        for platform in platforms or [target.platform]:
            moved = _on(target, platform)
            cuda = flags.cuda if platform in CUDA_PLATFORMS else "auto"
            jobs.append((moved, dataclasses.replace(flags, cuda=cuda)))
    plans = [_resolve(k, t, f) for t, f in jobs]
    oldest = min(p.torch for p in plans)
    if any(p.torch != oldest for p in plans):
        plans = [_resolve(k, t, dataclasses.replace(f, torch=f"=={oldest}")) for t, f in jobs]
    return plans


def _resolve(k: Knowledge, target: Target, flags: PlanFlags) -> Plan:
    """The plan for one platform. A platform without CUDA builds (macOS) that has no wheel of an
    extension asked for (``--with flash-attn``) is planned without it: the manifest's markers keep
    the extension to the platforms that have it."""
    from envkit.errors import NoBuildError
    from envkit.planning import make_request
    from envkit.resolve import resolve

    try:
        return resolve(k, target, make_request(flags))
    except NoBuildError:
        if not flags.extensions or target.platform in CUDA_PLATFORMS:
            raise
        return resolve(k, target, make_request(dataclasses.replace(flags, extensions=(), allow_build=False)))


def _intent(m: Manifested, k: Knowledge, target: Target) -> SpecIntent:
    """What a manifest asks for on the target (its torch line, build and CUDA)."""
    from envkit.specs.intent import intent_of

    try:
        view = m.kind.view(m.path, m.text, target.platform, str(target.python) if target.python else None)
    except (TypeError, AttributeError, KeyError, ValueError) as exc:
        raise shape_error(m.path, exc) from None
    return intent_of(view, k, target)


def _what_it_installs(m: Manifested, k: Knowledge, target: Target) -> str:
    """What a manifest gets on the target, for comparing two manifests: its range and build."""
    return f"{m.found.torch_range or 'any torch'} ({_intent(m, k, target).variant or 'default build'})"


def kept_cuda(m: Manifested, k: Knowledge, target: Target, flags: PlanFlags) -> tuple[str, ...]:
    """The CUDA to plan for where the GPU side is this machine's and it has no NVIDIA GPU (a login
    node; no --driver, --gpu, --no-gpu or --cuda given) and the manifest names a CUDA build (a local
    version, a variant index, conda's CUDA packages): its minor, then its major, as spec --check's
    fixes keep it (SpecIntent.plan), rather than this machine's CPU build. Empty otherwise."""
    given = flags.no_gpu or flags.driver is not None or bool(flags.gpus) or flags.cuda != "auto"
    if given or target.has_nvidia or m.found.torch is None:
        return ()
    from envkit.specs.intent import variant_of_url

    intent = _intent(m, k, target)
    spec = intent.spec
    urls = (spec.index_url or "", *spec.extra_index_urls, *spec.find_links)
    named = intent.via == "conda" or (intent.torch is not None and intent.torch.local is not None)
    if intent.cuda is None or not (named or any(map(variant_of_url, urls))):
        return ()  # no build named (PyPI's default build): this machine's is as good a guess
    exact = () if intent.major_only else (f"{intent.cuda.major}.{intent.cuda.minor}",)
    return (*exact, str(intent.cuda.major))


def plan_manifest(
    system: System, flags: PlanFlags, platforms: Sequence[str], cudas: Sequence[str] = ()
) -> list[Plan]:
    """plan_platforms, with the first of ``cudas`` (kept_cuda's) that has a build, where given."""
    from envkit.errors import NoBuildError

    for cuda in cudas:
        try:
            return plan_platforms(system, dataclasses.replace(flags, cuda=cuda), platforms)
        except NoBuildError:
            continue
    return plan_platforms(system, flags, platforms)


def add(
    system: System,
    project: str,
    packages: Sequence[str],
    flags: PlanFlags,
    *,
    platforms: Sequence[str] = (),
    channel: Optional[str] = None,
    with_: Sequence[str] = (),
    mirrors: Sequence[str] = (),
    extras: Sequence[str] = (),
    dry_run: bool = False,
) -> Added:
    """Plan and make the edits (written unless ``dry_run``)."""
    from envkit.knowledge import load_knowledge
    from envkit.planning import make_target
    from envkit.project.find import choose, find_manifests

    names: list[str] = [canonicalize_name(p) for p in packages] or ["torch"]
    unknown = [p for p in names if p not in TORCH_PACKAGES]
    if unknown:
        raise InputError(
            f"envkit add {unknown[0]}: envkit adds torch, torchvision and torchaudio",
            hint=f"add other packages with the project's own installer (uv add {unknown[0]}, poetry add, …)",
        )
    if channel is not None and channel not in ("pip", "conda"):
        raise InputError(f"--channel {channel!r}: pip or conda")
    found, notes = find_manifests(project)
    k = load_knowledge()
    python = flags.python or next((m.found.python for m in found if m.found.python), None)
    flags = dataclasses.replace(flags, python=python, extensions=tuple(with_) or flags.extensions)
    target = make_target(system, dataclasses.replace(flags, platform=platforms[0] if platforms else None))
    builds = {m.path: _what_it_installs(m, k, target) for m in found if m.found.torch is not None}
    chosen = choose(found, builds)
    wants: dict[str, Want] = {}
    edits = []
    for m in chosen:
        route = channel or m.found.channel
        if route == "conda" and m.kind.KIND in ("uv", "poetry", "requirements"):
            raise InputError(f"--channel conda: {m.path.name} ({m.kind.KIND}) installs torch with pip")
        if extras and m.kind.KIND != "uv":
            raise InputError(f"--extras: {m.path.name} is not a uv project (uv's optional extras per build)")
        if route not in wants:
            cudas = kept_cuda(m, k, target, flags)
            if cudas:
                notes.append(
                    f"{m.path.name} asks for CUDA {cudas[0]}, and this machine has no NVIDIA GPU: the edit "
                    "keeps its CUDA; for the compute nodes: --driver VERSION --gpu MODEL"
                )
            wants[route] = _want(system, m, flags, route, platforms, names, mirrors, extras, project, cudas)
        try:
            after = m.kind.apply(m.path, m.text, wants[route])
        except (TypeError, AttributeError, KeyError, ValueError) as exc:
            raise shape_error(m.path, exc) from None
        edits.append(Edit(m.path, m.kind.KIND, m.text, after))
        notes += [n for n in wants[route].credentials(m.kind.KIND) if n not in notes]
    warnings = tuple(
        dict.fromkeys(w for want in wants.values() for s in want.sources for w in s.plan.warnings)
    )
    added = Added(tuple(edits), tuple(wants.values()), tuple(notes), warnings, dry_run)
    if not dry_run:
        write_edits(added.edits)
    return added


def _want(
    system: System,
    m: Manifested,
    flags: PlanFlags,
    route: str,
    platforms: Sequence[str],
    names: Sequence[str],
    mirrors: Sequence[str],
    extras: Sequence[str],
    project: str,
    cudas: Sequence[str] = (),
) -> Want:
    from envkit.knowledge.mirrors import MirrorKind
    from envkit.specs.render import spec_mirrors

    torch = flags.torch or (str(m.found.torch_range) if m.found.torch_range is not None else None)
    planned = dataclasses.replace(flags, torch=torch, channel=route)
    chosen_platforms = tuple(platforms) or m.found.platforms
    packages = [*names, *(p for p in m.found.packages if p not in names)]
    if extras:
        plans = plan_platforms(system, planned, chosen_platforms[:1], cudas=extras)
        base = plans[:1]
    else:
        plans = plan_manifest(system, planned, chosen_platforms, cudas)
        base = plans
    chosen = spec_mirrors(list(mirrors), plans[0].variant) if mirrors else ()
    by_kind = {x.kind: x for x in chosen}
    return make_want(
        base,
        packages,
        command=add_command(names, project, flags, chosen_platforms),
        torch_mirror=by_kind.get(MirrorKind.TORCH_WHEELS),
        pypi_mirror=by_kind.get(MirrorKind.PYPI),
        extras=[(p.variant, p) for p in plans] if extras else (),
    )


def write_edits(edits: Sequence[Edit]) -> None:
    """Write the changed files, each whole or not at all (a temporary name, then a rename), with
    its own permissions. Every file is checked first: a read-only one stops all of them."""
    from envkit._files import write_atomic

    changed = [e for e in edits if e.changed]
    for e in changed:
        if not os.access(e.path, os.W_OK) or not os.access(e.path.parent, os.W_OK | os.X_OK):
            raise InputError(f"{e.path}: cannot write it (read-only, or not yours); nothing was changed")
    for e in changed:
        mode = stat.S_IMODE(e.path.stat().st_mode)
        try:
            write_atomic(e.path, e.after, mode=mode)
        except OSError as exc:
            raise InputError(f"{e.path}: cannot write it ({exc.strerror or exc})") from None
