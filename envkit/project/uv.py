"""A uv project's ``pyproject.toml``: the pins in ``[project].dependencies``, one
``[[tool.uv.index]]`` per variant with ``explicit = true`` (only the packages pinned to it come from
it: no dependency-confusion race with PyPI), and ``[tool.uv.sources]`` gating each index on the
platforms it is for, as uv's guide lays it out (astral-sh/uv:docs/guides/integration/pytorch.md
@04317224be05, "Using uv with PyTorch": "Using a PyTorch index", "Configuring accelerators with
environment markers", and "... with optional dependencies" for ``--extras``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Optional

from packaging.markers import InvalidMarker, Marker

from envkit._files import parse_toml, read_text
from envkit.errors import InputError
from envkit.project.manifest import (
    Found,
    dumped,
    edit_sequence,
    inline,
    kept_pin,
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
from envkit.project.want import TORCH_PACKAGES, platform_env
from envkit.specs.intent import variant_of_url
from envkit.specs.read import pip_spec

if TYPE_CHECKING:
    from pathlib import Path

    from envkit.project.want import Source, Want
    from envkit.specs.read import SpecFile

__all__ = ["KIND", "apply", "claims", "read", "set_pins", "view"]

KIND: Final = "uv"


def claims(path: Path, text: str) -> bool:
    if path.name != "pyproject.toml":
        return False
    data = parse_toml(text, str(path))
    tool = data.get("tool") or {}
    return "poetry" not in tool and "pixi" not in tool and ("project" in data or "uv" in tool)


def set_pins(array: Any, pins: dict[str, str]) -> bool:
    """Pins (name -> requirement) into a dependency array: the first line of each name replaced (its
    extras and marker kept: manifest.kept_pin), the name's other lines dropped, missing names
    appended. True when it changed."""
    new: list[Any] = []
    done: set[str] = set()
    for item in array:
        text = str(unwrap(item))
        name = requirement_name(text)
        if name not in pins:
            new.append(unwrap(item))
            continue
        if name in done:
            continue
        done.add(name)
        # the line's extras stay; so does its marker, unless the pin has its own (several platforms)
        new.append(kept_pin(pins[name], text))
    new += [pin for name, pin in pins.items() if name not in done]
    if not len(array) and new:
        array.multiline(True)
    return edit_sequence(array, new)


def _extension_indexes(want: Want) -> list[tuple[str, str, bool]]:
    """(name, URL, flat) of the indexes and find-links pages the extensions' wheels come from."""
    out: dict[str, tuple[str, str, bool]] = {}
    for pick, source in want.extensions():
        if pick.where in ("index", "find-links") and pick.index and pick.index != source.index_url:
            name = f"{pick.name}-{source.variant}"
            out.setdefault(name, (name, pick.index, pick.where == "find-links"))
    return list(out.values())


def _set_indexes(doc: Any, want: Want, referenced: set[str]) -> bool:
    uv = sub_table(sub_table(doc, "tool"), "uv")
    wanted = [(str(s.index_name), str(s.index_url), s.flat) for s in want.indexed()]
    wanted += _extension_indexes(want)
    names = {name for name, _, _ in wanted}
    if "index" not in uv:
        if not wanted and not want.pypi_index:
            return False
        uv["index"] = tomlkit_module().aot()
    indexes = uv["index"]
    changed = False
    for i in reversed(range(len(indexes))):  # indexes of builds no longer wanted, nothing else uses
        entry = indexes[i]
        name, url = entry.get("name"), str(entry.get("url", ""))
        if name not in names and name not in referenced and variant_of_url(url) and entry.get("explicit"):
            del indexes[i]
            changed = True
    for index_name, url, flat in wanted:
        fields: dict[str, Any] = {"name": index_name, "url": url, "explicit": True}
        if flat:
            fields["format"] = "flat"
        entry = next((e for e in indexes if e.get("name") == index_name), None)
        if entry is None:
            table = tomlkit_module().table()
            table.update(fields)
            indexes.append(spaced(table))
            changed = True
            continue
        for key, value in fields.items():
            if unwrap(entry.get(key)) != value:
                entry[key] = value
                changed = True
    if want.pypi_index:  # a PyPI mirror: the project's default index (uv's in place of PyPI)
        default = next((e for e in indexes if e.get("default")), None)
        if default is None:
            table = tomlkit_module().table()
            table.update({"name": "pypi-mirror", "url": want.pypi_index, "default": True})
            indexes.append(spaced(table))
            changed = True
        elif unwrap(default.get("url")) != want.pypi_index:
            default["url"] = want.pypi_index
            changed = True
    if not len(indexes):
        del uv["index"]
    return changed


