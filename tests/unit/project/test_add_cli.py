"""``envkit add`` from the command line: --dry-run shows the diff and changes nothing, a second run
changes nothing byte for byte, and bad input (a manifest that does not parse, manifests that
disagree, a read-only file) is exit 2 with the files untouched."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.unit.test_bad_input import assert_input_error, envkit

from .conftest import H100
from .test_edits import REQUIREMENTS, UV_INIT


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_dry_run_prints_the_diff_and_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(UV_INIT, encoding="utf-8")
    before = _snapshot(tmp_path)
    result = envkit("add", "torch", "--project", str(tmp_path), *H100, "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("--- a/pyproject.toml\n+++ b/pyproject.toml\n")
    assert '+    "torch==2.14.1",' in result.stdout and '+name = "pytorch-cu126"' in result.stdout
    assert "would edit" in result.stderr
    assert _snapshot(tmp_path) == before


def test_add_writes_then_a_second_run_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text(REQUIREMENTS, encoding="utf-8")
    (tmp_path / "requirements.txt").chmod(0o640)
    first = envkit("add", "torch", "torchvision", "--project", str(tmp_path), *H100)
    assert first.exit_code == 0, first.stderr
    after = _snapshot(tmp_path)
    # the file's own pin (torch==2.1.0) is the request: its release, in the build the target runs
    assert b"torch==2.1.0+cu121  # the model\ntorchvision==0.16.0\n" in after["requirements.txt"]
    assert (tmp_path / "requirements.txt").stat().st_mode & 0o777 == 0o640  # its permissions kept
    second = envkit("add", "torch", "torchvision", "--project", str(tmp_path), *H100)
    assert second.exit_code == 0 and second.stdout == ""
    assert "nothing to change" in second.stderr
    assert _snapshot(tmp_path) == after


def test_json_has_the_diff_and_the_plans(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(UV_INIT, encoding="utf-8")
    result = envkit("add", "--project", str(tmp_path), *H100, "--dry-run", "--json")
    data = json.loads(result.stdout)
    assert data["schema"] == "envkit.add/1" and data["dry_run"] is True
    assert data["files"][0]["kind"] == "uv" and data["files"][0]["changed"] is True
    assert [p["variant"] for p in data["plans"]] == ["cu126"]


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("pyproject.toml", '[project\nname = "x"\n', ("pyproject.toml", "not valid TOML")),
        ("environment.yml", "dependencies: [pytorch\n", ("environment.yml", "not valid YAML")),
        ("pixi.toml", "[workspace]\nchannels = [\n", ("pixi.toml", "not valid TOML")),
    ],
)
def test_a_manifest_that_does_not_parse_is_exit_2_and_untouched(
    tmp_path: Path, name: str, text: str, words: tuple[str, ...]
) -> None:
    (tmp_path / name).write_text(text, encoding="utf-8")
    before = _snapshot(tmp_path)
    assert_input_error(envkit("add", "torch", "--project", str(tmp_path), *H100), *words)
    assert _snapshot(tmp_path) == before


def test_manifests_that_disagree_are_exit_2_and_untouched(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        UV_INIT.replace('"numpy>=1.26",', '"torch>=2.4",'), encoding="utf-8"
    )
    (tmp_path / "requirements.txt").write_text(REQUIREMENTS, encoding="utf-8")
    before = _snapshot(tmp_path)
    result = envkit("add", "torch", "--project", str(tmp_path), *H100)
    assert_input_error(result, "disagree", "pyproject.toml", "requirements.txt")
    assert "--project" in result.stderr  # the hint names how to pick one
    assert _snapshot(tmp_path) == before
    chosen = envkit("add", "torch", "--project", str(tmp_path / "requirements.txt"), *H100)
    assert chosen.exit_code == 0, chosen.stderr
    assert _snapshot(tmp_path)["pyproject.toml"] == before["pyproject.toml"]


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes read-only files")
def test_a_read_only_manifest_is_exit_2_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text(REQUIREMENTS, encoding="utf-8")
    path.chmod(0o444)
    assert_input_error(envkit("add", "torch", "--project", str(tmp_path), *H100), "cannot write")
    assert path.read_text(encoding="utf-8") == REQUIREMENTS


def test_a_read_only_folder_is_exit_2_and_untouched(tmp_path: Path) -> None:
    """The temporary file of the atomic write goes beside the manifest: a folder that refuses it
    refuses the edit, before anything is written (root included: a read-only bind mount)."""
    path = tmp_path / "requirements.txt"
    path.write_text(REQUIREMENTS, encoding="utf-8")
    from envkit.commands import add as add_module

    real = os.access

    def read_only(p: object, mode: int, **kw: object) -> bool:
        return False if Path(str(p)) in (path, tmp_path) and mode & os.W_OK else real(p, mode)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(add_module.os, "access", read_only)
        assert_input_error(envkit("add", "torch", "--project", str(tmp_path), *H100), "cannot write")
    assert path.read_text(encoding="utf-8") == REQUIREMENTS


def test_no_manifest_and_other_packages_are_exit_2(tmp_path: Path) -> None:
    assert_input_error(envkit("add", "torch", "--project", str(tmp_path), *H100), "no manifest")
    (tmp_path / "requirements.txt").write_text("torch\n", encoding="utf-8")
    assert_input_error(envkit("add", "numpy", "--project", str(tmp_path), *H100), "numpy")
    assert_input_error(
        envkit("add", "torch", "--with", "flash-atn", "--project", str(tmp_path), *H100), "flash-atn"
    )


def test_a_mirror_login_is_a_note_never_output(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(UV_INIT, encoding="utf-8")
    mirrors = ("--mirror", "torch-wheels=http://me:t0ken@127.0.0.1:9/whl")
    result = envkit("add", "--project", str(tmp_path), *H100, *mirrors)
    assert result.exit_code == 0, result.stderr
    assert "set UV_INDEX_TORCH_CU126_USERNAME and UV_INDEX_TORCH_CU126_PASSWORD" in result.stderr
    written = (tmp_path / "pyproject.toml").read_text(encoding="utf-8")
    assert all("t0ken" not in text and "***" not in text for text in (result.stdout, result.stderr, written))


PIXI_FEATURES = """\
[workspace]
name = "train"
channels = ["conda-forge"]
platforms = ["linux-64"]

