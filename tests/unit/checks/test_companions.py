"""torch.companions on hand-built facts: torchvision / torchaudio / triton of another torch release
(the knowledge base's releases.toml pairs), and packages whose Requires-Dist pins another torch."""

from __future__ import annotations

from envkit.checks import CHECKS
from envkit.checks.companions import check_torch_companions
from envkit.facts import Distribution, Facts, PythonFacts, TorchFacts
from envkit.report import Status
from envkit.versions import Version

PYTHON = PythonFacts(
    executable="/envs/pt/bin/python",
    selected_by="VIRTUAL_ENV",
    version=Version("3.11.9"),
    platform="linux-x86_64",
    installers={"pip": "/envs/pt/bin/python -m pip"},
)


def facts(torch: str, *dists: Distribution, python: PythonFacts | None = PYTHON) -> Facts:
    return Facts(
        python=python,
        torch=TorchFacts(
            version=Version(torch),
            distributions=(Distribution("torch", Version(torch)), *dists),
        ),
    )


def dist(name: str, version: str, *requires: str) -> Distribution:
    return Distribution(name, Version(version), requires_torch=requires)


def test_registered() -> None:
    assert CHECKS["torch.companions"] is check_torch_companions


def test_torchvision_of_the_next_torch_fails_with_the_matching_set() -> None:
    """vllm-project/vllm-ascend#477/#479: torchvision 0.21.0 (torch 2.6.0's) beside torch 2.5.1 is the
    `operator torchvision::nms does not exist` error; torch 2.5.1's torchvision is 0.20.1."""
    result = check_torch_companions(facts("2.5.1", dist("torchvision", "0.21.0")))
    assert result.status is Status.FAIL
    assert "torchvision 0.21.0 is made for torch 2.6.0" in result.summary
    assert "not torch 2.5.1" in result.summary
    # PyPI's torch (no local label): plain PyPI, no --index-url.
    assert result.fix == "/envs/pt/bin/python -m pip install torch==2.5.1 torchvision==0.20.1"


def test_the_fix_uses_the_index_of_the_torch_build_and_every_installed_companion() -> None:
    result = check_torch_companions(
        facts(
            "2.4.1+cu121",
            dist("torchvision", "0.19.1+cu121"),
            dist("torchaudio", "2.5.1+cu121"),
            dist("triton", "3.1.0"),
        )
    )
    assert result.status is Status.FAIL
    assert "torchaudio 2.5.1+cu121 is made for torch 2.5.1" in result.detail
    assert "triton 3.1.0 is made for torch 2.5.0 and 2.5.1" in result.detail
    assert "torchvision 0.19.1+cu121 is torch 2.4.1's" in result.detail
    assert result.fix == (
        "/envs/pt/bin/python -m pip install torch==2.4.1 torchvision==0.19.1 torchaudio==2.4.1 "
        "triton==3.0.0 --index-url https://download.pytorch.org/whl/cu121"
    )


def test_same_series_other_patch_warns() -> None:
    """torchvision 0.20.0 pins torch==2.5.0 in its metadata: pip check reports it, it usually loads."""
    result = check_torch_companions(facts("2.5.1+cu124", dist("torchvision", "0.20.0+cu124")))
    assert result.status is Status.WARN
    assert "torch 2.5.0's, not 2.5.1's" in result.summary
    assert "torchvision==0.20.1" in result.fix


def test_matching_companions_pass() -> None:
    result = check_torch_companions(
        facts(
            "2.6.0+cu118",
            dist("torchvision", "0.21.0+cu118"),
            dist("torchaudio", "2.6.0+cu118"),
            dist("triton", "3.2.0"),
        )
    )
    assert result.status is Status.PASS
    assert "match torch 2.6.0+cu118" in result.summary


def test_a_companion_shared_by_several_torch_releases_passes() -> None:
    """releases.toml: torchaudio 2.11.0 is the torchaudio of torch 2.11 to 2.14."""
    result = check_torch_companions(facts("2.13.0", dist("torchaudio", "2.11.0")))
    assert result.status is Status.PASS


def test_torch_1_7_0_with_torchvision_0_8_1_passes() -> None:
    """pytorch-lightning#4587 (healthy): torchvision 0.8.1 is torch 1.7.0's (releases.toml's 1.7.0 row)."""
    result = check_torch_companions(facts("1.7.0+cu110", dist("torchvision", "0.8.1+cu110")))
    assert result.status is Status.PASS
    assert "torchvision 0.8.1+cu110 is torch 1.7.0's" in result.detail


def test_releases_the_table_does_not_know_skip() -> None:
    """torch 1.1.0 with torchvision 0.3.0 (previous-versions.md's v1.1.0): before the table starts."""
    result = check_torch_companions(facts("1.1.0", dist("torchvision", "0.3.0")))
    assert result.status is Status.SKIP
    assert "not in envkit's release table" in result.detail


