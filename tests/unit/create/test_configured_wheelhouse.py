"""create --offline without --wheelhouse takes the folder pip is configured to find wheels in
(pip's own `pip config list`, real pip, a real config file): the variable over the files,
[install] over [global], local folders only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envkit.create.prepare import CreateRequest, check_request, configured_wheelhouse
from envkit.errors import InputError
from envkit.system import System


def _system(tmp_path: Path, config: str, **env: str) -> System:
    conf = tmp_path / "pip.conf"
    conf.write_text(config)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return System(env={**clean, "PIP_CONFIG_FILE": str(conf), **env})


def test_install_over_global_and_urls_skipped(tmp_path: Path) -> None:
    wheels, other = tmp_path / "wheels", tmp_path / "other"
    wheels.mkdir()
    other.mkdir()
    config = f"[global]\nfind-links = {other}\n[install]\nfind-links =\n    https://example.invalid/w/\n    {wheels}\n"
    assert configured_wheelhouse(_system(tmp_path, config)) == str(wheels)
    # The variable wins over every file; a file:// URL names a folder too.
    assert configured_wheelhouse(_system(tmp_path, config, PIP_FIND_LINKS=f"file://{other}")) == str(other)


def test_nothing_configured_is_none_and_offline_still_asks_for_a_wheelhouse(tmp_path: Path) -> None:
    system = _system(tmp_path, "[global]\ntimeout = 60\n")
    assert configured_wheelhouse(system) is None
    missing = _system(tmp_path, f"[global]\nfind-links = {tmp_path / 'not-there'}\n")
    assert configured_wheelhouse(missing) is None
    with pytest.raises(InputError, match="--offline needs --wheelhouse DIR") as err:
        check_request(system, CreateRequest(name="pt2", offline=True))
    assert "pip config list" in (err.value.hint or "")


def test_a_folder_written_as_pip_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # pip expands a leading ~ (pip/_internal/models/search_scope.py, SearchScope.create) and reads
    # file: URLs as paths (pip/_internal/utils/urls.py, url_to_path: localhost, %-escapes).
    home = tmp_path / "home"
    (home / "wheels").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    found = configured_wheelhouse(_system(tmp_path, "[global]\nfind-links = ~/wheels\n", HOME=str(home)))
    assert found == str(home / "wheels")
    spaced = tmp_path / "my wheels"
    spaced.mkdir()
    quoted = str(spaced).replace(" ", "%20")
    url = f"file://localhost{quoted}"
    assert configured_wheelhouse(_system(tmp_path, f"[global]\nfind-links = {url}\n")) == str(spaced)
    # Another host's file: URL is no local folder.
    elsewhere = f"[global]\nfind-links = file://files.example{quoted}\n"
    assert configured_wheelhouse(_system(tmp_path, elsewhere)) is None
