"""scripts/update_conda_forge.py reads what the feedstock's CI built: main's (and release branches')
first-parent history, never the commits of a pull request merged into it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "update_conda_forge", ROOT / "scripts" / "update_conda_forge.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


ucf = _load()


def _commit(repo: Path, version: str, builds: dict[str, str], message: str) -> None:
    (repo / "recipe" / "meta.yaml").write_text(f'{{% set version = "{version}" %}}\n', encoding="utf-8")
    support = repo / ".ci_support"
    for old in support.glob("*.yaml"):
        old.unlink()
    for name, (platform, cuda) in ((n, b.split()) for n, b in builds.items()):
        text = f"target_platform:\n- {platform}\ncuda_compiler_version:\n- '{cuda}'\n"
        (support / f"{name}.yaml").write_text(text, encoding="utf-8")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", message], check=True)


def test_a_merged_pull_requests_own_commits_are_no_release(tmp_path: Path) -> None:
    repo = tmp_path / "feedstock"
    (repo / "recipe").mkdir(parents=True)
    (repo / ".ci_support").mkdir()
    git = ["git", "-C", str(repo)]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run([*git, "config", "user.name", "t"], check=True)
    subprocess.run([*git, "config", "user.email", "t@t"], check=True)
    _commit(repo, "2.8.0", {"linux_64_cuda": "linux-64 12.9"}, "2.8.0")
    subprocess.run([*git, "checkout", "-q", "-b", "bump"], check=True)
    # The pull request tries 2.9.0 with a Windows CUDA 12.9 build, then ships 2.9.1 without it.
    _commit(repo, "2.9.0", {"linux_64_cuda": "linux-64 12.9", "win_64_cuda": "win-64 12.9"}, "Bump to 2.9.0")
    _commit(repo, "2.9.1", {"linux_64_cuda": "linux-64 12.9", "win_64_cpu": "win-64 None"}, "Bump to 2.9.1")
    subprocess.run([*git, "checkout", "-q", "main"], check=True)
    subprocess.run([*git, "merge", "-q", "--no-ff", "-m", "Merge pull request #448", "bump"], check=True)
    found = ucf.versions_by_commit(repo)
    assert sorted(found) == ["2.8.0", "2.9.1"]
    assert [ucf.builds(repo, c) for c in found["2.9.1"]] == [{"linux-64": ["12.9"]}]
