"""The parsed knowledge tables kept between runs (envkit.knowledge._cache): the same tables, parsed
again whenever the TOML changed or the cache file is not this user's alone, never written through a
link."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from envkit.knowledge import load_knowledge
from envkit.knowledge._cache import SCHEMA, cache_folder, cached_table

pytestmark = pytest.mark.skipif(not hasattr(os, "geteuid"), reason="the cache needs file owners")

TOML = b'[[gpu]]\nmodel = "H100"\ncc = "9.0"\nbf16 = 989.5\nsource = "https://example.org/h100"\n'


class Parser:
    """tomllib's parse, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, raw: bytes) -> dict[str, Any]:
        self.calls += 1
        return tomllib.loads(raw.decode())


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return cache_folder()


def test_the_second_run_reads_the_cache(folder: Path) -> None:
    parse = Parser()
    first = cached_table("gpus", TOML, parse)
    again = cached_table("gpus", TOML, parse)
    assert first == again == tomllib.loads(TOML.decode())
    assert parse.calls == 1
    cache = folder / "gpus.json"
    assert cache.stat().st_mode & 0o777 == 0o600
    assert folder.stat().st_mode & 0o777 == 0o700
    assert json.loads(cache.read_text())["schema"] == SCHEMA


def test_changed_toml_is_parsed_again(folder: Path) -> None:
    parse = Parser()
    cached_table("gpus", TOML, parse)
    changed = TOML.replace(b"989.5", b"989.4")  # same size: a time stamp could not tell
    assert cached_table("gpus", changed, parse)["gpu"][0]["bf16"] == 989.4
    assert parse.calls == 2


@pytest.mark.parametrize("damage", ["garbage", "other-schema", "not-a-table", "writable-by-others"])
def test_a_damaged_or_foreign_file_is_not_used(folder: Path, damage: str) -> None:
    parse = Parser()
    cached_table("gpus", TOML, parse)
    cache = folder / "gpus.json"
    data = json.loads(cache.read_text())
    if damage == "garbage":
        cache.write_bytes(b"\xff\x00{")
    elif damage == "other-schema":
        cache.write_text(json.dumps({**data, "schema": "envkit.knowledge-cache/0"}))
    elif damage == "not-a-table":
        cache.write_text(json.dumps({**data, "table": ["x"]}))
    else:
        cache.write_text(json.dumps({**data, "table": {"gpu": [{"model": "planted"}]}}))
        cache.chmod(0o666)
    assert cached_table("gpus", TOML, parse) == tomllib.loads(TOML.decode())
    assert parse.calls == 2
    assert cached_table("gpus", TOML, parse) == tomllib.loads(TOML.decode())
    assert parse.calls == 2, "the file was replaced with a good one"


def test_a_folder_others_may_write_in_is_not_used(folder: Path) -> None:
    folder.mkdir(parents=True)
    folder.chmod(0o777)
    parse = Parser()
    cached_table("gpus", TOML, parse)
    cached_table("gpus", TOML, parse)
    assert parse.calls == 2
    assert not (folder / "gpus.json").exists()


def test_a_link_or_a_fifo_in_its_place_is_never_followed(folder: Path, tmp_path: Path) -> None:
    folder.mkdir(parents=True, mode=0o700)
    elsewhere = tmp_path / "bashrc"
    elsewhere.write_text("export KEEP=1\n")
    (folder / "gpus.json").symlink_to(elsewhere)
    os.mkfifo(folder / "arch.json")
    parse = Parser()
    assert cached_table("gpus", TOML, parse) == tomllib.loads(TOML.decode())
    assert cached_table("arch", TOML, parse) == tomllib.loads(TOML.decode())  # no wait for a writer
    assert parse.calls == 2
    assert elsewhere.read_text() == "export KEEP=1\n"
    assert (folder / "gpus.json").is_symlink()


def test_a_table_json_cannot_hold_is_parsed_each_time(folder: Path) -> None:
    dated = b'[table]\nwhen = 2024-01-02\nsource = "https://example.org"\n'
    parse = Parser()
    assert str(cached_table("dated", dated, parse)["table"]["when"]) == "2024-01-02"
    cached_table("dated", dated, parse)
    assert parse.calls == 2
    assert not (folder / "dated.json").exists()


def test_the_knowledge_base_from_the_cache_is_the_same(folder: Path) -> None:
    load_knowledge.cache_clear()
    try:
        parsed = load_knowledge()
        assert {p.name for p in folder.iterdir()} >= {"releases.json", "cuda.json", "gpus.json", "arch.json"}
        load_knowledge.cache_clear()
        assert load_knowledge() == parsed
    finally:
        load_knowledge.cache_clear()
