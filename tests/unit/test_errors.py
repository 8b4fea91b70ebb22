"""The error map: every error class in envkit.errors with a documented code, a class that forgets its
code refused, and the README's exit-code table equal to EXIT_CODES."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import envkit.errors as errors
from envkit.errors import (
    EXIT_CHECK_FAILED,
    EXIT_CODES,
    EXIT_INTERNAL,
    EXIT_NO_BUILD,
    EXIT_STEP_FAILED,
    EXIT_USAGE,
    CreateFailed,
    EnvkitError,
    InputError,
    KnowledgeError,
    LockFailed,
    NoBuildError,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "envkit"


def error_classes() -> list[type[EnvkitError]]:
    found: list[type[EnvkitError]] = []
    pending = list(EnvkitError.__subclasses__())
    while pending:
        cls = pending.pop()
        if cls.__module__.startswith("envkit."):  # not the classes the tests below make
            found.append(cls)
        pending += cls.__subclasses__()
    return sorted(found, key=lambda c: c.__name__)


def test_the_codes_of_each_class() -> None:
    assert InputError.exit_code == EXIT_USAGE == 2
    assert NoBuildError.exit_code == EXIT_NO_BUILD == 3
    # An installer or conda-lock step is not "a check failed" (1): it has its own code.
    assert CreateFailed.exit_code == LockFailed.exit_code == EXIT_STEP_FAILED == 4
    assert EXIT_STEP_FAILED != EXIT_CHECK_FAILED
    # The knowledge base is envkit's own data: a bad row is envkit's bug.
    assert KnowledgeError.exit_code == EXIT_INTERNAL == 70


def test_the_classes_are_importable_where_they_are_used() -> None:
    import envkit.create.install
    import envkit.create.lock
    import envkit.knowledge
    import envkit.knowledge._table

    assert envkit.create.install.CreateFailed is CreateFailed
    assert envkit.create.lock.LockFailed is LockFailed
    assert envkit.knowledge.KnowledgeError is KnowledgeError
    assert envkit.knowledge._table.KnowledgeError is KnowledgeError


def test_every_error_class_of_envkit_lives_in_errors_py() -> None:
    """Read from the source, so a module nobody imported in this test run is covered too."""
    names = {
        name
        for name in errors.__all__
        if isinstance(getattr(errors, name), type) and issubclass(getattr(errors, name), EnvkitError)
    }
    elsewhere = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        text = path.read_text(encoding="utf-8")
        if "class " not in text or not any(name in text for name in names):
            continue  # no class here can name one of them as a base (parsing every module: ~1 s)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                if bases & names:
                    elsewhere.append(f"{path.relative_to(ROOT)}: class {node.name}")
    assert elsewhere == []
    # And each class envkit.errors defines is in its __all__ (what the scan above looks for).
    defined = {c.__name__ for c in error_classes() if c.__module__ == "envkit.errors"}
    assert defined == names - {"EnvkitError"}


def test_every_error_class_declares_a_documented_code_in_its_own_body() -> None:
    import envkit.create.install
    import envkit.create.lock
    import envkit.knowledge  # noqa: F401 -- their classes are the ones checked

    classes = error_classes()
    assert {c.__name__ for c in classes} >= {"InputError", "NoBuildError", "CreateFailed", "LockFailed"}
    documented = {code for code, _ in EXIT_CODES}
    for cls in classes:
        assert "exit_code" in cls.__dict__, cls
        assert cls.exit_code in documented, cls


def test_a_subclass_that_forgets_its_code_is_refused() -> None:
    with pytest.raises(TypeError, match="Forgetful must declare its exit code"):

        class Forgetful(EnvkitError):
            pass

    # Inheriting a code is forgetting it too: a subclass says which code it means.
    with pytest.raises(TypeError, match="AlsoForgetful must declare its exit code"):

        class AlsoForgetful(InputError):
            pass


@pytest.mark.parametrize("code", [0, 5, 130, True, "2", 2.0, None])
def test_an_undocumented_code_is_refused(code: object) -> None:
    with pytest.raises(TypeError, match=r"Odd\.exit_code = .* is not a documented error code"):
        type("Odd", (EnvkitError,), {"exit_code": code})


def test_a_subclass_with_its_code_is_taken() -> None:
    class BadTemplate(InputError):
        exit_code = EXIT_USAGE

    error = BadTemplate("no such template")
    assert error.exit_code == 2 and error.message == "no such template"


def test_the_codes_are_distinct_and_sorted() -> None:
    codes = [code for code, _ in EXIT_CODES]
    assert codes == sorted(set(codes))
    assert all(meaning and "\n" not in meaning and "|" not in meaning for _, meaning in EXIT_CODES)


def readme_exit_codes() -> list[tuple[int, str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", section, flags=re.MULTILINE)
    return [(int(code), meaning) for code, meaning in rows]


def test_the_readme_table_is_exit_codes() -> None:
    assert readme_exit_codes() == list(EXIT_CODES)
