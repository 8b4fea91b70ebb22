"""Spec files for conda: ``environment.yml`` (conda / mamba / micromamba) and conda-lock's inputs.

Two conda routes (pytorch/pytorch#138506 ends the first at 2.5; conda-forge.org/docs/user/cuda the second):

- torch ≤ 2.5.1 on the ``pytorch`` channel: ``pytorch``, ``nvidia`` then ``defaults`` (or the
  template's channels), with ``pytorch-cuda=X.Y`` selecting the CUDA build. The torch packages are
  channel-qualified (``pytorch::pytorch``): defaults and conda-forge publish packages of the same
  names, and conda-forge's ``pytorch`` does not use ``pytorch-cuda`` (rusty1s/pytorch_sparse#391).
- newer torch on conda-forge: ``pytorch=V=cuda*`` forces the CUDA build (conda-forge.org/docs/user/cuda)
  and ``cuda-version`` pins the CUDA major; the minor follows the ``__cuda`` virtual package.

With ``pip_in_conda`` conda brings Python and pip, and torch comes through the ``pip:`` section from
the variant's index. conda-lock reads no pip options, so its file lists those indexes under
``pip-repositories`` instead (conda_lock/src_parser/environment_yaml.py).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Final, Optional

from envkit.errors import InputError
from envkit.knowledge import CONDA_SUBDIRS
from envkit.resolve import rules
from envkit.resolve.plan import Route
from envkit.specs.pip import comment, header

if TYPE_CHECKING:
    from envkit.knowledge import Knowledge
    from envkit.mirrors.choose import Mirror
    from envkit.resolve import Plan
    from envkit.specs.pip import PipSource
    from envkit.specs.template import Template

__all__ = [
    "SUBDIRS",
    "default_virtual",
    "render_environment",
    "render_virtual_packages",
    "virtual_cuda",
    "virtual_packages",
]

# envkit platform -> conda subdir.
SUBDIRS: Final = CONDA_SUBDIRS
# conda-lock's own defaults for the other virtual packages (conda_lock/default-virtual-packages.yaml,
# conda-lock 4.0.3), kept so that only __cuda differs from what conda-lock would assume.
_VIRTUAL: Final = {
    "linux-64": {"__unix": "0", "__linux": "5.10", "__archspec": "1 x86_64", "__glibc": "2.28"},
    "linux-aarch64": {"__unix": "0", "__linux": "5.10", "__archspec": "1 aarch64", "__glibc": "2.28"},
    "win-64": {"__win": "0", "__archspec": "1 x86_64"},
    "osx-arm64": {"__unix": "0", "__archspec": "1 arm64", "__osx": "11.0"},
    "osx-64": {"__unix": "0", "__archspec": "1 x86_64", "__osx": "11.0"},
}
_PLAIN: Final = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.=<>!*,+-]*$")


def _yaml(value: str) -> str:
    """A YAML scalar: plain where that cannot be misread, else double-quoted (JSON's escapes are YAML's)."""
    return value if _PLAIN.match(value) else json.dumps(value)


def default_virtual(subdir: str) -> dict[str, str]:
    """conda-lock's default virtual packages of a subdir, without __cuda (its own is 11.4)."""
    return dict(_VIRTUAL.get(subdir, {}))


def virtual_cuda(plan: Plan, k: Knowledge) -> tuple[Optional[str], str]:
    """(``__cuda``'s version for the plan's target, why that one); None when the target has none.

    conda reports the newest CUDA the driver runs as ``__cuda`` ("maximum version of CUDA supported
    by the display driver", docs.conda.io manage-virtual): for a target driver, NVIDIA's Table 3
    says which that is. Without a driver, the plan's own CUDA (the user planned for it)."""
    subdir = SUBDIRS.get(plan.platform, "linux-64")
    driver = plan.target.checked_driver
    if driver is not None and not subdir.startswith("osx-"):
        cuda = k.cuda_for_driver(driver, windows=subdir == "win-64")
        if cuda is not None:
            return str(cuda), (
                f"__cuda={cuda}: the newest CUDA driver {driver} runs (NVIDIA's Table 3, the newest toolkit "
                "whose driver floor it meets)."
            )
        return None, f"No __cuda: envkit knows no CUDA that driver {driver} runs."
    if driver is None and plan.cuda is not None:
        return str(
            plan.cuda
        ), f"__cuda={plan.cuda}: no target driver was given, so the plan's own CUDA (pass --driver)."
    return None, "No __cuda: the target has no NVIDIA driver, so no CUDA build may be chosen."


