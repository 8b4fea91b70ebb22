"""Which manifests a project folder holds, which of them say where torch comes from, and which
``envkit add`` edits: every one that names torch (when they agree), else the first in
``FILES`` order. Two that disagree are an input error: envkit does not guess which one is meant.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from envkit._files import read_text
from envkit.errors import InputError
from envkit.project import FILES, kind_of, requirements
from envkit.project.manifest import Found, Manifest, shape_error
from envkit.project.requirements import compiled

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Manifested", "choose", "find_manifests"]


@dataclass(frozen=True)
class Manifested:
    """One manifest of the project: its file, its kind, its text and what it says of torch."""

    path: Path
    kind: Manifest
    text: str
    found: Found


def _kind(path: Path, text: str) -> Optional[Manifest]:
    try:
        return kind_of(path, text)
    except (TypeError, AttributeError, KeyError, ValueError) as exc:
        raise shape_error(path, exc) from None


def _read(path: Path) -> Manifested:
    text = read_text(str(path))
    kind = _kind(path, text)
    if kind is None:
        raise InputError(
            f"{path}: not a manifest envkit edits (uv or Poetry pyproject.toml, pixi.toml, "
            "environment.yml, requirements.txt / .in)"
        )
    try:
        return Manifested(path, kind, text, kind.read(path, text))
    except (TypeError, AttributeError, KeyError, ValueError) as exc:
        raise shape_error(path, exc) from None


def _included(found: list[Manifested], notes: list[str]) -> None:
    """The files the requirements manifests take in with ``-r``/``-c`` (requirements/base.in), each
    added to ``found`` where it names torch: that pin is the one to edit (a pin added beside it in
    the including file would contradict it), in the file pip reads it from."""
    seen = {m.path.resolve() for m in found}
    queue = [m for m in found if m.kind is requirements]
    while queue and len(seen) < 64:
        including = queue.pop(0)
        for path in requirements.includes(including.path, including.text):
            if path.resolve() in seen or not path.is_file():
                continue
            seen.add(path.resolve())
            text = read_text(str(path))
            if compiled(text):  # pip-compile's output (a -c of the .in): compiled again, not edited
                continue
            try:
                m = Manifested(path, requirements, text, requirements.read(path, text))
            except (TypeError, AttributeError, KeyError, ValueError) as exc:
                raise shape_error(path, exc) from None
            queue.append(m)
            if m.found.torch is not None:
                found.append(m)
                notes.append(f"{path}: named by {including.path.name} (-r/-c), and it pins torch")


def find_manifests(project: str) -> tuple[list[Manifested], list[str]]:
    """The manifests of ``project`` (a folder, or one manifest file), with the requirements files
    they include that name torch, and notes on the files left out or taken in. InputError when
    there is none, or one does not parse."""
    where = Path(project)
    found: list[Manifested] = []
    notes: list[str] = []
    if where.is_file():
        found.append(_read(where))
        _included(found, notes)
        return found, notes
    if not where.is_dir():
        raise InputError(f"--project {project}: no such folder or file")
    for name in FILES:
        path = where / name
        if not path.is_file():
            continue
        text = read_text(str(path))
        if _kind(path, text) is None:
            notes.append(f"{path}: not a manifest envkit edits; left alone")
            continue
        found.append(_read(path))
    txt = next((m for m in found if m.path.name == "requirements.txt"), None)
    if txt is not None and compiled(txt.text) and any(m.path.name == "requirements.in" for m in found):
        found.remove(txt)
        notes.append(
            f"{txt.path} is compiled from requirements.in: compile it again after the edit "
            "(pip-compile, or uv pip compile requirements.in -o requirements.txt)"
        )
    _included(found, notes)
    if not found:
        raise InputError(
            f"--project {project}: no manifest envkit edits ({', '.join(FILES)})",
            hint="`uv init` makes a pyproject.toml; `envkit spec --format uv -o DIR` writes one for torch",
        )
    return found, notes


def choose(found: Sequence[Manifested], builds: dict[Path, str]) -> list[Manifested]:
    """The manifests ``envkit add`` edits. ``builds``: what each manifest that names torch would
    install on the target (its torch range and build); InputError when they differ."""
    naming = [m for m in found if m.found.torch is not None]
    if not naming:
        return [found[0]]
    distinct = {builds.get(m.path, "") for m in naming}
    if len(distinct) > 1:
        said = "; ".join(f"{m.path.name}: {builds.get(m.path) or m.found.torch}" for m in naming)
        raise InputError(
            f"the project's manifests disagree on torch ({said})",
            hint="name the one to edit: --project " + " or --project ".join(str(m.path) for m in naming),
        )
    return naming