[dependencies]
python = "3.11.*"

[feature.cuda.system-requirements]
cuda = "12"

[feature.cuda.dependencies]
pytorch-gpu = "*"

[feature.cpu.dependencies]
pytorch-cpu = "*"

[environments]
cuda = ["cuda"]
cpu = ["cpu"]
"""


def test_torch_in_pixi_features_is_exit_2_for_add_and_check_and_untouched(tmp_path: Path) -> None:
    """pixi's PyTorch guide keeps a CPU and a CUDA torch in features, one per environment. envkit read
    only [dependencies] and [target.*]: check said the project names no torch (fix: envkit add), and
    add wrote pytorch=2.13.0=cuda129* into [dependencies], which every environment shares: the cpu
    environment then asked for pytorch-cpu beside a CUDA pytorch, which no solver satisfies."""
    (tmp_path / "pixi.toml").write_text(PIXI_FEATURES, encoding="utf-8")
    before = _snapshot(tmp_path)
    for command in ("add", "check"):
        result = envkit(command, "--project", str(tmp_path), *H100)
        assert_input_error(result, "pixi.toml", "features (cuda, cpu)")
    assert _snapshot(tmp_path) == before


def test_a_torch_pin_in_an_included_file_is_the_one_edited(tmp_path: Path) -> None:
    """requirements.txt takes base.txt in with -r, and base.txt pins torch==2.1.0: check said the
    project names no torch, and add appended torch==2.14.1+cu126 to requirements.txt, beside the
    included pin (pip: 'Cannot install torch==2.1.0 and torch==2.14.1+cu126'). Now base.txt is the
    manifest: its pin is judged and edited, in place."""
    (tmp_path / "base.txt").write_text("torch==2.1.0  # ours\nnumpy\n", encoding="utf-8")
    (tmp_path / "requirements.txt").write_text("-r base.txt\neinops\n", encoding="utf-8")
    checked = envkit("check", "--project", str(tmp_path), *H100, "--json")
    assert checked.exit_code == 0 and "project.torch" not in checked.stdout
    assert "base.txt: driver 550.54.15 runs CUDA 12.1" in checked.stdout
    result = envkit("add", "--project", str(tmp_path / "requirements.txt"), *H100)
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "requirements.txt").read_text(encoding="utf-8") == "-r base.txt\neinops\n"
    assert "torch==2.1.0+cu121  # ours\n" in (tmp_path / "base.txt").read_text(encoding="utf-8")


def test_a_uv_workspace_root_names_its_member(tmp_path: Path) -> None:
    """A virtual workspace root ([tool.uv.workspace], no [project]): check said it names no torch
    (fix: envkit add torch), and that add was 'no [project] table; uv init makes one'. Both now say
    it is a workspace root and name the member that has torch."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.uv.workspace]\nmembers = ["packages/*"]\n', encoding="utf-8"
    )
    member = tmp_path / "packages" / "trainer"
    member.mkdir(parents=True)
    (member / "pyproject.toml").write_text(UV_INIT.replace('"numpy>=1.26"', '"torch>=2.4"'), encoding="utf-8")
    for command in ("add", "check"):
        result = envkit(command, "--project", str(tmp_path), *H100)
        assert_input_error(result, "a uv workspace root")
        assert f"--project {member}" in result.stderr


def test_on_a_node_without_a_gpu_the_manifests_cuda_is_kept(tmp_path: Path) -> None:
    """A login node (no NVIDIA GPU, no --driver/--gpu): envkit add turned torch==2.1.0+cu118 into
    torch==2.1.0+cpu, and check --project offered that add as the fix of its spec.mirror failure. The
    edit keeps the CUDA the file names, says so, and check then finds nothing to fix."""
    from envkit.facts import Facts
    from envkit.planning import target as target_module

    path = tmp_path / "requirements.txt"
    path.write_text("numpy\ntorch==2.1.0+cu118\n", encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:  # this machine: Linux, no NVIDIA driver or GPU
        mp.setattr(target_module, "detect_for_plan", lambda *a, **kw: Facts())
        before = envkit("check", "--project", str(path), "--python", "3.11")
        assert before.exit_code == 1 and "PyPI has no +cu118 build" in before.stdout
        result = envkit("add", "--project", str(path), "--python", "3.11")
        assert result.exit_code == 0, result.stderr
        assert "torch==2.1.0+cu118\n" in path.read_text(encoding="utf-8")
        assert "--index-url https://download.pytorch.org/whl/cu118\n" in path.read_text(encoding="utf-8")
        assert "keeps its CUDA" in result.stderr
        assert envkit("check", "--project", str(path), "--python", "3.11").exit_code == 0
