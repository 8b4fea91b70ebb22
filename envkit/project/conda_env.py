"""An ``environment.yml``: the conda route (its channels and the torch match specs, the plan's
``conda`` section: conda-forge's ``pytorch=V=cuda*`` with ``cuda-version``, or the pytorch
channel's ``pytorch-cuda``), or the pip route (the ``pip:`` section edited as a requirements file,
envkit.project.requirements).

Edited with ruamel.yaml's round-trip loader and dumper, which keep comments, key order, quoting
and anchors (an alias stays an alias: nothing is expanded, so a "billion laughs" file costs no
more than its text), with the file's own indentation (``load_yaml_guess_indent``). One quirk of
ruamel's: a comment on the line of an alias (``key: *anchor  # why``) moves to a line of its own
when the file is written; ``--dry-run`` shows it.
"""

from __future__ import annotations

import importlib
import io
from typing import TYPE_CHECKING, Any, Final, Optional

from envkit.errors import InputError
from envkit.project.manifest import Found, edit_sequence, like
from envkit.project.requirements import edit_lines, select
from envkit.project.want import TORCH_PACKAGES
from envkit.specs.read import environment_spec, parse_conda_spec

if TYPE_CHECKING:
    from pathlib import Path

    from envkit.project.want import Want
    from envkit.specs.read import SpecFile

__all__ = ["KIND", "apply", "claims", "read", "view"]

KIND: Final = "environment.yml"
NAMES: Final = ("environment.yml", "environment.yaml")
# conda package names of the torch build and what selects it: replaced as one set.
_TORCH_CONDA: Final = ("pytorch", "pytorch-gpu", "pytorch-cpu", "torch")
_SELECTORS: Final = ("pytorch-cuda", "cudatoolkit", "cuda-version", "cpuonly", "pytorch-mutex")
_COMPANIONS: Final = {"torchvision": "torchvision", "torchaudio": "torchaudio"}
# Channels that were there for the old route's torch alone (pytorch/pytorch#138506: the pytorch
# channel's last torch is 2.5.1; nvidia served its pytorch-cuda).
_OLD_ROUTE: Final = ("pytorch", "nvidia")


def claims(path: Path, text: str) -> bool:
    return path.name in NAMES or (path.suffix in (".yml", ".yaml") and "dependencies" in text)


def _yaml(text: str) -> tuple[Any, Any]:
    """(the round-trip YAML object set to the file's indentation, the loaded document)."""
    ruamel: Any = importlib.import_module("ruamel.yaml")
    util: Any = importlib.import_module("ruamel.yaml.util")
    _data, indent, block_seq_indent = util.load_yaml_guess_indent(text)
    yaml = ruamel.YAML()  # typ="rt": round trip
    yaml.preserve_quotes = True
    yaml.width = 4096  # never rewrap a long line
    yaml.indent(mapping=indent or 2, sequence=indent or 2, offset=block_seq_indent or 0)
    return yaml, yaml.load(text)


def _load(path: Path, text: str) -> tuple[Any, Any]:
    from envkit._files import MAX_NESTING  # the same limits as every file envkit reads

    ruamel_error: Any = importlib.import_module("ruamel.yaml.error")
    try:
        yaml, data = _yaml(text)
    except RecursionError:
        raise InputError(f"{path}: nested more than {MAX_NESTING} levels deep") from None
    except ruamel_error.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        what = getattr(exc, "problem", None) or (str(exc).splitlines() or ["?"])[0]
        raise InputError(f"{path}: not valid YAML{where}: {what}") from None
    if not isinstance(data, dict) or not isinstance(data.get("dependencies"), list):
        raise InputError(f"{path}: not a conda environment file (no 'dependencies' list)")
    return yaml, data


def _conda_name(item: Any) -> Optional[str]:
    pin = parse_conda_spec(str(item)) if isinstance(item, str) else None
    return pin.name if pin else None


def _pip_section(deps: list[Any]) -> Optional[list[Any]]:
    return next((d["pip"] for d in deps if isinstance(d, dict) and isinstance(d.get("pip"), list)), None)


def read(path: Path, text: str) -> Found:
    _yaml_obj, data = _load(path, text)
    deps = data["dependencies"]
    conda_names = {_conda_name(d) for d in deps}
    pip = [str(p) for p in _pip_section(deps) or []]
    torch_conda = next((str(d) for d in deps if _conda_name(d) in _TORCH_CONDA), None)
    from envkit.project.requirements import read as read_lines

    pip_found = read_lines(path, "\n".join(pip))
    if torch_conda is not None:
        pin = parse_conda_spec(torch_conda)
        names = tuple(n for n in TORCH_PACKAGES if n == "torch" or n in conda_names)
        rng = pin.spec if pin is not None and pin.spec is not None and len(pin.spec) else None
        return Found(path, KIND, torch_conda, rng, names, "conda", _python(deps))
    if pip_found.torch is not None:
        return Found(
            path, KIND, pip_found.torch, pip_found.torch_range, pip_found.packages, "pip", _python(deps)
        )
    names = tuple(n for n in TORCH_PACKAGES if n in conda_names)
    return Found(path, KIND, None, None, names, "conda", _python(deps))


