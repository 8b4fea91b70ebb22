"""``pixi.toml``: envkit's plan for pixi, and a pixi.toml read back for ``spec --check``.

Written as pixi's PyTorch guide lays the routes out (prefix-dev/pixi:docs/python/pytorch.md@0196a795,
with docs/source_files/pixi_tomls/pytorch-conda-forge.toml and pytorch-pypi.toml):

- the conda route: ``[workspace] channels`` (conda-forge, or the pytorch channel's pytorch, nvidia
  and Anaconda's main for torch ≤ 2.5.1), ``[dependencies]`` with the build that selects the plan
  (``pytorch = { version = "2.13.0.*", build = "cuda129*" }``, ``cuda-version``), and for a CUDA
  build ``[system-requirements] cuda``: "Without setting the appropriate system-requirements.cuda,
  Pixi will default to installing the CPU-only versions of PyTorch" (the guide), since pixi solves
  with that as the machines' ``__cuda``;
- the pip route: Python from conda-forge, torch in ``[pypi-dependencies]`` with the variant's
  ``index`` (uv resolves them inside pixi).

``read_pixi`` is the one reader of a pixi.toml (tomllib / tomli): the tables that apply on one
platform merged (``[target.<subdir>]``, ``[target.linux]`` …), as a SpecFile the checks judge;
envkit.project.pixi reads the manifests ``envkit add`` edits with it too.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Final, Optional

from envkit._files import parse_toml
from envkit.errors import InputError
from envkit.knowledge import CONDA_SUBDIRS
from envkit.mirrors.condarc import DEFAULT_CHANNELS
from envkit.resolve.plan import Route
from envkit.specs.pip import _toml, comment, header
from envkit.specs.read import SpecFile, environment_spec, parse_conda_spec, pip_spec

if TYPE_CHECKING:
    from envkit.knowledge import Knowledge
    from envkit.resolve import Plan
    from envkit.specs.pip import PipSource
    from envkit.specs.template import Template

__all__ = [
    "conda_text",
    "merged_tables",
    "pixi_head",
    "pixi_platforms",
    "read_pixi",
    "render_pixi",
]

_PLATFORM_OF: Final = {subdir: platform for platform, subdir in CONDA_SUBDIRS.items()}
# pixi's platform selectors besides the subdirs (pixi docs: "Target specific tables").
_SELECTOR_OS: Final = {"linux": "linux", "osx": "macos", "win": "windows"}
_TORCH_CONDA: Final = ("pytorch", "pytorch-gpu", "pytorch-cpu")


def _value(spec: str, channel: Optional[str] = None) -> tuple[str, str]:
    """A conda match spec (``pytorch=2.13.0=cuda129*``, ``lightning>=2.2``) as (name, pixi's TOML
    value); ``channel``: the channel it must come from (pixi's ``channel`` key, conda's ``ch::``)."""
    pin = parse_conda_spec(spec)
    name = pin.name if pin is not None else spec
    rest = spec[len(name) :].strip() if spec.lower().startswith(name) else ""
    build = ""
    if rest.startswith("=") and not rest.startswith("=="):  # conda's =2.13.0 is the 2.13.0 series
        version, _, build = rest[1:].partition("=")
        version = version if version.endswith("*") else f"{version}.*"
    elif rest and rest[0] in "<>!~=":
        version = rest
    else:  # "2.13.0 cuda*" or nothing
        version, _, build = rest.partition(" ")
        version = version or "*"
    fields = {"version": version, "build": build, "channel": channel or ""}
    if not build and not channel:
        return name, _toml(version)
    inline = ", ".join(f"{k} = {_toml(v)}" for k, v in fields.items() if v)
    return name, f"{{ {inline} }}"


def _channels(plan: Plan, template: Template, k: Knowledge) -> list[str]:
    """The plan's conda channels for pixi: Anaconda's ``defaults`` as its main channel's URL (pixi
    has no ``defaults``; conda's DEFAULT_CHANNELS), then the template's, in priority order."""
    listed = list(plan.conda.channels) if plan.conda is not None else [k.conda.forge_channel]
    out: list[str] = []
    for channel in [*listed, *template.conda_channels]:
        name = DEFAULT_CHANNELS[0] if channel == "defaults" else channel
        if name not in out and channel != "nodefaults":
            out.append(name)
    return out


def render_pixi(
    plan: Plan, template: Template, k: Knowledge, source: PipSource, env_name: str, regen: str
) -> str:
    """``pixi.toml`` of the plan: the conda route's packages in [dependencies], or the pip route's
    torch in [pypi-dependencies] with its index."""
    subdir = CONDA_SUBDIRS.get(plan.platform)
    if subdir is None:
        raise InputError(f"--format pixi: pixi has no platform for {plan.platform}")
    out = comment(header(plan, template.name, "pixi install (pixi ≥ 0.40 reads [workspace])", regen))
    if source.torch_links:
        raise InputError(
            "--format pixi takes PEP 503 indexes only, not a flat listing (--find-links)",
            hint="use --mirror pytorch, sjtu or nju for the torch wheels",
        )
    conda = plan.conda is not None
    channels = _channels(plan, template, k) if conda else [k.conda.forge_channel]
    out += [
        "",
        "[workspace]",
        f"name = {_toml(env_name)}",
        f"channels = [{', '.join(_toml(c) for c in channels)}]",
        f"platforms = [{_toml(subdir)}]",
        "",
    ]
    if conda and plan.cuda is not None:
        out += [
            "# pixi solves with this as the machines' __cuda; without it pixi picks no CUDA build",
            "# (prefix-dev/pixi docs/python/pytorch.md). The build's cuda-version needs __cuda >= its major.",
            "[system-requirements]",
            f'cuda = "{plan.cuda.major}"',
            "",
        ]
    python = plan.python or template.python
    out += ["[dependencies]", f"python = {_toml(f'{python}.*' if python else '*')}"]
    pypi: list[tuple[str, str]] = []
    if conda:
        assert plan.conda is not None
        companions = {"torchvision", "torchaudio"}
        deps = []
        for dep in plan.conda.dependencies:
            pin = parse_conda_spec(dep)
            name = pin.name if pin is not None else dep
            if name != "python" and (name not in companions or name in template.companions):
                deps.append(dep)
        pinned = plan.conda.route is Route.PYTORCH_CHANNEL
        torch_names = ("pytorch", "torchvision", "torchaudio", "cpuonly")
        for dep in deps:
            pin = parse_conda_spec(dep)
            # conda's pytorch::pytorch: the pytorch channel's torch, never defaults' or conda-forge's
            channel = (
                plan.conda.channels[0] if pinned and pin is not None and pin.name in torch_names else None
            )
            out.append(" = ".join(_value(dep, channel)))
        out += [" = ".join(_value(d)) for d in (*template.packages, *template.conda_packages)]
        pypi = [_pypi(p) for p in template.pip_packages]
    else:
        index = source.torch_index
        for line in source.pins:
            name, _, version = line.partition("==")
            public = _toml("==" + version.split("+", 1)[0])  # the index's build carries the local tag
            pypi.append((name, f"{{ version = {public}, index = {_toml(index)} }}" if index else public))
        pypi += [_pypi(p) for p in source.extras]
    if pypi:
        out.append("")
        if not conda and source.torch_index:
            out.append(
                "# torch from its variant's index (pixi resolves PyPI packages with uv); the rest from PyPI."
            )
        out.append("[pypi-dependencies]")
        out += [f"{name} = {value}" for name, value in pypi]
    return "\n".join(out) + "\n"


def _pypi(requirement: str) -> tuple[str, str]:
    """A PEP 508 requirement as a [pypi-dependencies] entry (``lightning>=2.2`` -> lightning = ">=2.2")."""
    from packaging.requirements import Requirement

    req = Requirement(requirement)
    return req.name, _toml(str(req.specifier) or "*")


# -- reading ---------------------------------------------------------------------------------------


def pixi_head(data: Any) -> Any:
    """The [workspace] table (pixi ≥ 0.40), else the older [project]; None when neither."""
    return data.get("workspace") if "workspace" in data else data.get("project")


def _unwrap(value: Any) -> Any:
    unwrap = getattr(value, "unwrap", None)  # tomlkit's items; tomllib's are plain already
    return unwrap() if callable(unwrap) else value


def pixi_platforms(data: Any) -> tuple[str, ...]:
    """The envkit platforms of the workspace's ``platforms`` (those envkit knows)."""
    head = pixi_head(data) or {}
    out = []
    for p in _unwrap(head.get("platforms")) or []:
        subdir = p.get("platform") if isinstance(p, dict) else p
        if subdir in _PLATFORM_OF:
            out.append(_PLATFORM_OF[subdir])
    return tuple(out)