def virtual_packages(
    plan: Plan, k: Knowledge, *, host: Optional[dict[str, str]] = None
) -> tuple[dict[str, str], str]:
    """(name -> ``version`` or ``version build``, why __cuda is what it is) for the plan's target:
    conda-lock's defaults for the subdir, the ``host``'s own values over them (create installs on
    this machine), and ``__cuda`` from the target's driver."""
    subdir = SUBDIRS[plan.platform]
    packages = {**_VIRTUAL[subdir], **(host or {})}
    cuda, why = virtual_cuda(plan, k)
    if cuda is not None:
        packages["__cuda"] = cuda
    return packages, why


def render_virtual_packages(plan: Plan, k: Knowledge, template_name: str, regen: str) -> str:
    """conda-lock's ``--virtual-package-spec`` file for the plan's target (conda-lock docs,
    "Virtual packages"; the format of its default-virtual-packages.yaml)."""
    subdir = SUBDIRS[plan.platform]
    packages, why = virtual_packages(plan, k)
    lines = header(
        plan, template_name, "conda-lock reads virtual-packages.yml from its folder by name", regen
    )
    if "__cuda" in packages:
        lines.append(why)
    if plan.cuda is None:
        # pytorch=V=cpu* (or cpuonly) picks the CPU build whatever __cuda says: nothing to warn about.
        lines.append("torch is the CPU build: its build string chooses it, not __cuda.")
    else:
        lines += [
            "Without this file conda-lock assumes __cuda=11.4 (its default-virtual-packages.yaml) and,",
            "on a login node without GPUs, would lock builds for CUDA 11.4 rather than for the",
            "compute nodes.",
        ]
    if "__cuda" not in packages and plan.cuda is not None:
        lines.append("No __cuda: the target has no NVIDIA driver, so no CUDA build may be chosen.")
    out = [*comment(lines), "subdirs:", f"  {subdir}:", "    packages:"]
    out += [f"      {name}: {json.dumps(value)}" for name, value in packages.items()]
    return "\n".join(out) + "\n"


def _channels(
    plan: Plan, template: Template, k: Knowledge, pip_in_conda: bool
) -> tuple[list[str], Optional[str]]:
    """The channel list, and the channel the torch packages are qualified with (None: none)."""
    extra = list(template.conda_channels)
    if pip_in_conda or plan.conda is None:
        channels = extra or [k.conda.forge_channel]
        qualifier = None
    elif plan.conda.route is Route.PYTORCH_CHANNEL:
        channels = [*k.conda.pytorch_channels, *(extra or ["defaults"])]
        qualifier = k.conda.pytorch_channels[0]
    else:
        channels = [k.conda.forge_channel, *extra]
        qualifier = None
    channels = list(dict.fromkeys(channels))
    if "defaults" not in channels:
        # Keep the user's .condarc defaults out: mixing defaults' builds with conda-forge's breaks
        # environments in subtle ways (conda-forge.org docs, "Using multiple channels").
        channels.append("nodefaults")
    return channels, qualifier


def _mirrored(channels: list[str], mirror: Optional[Mirror]) -> tuple[list[str], list[str]]:
    """Channel names -> the conda mirror's URLs where it carries them; notes for those it lacks."""
    if mirror is None:
        return channels, []
    if "***@" in mirror.url:
        raise InputError(
            f"--mirror {mirror.name}: envkit writes no credentials into environment.yml",
            hint="set the channel mirror and its token in .condarc (custom_channels, `conda token set`)",
        )
    out, notes = [], []
    for name in channels:
        if name in ("defaults", "nodefaults"):
            out.append(name)
        elif name in mirror.channels:
            out.append(f"{mirror.url}/{name}")
        else:
            out.append(name)
            notes.append(f"{mirror.name} does not mirror the {name} channel: it comes from anaconda.org.")
    return out, notes


