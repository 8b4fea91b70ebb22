"""A conda solve with no answer, in one paragraph a person can act on.

rattler's solver (resolvo) explains a failure as a tree: "Cannot solve the request because of:
pytorch-cuda 12.1.* cannot be installed because there are no viable options: └─ pytorch-cuda 12.1
would require └─ __cuda >=12.1, for which no candidates were found." This reads that text: a
virtual package the target lacks (``__cuda``, ``__glibc``) becomes "X needs __cuda >=12.1; the
target's driver runs CUDA 11.8" with the driver that would do; a package no channel has becomes
"no channel has X"; anything else is the tree on one line, which names the packages that conflict.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final, Optional

from envkit.knowledge import load_knowledge
from envkit.versions import Version, parse_version

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["explain_conflict"]

_VIRTUAL_NEED: Final = re.compile(
    r"(?P<pkg>[A-Za-z0-9_.\-]+) (?P<version>\S+) would (?:require|constrain)\s*\n[\s│├└─]*"
    r"(?P<virtual>__[a-z0-9_]+)(?P<spec>[^,\n]*), (?:for which no candidates were found|which conflicts)"
)
_MISSING: Final = re.compile(r"No candidates were found for (?P<spec>.+?)\.?\s*$", re.MULTILINE)
_TREE: Final = re.compile(r"^[\s│├└─]+", re.MULTILINE)


def _one_line(message: str) -> str:
    body = message.split("because of:", 1)[-1]
    parts = [p.strip().rstrip(":") for p in _TREE.sub("", body).splitlines() if p.strip()]
    return "; ".join(parts)


def _cuda_hint(need: str, have: Optional[str], why: str, override: str) -> str:
    floor = None
    wanted = parse_version(re.sub(r"[^0-9.]", "", need.split(",")[0]) or "0")
    if wanted is not None:
        k = load_knowledge()
        toolkit = k.toolkit(Version(f"{wanted.major}.{wanted.minor}"))
        floor = toolkit.linux_driver if toolkit is not None else None
    upgrade = f"a driver ≥ {floor}" if floor is not None else "a newer driver"
    if have is None:
        return (
            f"the target has no __cuda ({why.rstrip('.')}): plan for the machine that runs it with "
            f"--driver (it needs {upgrade}), or --cuda cpu"
        )
    plain = re.sub(r"[^0-9.]", "", need.split(",")[0])
    return (
        f"it needs {upgrade}; the solve had {why.rstrip('.')}. Ask for an older CUDA (--cuda {have}), "
        f"upgrade the driver, or, where the machine that will run it has that driver, "
        + override.format(cuda=plain)
    )


def explain_conflict(
    message: str,
    virtual: Mapping[str, str],
    cuda_why: str,
    *,
    override: str = "set CONDA_OVERRIDE_CUDA={cuda}",
) -> tuple[str, str]:
    """(summary, hint) for rattler's SolverError text. ``virtual``: the virtual packages the solve
    had (name -> "version" or "version build"); ``cuda_why``: why __cuda was what it was;
    ``override``: how to tell the solve the machine's driver ({cuda}: the CUDA it needs)."""
    needs = list(_VIRTUAL_NEED.finditer(message))
    if needs:
        first = needs[0]
        name, spec = first["virtual"], first["spec"].strip()
        have = virtual.get(name)
        shown = f"{name}={have.split()[0]}" if have else f"no {name}"
        summary = (
            f"the conda solve has no answer: {first['pkg']} {first['version']} needs {name} {spec}, "
            f"and the target has {shown}"
        )
        if name == "__cuda":
            hint = _cuda_hint(spec, have.split()[0] if have else None, cuda_why, override)
        elif name == "__glibc":
            hint = (
                f"this machine's C library is glibc {have or 'unknown'}: a newer OS image, or an older "
                "build of the package"
            )
        else:
            hint = f"the target lacks {name} {spec}: a build of {first['pkg']} for this platform"
        return summary, hint
    missing = _MISSING.search(message)
    if missing and "would require" not in message:
        spec = missing["spec"].strip()
        return (
            f"the conda solve has no answer: no channel has {spec}",
            (
                "check that the channels carry it (.condarc channel_alias / custom_channels, --mirror); "
                "`envkit resolve --channel conda` says which channel the plan takes it from"
            ),
        )
    return (
        f"the conda solve has no answer: {_one_line(message)}",
        (
            "the packages named conflict with each other on these channels: relax the template's pins, "
            "or check the channel list (.condarc, --mirror)"
        ),
    )
