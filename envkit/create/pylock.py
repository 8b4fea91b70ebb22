"""``envkit lock --channel pip``: hashed, reproducible pip locks of a plan, resolved by uv (``uv pip
compile --generate-hashes``, driven through envkit._proc: a real resolver, not one written here),
as PEP 751 ``pylock.toml`` and/or a ``requirements.txt`` with ``--hash=sha256:`` for every file, one
per platform asked. Each lock records the envkit plan it came from (``[tool.envkit]`` in the
pylock.toml, PEP 751's place for a tool's own data; an ``# envkit-plan:`` line in the
requirements.txt), which ``envkit create --from-lock`` reads to make the same plan again.

The torch index is given to uv as an extra index and PyPI (or its mirror) as the default: uv
searches its extra indexes first and stops at the first that has a package (index strategy
first-index, https://docs.astral.sh/uv/concepts/indexes/), so torch comes from the variant's index
and never from PyPI, and no other package races between the two.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Optional

from envkit import __version__
from envkit.errors import InputError, LockFailed
from envkit.resolve import Plan
from envkit.specs.conda import SUBDIRS
from envkit.specs.pip import GENERATED_MARK

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.mirrors.choose import Mirror
    from envkit.specs.template import Template
    from envkit.system import System

__all__ = [
    "FORMATS",
    "PLAN_LINE",
    "PipLock",
    "lock_platforms",
    "pip_lock",
    "pip_lock_jobs",
    "plan_of_lock",
]

FORMATS: Final = ("pylock", "requirements")
PLAN_LINE: Final = "# envkit-plan: "
COMPILE_TIMEOUT_S: Final = 1800.0
_MADE_BY: Final = f"{GENERATED_MARK} {__version__} with uv pip compile --generate-hashes"
# uv's --python-platform for each envkit platform (`uv pip compile --help`).
_UV_PLATFORMS: Final = {
    "linux-x86_64": "x86_64-manylinux_2_28",
    "linux-aarch64": "aarch64-manylinux_2_28",
    "windows-x86_64": "x86_64-pc-windows-msvc",
    "macos-arm64": "aarch64-apple-darwin",
    "macos-x86_64": "x86_64-apple-darwin",
}
_PLATFORM_OF_SUBDIR: Final = {subdir: platform for platform, subdir in SUBDIRS.items()}


@dataclass(frozen=True)
class PipLock:
    """One platform's lock: uv's command line and the files it makes."""

    plan: Plan
    argv: tuple[str, ...]  # the requirements.in path is {in}; the output {out}
    requirements_in: str
    outputs: dict[str, Path]  # format -> the file it writes
    regen: str


def lock_platforms(values: Sequence[str]) -> tuple[str, ...]:
    """``--lock-platform`` values as envkit platforms (conda subdirs are taken too: linux-64)."""
    out = []
    for value in values:
        platform = _PLATFORM_OF_SUBDIR.get(value, value)
        if platform not in _UV_PLATFORMS:
            known = ", ".join(_UV_PLATFORMS)
            raise InputError(f"--lock-platform {value}: one of {known} (or a conda subdir: linux-64, …)")
        out.append(platform)
    return tuple(dict.fromkeys(out))


def _uv(system: System) -> str:
    import sys

    exe = system.which("uv")
    if exe is None:
        candidate = Path(sys.executable).parent / "uv"  # the uv wheel's binary beside envkit's python
        exe = str(candidate) if candidate.is_file() else None
    if exe is None:
        raise LockFailed(
            "uv is not installed: envkit locks pip environments with uv's resolver (uv pip compile)",
            hint="pip install uv (or put uv on PATH)",
        )
    return exe


def _names(platform: str, formats: Sequence[str], out_dir: Path, several: bool) -> dict[str, Path]:
    suffix = f".{platform}" if several else ""
    names = {"pylock": f"pylock{suffix}.toml", "requirements": f"requirements{suffix}.txt"}
    return {f: out_dir / names[f] for f in formats}


def pip_lock_jobs(
    system: System,
    plans: Sequence[Plan],
    template: Template,
    *,
    out_dir: str,
    formats: Sequence[str] = FORMATS,
    mirrors: Sequence[Mirror] = (),
    wheelhouse: Optional[str] = None,
    offline: bool = False,
    regen: str = "",
) -> list[PipLock]:
    """uv's command line for each plan (nothing is run or written)."""
    from envkit.knowledge import load_knowledge
    from envkit.knowledge.mirrors import MirrorKind
    from envkit.specs.pip import PYPI_URL, pip_source

    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise InputError(f"--format {','.join(bad) or '(none)'}: pylock, requirements or both")
    if offline and not wheelhouse:
        raise InputError("--offline needs --wheelhouse DIR: the wheels have to come from somewhere")
    if wheelhouse is not None and not Path(wheelhouse).is_dir():
        raise InputError(f"--wheelhouse {wheelhouse}: not a folder")
    uv = _uv(system)
    k = load_knowledge()
    by_kind = {m.kind: m for m in mirrors}
    folder = Path(out_dir).absolute()
    jobs = []
    for plan in plans:
        extras = (*template.packages, *template.pip_packages)
        source = pip_source(
            plan,
            template,
            k,
            torch_mirror=by_kind.get(MirrorKind.TORCH_WHEELS),
            pypi_mirror=by_kind.get(MirrorKind.PYPI),
            extras=tuple(extras),
        )
        if source.secrets:
            raise InputError(
                "envkit lock --channel pip: a mirror with credentials in its URL is not locked here "
                "(the lock would carry them)",
                hint="give the mirror without credentials and set UV_INDEX_URL / UV_EXTRA_INDEX_URL for uv",
            )
        argv = [uv, "pip", "compile", "{in}", "--generate-hashes", "--no-header", "--emit-index-url"]
        argv += ["--python-version", str(plan.python or template.python or "3.11")]
        argv += ["--python-platform", _UV_PLATFORMS[plan.platform]]
        if offline:
            argv += ["--no-index", "--find-links", str(Path(str(wheelhouse)).absolute())]
        else:
            # PyPI (or its mirror) is the default index: with uv's first-index strategy it cannot race
            # the torch index, so it serves torch's dependencies whatever pip_source decided for pip.
            pypi = by_kind.get(MirrorKind.PYPI)
            default = source.default_index or source.extra_index or (pypi.url if pypi else PYPI_URL)
            if source.torch_index:
                argv += ["--extra-index-url", source.torch_index]
            if source.torch_links:
                argv += ["--find-links", source.torch_links]
            argv += ["--index-url", default]
            if wheelhouse:
                argv += ["--find-links", str(Path(wheelhouse).absolute())]
        requirements_in = "\n".join([*source.pins, *source.extras]) + "\n"
        outputs = _names(plan.platform, formats, folder, len(plans) > 1)
        jobs.append(PipLock(plan, tuple(argv), requirements_in, outputs, regen))
    return jobs


