"""The Protocol every manifest kind satisfies, what reading one finds, and the edits they share.

Each kind is a module (envkit/project/uv.py, poetry.py, pixi.py, conda_env.py, requirements.py)
with the functions below; ``envkit.project.find`` names them in one table.
"""

from __future__ import annotations

import difflib
import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Optional, Protocol

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from envkit._files import parse_toml
from envkit.errors import InputError

if TYPE_CHECKING:
    from collections.abc import MutableSequence, Sequence

    from envkit.project.want import Want
    from envkit.specs.read import SpecFile

__all__ = [
    "Found",
    "Manifest",
    "dumped",
    "edit_sequence",
    "inline",
    "kept_pin",
    "like",
    "lowest_python",
    "parse_document",
    "public_range",
    "requirement_name",
    "shape_error",
    "spaced",
    "sub_table",
    "tomlkit_module",
    "unwrap",
]


@dataclass(frozen=True)
class Found:
    """What a manifest says of torch, read before anything is planned."""

    path: Path
    kind: str  # the Manifest's KIND
    torch: Optional[str]  # the torch requirement as written (None: the file names no torch)
    torch_range: Optional[SpecifierSet]  # its public range (None: none, or one envkit cannot read)
    packages: tuple[str, ...]  # the torch packages it names (torch, torchvision, torchaudio)
    channel: str  # "pip" or "conda": how this file installs torch (or would, by its kind)
    python: Optional[str] = None  # the lowest Python the project admits ("3.11"), where it says
    platforms: tuple[str, ...] = ()  # the envkit platforms the manifest declares (pixi's)


class Manifest(Protocol):
    """One kind of project manifest (a module: the way pre-commit's languages/*.py are)."""

    KIND: str  # "uv", "poetry", "pixi", "environment.yml", "requirements"

    def claims(self, path: Path, text: str) -> bool:
        """Whether this kind reads ``path`` (by its name, and its content where names are shared)."""
        ...

    def read(self, path: Path, text: str) -> Found:
        """What the file says of torch; InputError when it does not parse."""
        ...

    def view(self, path: Path, text: str, platform: str, python: Optional[str]) -> SpecFile:
        """What the file installs on ``platform``, as envkit.specs.check judges spec files."""
        ...

    def apply(self, path: Path, text: str, want: Want) -> str:
        """The file's text saying ``want``; ``text`` itself, byte for byte, when it already does."""
        ...


def shape_error(path: Path, exc: Exception) -> InputError:
    """A manifest whose fields are not of the kinds its tool takes (``dependencies = "torch"``,
    ``channels = 3``): the edit cannot say where torch goes; one line, exit 2."""
    return InputError(
        f"{path}: a field envkit edits has an unexpected type ({type(exc).__name__}: {exc})",
        hint="check it with its own tool (uv lock, poetry check, pixi info, conda env create --dry-run)",
    )


def parse_document(path: Path, text: str) -> Any:
    """A TOML file as tomlkit's document (comments, order and layout kept), after the limits every
    file envkit reads is held to (envkit._files.parse_toml: nesting, size); InputError naming the file."""
    parse_toml(text, str(path))
    tomlkit: Any = importlib.import_module("tomlkit")
    try:
        return tomlkit.parse(text)
    except Exception as exc:  # noqa: BLE001 -- tomlkit's own parse errors (TOMLKitError, ValueError)
        raise InputError(f"{path}: not valid TOML: {exc}") from None


def tomlkit_module() -> Any:
    """tomlkit, imported where a manifest is edited (it is not needed to read one)."""
    return importlib.import_module("tomlkit")


def sub_table(parent: Any, key: str, *, super_table: bool = True) -> Any:
    """``parent[key]``, made (as an implicit table: no empty ``[tool]`` header) when missing."""
    if key not in parent:
        parent[key] = tomlkit_module().table(super_table)
    return parent[key]