def _tables(data: Any, kind: str, platform: str) -> list[Any]:
    """``[kind]`` and the ``[target.X.kind]`` tables that apply on ``platform``, base first."""
    out = [data.get(kind) or {}]
    subdir = CONDA_SUBDIRS.get(platform)
    os_name = platform.split("-", 1)[0]
    for selector, table in (data.get("target") or {}).items():
        if (
            selector == subdir
            or _SELECTOR_OS.get(selector) == os_name
            or (selector == "unix" and os_name != "windows")
        ):
            out.append(table.get(kind) or {})
    return out


def merged_tables(data: Any, kind: str, platform: str) -> dict[str, Any]:
    """``[kind]`` with the target tables for ``platform`` over it (pixi's own merge order)."""
    merged: dict[str, Any] = {}
    for table in _tables(data, kind, platform):
        merged.update({k: _unwrap(v) for k, v in table.items()})
    return merged


def conda_text(name: str, value: Any) -> str:
    """A pixi dependency as a conda match spec (``pytorch 2.13.0.* cuda129*``)."""
    if isinstance(value, dict):
        version, build = str(value.get("version", "*")), value.get("build")
        return f"{name} {version} {build}" if build else f"{name} {version}"
    return f"{name} {value}"


def _pypi_options(data: Any) -> list[str]:
    """The workspace's [pypi-options] as pip's requirements-file options."""
    options = _unwrap(data.get("pypi-options")) or {}
    lines = [f"--index-url {options['index-url']}"] if options.get("index-url") else []
    lines += [f"--extra-index-url {url}" for url in options.get("extra-index-urls") or []]
    for link in options.get("find-links") or []:
        where = link.get("url") or link.get("path") if isinstance(link, dict) else link
        lines += [f"--find-links {where}"] if where else []
    return lines


