"""The probes run in the TARGET interpreter (Python >= 3.8, stdlib + torch): they import nothing from
envkit; and no module of envkit imports itself round a circle. (The packages' own import rules are import-linter contracts in pyproject.toml, run by CI.)"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import grimp
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


def _circles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of a graph (Tarjan's strongly connected components of more than one)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(imports[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            part = []
            while True:
                other = stack.pop()
                part.append(other)
                if other == module:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for module in sorted(imports):
        if module not in index:
            visit(module)
    return found


def test_no_module_of_envkit_imports_itself_round_a_circle() -> None:
    """Every import counts: at the top, inside a function or under TYPE_CHECKING (grimp reads them
    all, as import-linter does). A circle says two modules are one concept or a record is in the
    wrong home (issue 22: system.py <-> detect/nvml*.py, and five inside packages)."""
    graph = grimp.build_graph("envkit", include_external_packages=False)
    imports = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert _circles(imports) == []


def test_the_circle_finder_finds_one() -> None:
    imports = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(imports) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []
