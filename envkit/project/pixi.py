"""A ``pixi.toml``: the conda route (conda-forge's ``pytorch`` with its build and ``cuda-version``
in ``[dependencies]``, the channels, and ``[system-requirements] cuda`` so that pixi's solver may
pick CUDA builds at all) or the pip route (``[pypi-dependencies]`` with the variant's ``index``),
as pixi's PyTorch guide lays them out (prefix-dev/pixi:docs/python/pytorch.md, with
docs/source_files/pixi_tomls/pytorch-conda-forge.toml and pytorch-pypi.toml). Platforms whose
builds differ get ``[target.<subdir>.…]`` tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Optional

from envkit._files import parse_toml
from envkit.errors import InputError
from envkit.project.manifest import (
    Found,
    dumped,
    edit_sequence,
    parse_document,
    public_range,
    spaced,
    tomlkit_module,
    unwrap,
)
from envkit.project.want import TORCH_PACKAGES
from envkit.specs.conda import SUBDIRS
from envkit.specs.pixi import conda_text as _conda_text
from envkit.specs.pixi import pixi_head as _head
from envkit.specs.pixi import pixi_platforms as _platforms
from envkit.specs.pixi import read_pixi
from envkit.specs.read import SpecFile, parse_conda_spec

if TYPE_CHECKING:
    from pathlib import Path

    from envkit.project.want import Source, Want

__all__ = ["KIND", "apply", "claims", "read", "view"]

KIND: Final = "pixi"
_TORCH_CONDA: Final = ("pytorch", "pytorch-gpu", "pytorch-cpu")
_SELECTORS: Final = ("pytorch-cuda", "cudatoolkit", "cuda-version", "cpuonly")


def claims(path: Path, text: str) -> bool:
    return path.name == "pixi.toml"


def _features_with_torch(data: Any) -> list[str]:
    """The features (``[feature.<name>.…]``) that name a torch build of their own: pixi's guide keeps
    a CPU and a CUDA torch in features, one per environment (prefix-dev/pixi:docs/source_files/
    pixi_tomls/pytorch-conda-forge-envs.toml@2b47aeb6: pytorch-gpu in feature gpu, pytorch-cpu in cpu)."""
    names = (*_TORCH_CONDA, "torch")
    out = []
    for name, feature in (data.get("feature") or {}).items():
        tables = [feature, *((feature.get("target") or {}).values())]
        kinds = ("dependencies", "pypi-dependencies")
        if any(n in (t.get(kind) or {}) for t in tables for kind in kinds for n in names):
            out.append(str(name))
    return out


def _no_features(path: Path, data: Any) -> None:
    """InputError where torch is in features: envkit reads and edits [dependencies] and [target.*],
    which every environment shares; a torch put there would sit beside each feature's own build."""
    features = _features_with_torch(data)
    if features:
        raise InputError(
            f"{path}: torch is in pixi features ({', '.join(features)}), one build per environment; "
            "envkit add and check read [dependencies] and [target.*] only",
            hint="envkit resolve --channel conda --platform P prints each build; pin it in its feature, "
            "or move torch into [dependencies]",
        )


