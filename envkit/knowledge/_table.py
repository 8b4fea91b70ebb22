"""Reading the knowledge TOML files: one row at a time, with errors that name the file, the row and
the field. Used by the knowledge base and by the mirror table.

Every row of every table (each ``[[kind]]`` entry and each single ``[table]``) cites where its facts
come from in ``source``, and the citation must be one a reader can follow: a URL, a file in a
public repository at a commit or tag, an issue, a package page. The rule is here, once: a row
without a source, or one citing research notes that are not in this repository, is refused.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Final, Optional

from envkit.errors import KnowledgeError as KnowledgeError  # re-exported: the loaders raise it
from envkit.knowledge._cache import cached_table
from envkit.versions import ComputeCapability, NvVersion, Version, parse_compute_capability

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

DATA_DIR: Final = Path(__file__).parent
# Citations of files a reader of this repository cannot open: the unpublished seeding notes (the
# compat[-]data notes file, anchors-*.md) and anything under ../shared/.
_UNFOLLOWABLE: Final = re.compile(
    r"compat[-]data|anchors-[\w*-]*(?:\.md)?|(?:\.\./)+shared/|shared/reference/"
)
# Text each of those holds: most citations hold none, and testing for it is quicker than the search
# (~8 us a row, 7 ms for the 800-odd rows of each run).
_UNFOLLOWABLE_HINTS: Final = ("compat", "anchors-", "shared/")


class Row:
    """One TOML table, read with errors that name the file, the row and the field."""

    def __init__(self, file: str, kind: str, index: int, data: object) -> None:
        if not isinstance(data, dict):
            raise KnowledgeError(f"{file}: [[{kind}]] #{index + 1} is not a table")
        self.data: dict[str, Any] = data
        name = data.get("name") if isinstance(data.get("name"), str) else ""
        label = data.get("torch") or data.get("cuda") or data.get("model") or data.get("major") or name
        self.where = f"{file}: [[{kind}]] #{index + 1}" + (f" ({label})" if label else "")

    def fail(self, field: str, expected: str) -> KnowledgeError:
        value = self.data.get(field, "<missing>")
        return KnowledgeError(f"{self.where}: field {field!r}: expected {expected}, got {value!r}")

    def raw(self, field: str, kind: type, optional: bool) -> Any:
        if field not in self.data:
            if optional:
                return None
            raise self.fail(field, kind.__name__)
        value = self.data[field]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.fail(field, kind.__name__)
        return value

    def text(self, field: str) -> str:
        return str(self.raw(field, str, False))

    def source(self) -> str:
        """The row's ``source``: a citation a reader can follow (a URL, a file at a commit, an issue).
        Empty text, or a citation of a file that is not in this repository (the seeding notes,
        anchors-*.md, ../shared/...), is refused."""
        value = self.text("source").strip()
        if not value:
            raise self.fail("source", "a primary source (URL, repo:path@commit, issue URL)")
        found = _UNFOLLOWABLE.search(value) if any(h in value for h in _UNFOLLOWABLE_HINTS) else None
        if found is not None:
            raise self.fail(
                "source",
                f"a primary source (URL, repo:path@commit, issue URL), not {found.group(0)!r}, "
                "a file that is not in this repository",
            )
        return value

    def boolean(self, field: str, default: bool) -> bool:
        value = self.data.get(field, default)
        if not isinstance(value, bool):
            raise self.fail(field, "true or false")
        return value

    def opt_text(self, field: str) -> Optional[str]:
        value = self.raw(field, str, True)
        return None if value is None else str(value)

    def version(self, field: str, optional: bool = False) -> Any:
        value = self.raw(field, str, optional)
        if value is None:
            return None
        try:
            return NvVersion(value)
        except ValueError:
            raise self.fail(field, "a version") from None

    def versions(self, field: str) -> tuple[Version, ...]:
        items = self.raw(field, list, True) or []
        try:
            return tuple(Version(v) for v in items)
        except (ValueError, TypeError):
            raise self.fail(field, "a list of versions") from None

    def cc(self, field: str) -> ComputeCapability:
        value = self.raw(field, str, False)
        cc = parse_compute_capability(value)
        if cc is None:
            raise self.fail(field, 'a compute capability like "9.0"')
        return cc

    def ccs(self, field: str) -> tuple[ComputeCapability, ...]:
        items = self.raw(field, list, False)
        parsed = [parse_compute_capability(v) if isinstance(v, str) else None for v in items]
        if any(p is None for p in parsed):
            raise self.fail(field, "a list of compute capabilities")
        return tuple(p for p in parsed if p is not None)

    def number(self, field: str) -> Optional[float]:
        value = self.data.get(field)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(field, "a number")
        return float(value)

    def integer(self, field: str, optional: bool = False) -> Optional[int]:
        value = self.raw(field, int, optional)
        return None if value is None else int(value)


def read_table(name: str) -> dict[str, Any]:
    """``name``.toml as parsed (kept between runs: envkit.knowledge._cache)."""
    path = DATA_DIR / f"{name}.toml"
    try:
        return cached_table(name, path.read_bytes(), _parse)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise KnowledgeError(f"{path.name}: cannot be read: {exc}") from None


def _parse(raw: bytes) -> dict[str, Any]:
    return tomllib.loads(raw.decode())  # as tomllib.load does with a file


def table_rows(data: dict[str, Any], file: str, kind: str) -> list[Row]:
    """The ``[[kind]]`` rows of a table, each checked for a source a reader can follow."""
    items = data.get(kind, [])
    if not isinstance(items, list):
        raise KnowledgeError(f"{file}: [[{kind}]] must be an array of tables")
    rows = [Row(file, kind, i, item) for i, item in enumerate(items)]
    for row in rows:
        row.source()
    return rows


def single_table(data: dict[str, Any], file: str, kind: str) -> Row:
    """The one ``[kind]`` table of a file, checked for a source like every row."""
    row = Row(file, kind, 0, data.get(kind))
    row.where = f"{file}: [{kind}]"
    row.source()
    return row
