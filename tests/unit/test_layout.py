"""The probes run in the TARGET interpreter (Python >= 3.8, stdlib + torch): they import nothing from
envkit. (The packages' own import rules are import-linter contracts in pyproject.toml, run by CI.)"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from envkit.system import PROBES_DIR

# What a probe may import besides the standard library.
ALLOWED = {"torch", "triton", "envkit_probe_util"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("probe", sorted(PROBES_DIR.glob("*.py")), ids=lambda p: p.name)
def test_a_probe_imports_only_the_standard_library_and_torch(probe: Path) -> None:
    foreign = {n for n in _imports(probe) if n not in sys.stdlib_module_names and n not in ALLOWED}
    assert not foreign, f"{probe.name} imports {sorted(foreign)}"


def test_the_rule_catches_an_envkit_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad_probe.py"
    bad.write_text("import json\nfrom envkit.facts import Facts\nimport torch.cuda\n", encoding="utf-8")
    assert {n for n in _imports(bad) if n not in sys.stdlib_module_names and n not in ALLOWED} == {"envkit"}