def _torch_dependencies(plan: Plan, template: Template, k: Knowledge, qualifier: Optional[str]) -> list[str]:
    assert plan.conda is not None
    if plan.conda.route is Route.PYTORCH_CHANNEL:
        q = f"{qualifier}::" if qualifier else ""
        deps = [f"{q}pytorch={plan.torch}={'*cuda*' if plan.cuda else '*cpu*'}"]
        deps += [
            f"{q}{c}={plan.torchvision if c == 'torchvision' else plan.torchaudio}"
            for c in template.companions
        ]
        deps.append(f"pytorch-cuda={plan.cuda}" if plan.cuda else f"{q}{k.conda.cpu_package}")
        return deps
    return [*rules.conda_forge_dependencies(k, plan.torch, plan.cuda), *template.companions]


def render_environment(
    plan: Plan,
    template: Template,
    k: Knowledge,
    source: PipSource,
    *,
    env_name: str,
    regen: str,
    pip_in_conda: bool = False,
    conda_mirror: Optional[Mirror] = None,
    lock: bool = False,
) -> str:
    """``environment.yml`` for conda env create, or (``lock``) the same as conda-lock's input."""
    if plan.conda is None and not pip_in_conda:
        raise InputError(
            "the plan has no conda route: it was resolved for pip",
            hint="resolve it with --channel conda, or render with --pip-in-conda",
        )
    if lock and source.torch_links:
        raise InputError(
            "conda-lock takes PEP 503 indexes only, not a flat listing (--find-links)",
            hint="use --mirror pytorch, sjtu or nju for the torch wheels",
        )
    channels, qualifier = _channels(plan, template, k, pip_in_conda)
    channels, notes = _mirrored(channels, conda_mirror)
    deps = [f"python={plan.python or template.python}"] if (plan.python or template.python) else []
    pip: list[str] = []
    if pip_in_conda:
        deps.append("pip")
        pip += [*source.pins, *source.extras]
        notes.append(
            "torch comes through pip from its variant's index (--pip-in-conda); conda brings Python."
        )
    else:
        deps += _torch_dependencies(plan, template, k, qualifier)
        deps += list(template.packages)
        pip += list(source.extras)
        if pip:
            deps.append("pip")
    deps += list(template.conda_packages)
    if pip and not lock:
        pip = source.options() + pip
    if lock:
        use = (
            "conda-lock lock -f environment.yml -p " + SUBDIRS[plan.platform] + " (with virtual-packages.yml)"
        )
    else:
        use = "conda env create -f environment.yml (or mamba / micromamba)"
    lines = comment(header(plan, template.name, use, regen) + notes + list(source.notes if pip else ()))
    if pip and source.secrets:
        lines.append(
            f"# Set {', '.join(source.secrets)} in the environment: pip / conda-lock expand ${{VAR}}."
        )
    lines += [f"name: {_yaml(env_name)}", "channels:"] + [f"  - {_yaml(c)}" for c in channels]
    if lock:
        lines += ["platforms:", f"  - {SUBDIRS[plan.platform]}"]
        repos = source.repositories() if pip else []
        if repos:
            lines += ["pip-repositories:"] + [f"  - {_yaml(r)}" for r in repos]
        if pip and source.torch_index and source.extra_index is None:
            # The same rule as pip's --extra-index-url: no PyPI beside an index that may host private names.
            lines.append("allow-pypi-requests: false")
    lines.append("dependencies:")
    lines += [f"  - {_yaml(d)}" for d in deps]
    if pip:
        lines.append("  - pip:")
        lines += [f"      - {_yaml(p)}" for p in pip]
    return "\n".join(lines) + "\n"
