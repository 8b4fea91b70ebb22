"""Every row of every knowledge table cites a source a reader can follow: the loader refuses a row
without one, or one citing a file that is not in this repository (the research notes
compat-data.md and anchors-*.md, anything under ../shared/), and its error names the file, the row
and the field. The tables tried are read from the TOML files themselves, so a new table is covered
without touching this test."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import envkit.knowledge._table as table
from envkit.knowledge import KnowledgeError, Row, load_knowledge
from envkit.knowledge.mirrors import load_mirrors

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib


def _tables() -> list[tuple[str, str, bool]]:
    """(file, table, is an array of tables) for every top-level table of every knowledge file."""
    found = []
    for path in sorted(table.DATA_DIR.glob("*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        for kind, value in data.items():
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                found.append((path.name, kind, True))
            elif isinstance(value, dict):
                found.append((path.name, kind, False))
    return found


TABLES = _tables()
UNFOLLOWABLE = (
    "compat-data.md §5c",
    "compat-data §1d [S] pytorch/pytorch#138506",
    "anchors-preflight.md §3 T1",
    "../shared/reference/anchors-install-tools.md §4",
    "see ../shared/notes.txt",
)


def test_every_table_is_tried() -> None:
    kinds = {(file, kind) for file, kind, _ in TABLES}
    assert {
        ("releases.toml", "release"),
        ("arch.toml", "arch"),
        ("cuda.toml", "toolkit"),
        ("cuda.toml", "family"),
        ("gpus.toml", "gpu"),
        ("conda.toml", "pytorch_channel"),
        ("conda.toml", "conda_forge"),
        ("conda.toml", "cudatoolkit"),
        ("mirrors.toml", "mirror"),
    } <= kinds


def _first_source_line(text: str, kind: str, array: bool) -> tuple[int, int]:
    """The span of the first ``source = ...`` line of the first ``[[kind]]`` (or ``[kind]``) table."""
    header = f"[[{kind}]]\n" if array else f"[{kind}]\n"
    start = text.index(header)
    found = re.compile(r"^source = .*\n", re.MULTILINE).search(text, start)
    assert found is not None, kind
    assert "\n[" not in text[start + len(header) : found.start()], f"{kind}: its source is not its own"
    return found.start(), found.end()


def _load(file: str) -> None:
    load_knowledge.cache_clear()
    load_mirrors.cache_clear()
    if file == "mirrors.toml":
        load_mirrors()
    else:
        load_knowledge()


def _where(file: str, kind: str, array: bool) -> str:
    return re.escape(f"{file}: [[{kind}]] #1") if array else re.escape(f"{file}: [{kind}]")


@pytest.fixture
def clean_caches() -> object:
    yield None
    load_knowledge.cache_clear()
    load_mirrors.cache_clear()


@pytest.mark.parametrize(("file", "kind", "array"), TABLES, ids=[f"{f}:{k}" for f, k, _ in TABLES])
def test_a_row_without_a_source_is_refused(
    data_copy: Path, clean_caches: object, file: str, kind: str, array: bool
) -> None:
    path = data_copy / file
    text = path.read_text(encoding="utf-8")
    start, end = _first_source_line(text, kind, array)
    path.write_text(text[:start] + text[end:], encoding="utf-8")
    with pytest.raises(KnowledgeError) as caught:
        _load(file)
    assert re.match(
        _where(file, kind, array) + r".*: field 'source': expected str, got '<missing>'", str(caught.value)
    )


# Each table gets one of the unfollowable citations (every citation is tried on a Row below).
CITED = [(*t, UNFOLLOWABLE[i % len(UNFOLLOWABLE)]) for i, t in enumerate(TABLES)]


@pytest.mark.parametrize(("file", "kind", "array", "cited"), CITED, ids=[f"{f}:{k}" for f, k, _, _ in CITED])
def test_a_row_citing_a_file_outside_the_repository_is_refused(
    data_copy: Path, clean_caches: object, file: str, kind: str, array: bool, cited: str
) -> None:
    path = data_copy / file
    text = path.read_text(encoding="utf-8")
    start, end = _first_source_line(text, kind, array)
    path.write_text(text[:start] + f'source = "{cited}"\n' + text[end:], encoding="utf-8")
    with pytest.raises(KnowledgeError) as caught:
        _load(file)
    message = str(caught.value)
    assert re.match(_where(file, kind, array) + r".*: field 'source': expected a primary source", message)
    assert "a file that is not in this repository" in message and cited in message


@pytest.mark.parametrize("cited", UNFOLLOWABLE)
def test_each_unfollowable_citation_is_refused(cited: str) -> None:
    row = Row("cuda.toml", "toolkit", 0, {"cuda": "12.1", "source": f"NVIDIA Table 3; {cited}"})
    with pytest.raises(KnowledgeError, match=r"^cuda.toml: \[\[toolkit\]\] #1 \(12.1\): field 'source'"):
        row.source()


@pytest.mark.parametrize("blank", ["", "   "])
def test_an_empty_source_is_refused(blank: str) -> None:
    row = Row("gpus.toml", "gpu", 4, {"model": "T4", "source": blank})
    with pytest.raises(
        KnowledgeError, match=r"^gpus.toml: \[\[gpu\]\] #5 \(T4\): field 'source': expected a primary"
    ):
        row.source()


@pytest.mark.parametrize(
    "source",
    [
        "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html (Table 3)",
        "pytorch/pytorch:.ci/manywheel/build_cuda.sh@v2.7.0",
        "https://github.com/pytorch/pytorch/issues/138506",
        "https://pypi.org/project/torch/2.5.1/",
        "unverified: seen in third-party repositories only",
    ],
)
def test_a_followable_source_is_kept(source: str) -> None:
    assert Row("x.toml", "row", 0, {"source": f"  {source} "}).source() == source


def test_the_shipped_tables_load() -> None:
    load_knowledge.cache_clear()
    load_mirrors.cache_clear()
    assert load_knowledge().releases and load_mirrors()
