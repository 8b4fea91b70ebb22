"""envkit/knowledge/extensions/*.toml: every project loads, every row cites a source a reader can
follow, and the loader refuses rows that are wrong (each error names the file, the row and the field).

The flash-attn rows are read from Dao-AILab/flash-attention's publish.yml and setup.py at each tag
(cited per row); its PyPI files from PyPI's simple JSON API (tests/data/extensions/pypi/)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from envkit.knowledge import KnowledgeError
from envkit.knowledge._table import Row
from envkit.knowledge.extensions import (
    KINDS,
    _file,
    _release,
    _wheel_set,
    load_extension,
    load_extensions,
    torch_cxx11_abi,
)
from envkit.versions import ComputeCapability, Version

V = Version


def test_every_project_loads_and_every_row_cites_a_source() -> None:
    found = load_extensions()
    assert "flash-attn" in found
    for name, ext in found.items():
        assert ext.kind in KINDS, name
        assert ext.source and ext.homepage.startswith("https://"), name
        assert ext.releases == tuple(sorted(ext.releases, key=lambda r: r.version, reverse=True)), name
        for release in ext.releases:
            assert release.source, (name, release.version)
            for wheels in release.wheels:
                assert re.search(r"[\w.-]+/[\w.-]+:[\w./-]+@[0-9a-f]{7,}|https://", wheels.source), (
                    name,
                    release.version,
                )
            for file in release.files:
                assert file.url.endswith(file.name)
                assert file.sha256 is None or re.fullmatch(r"[0-9a-f]{64}", file.sha256)


def test_one_extension_read_alone_is_the_same_as_from_the_whole_table() -> None:
    # doctor reads the installed extensions' files alone (load_extension); both say the same.
    load_extension.cache_clear()
    load_extensions.cache_clear()
    alone = load_extension("flash-attn")
    assert alone is not None and alone == load_extensions()["flash-attn"]
    assert load_extension("torch") is None and load_extension("../extensions/flash-attn") is None
    assert load_extension("_torch_abi") is None and load_extension("Flash_Attn") is None


def test_flash_attn_wheels_follow_publish_yml() -> None:
    fa = load_extensions()["flash-attn"]
    release = fa.release(V("2.8.3"))
    assert release is not None
    (wheels,) = release.wheels
    # publish.yml@060c9188beec: torch 2.4.0 2.5.1 2.6.0 2.7.1 2.8.0, CUDA 12.9.1, cp39-cp313, both ABIs,
    # torch 2.4 without 3.13; setup.py: sm_80, sm_90, and sm_100/sm_120 for nvcc >= 12.8.
    assert [str(t) for t in wheels.torch] == ["2.4.0", "2.5.1", "2.6.0", "2.7.1", "2.8.0"]
    assert wheels.cuda == ("cu12*",) and wheels.cxx11_abi == (False, True)
    assert wheels.exclude == ((("python", "3.13"), ("torch", "2.4")),)
    assert wheels.gpu.covers(ComputeCapability(9, 0)) and not wheels.gpu.covers(ComputeCapability(7, 5))
    assert fa.min_cc == ComputeCapability(8, 0) and fa.build is not None and fa.build.no_build_isolation
    # PyPI holds the sdist only (its sha256 from the simple JSON API).
    assert [f.name for f in release.files] == ["flash_attn-2.8.3.tar.gz"]
    old = fa.release(V("2.6.3"))
    assert old is not None and {w.url.split("+")[1][:5] for w in old.wheels} == {"cu118", "cu123"}


def test_torch_cxx11_abi() -> None:
    assert torch_cxx11_abi(V("2.7.0"), "cu126") and torch_cxx11_abi(V("2.15.0"), "cpu")
    assert not torch_cxx11_abi(V("2.6.0"), "cu124") and torch_cxx11_abi(V("2.6.0"), "cu126")
    assert torch_cxx11_abi(V("2.5.1"), "cu121", conda=True)


WHEELS: dict[str, Any] = {
    "where": "url",
    "url": "https://example.org/{version}/x-{version}-cp{py}-cp{py}-{platform_tag}.whl",
    "torch": ["2.8"],
    "cuda": ["cu12*"],
    "python": ["3.11"],
    "platforms": ["linux-x86_64"],
    "source": "owner/repo:.github/workflows/build.yml@0123456789ab",
}


def _wheels(**fields: Any) -> Any:
    return _wheel_set(Row("x.toml", "wheels", 0, {**WHEELS, **fields}))


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"cuda": ["cuda12"]}, "cuda"),
        ({"platforms": ["linux-riscv64"]}, "platforms"),
        ({"where": "ftp"}, "where"),
        ({"sass": ["9.9.9"]}, "sass"),
        ({"url": "https://x/{nope}.whl"}, "url"),
        ({"where": "find-links"}, "file"),
        ({"exclude": [{"torch": 2}]}, "exclude"),
        ({"source": "../shared/reference/notes.md"}, "source"),
    ],
)
def test_a_bad_wheel_set_names_its_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(KnowledgeError, match=rf"field '{field}'"):
        _wheels(**fields)


def test_a_bad_file_or_release_is_refused() -> None:
    with pytest.raises(KnowledgeError, match="field 'sha256'"):
        _file(Row("x.toml", "file", 0, {"name": "a.whl", "url": "https://h/a.whl", "sha256": "XYZ"}))
    with pytest.raises(KnowledgeError, match="field 'url'"):
        _file(Row("x.toml", "file", 0, {"name": "a.whl", "url": "http://h/b.whl"}))
    pypi = {"version": "1.0", "source": "https://pypi.org/simple/x/", "wheels": [{**WHEELS, "where": "pypi"}]}
    with pytest.raises(KnowledgeError, match=r"\[\[release\]\] #1 \(1.0\).*field 'file'"):
        _release("x.toml", 0, pypi)
    with pytest.raises(KnowledgeError, match="field 'requires_torch'"):
        _release("x.toml", 0, {"version": "1.0", "source": "https://x", "requires_torch": "=>2"})
    # A PyPI set claims only the platforms its files are for: vllm 0.6.3 said linux-aarch64 with one
    # manylinux1_x86_64 wheel (https://pypi.org/simple/vllm/), and --explain showed it.
    x86 = {
        "name": "x-1.0-cp38-abi3-manylinux1_x86_64.whl",
        "url": "https://h/x-1.0-cp38-abi3-manylinux1_x86_64.whl",
    }
    both = {**WHEELS, "where": "pypi", "platforms": ["linux-x86_64", "linux-aarch64"]}
    with pytest.raises(KnowledgeError, match=r"field 'wheels'.*linux-aarch64: none"):
        _release("x.toml", 0, {"version": "1.0", "source": "https://x", "wheels": [both], "file": [x86]})
    one = {**both, "platforms": ["linux-x86_64"]}
    assert _release("x.toml", 0, {"version": "1.0", "source": "https://x", "wheels": [one], "file": [x86]})
    vllm = load_extensions()["vllm"].release(V("0.6.3"))
    assert vllm is not None and vllm.wheels[0].platforms == ("linux-x86_64",)


def test_pyg_lib_wheels_follow_its_build_matrix() -> None:
    # pyg-team/pyg-lib:.github/workflows/utils/full_matrix_{linux,windows,macos}.json@26a2d1a06a47
    # (0.8.0): torch 2.13/2.12 with cpu cu126 cu130 cu132, 2.11/2.10 with cpu cu126 cu128 cu130; Linux
    # on x86_64 and aarch64, Windows, macOS (cpu, version +ptXY). The rows once named every table 2.13.
    release = load_extensions()["pyg-lib"].release(V("0.8.0"))
    assert release is not None
    pairs = {
        (f"{t.major}.{t.minor}", c, p)
        for w in release.wheels
        for t in w.torch
        for c in w.cuda
        for p in w.platforms
    }
    assert {t for t, _c, _p in pairs} == {"2.10", "2.11", "2.12", "2.13"}
    assert ("2.12", "cu132", "linux-aarch64") in pairs and ("2.11", "cu128", "windows-x86_64") in pairs
    assert ("2.12", "cu128", "linux-x86_64") not in pairs and ("2.10", "cpu", "macos-arm64") in pairs


def test_torchao_rows_follow_its_compatibility_list() -> None:
    # pytorch/ao:torchao/__init__.py@d94bb192966a (v0.14.1): 0.13.0 and 0.14.0 built against torch
    # 2.8.0, 0.14.1 against 2.9.0; 0.14.0 (on PyPI since 2025-10-13) was missing from the rows.
    ao = load_extensions()["torchao"]
    built = {str(r.version): [str(t) for w in r.wheels for t in w.torch] for r in ao.releases}
    assert built["0.14.0"] == ["2.8.0"] and built["0.14.1"] == ["2.9.0"] and built["0.13.0"] == ["2.8.0"]
