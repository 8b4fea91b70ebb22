"""Where a conda channel lives: the user's ``.condarc`` (``channel_alias``, ``custom_channels``,
``default_channels``), read as conda reads it, so that a backend without conda (rattler) and a lock
without conda-lock's conda find the same mirrors conda would.

conda reads the files of ``SEARCH_PATH`` in order, later ones winning for a setting
(conda/conda:conda/base/constants.py@0f64223f, SEARCH_PATH; the ``condarc.d/`` folders hold
``*.yml`` / ``*.yaml``), then ``$CONDARC``. A channel NAME lives at ``{custom_channels[NAME]}/NAME``
when the user mirrors it, else ``{channel_alias}/NAME`` (default https://conda.anaconda.org);
``defaults`` is ``default_channels`` (default repo.anaconda.com's main and r: DEFAULT_CHANNELS_UNIX
in the same file). A channel given as a URL is used as it is.

URLs may carry credentials (``https://user:pass@host``, an anaconda.org token ``/t/TOKEN/``): they
are kept as read, for the installer's own environment, and shown only through envkit.redact.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Optional

from envkit.errors import InputError, check_text

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["DEFAULT_CHANNELS", "DEFAULT_CHANNEL_ALIAS", "CondaConfig", "condarc_paths", "read_condarc"]

DEFAULT_CHANNEL_ALIAS: Final = "https://conda.anaconda.org"
DEFAULT_CHANNELS: Final = ("https://repo.anaconda.com/pkgs/main", "https://repo.anaconda.com/pkgs/r")
_SEARCH_PATH: Final = (
    "/etc/conda/.condarc",
    "/etc/conda/condarc",
    "/etc/conda/condarc.d/",
    "/var/lib/conda/.condarc",
    "/var/lib/conda/condarc",
    "/var/lib/conda/condarc.d/",
    "$CONDA_ROOT/.condarc",
    "$CONDA_ROOT/condarc",
    "$CONDA_ROOT/condarc.d/",
    "$XDG_CONFIG_HOME/conda/.condarc",
    "$XDG_CONFIG_HOME/conda/condarc",
    "$XDG_CONFIG_HOME/conda/condarc.d/",
    "~/.config/conda/.condarc",
    "~/.config/conda/condarc",
    "~/.config/conda/condarc.d/",
    "~/.conda/.condarc",
    "~/.conda/condarc",
    "~/.conda/condarc.d/",
    "~/.condarc",
    "$CONDA_PREFIX/.condarc",
    "$CONDA_PREFIX/condarc",
    "$CONDA_PREFIX/condarc.d/",
    "$CONDARC",
)


@dataclass(frozen=True)
class CondaConfig:
    """The channel settings of the user's .condarc files (conda's defaults where none says)."""

    channel_alias: str = DEFAULT_CHANNEL_ALIAS
    custom_channels: tuple[tuple[str, str], ...] = ()
    default_channels: tuple[str, ...] = DEFAULT_CHANNELS
    files: tuple[Path, ...] = field(default=())  # the files that were read, in order

    def channel_urls(self, channel: str) -> tuple[str, ...]:
        """Where ``channel`` lives: a URL as it is, ``defaults`` as default_channels, a name
        through custom_channels or the channel_alias."""
        if "://" in channel:
            return (channel.rstrip("/"),)
        if channel == "defaults":
            return tuple(self._named(c) for c in self.default_channels if c != "defaults")
        return (self._named(channel),)

    def _named(self, channel: str) -> str:
        if "://" in channel:
            return channel.rstrip("/")
        base = dict(self.custom_channels).get(channel, self.channel_alias)
        return f"{base.rstrip('/')}/{channel}"

    def describe(self) -> str:
        """Where the settings came from, for a note."""
        return ", ".join(str(f) for f in self.files) if self.files else "conda's defaults (no .condarc)"


def _expand(entry: str, env: Mapping[str, str]) -> Optional[Path]:
    """A SEARCH_PATH entry with its variable or ``~`` filled in; None when the variable is unset."""
    if entry.startswith("$"):
        name, _, rest = entry[1:].partition("/")
        value = env.get(name)
        if not value:
            return None
        return Path(value) / rest if rest else Path(value)
    if entry.startswith("~"):
        home = env.get("HOME")
        if not home:
            return None
        return Path(home) / entry[2:]
    return Path(entry)


def condarc_paths(env: Mapping[str, str]) -> list[Path]:
    """The .condarc files conda would read for this environment, in its order, that exist."""
    found: list[Path] = []
    for entry in _SEARCH_PATH:
        path = _expand(entry, env)
        if path is None:
            continue
        if entry.endswith("/"):
            if path.is_dir():
                found += sorted(p for p in path.iterdir() if p.suffix in (".yml", ".yaml") and p.is_file())
        elif path.is_file() and path not in found:
            found.append(path)
    return found


def _load(path: Path) -> dict[str, Any]:
    yaml: Any = importlib.import_module("yaml")  # a runtime dependency without type stubs
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise InputError(f"{path}: not valid YAML{where}", hint="conda cannot read it either") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(f"{path}: a .condarc is a mapping of settings, not {type(data).__name__}")
    return data


def _text(path: Path, key: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{path}: {key} must be a URL, not {value!r}")
    # A newline or an escape sequence in a channel URL split envkit's "channels:" line and went on
    # to the installer as written: one check of a value, as for --mirror.
    return check_text(value.strip(), f"{path}: {key}", spaces=False)


def read_condarc(env: Mapping[str, str]) -> CondaConfig:
    """The channel settings of the .condarc files conda reads here (later files win, as in conda)."""
    alias = DEFAULT_CHANNEL_ALIAS
    custom: dict[str, str] = {}
    defaults: tuple[str, ...] = DEFAULT_CHANNELS
    files = condarc_paths(env)
    for path in files:
        data = _load(path)
        if "channel_alias" in data:
            alias = _text(path, "channel_alias", data["channel_alias"])
        if "custom_channels" in data:
            table = data["custom_channels"] or {}
            if not isinstance(table, dict):
                raise InputError(f"{path}: custom_channels must map channel names to URLs")
            custom.update({str(k): _text(path, f"custom_channels.{k}", v) for k, v in table.items()})
        if "default_channels" in data:
            listed = data["default_channels"] or []
            if not isinstance(listed, list):
                raise InputError(f"{path}: default_channels must be a list of URLs or names")
            defaults = tuple(_text(path, "default_channels", v) for v in listed) or DEFAULT_CHANNELS
    if env.get("CONDA_CHANNEL_ALIAS"):  # conda reads every setting from CONDA_<NAME> too, over the files
        alias = check_text(env["CONDA_CHANNEL_ALIAS"].strip(), "CONDA_CHANNEL_ALIAS", spaces=False)
    return CondaConfig(alias, tuple(sorted(custom.items())), defaults, tuple(files))