def read(path: Path, text: str) -> Found:
    data = parse_toml(text, str(path))
    features = _features_with_torch(data)
    conda = {
        k: v
        for t in [data.get("dependencies") or {}]
        + [(v.get("dependencies") or {}) for v in (data.get("target") or {}).values()]
        for k, v in t.items()
    }
    pypi = {
        k: v
        for t in [data.get("pypi-dependencies") or {}]
        + [(v.get("pypi-dependencies") or {}) for v in (data.get("target") or {}).values()]
        for k, v in t.items()
    }
    python_pin = parse_conda_spec(_conda_text("python", conda["python"])) if "python" in conda else None
    python = None
    if python_pin is not None and python_pin.spec is not None:
        for s in python_pin.spec:
            parts = s.version.rstrip("*").rstrip(".").split(".")
            if s.operator in ("==", ">=", "~=") and len(parts) >= 2:
                python = f"{parts[0]}.{parts[1]}"
                break
    platforms = _platforms(data)
    name = next((n for n in _TORCH_CONDA if n in conda), None)
    if name is not None:
        pin = parse_conda_spec(_conda_text(name, conda[name]))
        rng = pin.spec if pin is not None and pin.spec is not None and len(pin.spec) else None
        names = tuple(n for n in TORCH_PACKAGES if n == "torch" or n in conda)
        return Found(path, KIND, _conda_text(name, conda[name]), rng, names, "conda", python, platforms)
    if "torch" in pypi:
        value = pypi["torch"]
        version = value.get("version", "") if isinstance(value, dict) else str(value)
        line = f"torch{version if version and version != '*' else ''}"
        names = tuple(n for n in TORCH_PACKAGES if n in pypi)
        return Found(path, KIND, line, public_range(line), names, "pip", python, platforms)
    names = tuple(n for n in TORCH_PACKAGES if n in conda or n in pypi)
    torch = f"torch (in features {', '.join(features)})" if features else None  # view and apply refuse
    return Found(path, KIND, torch, None, names, "conda", python, platforms)


def view(path: Path, text: str, platform: str, python: Optional[str]) -> SpecFile:
    """What the manifest installs on ``platform``: envkit.specs.pixi's reader (spec --check's too)."""
    _no_features(path, parse_toml(text, str(path)))
    return read_pixi(str(path), text, platform)


def _pixi_value(spec: str) -> Any:
    """A conda match spec of the plan (``pytorch=2.13.0=cuda*``) as pixi writes it."""
    pin = parse_conda_spec(spec)
    name = pin.name if pin else spec
    rest = spec[len(name) :].lstrip("=") if spec.startswith(name) else ""
    version, _, build = rest.partition("=")
    if not version:
        return "*"
    if not version.endswith("*") and not spec[len(name) :].startswith("=="):
        version = f"{version}.*"  # conda's "pytorch=2.13.0" is the 2.13.0 series
    if build:
        table = tomlkit_module().inline_table()
        table.update({"version": version, "build": build})
        return table
    return version


def _set(table: Any, key: str, value: Any) -> bool:
    if unwrap(table.get(key)) == unwrap(value):
        return False
    table[key] = value
    return True


def _drop(table: Any, names: tuple[str, ...]) -> bool:
    gone = [n for n in names if n in table]
    for n in gone:
        del table[n]
    return bool(gone)


def _section(doc: Any, kind: str, subdir: Optional[str], made: list[Any]) -> Any:
    """``[kind]`` or ``[target.<subdir>.kind]``; one made here is listed in ``made`` (to be spaced
    once filled)."""
    if subdir is None:
        if kind not in doc:
            doc[kind] = tomlkit_module().table()
            made.append(doc[kind])
        return doc[kind]
    if "target" not in doc:
        doc["target"] = tomlkit_module().table(True)
    if subdir not in doc["target"]:
        doc["target"][subdir] = tomlkit_module().table(True)
    target = doc["target"][subdir]
    if kind not in target:
        target[kind] = tomlkit_module().table()
        made.append(target[kind])
    return target[kind]


def _groups(want: Want) -> list[tuple[Optional[str], Source]]:
    """(None: the base table, else a target subdir, source): the first source in the base tables,
    the others per platform."""
    out: list[tuple[Optional[str], Source]] = [(None, want.sources[0])]
    for source in want.sources[1:]:
        out += [(subdir, source) for subdir in source.subdirs]
    return out


