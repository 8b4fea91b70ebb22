"""``envkit create NAME --from-lock FILE``: install exactly a hashed lock ``envkit lock --channel pip``
made (a PEP 751 ``pylock.toml``, or a ``requirements.txt`` with ``--hash`` lines), hash checking on:
a file whose hash does not match what the index serves fails the installer, and create removes the
half-made environment (exit 4).

The plan is made again from the one the lock records (its torch release, build, platform, Python
and target), so that the environment says how it was made and verify knows what to expect.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Final

from envkit.create.backends import (
    INSTALL_TIMEOUT_S,
    VENV_TIMEOUT_S,
    Backend,
    Step,
    backend_exe,
    base_python,
    default_prefix,
    find_tool,
)
from envkit.create.install import Installation
from envkit.create.place import check_prefix
from envkit.errors import InputError

if TYPE_CHECKING:
    from envkit.create.prepare import CreateRequest
    from envkit.resolve import Plan
    from envkit.system import System

__all__ = ["lay_out_lock"]

_NAMES: Final = {"pylock": "pylock.toml", "requirements": "requirements.txt"}


def _plan(record: dict[str, object]) -> Plan:
    """The plan the lock records, made again for the target it names (nothing is detected)."""
    from envkit.knowledge import load_knowledge
    from envkit.resolve import Channel, Request, parse_cuda_request, parse_torch_spec, resolve
    from envkit.resolve.target import Target, target_from_flags

    k = load_knowledge()
    gpus = [str(g) for g in record.get("gpus") or []]  # type: ignore[attr-defined]
    driver = str(record.get("driver") or "") or None
    platform = str(record.get("platform") or "") or "linux-x86_64"
    target = target_from_flags(
        k,
        base=Target(platform=platform),
        driver=driver,
        gpus=gpus,
        no_gpu=not driver and not gpus,
        platform=platform,
        python=str(record.get("python") or "") or None,
    )
    request = Request(
        torch=parse_torch_spec(f"=={record['torch']}"),
        cuda=parse_cuda_request(str(record["variant"])),
        channel=Channel.PIP,
    )
    return resolve(k, target, request)


def lay_out_lock(system: System, request: CreateRequest, lock: str) -> Installation:
    """The installation of a lock: a venv, then the installer with hash checking (nothing is run)."""
    from envkit._files import read_text
    from envkit.create.pylock import plan_of_lock
    from envkit.resolve.target import this_platform

    record = plan_of_lock(lock)
    here, locked_for = this_platform(), str(record.get("platform") or "")
    if here is not None and locked_for and locked_for != here:
        # its wheels are another platform's: the installer would fail on a hash or a missing wheel
        again = re.sub(r" --lock-platform \S+", "", str(record.get("command") or "envkit lock --channel pip"))
        raise InputError(
            f"--from-lock {lock}: a lock for {locked_for}, and this machine is {here}",
            hint=f"make one for it: {again} --lock-platform {here}",
        )
    text = read_text(lock)
    plan = _plan(record)
    pylock = lock.endswith(".toml")
    wanted = Backend(request.backend) if request.backend in ("auto", "uv", "venv") else None
    if wanted is None:
        raise InputError(f"--from-lock installs pip locks: --backend {request.backend} is a conda one")
    exe = backend_exe(system, request.backend)
    if wanted is Backend.AUTO:
        uv = find_tool(system, Backend.UV)
        wanted, exe = (Backend.UV, uv) if uv else (Backend.VENV, "")
    if pylock and wanted is Backend.VENV:
        raise InputError(
            f"--from-lock {lock}: pip installs no pylock.toml yet",
            hint="use --backend uv, or the requirements.txt lock envkit lock --channel pip wrote beside it",
        )
    given = Path(os.path.abspath(Path(request.prefix).expanduser())) if request.prefix else None
    if given is not None:
        check_prefix(given)
    name = request.name or (given.name if given is not None else "")
    prefix = given if given is not None else default_prefix(system, name, wanted)
    python = prefix / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    staging = prefix.with_name(f".{prefix.name}.envkit-spec")
    file_name = _NAMES["pylock" if pylock else "requirements"]
    locked = str(staging / file_name)
    version = str(plan.python) if plan.python else None
    if wanted is Backend.UV:
        # No --seed: the environment is the lock's packages and nothing else (uv's own seed packages,
        # pip and setuptools, would come from PyPI, unlocked and unhashed).
        create = [exe, "venv", str(prefix)] + (["--python", version] if version else [])
        install = [exe, "pip", "install", "--python", str(python), "-r", locked]
        if not pylock:  # a pylock.toml carries its hashes; uv checks them without being told
            install.append("--require-hashes")
    else:
        create = [base_python(system, version), "-m", "venv", str(prefix)]
        install = [str(python), "-m", "pip", "install", "--require-hashes", "--no-deps", "-r", locked]
    steps = (
        Step("create the environment", tuple(create), VENV_TIMEOUT_S),
        Step(f"install {Path(lock).name} (hashes checked)", tuple(install), INSTALL_TIMEOUT_S),
    )
    return Installation(
        name=name,
        prefix=prefix,
        backend=wanted,
        plan=plan,
        steps=steps,
        spec_files={file_name: text},
        staging=staging,
        python=python,
        notes=(f"from the lock {lock} ({record.get('command') or 'envkit lock --channel pip'})",),
    )