def read_pixi(path: str, text: str, platform: str) -> SpecFile:
    """A pixi.toml as the checks read a spec: its torch for ``platform`` (the base tables and the
    target tables that apply there), the conda route's channels and [system-requirements] cuda, or
    the pip route's torch with its index. InputError when it is no pixi manifest."""
    data = parse_toml(text, path)
    if pixi_head(data) is None:
        raise InputError(
            f"{path}: no [workspace] (or [project]) table: not a pixi manifest", hint="pixi init makes one"
        )
    conda = merged_tables(data, "dependencies", platform)
    pypi = merged_tables(data, "pypi-dependencies", platform)
    system = merged_tables(data, "system-requirements", platform)
    cuda = system.get("cuda")
    if "torch" in pypi and not any(n in conda for n in _TORCH_CONDA):
        value = pypi["torch"]
        version = value.get("version", "") if isinstance(value, dict) else str(value)
        index = value.get("index") if isinstance(value, dict) else None
        torch = f"torch{'' if version in ('', '*') else version}"
        # A package's own index is the only one it comes from; else [pypi-options]' index-url
        # (PyPI's stand-in) and extra-index-urls as pip reads them (pixi docs, "pypi-options").
        lines = [f"--index-url {index}", torch] if index else [*_pypi_options(data), torch]
        spec = pip_spec(path, lines)
    else:
        channels = [
            str(c.get("channel") if isinstance(c, dict) else c)
            for c in _unwrap((pixi_head(data) or {}).get("channels")) or []
        ]
        deps = [conda_text(k, v) for k, v in conda.items()]
        spec = environment_spec({"channels": channels, "dependencies": deps}, path)
    return dataclasses.replace(spec, manifest="pixi", system_cuda=None if cuda is None else str(cuda))
