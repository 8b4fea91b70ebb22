"""The project manifests people already have, edited in place so that their own installer gets the
torch build envkit resolved (``envkit add``), and read back to judge what they would install
(``envkit check --project``).

One module per manifest kind, each satisfying :class:`envkit.project.manifest.Manifest` (the way
pre-commit's ``languages/*.py`` each satisfy one Protocol): ``uv`` (pyproject.toml with uv's
indexes), ``poetry`` (pyproject.toml with ``[tool.poetry]``), ``pixi`` (pixi.toml),
``conda_env`` (environment.yml) and ``requirements`` (requirements.txt /
requirements.in).
``KINDS`` below names them; ``kind_of`` names the one that reads a file; envkit.project.find
finds them in a folder.

What every edit keeps: the user's comments, order and formatting (tomlkit and ruamel.yaml
round-trip what they do not touch), and idempotence: a file that already says what the plan wants
is returned byte for byte. Nothing here runs a process or writes a file: envkit.commands.add does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Optional

from envkit.project import conda_env, pixi, poetry, requirements, uv

if TYPE_CHECKING:
    from pathlib import Path

    from envkit.project.manifest import Manifest

__all__ = ["FILES", "KINDS", "kind_of"]

# Every kind, in the order a folder's files are tried (the first that claims a file reads it).
KINDS: Final[tuple[Manifest, ...]] = (pixi, poetry, uv, conda_env, requirements)
# The files a project folder is searched for, in the order one is chosen when none names torch.
FILES: Final = (
    "pixi.toml",
    "pyproject.toml",
    "environment.yml",
    "environment.yaml",
    "requirements.in",
    "requirements.txt",
)


def kind_of(path: Path, text: str) -> Optional[Manifest]:
    """The kind that reads ``path`` (None: envkit edits no such file)."""
    return next((k for k in KINDS if k.claims(path, text)), None)
