"""The README opens with the two commands a new user runs, and CI runs the second one verbatim."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_readme_opens_with_exactly_two_commands() -> None:
    install, test = readme_commands()
    assert install.endswith("envkit doctor")
    assert "pip install -e '.[test]'" in test
    assert test.endswith("python -m pytest && python -m pytest -m slow")


def test_ci_runs_the_readme_test_command() -> None:
    _install, test = readme_commands()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test in ci
