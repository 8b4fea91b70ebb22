"""scripts/update_extensions.py: the tables round-trip through its writer unchanged, refreshing from
the saved PyPI pages (tests/data/extensions/pypi/) changes nothing, and the metadata reading."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
TABLES = ROOT / "envkit" / "knowledge" / "extensions"
SAVED = ROOT / "tests" / "data" / "extensions" / "pypi"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "update_extensions", ROOT / "scripts" / "update_extensions.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


ue = _load()


def test_refreshing_from_the_saved_pages_changes_nothing(tmp_path: Path) -> None:
    for name in ("flash-attn.toml", "xformers.toml", "bitsandbytes.toml", "torchao.toml"):
        shutil.copy(TABLES / name, tmp_path / name)
        text, findings = ue.refresh(tmp_path / name, ue.Source(SAVED, None), "2026-12-04")
        assert text == (TABLES / name).read_text(encoding="utf-8"), name
        assert all("not in the table" in f or "no files on PyPI" in f for f in findings), findings


def test_the_torch_requirement_of_a_wheels_metadata() -> None:
    metadata = (SAVED / "metadata" / "vllm-0.34.0-cp38-abi3-manylinux_2_28_x86_64.whl.METADATA").read_text()
    assert ue.torch_requirement(metadata) == "==2.14.0"
    assert ue.torch_requirement("Name: x\nRequires-Dist: torch>=2; extra == 'gpu'\n") is None
    assert ue.torch_requirement("Name: x\nRequires-Dist: torch\n") == ""
    assert ue.metadata_headers("Name: x\nVersion: 1\nSummary: s\n\nlong text\n") == "Name: x\nVersion: 1\n"