def _sources_of(want: Want, pairs: list[tuple[dict[str, str], Source]]) -> list[dict[str, str]]:
    return [
        {"index": str(s.index_name), **extra} | ({"marker": s.marker} if s.marker else {})
        for extra, s in pairs
        if s.index_name is not None
    ]


def _extension_sources(want: Want, name: str) -> list[dict[str, str]]:
    """uv's sources of one extension: its wheel's URL, or the index it comes from, per platform."""
    several = len(want.sources) > 1
    out = []
    for pick, source in want.extensions():
        if pick.name != name:
            continue
        marker = {"marker": source.marker} if several and source.marker else {}
        if pick.where == "url" and pick.url:
            out.append({"url": pick.url, **marker})
        elif pick.where in ("index", "find-links") and pick.index and pick.index != source.index_url:
            out.append({"index": f"{pick.name}-{source.variant}", **marker})
        elif source.index_name is not None and pick.where == "index":
            out.append({"index": source.index_name, **marker})
    return out


def _set_sources(doc: Any, want: Want) -> tuple[bool, set[str]]:
    """[tool.uv.sources] for the torch packages; also the index names other packages' sources use."""
    uv = sub_table(sub_table(doc, "tool"), "uv")
    if want.extras:
        pairs = [({"extra": extra}, s) for extra, s in want.extras]
    else:
        pairs = [({}, s) for s in want.sources]
    wanted_of = {name: _sources_of(want, pairs) for name in want.packages}
    for name in want.extension_names():
        wanted_of[name] = _extension_sources(want, name)
    sources = uv.get("sources")
    referenced = {
        str(e.get("index"))
        for name, value in (sources or {}).items()
        if name not in wanted_of
        for e in (value if isinstance(unwrap(value), list) else [value])
        if hasattr(e, "get") and e.get("index")
    }
    made = False
    if sources is None:
        if not any(wanted_of.values()):
            return False, referenced
        sources = uv["sources"] = tomlkit_module().table()
        made = True
    changed = False
    for name, wanted in wanted_of.items():
        current = unwrap(sources.get(name))
        if not wanted:
            if current is not None:
                del sources[name]
                changed = True
            continue
        if current == wanted:
            continue
        array = tomlkit_module().array()
        for fields in wanted:
            array.append(inline(fields))
        if len(wanted) > 1:
            array.multiline(True)
        sources[name] = array
        changed = True
    if not len(sources):
        del uv["sources"]
    elif made:
        sources.add(tomlkit_module().nl())  # a blank line before whatever table comes next
    return changed, referenced


def _set_extras(doc: Any, want: Want) -> bool:
    """One optional extra per build, declared conflicting (uv cannot install both): uv's guide,
    "Configuring accelerators with optional dependencies". The torch packages leave the plain
    dependencies: each extra brings its own build."""
    project = doc["project"]
    changed = False
    if "dependencies" in project:
        kept = [
            d for d in map(unwrap, project["dependencies"]) if requirement_name(str(d)) not in want.packages
        ]
        changed |= edit_sequence(project["dependencies"], kept)
    optional = sub_table(project, "optional-dependencies", super_table=False)
    for extra, source in want.extras:
        if extra not in optional:
            optional[extra] = tomlkit_module().array()
        changed |= set_pins(optional[extra], {n: want.pin(n, source, local=False) for n in want.packages})
    uv = sub_table(sub_table(doc, "tool"), "uv")
    group = [{"extra": extra} for extra, _ in want.extras]
    conflicts = uv.get("conflicts")
    if conflicts is None:
        conflicts = uv["conflicts"] = tomlkit_module().array()
        conflicts.multiline(True)
    if not any(sorted(map(str, unwrap(g))) == sorted(map(str, group)) for g in conflicts):
        array = tomlkit_module().array()
        for fields in group:
            array.append(inline(fields))
        conflicts.append(array)
        changed = True
    return changed


def _extension_pins(want: Want) -> dict[str, str]:
    """``name==version`` of each extension, with the marker of the platforms that have it where
    not all of them do (a macOS CPU plan has no flash-attn)."""
    picks = want.extensions()
    out = {}
    for name in want.extension_names():
        mine = [(p, s) for p, s in picks if p.name == name]
        pin = f"{name}=={mine[0][0].version}"
        if len(mine) < len(want.sources):
            pin += "; " + " or ".join(f"({s.marker})" if " or " in s.marker else s.marker for _, s in mine)
        out[name] = pin
    return out