def inline(fields: dict[str, Any]) -> Any:
    """``fields`` as a TOML inline table (``{index = "pytorch-cu126", marker = "…"}``)."""
    table = tomlkit_module().inline_table()
    table.update(fields)
    return table


def spaced(table: Any) -> Any:
    """``table`` (a tomlkit table made here) ending in a blank line, so that the next table's header
    does not follow its last line directly (the layout uv, Poetry and pixi write)."""
    body = getattr(table, "value", table).body if hasattr(getattr(table, "value", table), "body") else []
    if body and type(body[-1][1]).__name__ != "Whitespace":
        tomlkit: Any = importlib.import_module("tomlkit")
        table.add(tomlkit.nl())
    return table


def dumped(doc: Any, original: str) -> str:
    """tomlkit's text of ``doc``, ending as ``original`` did (one line break, not the blank line a
    table made here ends in), in its line breaks."""
    tomlkit: Any = importlib.import_module("tomlkit")
    text = str(tomlkit.dumps(doc)).replace("\r\n", "\n")
    before = original.replace("\r\n", "\n")
    if "\n\n\n" not in before:  # a made table's blank line, and tomlkit's own before the next table
        while "\n\n\n" in text:
            text = text.replace("\n\n\n", "\n\n")
    if before.endswith("\n") and not before.endswith("\n\n"):
        text = text.rstrip("\n") + "\n"
    return like(_set_off(text, before), original)


def like(text: str, original: str) -> str:
    """``text`` (with ``\\n`` line breaks) in ``original``'s: CRLF where it has them (the lines an
    edit adds too), and no final line break where it had none."""
    if not original.endswith(("\n", "\r")):
        text = text.rstrip("\n")
    return text.replace("\n", "\r\n") if "\r\n" in original else text


# A table header at the start of a line: [x], [[x]], [x."y"], with an optional comment.
_HEADER: Final = re.compile(r"^\[\[?[^\[\],=]+\]\]?\s*(#.*)?$")


def _set_off(text: str, original: str) -> str:
    """A blank line before each table header that now follows a line directly where the file did
    not have the two side by side (a table made here, or the one a made table now precedes);
    headers the file itself wrote together, or under a comment, stay as they were."""
    before = original.splitlines()
    together = set(zip(before, before[1:]))
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        bare, last = line.rstrip("\r\n"), out[-1].rstrip("\r\n") if out else ""
        header = _HEADER.match(bare) and last.strip() and not last.lstrip().startswith("#")
        if header and (last, bare) not in together:
            out.append(line[len(bare) :] or "\n")  # the blank line, in the file's line break
        out.append(line)
    return "".join(out)


def unwrap(value: Any) -> Any:
    """A tomlkit item as plain Python data (tomlkit's own ``unwrap``), for comparing."""
    return value.unwrap() if hasattr(value, "unwrap") else value


def requirement_name(text: str) -> Optional[str]:
    """The canonical name of a PEP 508 requirement (None when it is not one)."""
    try:
        return canonicalize_name(Requirement(text).name)
    except InvalidRequirement:
        return None


_EXTRAS: Final = re.compile(r"^\s*[A-Za-z0-9][A-Za-z0-9._-]*\s*(\[[^\]]*\])")


# The markers envkit writes to give each group of platforms its build (want.platform_marker): a
# line that has one is envkit's per-platform pin, not the project's own condition.
_PLATFORM_TERM: Final = r"(?:sys_platform == '\w+'|\(sys_platform == '\w+' and platform_machine == '\w+'\))"
_PLATFORM_MARKER: Final = re.compile(rf"{_PLATFORM_TERM}(?: or {_PLATFORM_TERM})*")


