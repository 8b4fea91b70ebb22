"""scripts/update_knowledge.py: parsing saved copies of the wheel index and RELEASE.md, comparing them
with releases.toml, rewriting it as text, and the command line (offline: saved pages, an unreachable
local port)."""

from __future__ import annotations

import dataclasses
import doctest
import importlib.util
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

import envkit.knowledge as kb
from envkit.knowledge import load_knowledge
from envkit.versions import Version

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "update_knowledge.py"
DATA = ROOT / "tests" / "data" / "pytorch-index"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("update_knowledge", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


uk = _load_script()
PAGE = (DATA / "torch.html").read_text(encoding="utf-8")
INDEX = uk.parse_wheel_index(PAGE)
K = load_knowledge()
V = Version


def minors(first: int, last: int, extra: tuple[str, ...] = ()) -> frozenset[str]:
    return frozenset({f"3.{m}" for m in range(first, last + 1)} | set(extra))


def release(torch: str) -> kb.Release:
    found = K.release(V(torch))
    assert found is not None
    return found


# --- The wheel index page --------------------------------------------------------------------------


def test_the_saved_page_holds_these_releases() -> None:
    # 1.10.0 (nixpkgs), 2.3.0 (nixpkgs), 2.4.1 (rules_python), 2.5.1 (uv#10843, uv#9307, a pip log),
    # 2.7.0 (uv#13195); the nightlies of block H are skipped.
    assert list(INDEX.releases) == [V("1.10.0"), V("2.3.0"), V("2.4.1"), V("2.5.1"), V("2.7.0")]
    assert "skipped 8 file(s): dev/nightly or pre-release versions" in INDEX.notes
    # Intel-Mac files (macosx_10_9_x86_64) are read as macos-x86_64: no platform is skipped.
    assert not [n for n in INDEX.notes if "platform" in n]


def test_2_7_0_cu128_verbatim_block_free_threaded_kept_apart() -> None:
    cu128 = minors(9, 13, ("3.13t",))
    assert INDEX.releases[V("2.7.0")] == {
        "linux-x86_64": {"cu128": cu128},
        "linux-aarch64": {"cu128": cu128},
        "windows-x86_64": {"cu128": cu128},
    }
    assert INDEX.python(V("2.7.0")) == ["3.9", "3.10", "3.11", "3.12", "3.13"]
    assert INDEX.partial_python(V("2.7.0")) == []


def test_2_4_1_cpu_folder_unlabelled_aarch64_and_macos() -> None:
    # manylinux_2_17_aarch64.manylinux2014_aarch64 is a compressed tag set: one platform, not two.
    assert INDEX.releases[V("2.4.1")] == {
        "linux-x86_64": {"cpu": minors(8, 12)},
        "linux-aarch64": {uk.PYPI: minors(8, 12)},
        "windows-x86_64": {"cpu": minors(8, 12)},
        "macos-arm64": {"cpu": minors(8, 12)},
    }
    assert INDEX.python(V("2.4.1")) == ["3.8", "3.9", "3.10", "3.11", "3.12"]
    assert [str(p) for p in release("2.4.1").python] == INDEX.python(V("2.4.1"))


def test_2_5_1_merges_variant_folders_and_leaves_the_linux_only_minor_out() -> None:
    got = INDEX.releases[V("2.5.1")]
    assert got["linux-x86_64"] == {
        "cpu": minors(11, 13),
        "cu118": minors(11, 13),
        "cu124": minors(9, 13),
        "rocm6.2": minors(11, 11),
    }
    assert got["windows-x86_64"] == {"cpu": minors(11, 12), "cu118": minors(11, 12), "cu124": minors(9, 12)}
    assert got["linux-aarch64"] == {uk.PYPI: minors(9, 12)}
    assert "macos-arm64" not in got
    # cp313 exists for linux-x86_64 only: releases.toml leaves such a minor out, and so does the index.
    assert INDEX.python(V("2.5.1")) == ["3.9", "3.10", "3.11", "3.12"]
    assert INDEX.partial_python(V("2.5.1")) == ["3.13"]


def test_old_abi_tags_and_intel_macs() -> None:
    # cp37m is CPython 3.7; macosx_10_9_x86_64 is an Intel Mac, whose unlabelled wheels are cpu builds.
    assert INDEX.releases[V("1.10.0")] == {
        "linux-x86_64": {"cu113": minors(7, 9)},
        "macos-arm64": {"cpu": minors(8, 9)},
        "macos-x86_64": {"cpu": minors(7, 9)},
    }
    assert INDEX.python_on(V("1.10.0"), "macos-arm64") == ["3.8", "3.9"]
    assert INDEX.python(V("1.10.0")) == ["3.8", "3.9"]
    assert INDEX.python(V("1.10.0"), besides=["macos-arm64"]) == ["3.7", "3.8", "3.9"]


def test_dev_versions_only_when_asked() -> None:
    index = uk.parse_wheel_index(PAGE, include_dev=True)
    assert index.releases[V("2.0.0.dev20230207")] == {"linux-x86_64": {"rocm5.3": minors(8, 10)}}
    assert index.releases[V("1.13.0.dev20220728")]["windows-x86_64"] == {"cpu": frozenset({"3.7", "3.10"})}


def test_url_encoded_href_wins_over_the_link_text() -> None:
    # One anchor of block C, its text replaced: the file name comes from the (percent-encoded) href.
    anchor = (
        '<a href="https://download.pytorch.org/whl/cu124/torch-2.5.1%2Bcu124-cp310-cp310-win_amd64.whl'
        '#sha256=6f99d8459369cfd6661c2aee14787592fe50156a33faf9ef643ba04e42d6543f">torch-2.5.1+cu124</a>'
    )
    assert uk.parse_wheel_index(anchor).releases == {
        V("2.5.1"): {"windows-x86_64": {"cu124": minors(10, 10)}}
    }
    # With an href that is not a file, the text is the file name.
    text_only = '<a href="#">torch-2.4.1+cpu-cp39-cp39-win_amd64.whl</a>'
    assert uk.parse_wheel_index(text_only).releases == {V("2.4.1"): {"windows-x86_64": {"cpu": minors(9, 9)}}}


def test_other_projects_and_odd_names_are_skipped_with_a_note() -> None:
    page = (
        '<a href="/whl/rocm6.2/pytorch_triton_rocm-3.1.0-cp312-cp312-linux_x86_64.whl">t</a>'
        '<a href="/whl/torch-2.0.0.whl">x</a>'
    )
    index = uk.parse_wheel_index(page)
    assert index.releases == {}
    assert index.notes == (
        "skipped 1 file(s): not a valid wheel file name",
        "skipped 1 file(s): project pytorch-triton-rocm",
    )


@pytest.mark.parametrize(
    ("tag", "platform"),
    [
        ("linux_x86_64", "linux-x86_64"),
        ("manylinux1_x86_64", "linux-x86_64"),
        ("manylinux_2_28_x86_64", "linux-x86_64"),
        ("manylinux2014_aarch64", "linux-aarch64"),
        ("manylinux_2_28_aarch64", "linux-aarch64"),
        ("linux_aarch64", "linux-aarch64"),
        ("win_amd64", "windows-x86_64"),
        ("macosx_11_0_arm64", "macos-arm64"),
        ("macosx_10_9_x86_64", "macos-x86_64"),
        ("macosx_11_0_x86_64", "macos-x86_64"),
        ("linux_s390x", None),
        ("win_arm64", None),
    ],
)
def test_platform_tags(tag: str, platform: str | None) -> None:
    assert uk.platform_of(tag) == platform


def test_unlabelled_files_resolve_to_the_pypi_build() -> None:
    # linux-x86_64: the release's PyPI default; aarch64/Windows: cpu only when nothing else is there.
    index = uk.parse_wheel_index(
        '<a href="/whl/torch-2.1.1-cp38-cp38-manylinux2014_aarch64.whl">a</a>'
        '<a href="/whl/cu118/torch-2.1.1%2Bcu118-cp38-cp38-linux_x86_64.whl">b</a>'
    )
    assert uk.index_variants(index, V("2.1.1"), "linux-aarch64", "cu121") == {"cpu"}
    assert uk.index_variants(INDEX, V("2.7.0"), "linux-aarch64", "cu126") == {"cu128"}
    assert uk.index_variants(INDEX, V("2.5.1"), "linux-aarch64", "cu124") == {"cpu"}
    # From 2.11 PyPI's aarch64 wheel is a CUDA build (the release's pypi_default_aarch64).
    assert uk.index_variants(index, V("2.1.1"), "linux-aarch64", "cu121", "cu130") == {"cu130"}
    assert uk.index_variants(INDEX, V("1.10.0"), "macos-x86_64", "cu102") == {"cpu"}


def test_pages_merge() -> None:
    merged = uk.merge_indexes([INDEX, uk.parse_wheel_index(PAGE)])
    assert merged.releases == INDEX.releases
    assert len(merged.notes) == 2 * len(INDEX.notes)


# --- RELEASE.md -----------------------------------------------------------------------------------


def test_upstream_release_md_four_columns() -> None:
    matrix = uk.parse_release_matrix((DATA / "RELEASE.md").read_text(encoding="utf-8"))
    assert [r.torch for r in matrix.rows] == ["2.3", "2.2", "2.1", "2.0", "1.13", "1.12"]
    assert matrix.notes == ()
    row = matrix.row("2.3")
    assert row is not None
    assert (row.python_min, row.python_max) == ("3.8", "3.11")
    assert row.python == ">=3.8, <=3.11, (3.12 experimental)"
    assert (row.stable_cuda, row.experimental_cuda, row.rocm) == (("11.8",), ("12.1",), None)


def test_newer_matrix_with_cpp_and_rocm_columns() -> None:
    matrix = uk.parse_release_matrix((DATA / "RELEASE-fork-cyyever.md").read_text(encoding="utf-8"))
    assert len(matrix.rows) == 17 and matrix.notes == ()
    r214, r29, r26, r25 = (matrix.row(m) for m in ("2.14", "2.9", "2.6", "2.5"))
    assert r214 is not None and r29 is not None and r26 is not None and r25 is not None
    assert r214.stable_cuda == ("12.6", "13.0", "13.2") and r214.experimental_cuda == ()
    assert r214.rocm == "7.14"
    assert (r29.python_min, r29.python_max) == ("3.10", "3.14")
    assert r29.experimental_cuda == ("13.0",)
    assert r26.rocm == "6.2.4"
    assert r25.stable_cuda == ("11.8", "12.1", "12.4") and r25.experimental_cuda == ()  # "None"
    # The CUDA support tables below the matrix are not rows of it.
    assert matrix.row("12.6") is None


def test_merge_conflict_lines_are_skipped_with_notes() -> None:
    matrix = uk.parse_release_matrix((DATA / "RELEASE-fork-rocm-conflict.md").read_text(encoding="utf-8"))
    assert [r.torch for r in matrix.rows][:3] == ["2.8", "2.7", "2.6"]
    assert len(matrix.rows) == 11
    assert len(matrix.notes) == 3
    assert all("not a table row" in n for n in matrix.notes)
    assert "line 9" in matrix.notes[0] and "<<<<<<< HEAD" in matrix.notes[0]


def test_no_matrix() -> None:
    matrix = uk.parse_release_matrix("# Releasing PyTorch\n\nNothing here.\n")
    assert matrix.rows == ()
    assert matrix.notes == ("RELEASE.md: no Release Compatibility Matrix table found",)


# --- Comparing with releases.toml ----------------------------------------------------------------


def test_diff_against_the_real_releases_toml() -> None:
    matrix = uk.parse_release_matrix((DATA / "RELEASE.md").read_text(encoding="utf-8"))
    findings = uk.diff_releases(K.releases, INDEX, matrix)
    # Every release on the page is in releases.toml's range (1.8.0 up): none is left uncompared.
    assert not [f for f in findings if "older than" in f]
    assert findings[0] == "torch 1.10.0 linux-x86_64: in releases.toml, no file on the wheel index: cpu"
    assert "torch 2.5.1 linux-x86_64: in releases.toml, no file on the wheel index: cu121" in findings
    assert (
        "torch 2.5.1 macos-arm64: no file on the wheel index for this platform (releases.toml lists cpu)"
        in findings
    )
    assert (
        "torch 2.4.1 linux-x86_64: in releases.toml, no file on the wheel index: cu118, cu121, cu124 "
        "(cu121 is the PyPI default: --write keeps it)"
    ) in findings
    # linux-aarch64 keeps its PyPI default (pypi_default_aarch64) as linux-x86_64 keeps pypi_default.
    assert (
        "torch 2.7.0 linux-aarch64: in releases.toml, no file on the wheel index: cpu "
        "(cpu is the PyPI default: --write keeps it)"
    ) in findings
    # Every variant the page has is already in releases.toml and the matrix (1.12-2.3) has no CUDA
    # version without a variant. The one Python finding: the page's 1.10.0 files (nixpkgs) have no cp36;
    # macos-arm64 has its own python_platform line (3.8, 3.9, which the page agrees with), so only
    # linux-x86_64 and macos-x86_64 count for the release's python.
    assert not [f for f in findings if "not in releases.toml" in f]
    python_findings = [f for f in findings if "python" in f and "release(s)" not in f]
    assert python_findings == [
        (
            "torch 1.10.0: python in releases.toml is 3.6, 3.7, 3.8, 3.9; the wheel index has 3.7, 3.8, 3.9 "
            "on every platform it lists (linux-x86_64, macos-x86_64)"
        )
    ]
    assert not [f for f in findings if f.startswith("RELEASE.md")]
    # The rest of releases.toml (whatever it grows to) is not on the saved page, oldest first.
    others = sorted(r.torch for r in K.releases if r.torch not in INDEX.releases)
    assert len(others) == len(K.releases) - len(INDEX.releases)
    assert findings[-1] == (
        f"{len(others)} release(s) in releases.toml have no file on the wheel index: "
        + ", ".join(str(t) for t in others)
    )


def test_a_python_platform_line_is_compared_with_its_platform() -> None:
    r1100 = dataclasses.replace(
        release("1.10.0"), python_platform={"macos-arm64": (V("3.8"), V("3.9"), V("3.10"))}
    )
    findings = uk.diff_releases([r1100], INDEX)
    assert (
        "torch 1.10.0 macos-arm64: python_platform in releases.toml is 3.8, 3.9, 3.10; the wheel index "
        "has 3.8, 3.9"
    ) in findings


def test_the_newer_matrix_agrees_with_releases_toml() -> None:
    matrix = uk.parse_release_matrix((DATA / "RELEASE-fork-cyyever.md").read_text(encoding="utf-8"))
    # One disagreement, about 1.12 (in releases.toml since the 1.8-1.12 rows): the matrix names ROCm 5.0,
    # releases.toml lists the rocm5.1.1 wheels only. A question for the knowledge base, not the script.
    assert uk.diff_releases(K.releases, uk.WheelIndex({}), matrix) == [
        "RELEASE.md: torch 1.12 lists ROCm 5.0; releases.toml has no rocm5.0 variant for 1.12.0, 1.12.1"
    ]


def test_diff_reports_what_releases_toml_lacks() -> None:
    def edit(r: kb.Release) -> kb.Release:
        if r.torch == V("2.7.0"):
            variants = dict(r.variants, **{"windows-x86_64": ("cpu", "cu118", "cu126")})
            return dataclasses.replace(r, variants=variants, python=tuple(V(p) for p in ("3.9", "3.10")))
        if r.torch.release[:2] == (2, 4):
            variants = {p: tuple(v for v in vs if v != "cu124") for p, vs in r.variants.items()}
            return dataclasses.replace(r, variants=variants)
        return r

    releases = [edit(r) for r in K.releases if r.torch != V("2.5.1") and r.torch < V("2.14")]
    matrix = uk.parse_release_matrix((DATA / "RELEASE-fork-cyyever.md").read_text(encoding="utf-8"))
    findings = uk.diff_releases(releases, INDEX, matrix)
    assert "torch 2.7.0 windows-x86_64: on the wheel index, not in releases.toml: cu128" in findings
    assert (
        "torch 2.7.0: python in releases.toml is 3.9, 3.10; the wheel index has 3.9, 3.10, 3.11, 3.12, 3.13 "
        "on every platform it lists (linux-x86_64, linux-aarch64, windows-x86_64)"
    ) in findings
    new = [f for f in findings if f.startswith("torch 2.5.1:")]
    assert len(new) == 1
    assert "not in releases.toml; add it by hand" in new[0]
    assert "linux-x86_64: cpu, cu118, cu124, rocm6.2" in new[0]
    assert "python 3.9, 3.10, 3.11, 3.12" in new[0]
    assert (
        "RELEASE.md: torch 2.4 lists CUDA 12.4 (experimental); releases.toml has no cu124 variant for 2.4.0, 2.4.1"
    ) in findings
    assert "RELEASE.md lists torch 2.14; releases.toml has no 2.14.x release" in findings


# --- Rewriting releases.toml ----------------------------------------------------------------------

TODAY = "2026-12-01"


def _block(text: str, torch: str) -> str:
    blocks = text.split("[[release]]\n")
    (found,) = [b for b in blocks if b.startswith(f'torch = "{torch}"\n')]
    return found


def test_apply_rewrites_only_variant_and_source_lines(data_copy: Path) -> None:
    path = data_copy / "releases.toml"
    old = path.read_text(encoding="utf-8")
    new, changes = uk.apply_updates_report(old, INDEX, today=TODAY)
    assert [c.split(":")[0] for c in changes] == [
        "torch 1.10.0",
        "torch 2.3.0",
        "torch 2.4.1",
        "torch 2.5.1",
        "torch 2.7.0",
    ]

    old_lines, new_lines = old.splitlines(), new.splitlines()
    assert len(old_lines) == len(new_lines)
    changed = [(a, b) for a, b in zip(old_lines, new_lines) if a != b]
    assert all(a.startswith(("source = ", "linux-", "windows-")) for a, _ in changed)
    # Comments stay, sources only grow by the note.
    assert [line for line in old_lines if line.startswith("#")] == [
        line for line in new_lines if line.startswith("#")
    ]
    for a, b in changed:
        if a.startswith("source = "):
            assert b == a[:-1] + f'; wheel index read {TODAY}"'

    b251 = _block(new, "2.5.1")
    assert (
        'linux-x86_64 = ["cpu", "cu118", "cu124", "rocm6.1", "rocm6.2", "xpu"]\n' in b251
    )  # rocm6.1 and xpu: not on the page
    assert 'windows-x86_64 = ["cpu", "cu118", "cu124", "xpu"]\n' in b251
    assert 'linux-aarch64 = ["cpu"]\nwindows' in b251  # unchanged
    assert 'macos-arm64 = ["cpu"]\n' in b251  # no macOS file on the page: left alone
    assert '[release.conda]\npytorch_cuda = ["11.8", "12.1", "12.4"]' in b251
    # The PyPI default stays on linux-x86_64 although the page has no cu121 file for 2.4.1.
    assert 'linux-x86_64 = ["cpu", "cu121", "rocm6.0", "rocm6.1"]\n' in _block(new, "2.4.1")
    assert _block(new, "2.6.0") == _block(old, "2.6.0")
    # linux-aarch64 keeps cpu, 2.7.0's PyPI build there, though the page has only cu128 for it.
    assert 'linux-aarch64 = ["cpu", "cu128"]\n' in _block(new, "2.7.0")
    # 1.10.0's python lines stay: the page lacks linux-aarch64 and Windows for it.
    assert _block(new, "1.10.0").count("python") == _block(old, "1.10.0").count("python")
    assert 'python = ["3.6", "3.7", "3.8", "3.9"]\n' in _block(new, "1.10.0")

    path.write_text(new, encoding="utf-8")
    loaded = load_knowledge()
    got = loaded.release(V("2.5.1"))
    assert got is not None
    assert got.variants["windows-x86_64"] == ("cpu", "cu118", "cu124", "xpu")
    assert got.source.endswith(f"; wheel index read {TODAY}")
    assert got.torchvision == V("0.20.1")


def test_apply_twice_changes_nothing_more() -> None:
    text = (kb.DATA_DIR / "releases.toml").read_text(encoding="utf-8")
    once = uk.apply_updates(text, INDEX, today=TODAY)
    twice, changes = uk.apply_updates_report(once, INDEX, today="2027-01-01")
    assert changes == [] and twice == once


def test_apply_rewrites_python_and_adds_a_missing_platform_line(data_copy: Path) -> None:
    path = data_copy / "releases.toml"
    old = path.read_text(encoding="utf-8")
    block = _block(old, "2.4.1")
    edited = block.replace('python = ["3.8", "3.9", "3.10", "3.11", "3.12"]', 'python = ["3.9", "3.10"]')
    edited = edited.replace('macos-arm64 = ["cpu"]\n', "")
    text = old.replace(block, edited)
    new, changes = uk.apply_updates_report(text, INDEX, today=TODAY)
    b241 = _block(new, "2.4.1")
    assert 'python = ["3.8", "3.9", "3.10", "3.11", "3.12"]\n' in b241
    assert 'windows-x86_64 = ["cpu"]\nmacos-arm64 = ["cpu"]\n[release.conda]' in b241
    (c241,) = [c for c in changes if c.startswith("torch 2.4.1:")]
    assert "python 3.9, 3.10 -> 3.8, 3.9, 3.10, 3.11, 3.12" in c241
    assert "macos-arm64 none -> cpu" in c241
    # 2.5.1 has no macOS file on the page: its python line is not rewritten from three platforms.
    assert 'python = ["3.9", "3.10", "3.11", "3.12"]' in _block(new, "2.5.1")
    path.write_text(new, encoding="utf-8")
    assert load_knowledge().release(V("2.4.1")) is not None


def test_a_rewrite_that_does_not_load_is_undone(data_copy: Path) -> None:
    path = data_copy / "releases.toml"
    old = path.read_text(encoding="utf-8")
    bad = old.replace('pypi_default = "cu124"', 'pypi_default = "cu999"', 1)
    with pytest.raises(uk.UpdateError, match=r"does not load .*pypi_default.*the old file is back"):
        uk.write_validated(path, bad)
    assert path.read_text(encoding="utf-8") == old
    assert not list(data_copy.glob(".releases.toml.*"))


def test_write_validated_replaces_the_file(data_copy: Path) -> None:
    path = data_copy / "releases.toml"
    new = uk.apply_updates(path.read_text(encoding="utf-8"), INDEX, today=TODAY)
    uk.write_validated(path, new)
    assert path.read_text(encoding="utf-8") == new
    assert not list(data_copy.glob(".releases.toml.*"))


# --- The command line -----------------------------------------------------------------------------


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_cli_from_dir_prints_findings_and_writes_nothing() -> None:
    real = kb.DATA_DIR / "releases.toml"
    before = real.read_bytes()
    proc = _run("--from-dir", str(DATA))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "5 torch release(s) on the wheel index, 6 row(s) in RELEASE.md's matrix" in proc.stdout
    assert "- torch 2.5.1 linux-x86_64: in releases.toml, no file on the wheel index: cu121\n" in proc.stdout
    assert "note: skipped 8 file(s): dev/nightly or pre-release versions" in proc.stdout
    assert real.read_bytes() == before


def test_cli_write_to_a_knowledge_copy(tmp_path: Path) -> None:
    for path in kb.DATA_DIR.glob("*.toml"):
        shutil.copy(path, tmp_path / path.name)
    proc = _run("--from-dir", str(DATA), "--knowledge-dir", str(tmp_path), "--write")
    assert proc.returncode == 0, proc.stderr
    assert f"{tmp_path / 'releases.toml'}: rewrote 5 release(s)" in proc.stdout
    assert "  torch 2.7.0: linux-x86_64 cpu, cu118, cu126, cu128, rocm6.2.4, rocm6.3, xpu -> " in proc.stdout
    text = (tmp_path / "releases.toml").read_text(encoding="utf-8")
    assert text.count("; wheel index read ") == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in kb.DATA_DIR.glob("*.toml"))
    again = _run("--from-dir", str(DATA), "--knowledge-dir", str(tmp_path), "--write")
    assert again.returncode == 0 and "releases.toml: nothing to change" in again.stdout


def test_cli_unreachable_index_fails_fast_in_one_line() -> None:
    start = time.monotonic()
    proc = _run(
        "--index-url", "http://127.0.0.1:9/", "--release-md", "http://127.0.0.1:9/RELEASE.md", timeout=30
    )
    elapsed = time.monotonic() - start
    assert proc.returncode == 2
    assert elapsed < 15
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("update_knowledge: cannot reach http://127.0.0.1:9/: ")
    assert lines[0].endswith("; use --from-dir with saved copies")
    assert "Traceback" not in proc.stderr


def test_cli_from_dir_without_the_files(tmp_path: Path) -> None:
    proc = _run("--from-dir", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(f"update_knowledge: cannot read {tmp_path / 'torch.html'}: ")


def test_the_scripts_doctests() -> None:
    # pytest collects doctests from envkit/ and tests/ only.
    assert doctest.testmod(uk).failed == 0


def test_fetch_reads_a_url() -> None:
    assert uk.fetch((DATA / "RELEASE.md").as_uri()).startswith("# Releasing PyTorch")
