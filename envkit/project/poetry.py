"""A Poetry project's ``pyproject.toml``: one ``[[tool.poetry.source]]`` per variant with
``priority = "explicit"`` (a source only the dependencies that name it use: Poetry's "Explicit
Package Sources", python-poetry/poetry:docs/repositories.md, which gives this very PyTorch example
since 1754f5a), and the dependency's ``source``.

Two layouts: Poetry 2's ``[project].dependencies`` (the pin there, and ``[tool.poetry.dependencies]``
adding the source: poetry docs/pyproject.md, "dependencies and dependency groups"), or Poetry 1's
``[tool.poetry.dependencies]`` (``torch = {version = "2.14.1", source = "pytorch-cu126"}``). Several
platforms get one constraint each with ``markers`` (Poetry's "multiple constraints dependencies");
a platform whose build is PyPI's default names ``source = "pypi"``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final, Optional

from envkit._files import parse_toml
from envkit.project.manifest import (
    Found,
    dumped,
    inline,
    lowest_python,
    parse_document,
    public_range,
    requirement_name,
    spaced,
    sub_table,
    tomlkit_module,
    unwrap,
)
from envkit.project.requirements import select
from envkit.project.uv import set_pins
from envkit.project.want import TORCH_PACKAGES, platform_env
from envkit.specs.intent import variant_of_url
from envkit.specs.read import pip_spec

if TYPE_CHECKING:
    from pathlib import Path

    from envkit.project.want import Source, Want
    from envkit.specs.read import SpecFile

__all__ = ["KIND", "apply", "claims", "pep440", "read", "view"]

KIND: Final = "poetry"
_CARET: Final = re.compile(r"^\^(\d+)(?:\.(\d+))?(?:\.(\d+))?$")
_TILDE: Final = re.compile(r"^~(\d+)(?:\.(\d+))?(?:\.(\d+))?$")


def claims(path: Path, text: str) -> bool:
    return path.name == "pyproject.toml" and "poetry" in (parse_toml(text, str(path)).get("tool") or {})


def pep440(constraint: str) -> Optional[str]:
    """A Poetry version constraint as a PEP 440 range (``^2.1`` -> ``>=2.1,<3.0``, ``2.1.0`` ->
    ``==2.1.0``, ``*`` -> none); None for what envkit does not translate."""
    text = constraint.strip()
    if text in ("", "*"):
        return None
    for pattern, bump in ((_CARET, "caret"), (_TILDE, "tilde")):
        match = pattern.match(text)
        if match:
            parts = [int(p) for p in match.groups() if p is not None]
            if bump == "caret":
                i = next((k for k, v in enumerate(parts) if v), len(parts) - 1)
            else:
                i = 0 if len(parts) == 1 else 1
            upper = [*parts[:i], parts[i] + 1]
            return f">={'.'.join(map(str, parts))},<{'.'.join(map(str, upper))}"
    if text[0].isdigit():
        return f"=={text}"
    return text


def _constraints(value: Any) -> list[dict[str, Any]]:
    value = unwrap(value)
    if isinstance(value, str):
        return [{"version": value}]
    if isinstance(value, dict):
        return [value]
    return [v for v in value or [] if isinstance(v, dict)]


def _wanted(want: Want, name: str, source: Source, *, version: bool, several: bool) -> dict[str, str]:
    fields: dict[str, str] = {}
    if version:
        fields["version"] = want.pin(name, source, local=False).split("==", 1)[1]
    if several and source.marker:
        fields["markers"] = source.marker
    # PyPI's build: "pypi", or the PyPI mirror (a primary source turns Poetry's implicit PyPI off)
    fields["source"] = source.index_name or ("pypi-mirror" if want.pypi_index else "pypi")
    return fields


def _set_sources(doc: Any, want: Want) -> bool:
    poetry = sub_table(doc["tool"], "poetry")
    wanted = want.indexed()
    names = {s.index_name for s in wanted}
    used = {
        str(c.get("source"))
        for n, v in (poetry.get("dependencies") or {}).items()
        if n not in TORCH_PACKAGES
        for c in _constraints(v)
    }
    if "source" not in poetry:
        if not wanted and not want.pypi_index:
            return False
        poetry["source"] = tomlkit_module().aot()
    sources = poetry["source"]
    changed = False
    for i in reversed(range(len(sources))):
        entry = sources[i]
        name, url = entry.get("name"), str(entry.get("url", ""))
        if (
            name not in names
            and name not in used
            and variant_of_url(url)
            and entry.get("priority") == "explicit"
        ):
            del sources[i]
            changed = True
    rows = [{"name": s.index_name, "url": s.index_url, "priority": "explicit"} for s in wanted]
    if want.pypi_index:  # Poetry docs, "Primary Package Sources": searched in place of PyPI
        rows.append({"name": "pypi-mirror", "url": want.pypi_index, "priority": "primary"})
    for fields in rows:
        entry = next((e for e in sources if e.get("name") == fields["name"]), None)
        if entry is None:
            table = tomlkit_module().table()
            table.update(fields)
            sources.append(spaced(table))
            changed = True
            continue
        for key, value in fields.items():
            if unwrap(entry.get(key)) != value:
                entry[key] = value
                changed = True
    if not len(sources):
        del poetry["source"]
    return changed


def apply(path: Path, text: str, want: Want) -> str:
    doc = parse_document(path, text)
    project = doc.get("project")
    poetry = sub_table(doc["tool"], "poetry")
    pep621 = project is not None and "dependencies" in project
    changed = False
    if pep621:  # Poetry 2: the pins in [project], the sources in [tool.poetry.dependencies]
        pins = {n: want.pin(n, want.sources[0], local=False) for n in want.packages}
        changed |= set_pins(project["dependencies"], pins)
    deps = poetry.get("dependencies")
    made = deps is None
    if deps is None:
        deps = poetry["dependencies"] = tomlkit_module().table()
    several = len(want.sources) > 1
    only_pypi = all(s.index_name is None for s in want.sources)
    for name in want.packages:
        constraints = [_wanted(want, name, s, version=not pep621, several=several) for s in want.sources]
        if only_pypi:  # PyPI's build: no source to name
            constraints = [{k: v for k, v in c.items() if k != "source"} for c in constraints[:1]]
        value: Any
        if len(constraints) == 1:
            plain = constraints[0]
            if pep621 and only_pypi:
                value = None  # nothing to add to [project]'s pin
            elif list(plain) == ["version"]:
                value = plain["version"]
            else:
                value = plain
        else:
            value = constraints
        if unwrap(deps.get(name)) == value or (value is None and name not in deps):
            continue
        if value is None:
            del deps[name]
        elif isinstance(value, list):
            array = tomlkit_module().array()
            for fields in value:
                array.append(inline(fields))
            array.multiline(True)
            deps[name] = array
        elif isinstance(value, dict):
            deps[name] = inline(value)
        else:
            deps[name] = value
        changed = True
    if made:
        spaced(deps)
    for pick, _source in want.extensions()[:1] if len(want.sources) == 1 else want.extensions():
        # One platform: the wheel's URL (or its version); several: the version, with markers in
        # [project] or on the constraint, is left to Poetry's resolver.
        value = {"url": pick.url} if pick.where == "url" and pick.url else None
        if pep621:
            changed |= set_pins(project["dependencies"], {pick.name: f"{pick.name}=={pick.version}"})
            if value is not None and unwrap(deps.get(pick.name)) != value:
                deps[pick.name] = inline(value)
                changed = True
        elif unwrap(deps.get(pick.name)) != (value or str(pick.version)):
            deps[pick.name] = inline(value) if value is not None else str(pick.version)
            changed = True
    changed |= _set_sources(doc, want)
    return dumped(doc, text) if changed else text


def _torch_text(data: dict[str, Any]) -> Optional[str]:
    project = data.get("project") or {}
    line = next(
        (str(d) for d in project.get("dependencies") or [] if requirement_name(str(d)) == "torch"), None
    )
    if line is not None:
        return line
    value = ((data.get("tool") or {}).get("poetry") or {}).get("dependencies", {}).get("torch")
    if value is None:
        return None
    constraint = next((c.get("version") for c in _constraints(value) if c.get("version")), "*")
    return f"torch{pep440(str(constraint)) or ''}"


def read(path: Path, text: str) -> Found:
    data = parse_toml(text, str(path))
    project = data.get("project") or {}
    poetry = (data.get("tool") or {}).get("poetry") or {}
    names = {requirement_name(str(d)) for d in project.get("dependencies") or []} | set(
        poetry.get("dependencies") or {}
    )
    torch = _torch_text(data)
    python = lowest_python(project.get("requires-python")) or lowest_python(
        pep440(str((poetry.get("dependencies") or {}).get("python", "")))
    )
    found = tuple(n for n in TORCH_PACKAGES if n in names)
    return Found(path, KIND, torch, public_range(torch), found, "pip", python)


def view(path: Path, text: str, platform: str, python: Optional[str]) -> SpecFile:
    from packaging.markers import InvalidMarker, Marker

    data = parse_toml(text, str(path))
    poetry = (data.get("tool") or {}).get("poetry") or {}
    torch = _torch_text(data)
    env = platform_env(platform, python or "3.11")
    constraints = _constraints((poetry.get("dependencies") or {}).get("torch"))

    def applies(c: dict[str, Any]) -> bool:
        try:
            return not c.get("markers") or bool(Marker(str(c["markers"])).evaluate(env))
        except InvalidMarker:
            return False

    chosen = next((c for c in constraints if applies(c)), None)
    sources = {s.get("name"): s for s in poetry.get("source") or [] if isinstance(s, dict)}
    url = None
    if chosen is not None and chosen.get("source") in sources:
        url = sources[chosen["source"]].get("url")
    else:
        url = next(
            (s.get("url") for s in sources.values() if s.get("priority") in ("primary", "default")), None
        )
    lines = ([f"--index-url {url}"] if url else []) + ([torch] if torch else [])
    return pip_spec(str(path), select(lines, platform, python))