def kept_pin(pin: str, old: str, *, separator: str = "; ", marker: bool = True) -> str:
    """``pin`` (``torch==2.14.1``, maybe with envkit's own platform marker) with what the line it
    replaces said beside its version: its extras (``torch[opt-einsum]``), and (``marker``) its
    marker where the pin has none (``; platform_system != "Darwin"``: where the project wants torch
    at all), unless it is one envkit wrote to choose a platform's build."""
    extras = _EXTRAS.match(old)
    if extras is not None:
        name = re.match(r"[A-Za-z0-9._-]+", pin)
        if name is not None:
            pin = f"{name.group(0)}{extras.group(1).replace(' ', '')}{pin[name.end() :]}"
    if marker and ";" in old and ";" not in pin:
        condition = old.split(";", 1)[1].strip()
        if condition and not _PLATFORM_MARKER.fullmatch(condition):
            pin = f"{pin}{separator}{condition}"
    return pin


def public_range(text: Optional[str]) -> Optional[SpecifierSet]:
    """A requirement's version range without local labels (``==2.1.0+cu118`` -> ``==2.1.0``):
    what the resolver is asked for. None when there is none or it cannot be read."""
    if not text:
        return None
    try:
        req = Requirement(text)
    except InvalidRequirement:
        try:
            req = Requirement(f"torch{text}" if text[0] in "<>=!~" else f"torch=={text}")
        except InvalidRequirement:
            return None
    terms = [f"{s.operator}{s.version.split('+', 1)[0]}" for s in req.specifier]
    try:
        spec = SpecifierSet(",".join(terms))
    except InvalidSpecifier:
        return None
    return spec if len(spec) else None


def lowest_python(requires: Optional[str]) -> Optional[str]:
    """The lowest Python ``X.Y`` a ``requires-python`` admits (``>=3.11`` -> 3.11), or None."""
    if not requires:
        return None
    try:
        spec = SpecifierSet(requires)
    except InvalidSpecifier:
        return None
    for minor in range(6, 30):
        if spec.contains(f"3.{minor}.99", prereleases=True) or spec.contains(f"3.{minor}", prereleases=True):
            return f"3.{minor}"
    return None


def _item_key(item: Any) -> str:
    """What a list item is, whatever its version says: a requirement's name (pip's ``torch==2.1.0``,
    conda's ``pytorch=2.1.0``), else the item's text (an option line, a table). Items of one key
    are edited in place, so the comment ruamel keeps by an item's place stays on its line."""
    if isinstance(item, str) and not item.startswith("-"):
        name = requirement_name(item)
        if name is None:
            from envkit.specs.read import parse_conda_spec

            pin = parse_conda_spec(item)
            name = pin.name if pin is not None else None
        if name is not None:
            return f"name:{name}"
    return repr(item)


def edit_sequence(seq: MutableSequence[Any], new: Sequence[Any]) -> bool:
    """Make ``seq`` (a tomlkit array, a ruamel list, a list) equal ``new`` with the fewest item
    edits, so the items left alone keep their comments and layout. True when anything changed."""
    old = [unwrap(v) for v in seq]
    if old == list(new):
        return False
    # Items may be tables or mappings (unhashable): the matcher compares keys (texts, or names).
    ops = difflib.SequenceMatcher(
        a=list(map(_item_key, old)), b=list(map(_item_key, new)), autojunk=False
    ).get_opcodes()
    for tag, i1, i2, j1, j2 in reversed(ops):  # from the end: earlier indexes stay valid
        if tag == "equal":  # the same items, maybe at other versions: replaced where they differ
            for k in range(i2 - i1):
                if unwrap(seq[i1 + k]) != new[j1 + k]:
                    seq[i1 + k] = new[j1 + k]
            continue
        replaced = min(i2 - i1, j2 - j1)
        for k in range(replaced):
            if unwrap(seq[i1 + k]) != new[j1 + k]:
                seq[i1 + k] = new[j1 + k]
        for _ in range(i2 - i1 - replaced):
            del seq[i1 + replaced]
        for k, item in enumerate(new[j1 + replaced : j2]):
            seq.insert(i1 + replaced + k, item)
    return True
