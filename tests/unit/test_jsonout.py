"""--json output: msgspec writes it where it writes json.dumps(indent=2, ensure_ascii=False)'s text
byte for byte, and json writes the rest; redacted either way."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from envkit.redact import redact_data
from envkit.render.jsonout import dumps
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


def _reference(data: Any) -> str:
    return json.dumps(redact_data(data), indent=2, ensure_ascii=False)


@examples(300, 3000)
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
