"""The msgspec fast path (envkit._serial.decode_json, envkit.report.decode_report): the same records
as the slow path for every document it accepts, and None (the slow path's turn) for the rest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from envkit._files import MAX_NESTING
from envkit._serial import decode_json, from_jsonable
from envkit.facts import DeviceInfo, Facts, GpuFacts, facts_to_json
from envkit.report import decode_report, report_from_json
from tests.unit.test_serial import full_facts

REPORT = Path(__file__).parent.parent / "data" / "reports" / "h200-580-torch2.11-cu130.json"


def test_a_real_report_takes_the_fast_path_and_equals_the_slow_one() -> None:
    raw = REPORT.read_bytes()
    fast = decode_report(raw, str(REPORT))
    slow = report_from_json(json.loads(raw), str(REPORT))
    assert fast is not None
    assert fast == slow
    # Records that hold a ComputeCapability were decoded through a subclass: they have their own back.
    assert all(type(g) is GpuFacts for g in fast.facts.gpus)
    assert type(fast.facts) is Facts
    assert str(fast.facts.gpus[0].compute_capability) == "9.0"
    assert fast.to_json() == slow.to_json()


def test_facts_round_trip_through_the_fast_path() -> None:
    facts = full_facts()
    raw = json.dumps(facts_to_json(facts)).encode()
    back = decode_json(Facts, raw)
    assert back == facts == from_jsonable(Facts, json.loads(raw))
    assert back is not None and back.torch.deep is not None
    assert type(back.torch.deep.devices[0]) is DeviceInfo


def _patched(change: Callable[[dict[str, Any]], None]) -> bytes:
    data = json.loads(REPORT.read_bytes())
    change(data)
    return json.dumps(data).encode()


@pytest.mark.parametrize(
    "raw",
    [
        _patched(lambda d: d["facts"]["gpus"][0].update(index="zero")),  # wrong type
        _patched(lambda d: d["facts"]["driver"].update(version="not.a.version!")),
        _patched(lambda d: d["facts"]["gpus"][0].update(compute_capability="ninety")),
        # Distribution.version is Optional without a default: the slow path reads a missing one as None.
        _patched(lambda d: d["facts"]["torch"]["distributions"][0].pop("version")),
        _patched(lambda d: d.update(schema="something/1")),
        _patched(lambda d: d.update(checks="")),  # the slow path reads a falsy "checks" as none
        _patched(lambda d: d.pop("facts")),
        REPORT.read_bytes().replace(b'"duration_s": 6.75', b'"duration_s": NaN'),  # json reads NaN
        REPORT.read_bytes().replace(b'"vm"', b'"\\ud800"', 1),  # a lone surrogate: replaced there
        REPORT.read_bytes()[:5000],  # cut short
        b"\xff\xfe",
    ],
)
def test_what_the_fast_path_refuses_goes_to_the_slow_path(raw: bytes) -> None:
    assert decode_report(raw, "r.json") is None


def test_an_any_value_nested_too_deep_goes_to_the_slow_path() -> None:
    deep: Any = {}
    for _ in range(MAX_NESTING):
        deep = {"x": deep}
    raw = _patched(lambda d: d["checks"][0].update(metrics=deep))
    assert decode_report(raw, "r.json") is None
    shallow = _patched(lambda d: d["checks"][0].update(metrics={"a": [[1, 2], {"b": None}]}))
    fast = decode_report(shallow, "r.json")
    assert fast is not None and fast.checks[0].metrics == {"a": [[1, 2], {"b": None}]}


def test_the_slow_path_still_names_the_field(tmp_path: Path) -> None:
    from envkit.errors import InputError
    from envkit.fleet.aggregate import read_report

    path = tmp_path / "r.json"
    path.write_bytes(_patched(lambda d: d["facts"]["gpus"][0].update(index="zero")))
    with pytest.raises(InputError, match=r"facts\.gpus\[0\]\.index: expected int"):
        read_report(str(path))
    path.write_bytes(_patched(lambda d: d["facts"]["torch"]["distributions"][0].pop("version")))
    report = read_report(str(path))  # the slow path's lenience is kept
    assert report.facts.torch.distributions[0].version is None
    assert report == report_from_json(json.loads(path.read_bytes()), str(path))


def test_equal_sections_of_two_reports_are_decoded_once_and_shared() -> None:
    from envkit.facts import TorchFacts
    from envkit.report import CheckResult

    a = _patched(lambda d: d.update(host="node-1"))
    b = _patched(lambda d: (d.update(host="node-2"), d["checks"][2].update(detail="GPU 0: 41 °C")))
    one, two = decode_report(a, "a.json"), decode_report(b, "b.json")
    assert one is not None and two is not None
    assert one == report_from_json(json.loads(a), "a.json") and two == report_from_json(
        json.loads(b), "b.json"
    )
    # The same torch, Python, toolkits, CUDA libraries and driver: one record for both reports.
    assert one.facts.torch is two.facts.torch and type(one.facts.torch) is TorchFacts
    assert one.facts.python is two.facts.python and one.facts.driver is two.facts.driver
    assert one.facts.host.cuda_libs is two.facts.host.cuda_libs and one.facts.toolkits is two.facts.toolkits
    # Checks are shared one by one: the one whose detail differs is not.
    assert one.checks[0] is two.checks[0] and type(one.checks[0]) is CheckResult
    assert one.checks[2] is not two.checks[2] and two.checks[2].detail == "GPU 0: 41 °C"
    # Per-node parts are the report's own.
    assert one.facts.host is not two.facts.host and one.facts.gpus[0] is not two.facts.gpus[0]


def test_a_report_without_a_shared_section_reads_as_the_slow_path_reads_it(tmp_path: Path) -> None:
    from envkit.fleet.aggregate import read_report

    raw = _patched(lambda d: d["facts"].pop("torch"))
    assert decode_report(raw, "r.json") is None  # a section is required on the wire
    path = tmp_path / "r.json"
    path.write_bytes(raw)
    assert read_report(str(path)) == report_from_json(json.loads(raw), str(path))


def test_the_section_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from envkit import _serial
    from envkit.facts import DriverFacts

    decode_report(REPORT.read_bytes(), "r.json")
    cache = _serial._SECTIONS[DriverFacts]  # the one the decoder holds
    kept = dict(cache)

    def read(n: int) -> None:
        raw = _patched(lambda d: d["facts"]["driver"].update(version=f"580.{n}.01"))
        report = decode_report(raw, "r.json")
        assert report is not None and str(report.facts.driver.version) == f"580.{n}.01"

    try:
        monkeypatch.setattr(_serial, "_SECTIONS_MAX", 3)  # at most 3 sections ...
        cache.clear()
        for n in range(10):
            read(n)
        assert len(cache) == 3
        monkeypatch.setattr(_serial, "_SECTIONS_MAX", 4096)
        size = len(next(iter(cache)))
        monkeypatch.setattr(_serial, "_SECTIONS_BYTES", 2 * size + size // 2)  # ... or 2.5 of them
        cache.clear()
        for n in range(10, 20):
            read(n)
        assert len(cache) == 2 and cache.held == sum(map(len, cache))
    finally:
        monkeypatch.undo()
        cache.clear()
        for raw, value in kept.items():
            cache.keep(raw, value)


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["facts"].pop("python"),  # Optional, default None: was a TypeError traceback
        lambda d: d["facts"].pop("toolkits"),  # default ()
        lambda d: d["facts"]["host"].pop("cuda_libs"),
        lambda d: d["facts"].pop("torch"),  # default_factory
    ],
)
def test_a_section_left_out_never_reaches_the_section_decoder(
    change: Callable[[dict[str, Any]], None],
) -> None:
    # An older or hand-made report may leave out a section the fast path takes raw: msgspec leaves
    # that field unset, and the record's own default must not reach the section decoder.
    raw = _patched(change)
    slow = report_from_json(json.loads(raw), "r.json")
    fast = decode_report(raw, "r.json")
    assert fast is None or fast == slow