def _edit_conda(doc: Any, want: Want, path: Path, made: list[Any]) -> bool:
    changed = False
    head = _head(doc)
    channels: list[str] = []
    for source in want.sources:
        if source.plan.conda is None:
            raise InputError(f"{path}: no conda route for {source.plan.candidate}", hint="use --channel pip")
        channels += [c for c in source.plan.conda.channels if c not in channels]
    current = [str(unwrap(c)) for c in head.get("channels") or []]
    named = [c.rstrip("/").rsplit("/", 1)[-1] for c in current]
    missing = [c for c in channels if c not in named]
    if missing:
        changed |= (
            edit_sequence(head["channels"], [*missing, *current])
            if "channels" in head
            else _set(head, "channels", missing)
        )
    cuda = max((s.plan.cuda for s in want.sources if s.plan.cuda is not None), default=None)
    if cuda is not None:
        if "system-requirements" not in doc:
            doc["system-requirements"] = tomlkit_module().table()
            made.append(doc["system-requirements"])
        # The CUDA major the machines have (pixi's __cuda): conda-forge's cuda-version packages of a
        # major need only that major's driver (minor-version compatibility).
        changed |= _set(doc["system-requirements"], "cuda", str(cuda.major))
    wanted = set(want.packages)
    for subdir, source in _groups(want):
        table = _section(doc, "dependencies", subdir, made)
        assert source.plan.conda is not None
        deps = {}
        for spec in source.plan.conda.dependencies:
            pin = parse_conda_spec(spec)
            if (
                pin is None
                or pin.name == "python"
                or (pin.name in ("torchvision", "torchaudio") and pin.name not in wanted)
            ):
                continue
            deps[pin.name] = _pixi_value(spec)
        changed |= _drop(table, tuple(n for n in (*_TORCH_CONDA, *_SELECTORS) if n not in deps))
        for name, value in deps.items():
            changed |= _set(table, name, value)
    targets = [t.get("pypi-dependencies") for t in (doc.get("target") or {}).values()]
    for pypi in (doc.get("pypi-dependencies"), *targets):
        if pypi is not None:  # pip's torch would be a second install
            changed |= _drop(pypi, tuple(want.packages))
    return changed


def _edit_pip(doc: Any, want: Want, path: Path, made: list[Any]) -> bool:
    changed = False
    base = doc.get("dependencies")
    if base is not None:  # conda's torch would be a second install
        changed |= _drop(base, (*_TORCH_CONDA, *_SELECTORS, "torchvision", "torchaudio"))
    if base is None or "python" not in base:
        python = want.sources[0].plan.python
        changed |= _set(_section(doc, "dependencies", None, made), "python", f"{python}.*" if python else "*")
    if want.pypi_index:  # pixi docs, "pypi-options": the index in place of PyPI
        changed |= _set(_section(doc, "pypi-options", None, made), "index-url", want.pypi_index)
    picks = want.extensions()
    for subdir, source in _groups(want):
        table = _section(doc, "pypi-dependencies", subdir, made)
        for pick, _ in [(p, s) for p, s in picks if s is source]:
            extension: Any = f"=={pick.version}"
            if pick.where == "url" and pick.url:
                extension = tomlkit_module().inline_table()
                extension.update({"url": pick.url})
            elif pick.where == "index" and pick.index:
                extension = tomlkit_module().inline_table()
                extension.update({"version": f"=={pick.version}", "index": pick.index})
            changed |= _set(table, pick.name, extension)
        for name in want.packages:
            version = "==" + want.pin(name, source, local=False).split("==", 1)[1]
            if source.index_url is None:
                value: Any = version
            else:
                value = tomlkit_module().inline_table()
                value.update({"version": version, "index": source.index_url})
            changed |= _set(table, name, value)
    return changed


def _ensure_platforms(doc: Any, want: Want) -> bool:
    head = _head(doc)
    if head is None:
        return False
    have = list(_platforms(doc))
    missing = [SUBDIRS[p] for p in want.platforms if p in SUBDIRS and p not in have]
    if not missing:
        return False
    if "platforms" not in head:
        return _set(head, "platforms", missing)
    for subdir in missing:
        head["platforms"].append(subdir)
    return True


def apply(path: Path, text: str, want: Want) -> str:
    doc = parse_document(path, text)
    if _head(doc) is None:
        raise InputError(f"{path}: no [workspace] (or [project]) table", hint="pixi init makes one")
    _no_features(path, doc)
    channel = want.sources[0].plan.channel.value
    made: list[Any] = []
    changed = _ensure_platforms(doc, want)
    changed |= _edit_conda(doc, want, path, made) if channel == "conda" else _edit_pip(doc, want, path, made)
    for table in made:
        spaced(table)
    return dumped(doc, text) if changed else text