def test_an_old_torch_with_a_known_newer_torchvision_fails() -> None:
    result = check_torch_companions(facts("1.7.0", dist("torchvision", "0.11.1")))
    assert result.status is Status.FAIL
    assert "made for torch 1.10.0" in result.summary
    assert result.fix.endswith("torch==1.7.0 torchvision==0.8.1")  # 1.7.0's own torchvision


def test_a_torch_before_the_table_with_a_known_torchvision_fails() -> None:
    result = check_torch_companions(facts("1.1.0", dist("torchvision", "0.11.1")))
    assert result.status is Status.FAIL
    assert "made for torch 1.10.0" in result.summary
    assert "install the torchvision release made for torch 1.1.0" in result.fix


def test_nothing_to_compare_skips() -> None:
    assert check_torch_companions(facts("2.5.1")).status is Status.SKIP
    assert check_torch_companions(Facts()).status is Status.SKIP
    unknown = Facts(torch=TorchFacts(distributions=(Distribution("torch", None),)))
    assert check_torch_companions(unknown).status is Status.SKIP


def test_a_nightly_gets_the_nightly_index() -> None:
    result = check_torch_companions(
        facts("2.6.0.dev20241112+cu124", dist("torchvision", "0.21.0.dev20241112+cu124"))
    )
    assert result.status is Status.PASS
    result = check_torch_companions(facts("2.6.0.dev20241112+cu124", dist("torchvision", "0.20.1+cu124")))
    assert result.status is Status.FAIL
    assert result.fix.endswith("--pre --index-url https://download.pytorch.org/whl/nightly/cu124")
    assert "--force-reinstall torch==2.6.0.dev20241112 torchvision" in result.fix


def test_an_exact_pin_of_another_torch_fails() -> None:
    """vllm 0.6.3.post1 requires torch==2.4.0 (its PyPI metadata); beside torch 2.5.1 its _C breaks."""
    vllm = dist("vllm", "0.6.3.post1", "torch==2.4.0")
    result = check_torch_companions(facts("2.5.1+cu124", vllm))
    assert result.status is Status.FAIL
    assert (
        result.summary == "vllm 0.6.3.post1 requires torch==2.4.0 (its metadata), this torch is 2.5.1+cu124"
    )
    assert "vllm release made for torch 2.5.1" in result.fix


def test_a_range_pin_warns_and_a_satisfied_pin_passes() -> None:
    loose = dist("somepkg", "1.0", "torch<2.5,>=2.1")
    assert check_torch_companions(facts("2.5.1", loose)).status is Status.WARN
    xformers = dist("xformers", "0.0.28.post3", "torch==2.5.1")
    result = check_torch_companions(facts("2.5.1+cu124", xformers))
    assert result.status is Status.PASS
    assert result.summary == "xformers 0.0.28.post3 match torch 2.5.1+cu124"


def test_markers_are_evaluated_for_the_inspected_interpreter() -> None:
    # Only for Windows: not this Linux interpreter's requirement.
    windows_only = dist("winpkg", "1.0", 'torch==2.0.0; sys_platform == "win32"')
    assert check_torch_companions(facts("2.5.1", windows_only)).status is Status.SKIP
    old_python = dist("pypkg", "1.0", 'torch==2.0.0; python_version < "3.9"')
    assert check_torch_companions(facts("2.5.1", old_python)).status is Status.SKIP
    this_one = dist("linuxpkg", "1.0", 'torch==2.0.0; platform_system == "Linux"')
    assert check_torch_companions(facts("2.5.1", this_one)).status is Status.FAIL


def test_a_companion_the_table_knows_is_judged_by_the_table_and_its_pin() -> None:
    # A torchvision built from source for this torch: the table pairs 0.21 with 2.6, its pin says 2.5.1.
    source_build = dist("torchvision", "0.21.0", "torch==2.5.1")
    assert check_torch_companions(facts("2.5.1", source_build)).status is Status.FAIL
    # The table's pair, but the wheel pins another patch: its pin decides.
    pinned = dist("torchvision", "0.20.1", "torch==2.5.0")
    assert check_torch_companions(facts("2.5.1", pinned)).status is Status.FAIL


def test_a_torch_version_written_with_more_parts_is_quoted_as_written() -> None:
    # Version("2.5.1") == Version("2.5.1.0"): the findings of one must not quote the other's text.
    first = check_torch_companions(facts("2.5.1", dist("torchvision", "0.20.1")))
    second = check_torch_companions(facts("2.5.1.0", dist("torchvision", "0.20.1")))
    assert "is torch 2.5.1's" in first.detail
    assert "is torch 2.5.1.0's" in second.detail
