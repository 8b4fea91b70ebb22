"""``envkit check --project`` (and ``spec --check`` on a pyproject.toml): the project as written,
judged for the target by spec --check's own checks, each failure's fix led by the ``envkit add``
that makes it right; after that add, nothing it can fix is left."""

from __future__ import annotations

import json
from pathlib import Path

from tests.unit.test_bad_input import envkit

from .conftest import H100
from .test_edits import CU126, UV_INIT


def _checks(result: object) -> dict[str, dict[str, str]]:
    data = json.loads(result.stdout)  # type: ignore[attr-defined]
    assert data["schema"] == "envkit.spec-check/1"
    return {c["id"]: c for c in data["checks"]}


def test_pypi_torch_for_a_driver_550_fails_and_add_is_the_fix(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("numpy\ntorch>=2.4\n", encoding="utf-8")
    result = envkit("check", "--project", str(tmp_path), *H100, "--platform", "linux-x86_64", "--json")
    assert result.exit_code == 1, result.stderr
    driver = _checks(result)["spec.driver"]
    assert driver["status"] == "fail" and "cannot run CUDA 13" in driver["summary"]
    assert driver["fix"].startswith(f"envkit add torch --project {tmp_path} --driver 550.54.15 --gpu H100")

    assert envkit("add", "--project", str(tmp_path), *H100, "--platform", "linux-x86_64").exit_code == 0
    after = envkit("check", "--project", str(tmp_path), *H100, "--platform", "linux-x86_64", "--json")
    assert after.exit_code == 0, after.stdout
    checks = _checks(after)
    # 550 runs CUDA 12.6 by minor-version compatibility, and the wheel has sm_90 SASS: nothing needs
    # the PTX JIT that needs 560 (rules.build_on_driver), so what `envkit add` wrote passes.
    assert checks["spec.driver"]["status"] == "pass"
    assert "minor-version compatibility" in checks["spec.driver"]["summary"]


def test_spec_check_reads_a_uv_pyproject_per_platform(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(UV_INIT.replace('"numpy>=1.26",', '"torch==2.14.1",'), encoding="utf-8")
    assert envkit("add", "--project", str(path), *H100, "--platform", "linux-x86_64").exit_code == 0
    linux = _checks(envkit("spec", "--check", str(path), *H100, "--platform", "linux-x86_64", "--json"))
    assert linux["spec.channel"]["status"] == "pass" and linux["spec.arch"]["status"] == "pass"
    mac = _checks(
        envkit("spec", "--check", str(path), "--python", "3.11", "--platform", "macos-arm64", "--json")
    )
    assert mac["spec.driver"]["summary"].endswith(
        "the CPU build needs no driver"
    )  # PyPI's, not the cu126 index


def test_a_project_without_torch_says_so(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(UV_INIT, encoding="utf-8")
    result = envkit("check", "--project", str(tmp_path), *H100, "--json")
    assert result.exit_code == 0
    assert _checks(result)["project.torch"]["fix"].startswith("envkit add torch")


def test_after_a_cross_platform_add_check_finds_nothing_on_macos(tmp_path: Path) -> None:
    """envkit agrees with itself: what `envkit add` writes for Linux + macOS (the cu126 index as
    --index-url, PyPI as an extra index, torch==2.14.1 for darwin) gets macOS its PyPI build, since
    the cu126 index has no macOS wheels; check judged it by the cu126 index ('torch 2.14.1 has no
    cu126 build for macos-arm64', exit 1), in a requirements.txt and an environment.yml's pip:."""
    platforms = ("--platform", "linux-x86_64", "--platform", "macos-arm64")
    (tmp_path / "requirements.txt").write_text("numpy\ntorch\n", encoding="utf-8")
    (tmp_path / "environment.yml").write_text(
        "name: x\ndependencies:\n  - pip\n  - pip:\n    - torch\n", encoding="utf-8"
    )
    for name in ("requirements.txt", "environment.yml"):
        path = str(tmp_path / name)
        assert envkit("add", "--project", path, *H100, *platforms).exit_code == 0
        result = envkit("check", "--project", path, *H100, *platforms, "--json")
        assert result.exit_code == 0, result.stdout
        mac = [c for c in json.loads(result.stdout)["checks"] if "macos-arm64" in c["summary"]]
        driver = next(c for c in mac if c["id"] == "spec.driver")
        assert driver["summary"].endswith("the CPU build needs no driver")
    # a file whose only index is a CUDA one has no torch for macOS: still a failure
    (tmp_path / "requirements.txt").write_text(f"--index-url {CU126}\ntorch==2.14.1\n", encoding="utf-8")
    only = envkit("check", "--project", str(tmp_path / "requirements.txt"), "--platform", "macos-arm64")
    assert only.exit_code == 1 and "has no cu126 build for macos-arm64" in only.stdout


def test_a_local_version_pin_with_no_torch_index_fails(tmp_path: Path) -> None:
    """torch==2.1.0+cu118 and no index: pip and uv look on PyPI, which has no +cu118 build ('No
    matching distribution'); check passed it ('torch 2.1.0 is published on its index'). spec --check
    says so too; after envkit add, the uv project names its index and passes."""
    path = tmp_path / "pyproject.toml"
    path.write_text(UV_INIT.replace('"numpy>=1.26",', '"torch==2.1.0+cu118",'), encoding="utf-8")
    result = envkit("check", "--project", str(path), *H100, "--json")
    assert result.exit_code == 1
    mirror = _checks(result)["spec.mirror"]
    assert mirror["status"] == "fail" and "PyPI has no +cu118 build" in mirror["summary"]
    assert mirror["fix"].startswith("envkit add torch")
    assert envkit("add", "--project", str(path), *H100).exit_code == 0
    assert envkit("check", "--project", str(path), *H100).exit_code == 0