def _plan_record(plan: Plan, regen: str) -> dict[str, Any]:
    """What a lock keeps of its plan: enough to make the same plan again (envkit create
    --from-lock) and to say what it was for."""
    t = plan.target
    record: dict[str, Any] = {
        "schema": "envkit.plan/1",
        "torch": str(plan.torch),
        "variant": plan.variant,
        "platform": plan.platform,
        "python": str(plan.python) if plan.python else "",
        "index_url": plan.index_url or "",
        "driver": str(t.driver) if t.driver else "",
        "gpus": [g.cc.sm for g in t.gpus],
        "command": regen,
    }
    return record


def _with_plan_pylock(text: str, plan: Plan, regen: str) -> str:
    """uv's pylock.toml with ``[tool.envkit]`` (PEP 751: tools keep their own data under [tool])."""
    import importlib

    tomlkit: Any = importlib.import_module("tomlkit")
    doc = tomlkit.parse(text)
    tool = doc.get("tool")
    if tool is None:
        tool = doc["tool"] = tomlkit.table(True)
    table = tomlkit.table()
    table["plan"] = _plan_record(plan, regen)
    tool["envkit"] = table
    return f"# {_MADE_BY}\n{tomlkit.dumps(doc)}"  # the first line marks it as envkit's (write_specs)


def _with_plan_requirements(text: str, plan: Plan, regen: str) -> str:
    from envkit.specs.pip import comment, header

    lines = comment(header(plan, "", "pip install --require-hashes -r requirements.txt", regen))
    lines[0] = f"# {_MADE_BY}; make it again with:"
    lines.append(PLAN_LINE + json.dumps(_plan_record(plan, regen), sort_keys=True))
    return "\n".join(lines) + "\n" + text


def pip_lock(system: System, jobs: Sequence[PipLock], *, force: bool = False) -> list[Path]:
    """Run uv for each job in a temporary folder, then write the files whole (none when any lock
    fails: every platform is resolved before anything is written). A file envkit did not write
    (the project's own requirements.txt) is replaced only with ``force``: refused before uv runs."""
    from envkit.specs.render import refuse_foreign, write_specs

    refuse_foreign([path for job in jobs for path in job.outputs.values()], force=force)
    made: dict[Path, str] = {}
    for job in jobs:
        work = Path(tempfile.mkdtemp(prefix="envkit-pylock-"))
        try:
            src = work / "requirements.in"
            src.write_text(job.requirements_in, encoding="utf-8")
            for fmt, path in job.outputs.items():
                out = work / path.name
                argv = [str(src) if a == "{in}" else a for a in job.argv]
                argv += ["-o", str(out)] + (["--format", "pylock.toml"] if fmt == "pylock" else [])
                result = system.run(argv, timeout=COMPILE_TIMEOUT_S, cwd=str(work))
                if not result.ok:
                    tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-8:])
                    raise LockFailed(
                        f"uv could not lock torch {job.plan.candidate} for {job.plan.platform}: "
                        f"{result.describe()}\n{tail}".rstrip()
                    )
                text = out.read_text(encoding="utf-8")
                add = _with_plan_pylock if fmt == "pylock" else _with_plan_requirements
                made[path] = add(text, job.plan, job.regen)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    folders = {path.parent for path in made}
    for folder in folders:  # one -o folder: all of them written, or none
        write_specs({p.name: t for p, t in made.items() if p.parent == folder}, folder, force=True)
    return list(made)


def plan_of_lock(path: str) -> dict[str, Any]:
    """The plan record a lock envkit made carries; InputError for a file that has none."""
    from envkit._files import parse_toml, read_text

    text = read_text(path)
    record: Any = None
    if path.endswith(".toml"):
        data = parse_toml(text, path)
        record = ((data.get("tool") or {}).get("envkit") or {}).get("plan")
        if not isinstance(data.get("packages"), list):
            raise InputError(f"{path}: not a pylock.toml (no [[packages]])")
    else:
        line = next((ln for ln in text.splitlines() if ln.startswith(PLAN_LINE)), None)
        if line is not None:
            try:
                record = json.loads(line[len(PLAN_LINE) :])
            except ValueError:
                record = None
        if "--hash=" not in text:
            raise InputError(
                f"{path}: no --hash lines: not a hashed lock", hint="envkit lock --channel pip makes one"
            )
    if not isinstance(record, dict) or not record.get("torch") or not record.get("variant"):
        raise InputError(
            f"{path}: not a lock envkit made (it records no envkit plan)",
            hint="envkit lock --channel pip makes one; another lock installs with its own tool",
        )
    return record
