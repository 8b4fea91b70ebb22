"""--json output: msgspec writes it where it writes json.dumps(indent=2, ensure_ascii=False)'s text
byte for byte, and json writes the rest; redacted either way. msgspec writes only large documents
(jsonout._MSGSPEC_FROM values): here every document is large enough, so that its text is checked."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import strategies as st

from envkit.redact import redact_data
from envkit.render import jsonout
from envkit.render.jsonout import dumps, print_json
from tests.conftest import check_property, examples

_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
)
_DATA = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


@pytest.fixture(autouse=True)
def _msgspec_writes_every_document(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonout, "_MSGSPEC_FROM", 0)


def test_a_small_document_is_written_without_importing_msgspec() -> None:
    # One doctor report (~400 values): importing msgspec would cost more than json takes to write it.
    code = (
        "import sys; from envkit.render.jsonout import dumps; "
        "t = dumps({'checks': [{'id': 'x', 'status': 'pass', 'n': [1, 2.5, None]}] * 50}); "
        "print('msgspec' in sys.modules, len(t))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split()[0] == "False"


def _reference(data: Any) -> str:
    return json.dumps(redact_data(data), indent=2, ensure_ascii=False)


@examples(100, 3000)
def test_the_text_is_json_dumps_byte_for_byte(max_examples: int) -> None:
    def body(data: Any) -> None:
        assert dumps(data) == _reference(data)

    check_property(max_examples, body, _DATA)


def test_the_cases_msgspec_writes_otherwise_go_to_json() -> None:
    for data in (
        {"big": 1e16, "small": 1e-7, "nan": float("nan"), "inf": float("-inf")},  # 1e+16, 1e-07, NaN
        {1: "an int key"},
        {"huge": 2**64},
        ["\ud800"],  # a lone surrogate
        {"url": "https://user:t0ken@example.com/simple/"},
    ):
        assert dumps(data) == _reference(data)
    assert "t0ken" not in dumps({"url": "https://user:t0ken@example.com/simple/"})
    fleet_like = {
        "nodes": [{"name": f"n{i}", "exit_code": 0, "facts": {"gpu.count": "8"}} for i in range(50)]
    }
    assert dumps(fleet_like) == _reference(fleet_like)


def test_a_streamed_list_is_written_as_the_list(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    def rows() -> Iterator[dict[str, Any]]:
        for i in range(3):
            yield {"name": f"n{i}", "url": "https://u:t0ken@h/", "facts": {"gpu.count": "8", "x": []}}

    for data, lazy in (
        ({"schema": "s/1", "nodes": rows(), "HF_TOKEN": "abc", "tail": {"a": [1, 2.5]}}, True),
        ({"nodes": (r for r in ()), "n": 0}, True),
        ({"plain": [1, {"a": None}]}, False),
    ):
        reference = {k: list(v) if k == "nodes" else v for k, v in data.items()}
        if lazy:
            data = {k: rows() if k == "nodes" and reference[k] else v for k, v in data.items()}
        print_json(data)
        assert capsysbinary.readouterr().out.decode() == _reference(reference) + "\n"


@pytest.mark.parametrize("count", [1, 511, 512, 513, 1300])
def test_a_streamed_list_reads_the_same_across_batches(
    count: int, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    # Items go out in batches (jsonout._BATCH); one item msgspec would write otherwise (1e16) sends
    # its batch to json, and the text must not show where one batch ends and the next begins.
    def rows() -> Iterator[dict[str, Any]]:
        for i in range(count):
            yield {"name": f"n{i}", "v": 1e16 if i == 600 else i, "facts": {"k": [i, None], "e": {}}}

    print_json({"schema": "s/1", "nodes": rows(), "tail": []})
    reference = {"schema": "s/1", "nodes": list(rows()), "tail": []}
    assert capsysbinary.readouterr().out.decode() == _reference(reference) + "\n"


def test_containers_met_twice_are_redacted_and_judged_alike() -> None:
    # A fleet's nodes alike share one dict: redaction and msgspec's check see it once, and the
    # text is still json's, a secret still masked, and a value msgspec writes otherwise still found.
    shared = {"url": "https://u:t0ken@h/", "HF_TOKEN": "abc", "n": [1, None]}
    odd = {"x": 1e16}
    data = {"nodes": [{"facts": shared}, {"facts": shared}, {"f": odd}, {"f": odd}], "again": shared}
    text = dumps(data)
    assert text == _reference(data) and "t0ken" not in text and '"HF_TOKEN": "***"' in text
    assert '"x": 1e+16' in text  # json's spelling: the batch went to json


# Keys where secrets and URLs hide, beside random ones: a shared part may sit under any of them.
_KEYS = st.sampled_from(["HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "x", "facts", "url"]) | st.text(max_size=8)
_SECRETISH = _LEAVES | st.sampled_from(["https://u:t0ken@h/s", "TOKEN=abc", "Bearer abc.def", ""])
_PARTS = st.recursive(
    _SECRETISH,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=20,
)


@examples(70, 2000)
def test_shared_parts_read_as_their_copies_do(max_examples: int) -> None:
    # The same list or dict object met several times in one document (a fleet's nodes alike share
    # their facts and checks), under secret-like keys and ordinary ones: redaction and msgspec's
    # check see it once, and the text is still what json writes of a copy that shares nothing,
    # redacted afresh: a memo by identity neither skips a key's rule nor a value's.
    def body(parts: list[Any], layout: list[tuple[str, int]]) -> None:
        data = {"nodes": [{key: parts[i % len(parts)]} for key, i in layout], "parts": parts}
        copy = json.loads(json.dumps(data))  # the same values, nothing shared
        assert dumps(data) == dumps(copy) == _reference(copy)

    layout = st.lists(st.tuples(_KEYS, st.integers(0, 7)), max_size=8)
    check_property(max_examples, body, st.lists(_PARTS, min_size=1, max_size=4), layout)
