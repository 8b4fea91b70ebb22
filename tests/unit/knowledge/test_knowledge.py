"""The knowledge base: it loads, it is consistent, and a bad row names itself."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import envkit.knowledge as kb
from envkit.knowledge import PLATFORMS, KnowledgeError, load_knowledge, variant_cuda
from envkit.versions import ComputeCapability, Version

K = load_knowledge()


def test_releases_span_1_2_to_the_newest() -> None:
    versions = [r.torch for r in K.releases]
    assert versions == sorted(versions, reverse=True)
    # 1.2.0 (2019-08-08): the oldest release on pytorch.github.io's previous-versions page with
    # per-CUDA pip commands (cu92, cu100).
    assert versions[-1] == Version("1.2.0")
    assert versions[0] >= Version("2.15.0")


def test_companions_rise_with_torch() -> None:
    # Each torch release has its own torchvision and torchaudio, newer than the previous release's
    # (1.2.0: torchvision 0.4.0, torchaudio 0.3.0), except torchaudio 2.11 serving torch >= 2.11.
    oldest_first = list(reversed(K.releases))
    assert (oldest_first[0].torchvision, oldest_first[0].torchaudio) == (Version("0.4.0"), Version("0.3.0"))
    for older, newer in zip(oldest_first, oldest_first[1:]):
        assert newer.torchvision > older.torchvision, newer.torch
        assert newer.torchaudio >= older.torchaudio, newer.torch


def test_cu92_wheels_are_torch_1_2_to_1_7() -> None:
    # CUDA 9.2 is a two-digit folder (cu92) on download.pytorch.org: torch 1.2.0 … 1.7.1 on Linux.
    with_cu92 = [r.torch for r in K.releases if "cu92" in r.variants.get("linux-x86_64", ())]
    assert min(with_cu92) == Version("1.2.0") and max(with_cu92) == Version("1.7.1")
    assert variant_cuda("cu92") == Version("9.2") and kb.is_variant("cu92")


def test_sm_35_left_the_linux_wheels_at_1_3_1() -> None:
    # pytorch/builder 2aac90bd (2019-10-29) moved 3.5 to 3.7 after torch 1.3.0 was released;
    # pytorch/pytorch#24205: "switched builds and nightlies from 3.5 to only 3.7".
    k35 = ComputeCapability(3, 5)
    for torch, has_35 in (("1.3.0", True), ("1.3.1", False)):
        release = K.release(Version(torch))
        assert release is not None
        row = K.arch_for(release, "cu101", "linux-x86_64")
        assert row is not None and (k35 in row.sass) is has_35, torch


@pytest.mark.parametrize("release", K.releases, ids=lambda r: str(r.torch))
def test_every_release_is_complete(release: kb.Release) -> None:
    assert release.torchvision >= Version("0.4")  # torch 1.2.0's
    assert release.torchaudio >= Version("0.3")
    assert set(release.variants) <= set(PLATFORMS)
    assert "cpu" in release.variants["linux-x86_64"]
    assert release.pypi_default in release.variants["linux-x86_64"]
    assert release.python == tuple(sorted(release.python))
    assert release.source


@pytest.mark.parametrize(
    "release", [r for r in K.releases if r.torch >= Version("2.12")], ids=lambda r: str(r.torch)
)
def test_torchaudio_stays_at_2_11_from_torch_2_12(release: kb.Release) -> None:
    # torchaudio 2.11 is built on the stable ABI and supports later torch (docs.pytorch.org/audio/2.11).
    assert release.torchaudio.major == 2 and release.torchaudio.minor == 11


def test_every_cuda_variant_has_driver_floors_and_an_arch_row() -> None:
    for release in K.releases:
        for platform, variants in release.variants.items():
            for variant in variants:
                cuda = variant_cuda(variant)
                if cuda is None:
                    continue
                assert K.toolkit(cuda) is not None, (release.torch, variant)
                assert K.family(cuda) is not None, (release.torch, variant)
                if platform != "macos-arm64":
                    assert K.arch_for(release, variant, platform) is not None, (
                        release.torch,
                        platform,
                        variant,
                    )


def test_toolkit_drivers_are_above_their_family_floor() -> None:
    # CUDA 11.0 GA shipped with 450.51.05, below the 11.x floor 450.80.02 (NVIDIA's minor version
    # compatibility page says so), and CUDA 9/10 have no family floor at all.
    for toolkit in K.toolkits.values():
        family = K.family(toolkit.cuda)
        assert family is not None
        if family.linux_min_driver is None or toolkit.cuda == Version("11.0"):
            continue
        assert toolkit.linux_driver >= family.linux_min_driver, toolkit.cuda


def test_arch_lists_use_known_architectures() -> None:
    known = {g.cc for g in K.gpus} | {
        ComputeCapability(3, 7),
        ComputeCapability(5, 0),
        ComputeCapability(6, 0),
    }
    for row in K.arch:
        for cc in row.sass + row.ptx:
            assert cc in known or cc.major in {c.major for c in known}, (row.variant, cc)


@pytest.mark.parametrize(
    ("nvml_name", "cc"),
    [
        ("NVIDIA H100 80GB HBM3", "9.0"),
        ("NVIDIA H100 PCIe", "9.0"),
        ("NVIDIA H200", "9.0"),
        ("NVIDIA A100-SXM4-80GB", "8.0"),
        ("Tesla V100-SXM2-32GB", "7.0"),
        ("Tesla P100-PCIE-16GB", "6.0"),
        ("Tesla T4", "7.5"),
        ("NVIDIA GeForce RTX 4090", "8.9"),
        ("NVIDIA GeForce RTX 5090", "12.0"),
        ("NVIDIA GeForce RTX 3080", "8.6"),
        ("NVIDIA L40S", "8.9"),
        ("NVIDIA B200", "10.0"),
        ("NVIDIA GH200 480GB", "9.0"),
        ("NVIDIA RTX A6000", "8.6"),
        ("Tesla K80", "3.7"),
        ("NVIDIA GeForce GTX 1080 Ti", "6.1"),
    ],
)
def test_gpu_names_from_nvml(nvml_name: str, cc: str) -> None:
    gpu = K.gpu_named(nvml_name)
    assert gpu is not None, nvml_name
    assert str(gpu.cc) == cc


def test_datacenter_peaks() -> None:
    h100 = K.gpu_named("NVIDIA H100 80GB HBM3")
    h200 = K.gpu_named("NVIDIA H200")
    assert h100 is not None and h100.bf16_tflops == 989
    assert h200 is not None and h200.memory_bandwidth_gbs == 4800


def test_conda_routes() -> None:
    assert K.conda.pytorch_last_release == Version("2.5.1")
    assert Version("11.8") in K.conda.cudatoolkit_versions
    assert max(K.conda.cudatoolkit_versions) == Version("11.8")  # no cudatoolkit 12.x ever existed


def test_arch_coverage_rules() -> None:
    release = K.release(Version("2.7.0"))
    assert release is not None
    cu128 = K.arch_for(release, "cu128", "linux-x86_64")
    cu126 = K.arch_for(release, "cu126", "linux-x86_64")
    assert cu128 is not None and cu126 is not None
    assert cu128.covers(ComputeCapability(12, 0))
    assert not cu126.covers(ComputeCapability(12, 0))
    assert cu126.covers(ComputeCapability(8, 9))  # sm_86 SASS runs on 8.9 (RTX 40xx)
    assert cu126.covers(ComputeCapability(6, 1))  # sm_60 SASS runs on 6.1 (GTX 10xx)
    assert not cu128.covers(ComputeCapability(7, 0))  # sm_70 dropped from cu128 in 2.7


def test_ptx_covers_newer_majors() -> None:
    release = K.release(Version("2.13.0"))
    assert release is not None
    cu130 = K.arch_for(release, "cu130", "linux-x86_64")
    assert cu130 is not None and ComputeCapability(12, 0) in cu130.ptx
    assert cu130.covers(ComputeCapability(12, 1))


# A bad row names its file, its position and its field ------------------------------------------


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    ("file", "old", "new", "message"),
    [
        (
            "releases.toml",
            'torch = "2.5.1"',
            'torch = "two"',
            r"releases.toml: \[\[release\]\] #\d+ \(two\): field 'torch'",
        ),
        (
            "releases.toml",
            'pypi_default = "cu124"',
            'pypi_default = "cu999"',
            "field 'pypi_default': expected one of the release's",
        ),
        (
            "arch.toml",
            'sass = ["7.5", "8.0", "8.6", "9.0", "10.0", "12.0"]',
            'sass = ["7.5", "eight"]',
            "field 'sass': expected a list of compute capabilities",
        ),
        (
            "cuda.toml",
            'linux_driver = "550.54.14"',
            "linux_driver = 550",
            "field 'linux_driver': expected str",
        ),
        (  # a Table 3 update row is checked at load too (it feeds conda-lock's __cuda)
            "cuda.toml",
            'cuda = "13.3.1"\nlinux_driver = "610.43.02"',
            'cuda = "13.3.1"\nlinux_driver = "six hundred ten"',
            r"cuda.toml: \[\[toolkit_update\]\] #1 \(13.3.1\): field 'linux_driver': expected a version",
        ),
        ("gpus.toml", 'cc = "9.0"', 'cc = "ninety"', "field 'cc': expected a compute capability"),
        (  # a companion gap is for a platform XPU wheels are built for, and names companions only
            "intel.toml",
            'platform = "windows-x86_64"\npackages',
            'platform = "macos-arm64"\npackages',
            r"intel.toml: \[\[companion_gap\]\] #1.*field 'platform': expected one of linux-x86_64",
        ),
        (
            "intel.toml",
            'packages = ["torchvision", "torchaudio"]',
            'packages = ["torchtext"]',
            "field 'packages': expected torchvision and/or torchaudio",
        ),
        ("releases.toml", "[[release]]", "[[release]]\nbroken = ", "releases.toml: cannot be read"),
    ],
)
def test_bad_rows_name_themselves(data_copy: Path, file: str, old: str, new: str, message: str) -> None:
    _edit(data_copy / file, old, new)
    with pytest.raises(KnowledgeError, match=message):
        load_knowledge()


def test_a_variant_without_floors_is_refused(data_copy: Path) -> None:
    _edit(data_copy / "cuda.toml", 'cuda = "12.1"', 'cuda = "12.2"')
    with pytest.raises(KnowledgeError, match=re.escape("cuda.toml has no [[toolkit]] row for CUDA 12.1")):
        load_knowledge()


def test_a_variant_without_arch_is_refused(data_copy: Path) -> None:
    _edit(data_copy / "arch.toml", 'variant = "cu121"', 'variant = "cu122"')
    with pytest.raises(KnowledgeError, match=re.escape("arch.toml has 0 rows for it, expected 1")):
        load_knowledge()
