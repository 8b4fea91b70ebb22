from __future__ import annotations

from envkit.detect.visibility import apply_visibility
from envkit.facts import GpuFacts

GPUS = tuple(GpuFacts(index=i, uuid=f"GPU-{i}aaa-bbbb") for i in range(4))


def visible(value: str | None) -> list[tuple[int, int | None]]:
    gpus, _notes = apply_visibility(GPUS, value)
    return [(g.index, g.cuda_index) for g in gpus if g.visible]


def test_unset_shows_all_in_order() -> None:
    assert visible(None) == [(0, 0), (1, 1), (2, 2), (3, 3)]


def test_indices_reorder() -> None:
    assert visible("2,0") == [(0, 1), (2, 0)]


def test_empty_hides_all() -> None:
    assert visible("") == []


def test_uuid_prefixes() -> None:
    assert visible("GPU-3aaa,GPU-1") == [(1, 1), (3, 0)]


def test_cuda_stops_at_the_first_invalid_entry() -> None:
    gpus, notes = apply_visibility(GPUS, "1,7,2")
    assert [(g.index, g.cuda_index) for g in gpus if g.visible] == [(1, 0)]
    assert "stops at '7'" in notes[0]


def test_minus_one_hides_all() -> None:
    assert visible("-1") == []


def test_mig_entries_are_noted() -> None:
    _gpus, notes = apply_visibility(GPUS, "MIG-abc")
    assert "MIG instance" in notes[0]
