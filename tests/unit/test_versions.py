from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from envkit.versions import (
    ComputeCapability,
    NvVersion,
    Version,
    cuda_from_int,
    parse_compute_capability,
    parse_version,
)


def test_nvversion_keeps_nvidia_text_and_orders_as_a_version() -> None:
    v = NvVersion("535.104.05")
    assert str(v) == "535.104.05"
    assert v > Version("535.86.10")  # a string compare would say "104" < "86"
    assert v == Version("535.104.5")
    assert NvVersion("570.86.15") < NvVersion("570.124.06")


def test_versions_are_never_compared_as_strings() -> None:
    assert Version("0.20.1") > Version("0.9.0")
    assert sorted([NvVersion("580.65.06"), NvVersion("575.57.08"), NvVersion("580.105.08")])[-1] == NvVersion(
        "580.105.08"
    )


def test_cuda_from_int() -> None:
    assert cuda_from_int(12080) == Version("12.8")
    assert cuda_from_int(13000) == Version("13.0")
    assert cuda_from_int(11040) == Version("11.4")


def test_parse_compute_capability_forms() -> None:
    assert parse_compute_capability("9.0") == ComputeCapability(9, 0)
    assert parse_compute_capability("sm_90") == ComputeCapability(9, 0)
    assert parse_compute_capability("sm_120") == ComputeCapability(12, 0)
    assert parse_compute_capability("compute_86") == ComputeCapability(8, 6)
    assert parse_compute_capability("sm_90a") == ComputeCapability(9, 0)
    assert parse_compute_capability("10.3") == ComputeCapability(10, 3)
    assert parse_compute_capability("9") is None
    assert parse_compute_capability("H100") is None
    assert str(ComputeCapability(12, 0)) == "12.0"
    assert ComputeCapability(12, 0).sm == "sm_120"


@given(st.text())
def test_parsers_never_raise(text: str) -> None:
    parse_compute_capability(text)
    parse_version(text)