def apply(path: Path, text: str, want: Want) -> str:
    doc = parse_document(path, text)
    project = doc.get("project")
    if project is None:
        raise InputError(f"{path}: no [project] table", hint="uv init makes one; envkit add edits [project]")
    changed = False
    if want.extras:
        changed |= _set_extras(doc, want)
    else:
        if "dependencies" not in project:
            project["dependencies"] = tomlkit_module().array()
        pins = {n: want.pin(n, want.sources[0], local=False) for n in want.packages}
        pins.update(_extension_pins(want))
        changed |= set_pins(project["dependencies"], pins)
    sources_changed, referenced = _set_sources(doc, want)
    changed |= sources_changed
    changed |= _set_indexes(doc, want, referenced)
    return dumped(doc, text) if changed else text


def _workspace_root(path: Path, data: dict[str, Any]) -> None:
    """InputError for a virtual workspace root (``[tool.uv.workspace]``, no ``[project]``): torch is
    a member's dependency, and the member is the manifest to give (naming those that have torch)."""
    workspace = ((data.get("tool") or {}).get("uv") or {}).get("workspace")
    if "project" in data or not isinstance(workspace, dict):
        return
    members = [m for g in workspace.get("members") or [] if isinstance(g, str) for m in path.parent.glob(g)]
    manifests = [m / "pyproject.toml" for m in sorted(members) if (m / "pyproject.toml").is_file()]
    naming = [m for m in manifests if _names_torch(m)]
    chosen = [str(m.parent) for m in naming or manifests] or ["MEMBER"]
    raise InputError(
        f"{path}: a uv workspace root without [project]: torch is a member's dependency",
        hint="give the member: --project " + " or --project ".join(chosen[:3]),
    )


def _names_torch(path: Path) -> bool:
    try:
        return read(path, read_text(str(path))).torch is not None
    except InputError:  # a member that does not parse is its own error, when it is given
        return False


def read(path: Path, text: str) -> Found:
    data = parse_toml(text, str(path))
    _workspace_root(path, data)
    project = data.get("project") or {}
    lines = [str(d) for d in project.get("dependencies") or []]
    for extra in (project.get("optional-dependencies") or {}).values():
        lines += [str(d) for d in extra or []]
    torch = next((d for d in lines if requirement_name(d) == "torch"), None)
    names = tuple(n for n in TORCH_PACKAGES if any(requirement_name(d) == n for d in lines))
    python = lowest_python(project.get("requires-python"))
    return Found(path, KIND, torch, public_range(torch), names, "pip", python)


def _marker_applies(marker: Optional[str], platform: str, python: Optional[str]) -> bool:
    if not marker:
        return True
    try:
        return bool(Marker(marker).evaluate(platform_env(platform, python or "3.11")))
    except InvalidMarker:
        return False


def view(path: Path, text: str, platform: str, python: Optional[str]) -> SpecFile:
    """torch's lines for ``platform``, with the index uv takes it from as ``--index-url``: an
    explicit index a source points torch at, else the project's default index (PyPI)."""
    data = parse_toml(text, str(path))
    project = data.get("project") or {}
    python = python or lowest_python(project.get("requires-python"))
    uv = (data.get("tool") or {}).get("uv") or {}
    lines = [str(d) for d in project.get("dependencies") or []]
    if not any(requirement_name(d) == "torch" for d in lines):  # torch only in extras: the first one's
        for extra in (project.get("optional-dependencies") or {}).values():
            if any(requirement_name(str(d)) == "torch" for d in extra or []):
                lines += [str(d) for d in extra]
                break
    entries = (uv.get("sources") or {}).get("torch") or []
    entries = entries if isinstance(entries, list) else [entries]
    applying = [
        e for e in entries if isinstance(e, dict) and _marker_applies(e.get("marker"), platform, python)
    ]
    indexes = {i.get("name"): i for i in uv.get("index") or [] if isinstance(i, dict)}
    url = None
    if applying and applying[0].get("index") in indexes:
        url = indexes[applying[0]["index"]].get("url")
    elif applying and applying[0].get("url"):
        lines = [d for d in lines if requirement_name(d) != "torch"] + [f"torch @ {applying[0]['url']}"]
    else:
        url = next((i.get("url") for i in indexes.values() if i.get("default")), None)
    options = [f"--index-url {url}"] if url else []
    return pip_spec(str(path), options + select(lines, platform, python))