def _python(deps: list[Any]) -> Optional[str]:
    line = next((str(d) for d in deps if _conda_name(d) == "python"), None)
    pin = parse_conda_spec(line) if line else None
    if pin is None or pin.spec is None:
        return None
    for spec in pin.spec:
        parts = spec.version.rstrip("*").rstrip(".").split(".")
        if spec.operator in ("==", ">=", "~=") and len(parts) >= 2:
            return f"{parts[0]}.{parts[1]}"
    return None


def view(path: Path, text: str, platform: str, python: Optional[str]) -> SpecFile:
    _yaml_obj, data = _load(path, text)
    plain = {
        "channels": [str(c) for c in data.get("channels") or []],
        "dependencies": [
            {"pip": select([str(p) for p in d["pip"]], platform, python)} if isinstance(d, dict) else d
            for d in data["dependencies"]
            if isinstance(d, (str, int, float)) or (isinstance(d, dict) and isinstance(d.get("pip"), list))
        ],
    }
    return environment_spec(plain, str(path))


def _conda_deps(want: Want, path: Path) -> tuple[list[str], list[str]]:
    """(channels, the torch match specs) of the plan's conda section, one for every platform."""
    specs = {tuple(s.plan.conda.dependencies) if s.plan.conda else () for s in want.sources}
    if len(specs) > 1:
        builds = "; ".join(f"{', '.join(s.platforms)}: {s.plan.candidate}" for s in want.sources)
        raise InputError(
            f"{path}: an environment.yml holds one set of packages for every platform, and the "
            f"platforms need different ones ({builds})",
            hint="give one --platform per environment file, or use pixi.toml (per-platform targets)",
        )
    source = want.sources[0]
    conda = source.plan.conda
    if conda is None:
        raise InputError(f"{path}: no conda route for {source.plan.candidate}", hint="use --channel pip")
    wanted = set(want.packages)
    deps = []
    for dep in conda.dependencies:
        name = _conda_name(dep)
        if name == "python":
            continue  # the file's own Python line stays
        if name in _COMPANIONS and _COMPANIONS[name] not in wanted:
            continue
        deps.append(dep)
    return list(conda.channels), deps


def _edit_conda(data: Any, want: Want, path: Path) -> bool:
    channels, torch_deps = _conda_deps(want, path)
    changed = False
    current = [str(c) for c in data.get("channels") or []]
    forge = "conda-forge" in channels
    kept = [
        c
        for c in current
        if c not in channels and not (forge and c.rstrip("/").rsplit("/", 1)[-1] in _OLD_ROUTE)
    ]
    new_channels = [*channels, *kept]
    if "channels" not in data:
        data.insert(0 if "name" not in data else 1, "channels", new_channels)
        changed = True
    elif not isinstance(data["channels"], list):
        data["channels"] = new_channels
        changed = True
    elif current != new_channels:
        changed |= edit_sequence(data["channels"], new_channels)
    deps = data["dependencies"]
    managed = {*_TORCH_CONDA, *_SELECTORS, *(n for n in _COMPANIONS if n in want.packages)}
    by_name = {_conda_name(d): d for d in torch_deps}
    new: list[Any] = []
    placed = False
    for item in deps:
        name = _conda_name(item)
        if name not in managed:
            new.append(item)
            continue
        if not placed:
            new += torch_deps
            placed = True
        elif name in by_name:
            continue
    if not placed:
        at = next((i for i, d in enumerate(new) if isinstance(d, dict)), len(new))
        new[at:at] = torch_deps
    # pip's torch lines go: conda brings torch now, and two torch installs break each other
    pip = _pip_section(deps)
    if pip is not None:
        from envkit.project.manifest import requirement_name

        kept_pip = [p for p in pip if requirement_name(str(p)) not in want.packages]
        changed |= edit_sequence(pip, kept_pip)
    return edit_sequence(deps, new) or changed


def _edit_pip(data: Any, want: Want, path: Path) -> bool:
    deps = data["dependencies"]
    changed = False
    conda_torch = [d for d in deps if _conda_name(d) in (*_TORCH_CONDA, *_SELECTORS, *_COMPANIONS)]
    if conda_torch:  # torch comes through pip: conda's torch packages would be a second install
        changed |= edit_sequence(deps, [d for d in deps if d not in conda_torch])
    pip = _pip_section(deps)
    if pip is None:
        if not any(_conda_name(d) == "pip" for d in deps):
            deps.append("pip")
        deps.append({"pip": []})
        pip = _pip_section(deps)
        changed = True
    assert pip is not None
    lines = [str(p) for p in pip]
    new = edit_lines(lines, want, label=f"{path} (pip:)")
    return edit_sequence(pip, new) or changed


def apply(path: Path, text: str, want: Want) -> str:
    # ruamel writes "\n" and keeps a CR in the comment it ends: the edit works on "\n", then the
    # file's own line breaks are put back (manifest.like)
    yaml, data = _load(path, text.replace("\r\n", "\n"))
    channel = want.sources[0].plan.channel.value
    changed = _edit_conda(data, want, path) if channel == "conda" else _edit_pip(data, want, path)
    if not changed:
        return text
    out = io.StringIO()
    yaml.dump(data, out)
    return like(out.getvalue(), text)
