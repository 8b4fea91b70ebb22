"""resolve() remembers its answers: the same knowledge, target and request give the same plan, or
the same NoBuildError, without working it out again (a fleet of reports from another envkit
version asks it twice per node)."""

from __future__ import annotations

import dataclasses
import traceback

import pytest

from envkit.errors import NoBuildError
from envkit.knowledge import load_knowledge
from envkit.resolve import _ANSWERS, resolve
from envkit.resolve.plan import CudaKind, CudaRequest, Request
from envkit.resolve.target import GpuTarget, Target
from envkit.versions import NvVersion, parse_compute_capability


def _h100(driver: str) -> Target:
    cc = parse_compute_capability("9.0")
    assert cc is not None
    return Target("linux-x86_64", NvVersion(driver), (GpuTarget(cc, "H100"),))


def test_the_same_question_gets_the_same_plan_and_another_question_its_own() -> None:
    k = load_knowledge()
    first = resolve(k, _h100("580.65.06"), Request())
    assert resolve(k, _h100("580.65.06"), Request()) is first  # equal, not identical, arguments
    older = resolve(k, _h100("535.104.05"), Request())
    assert older is not first and older.cuda is not None and older.cuda < (first.cuda or older.cuda)
    # Another knowledge object (a test's, an updated table) is never answered from the first's.
    other = dataclasses.replace(k)
    assert resolve(other, _h100("580.65.06"), Request()) is not first


def test_no_build_is_raised_afresh_each_time() -> None:
    k = load_knowledge()
    target, request = _h100("418.39"), Request(cuda=CudaRequest(CudaKind.EXACT, "cu128"))
    errors = []
    for _ in range(3):
        with pytest.raises(NoBuildError) as caught:
            resolve(k, target, request)
        errors.append(caught.value)
    assert len({id(e) for e in errors}) == 3
    assert {str(e) for e in errors} == {str(errors[0])} and {e.hint for e in errors} == {errors[0].hint}
    assert errors[0].ways_out == errors[2].ways_out and errors[2].exit_code == errors[0].exit_code
    # The stored error gathers no traceback from earlier raises.
    frames = [len(list(traceback.walk_tb(e.__traceback__))) for e in errors]
    assert frames[0] == frames[2]
    assert all(
        entry[1].__traceback__ is None for entry in _ANSWERS.values() if isinstance(entry[1], Exception)
    )


def test_equal_versions_written_otherwise_get_their_own_text() -> None:
    # packaging's Version("550.54") == Version("550.54.0") (and SpecifierSet("==1.0") equals
    # "==1.0.0"), but a plan and an error quote the target's and the request's own text.
    from packaging.specifiers import SpecifierSet

    from envkit.resolve import _resolve
    from envkit.versions import Version

    k = load_knowledge()
    for first, second in (
        (Target("linux-x86_64", NvVersion("550.54")), Target("linux-x86_64", NvVersion("550.54.0"))),
        (
            Target("linux-x86_64", NvVersion("580.95.05"), python=Version("3.12")),
            Target("linux-x86_64", NvVersion("580.95.05"), python=Version("3.12.0")),
        ),
    ):
        assert first == second
        resolve(k, first, Request())
        assert resolve(k, second, Request()) == _resolve(k, second, Request())
        assert repr(resolve(k, second, Request())) == repr(_resolve(k, second, Request()))
    target = Target("linux-x86_64", NvVersion("580.95.05"))
    for spec in ("==1.0", "==1.0.0"):
        with pytest.raises(NoBuildError) as caught:
            resolve(k, target, Request(torch=SpecifierSet(spec)))
        assert f"--torch {spec} " in str(caught.value)


def test_a_full_memo_still_remembers_the_newest_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    # A long run (a fleet, the test suite in one worker) asks more distinct questions than the bound:
    # the oldest answers make room, so the same question asked twice in a row is still answered once.
    # (A memo that stopped storing when full made the first test above fail after 512 other questions.)
    from envkit import resolve as resolve_module

    monkeypatch.setattr(resolve_module, "_ANSWERS_MAX", 4)
    monkeypatch.setattr(resolve_module, "_ANSWERS", {})
    k = load_knowledge()
    for driver in ("535.104.05", "550.54.15", "560.35.03", "570.86.10", "575.51.03"):
        resolve(k, _h100(driver), Request())
    assert len(resolve_module._ANSWERS) == 4
    first = resolve(k, _h100("580.65.06"), Request())
    assert resolve(k, _h100("580.65.06"), Request()) is first
    assert len(resolve_module._ANSWERS) == 4
