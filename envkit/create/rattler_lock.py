"""``envkit lock --channel conda`` where conda-lock has no conda to solve with: py-rattler solves
(the rattler backend's worker, in a child process through envkit._proc, ``"mode": "lock"``), and
conda-lock's own code writes its lock file, so that ``conda-lock install`` and conda-lock's parser
read it as one of their own.

conda-lock solves by running conda, mamba or micromamba (ensureconda finds one, or downloads
micromamba: conda_lock/invoke_conda.py, ensureconda/api.py); where none is installed and nothing
can be downloaded, this is the way. The same inputs as conda-lock's: envkit's environment.yml
(channels mapped through the user's .condarc as for ``create --backend rattler``) and
virtual-packages.yml (``__cuda`` from the target driver) for each ``--lock-platform``. What goes
into the file is what conda-lock's solver path puts there (conda_lock/conda_solver.py,
solve_conda): each package's name, version, build, URL and md5/sha256, its ``depends`` merged per
name into conda-lock's ``dependencies``, the categories from what was asked for, and conda-lock's
content hash of the inputs. URLs are written without credentials (conda-lock's --strip-auth).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Final, Optional

from envkit._files import write_output
from envkit.create.backends import find_tool
from envkit.create.backends.rattler import CHANNELS_VARIABLE, RESULT_MARKER, WORKER, conda_inputs, read_result
from envkit.errors import LockFailed, SolveFailed
from envkit.redact import redact
from envkit.specs.conda import default_virtual

if TYPE_CHECKING:
    from envkit.create.lock_job import LockJob
    from envkit.system import System

__all__ = ["conda_lock_solver", "rattler_lock", "rattler_lockable"]

LOCK_TIMEOUT_S: Final = 1800.0
# What conda-lock's solver search looks for (ensureconda: mamba, micromamba, conda, conda-standalone).
_SOLVERS: Final = ("mamba", "micromamba", "conda", "conda-standalone")


def conda_lock_solver(system: System) -> Optional[str]:
    """The conda, mamba or micromamba conda-lock would solve with, without downloading one: on PATH
    (CONDA_EXE / MAMBA_EXE first), or one ensureconda installed before in its own folder."""
    for name in _SOLVERS:
        found = find_tool(system, name) if name in ("conda", "mamba", "micromamba") else system.which(name)
        if found:
            return found
    if importlib.util.find_spec("ensureconda") is not None:
        site: Any = importlib.import_module("ensureconda.resolve")
        folder = Path(site.site_path())
        for name in ("micromamba", "conda_standalone"):
            candidate = folder / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return None


def rattler_lockable() -> bool:
    """Whether this envkit can lock with rattler: py-rattler to solve, conda-lock to write the file."""
    return all(importlib.util.find_spec(m) is not None for m in ("rattler", "conda_lock"))


def _virtual(text: str) -> dict[str, list[list[str]]]:
    """virtual-packages.yml (conda-lock's format) -> subdir -> [[name, version, build], …]."""
    yaml: Any = importlib.import_module("yaml")
    data = yaml.safe_load(text) or {}
    out: dict[str, list[list[str]]] = {}
    for subdir, spec in (data.get("subdirs") or {}).items():
        out[str(subdir)] = [
            [str(name), *str(value).split(" ", 1)] for name, value in (spec.get("packages") or {}).items()
        ]
    return out


def rattler_lock(system: System, job: LockJob, *, on_line: Optional[Callable[[str], None]] = None) -> Path:
    """Solve ``job`` with rattler for each of its platforms and write conda-lock's file (atomically:
    nothing is written when anything fails). SolveFailed (exit 3) when a platform has no answer."""
    environment = job.inputs["environment.yml"]
    inputs = conda_inputs(environment, system.env)
    if inputs.pip:
        raise LockFailed(
            "the rattler lock solves conda packages only, and this environment.yml has a pip: section",
            hint="install micromamba (conda-lock then solves the pip section too), or use a template "
            "without pip_packages",
        )
    platforms = list(job.platforms)
    virtual = _virtual(job.inputs["virtual-packages.yml"])
    cuda = next((row for rows in virtual.values() for row in rows if row[0] == "__cuda"), None)
    for platform in platforms:
        if platform not in virtual:  # the file is rendered for the plan's platform: the others'
            # defaults are conda-lock's, and __cuda is the target driver's as there
            defaults = [[name, *value.split(" ", 1)] for name, value in default_virtual(platform).items()]
            virtual[platform] = defaults + ([cuda] if cuda and not platform.startswith("osx") else [])
    from envkit.create.backends.rattler import rattler_cache

    cache = rattler_cache(system.env)
    request = {
        "schema": "envkit.rattler-request/1",
        "mode": "lock",
        "channels": [redact(c) for c in inputs.channels],
        "specs": list(inputs.specs),
        "platforms": platforms,
        "virtual_packages": virtual,
        "repodata_cache": str(cache / "repodata"),
        "marker": RESULT_MARKER,
    }
    hidden = any(redact(c) != c for c in inputs.channels)
    env = {**system.env, CHANNELS_VARIABLE: json.dumps(list(inputs.channels))} if hidden else None
    workdir = Path(tempfile.mkdtemp(prefix="envkit-lock-"))
    try:
        for name, content in job.inputs.items():
            (workdir / name).write_text(content, encoding="utf-8")
        request_file = workdir / "rattler-request.json"
        request_file.write_text(json.dumps(request), encoding="utf-8")
        argv = [sys.executable, str(WORKER), str(request_file)]
        result = system.run(argv, timeout=LOCK_TIMEOUT_S, env=env, on_line=on_line)
        answer = read_result(result.stdout)
        if answer is None or not answer.get("ok"):
            platform = str(((answer or {}).get("error") or {}).get("platform") or platforms[0])
            shown = {row[0]: " ".join(row[1:]) for row in virtual.get(platform, [])}
            raise _failure(result.describe(), answer, result.stdout, shown)
        lockfile = _lockfile(workdir, platforms, answer["solved"])
        # conda-lock's writer makes the file under its own name in the work folder (its help text
        # names the file); envkit._files puts it in place whole: renamed over a regular file, never
        # over a link (the file it points to is written), a FIFO or a device (written into). A
        # plain os.replace here deleted a conda-lock.yml link and put a file where a FIFO was.
        made = workdir / "out" / job.lockfile.name
        made.parent.mkdir()
        _write(lockfile, made)
        write_output(str(job.lockfile), made.read_text(encoding="utf-8"), label=str(job.lockfile))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return job.lockfile


def _failure(how: str, answer: Optional[dict[str, Any]], stdout: str, virtual: dict[str, str]) -> Exception:
    if answer is None:
        tail = "\n".join(stdout.strip().splitlines()[-12:])
        return LockFailed(f"the rattler solve failed: {how}\n{tail}".rstrip())
    error = answer.get("error") or {}
    kind, message = str(error.get("kind") or ""), str(error.get("message") or "")
    if kind == "unsolvable":
        from envkit.create.backends.conflict import explain_conflict

        have = virtual.get("__cuda")
        why = f"__cuda={have} from the target driver" if have else "no __cuda: the target has no driver"
        override = "lock for it: --driver (that machine's driver version)"
        summary, hint = explain_conflict(message, virtual, why, override=override)
        return SolveFailed(summary.replace("the conda solve", "the conda lock"), hint=hint)
    from envkit.create.backends.rattler import HINTS

    if kind == "missing":
        return SolveFailed(f"the conda lock has no answer: {message}", hint=HINTS["missing"])
    return LockFailed(f"cannot lock: {message or how}", hint=HINTS.get(kind, ""))


def _lockfile(workdir: Path, platforms: list[str], solved: dict[str, list[dict[str, Any]]]) -> Any:
    """conda-lock's Lockfile of the solved records, built as conda-lock's own solver path builds it."""
    with warnings.catch_warnings():
        # conda-lock's vendored conda warns on import that its vendored frozendict is deprecated.
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        from conda_lock.content_hash import compute_content_hashes
        from conda_lock.lockfile import apply_categories
        from conda_lock.lockfile.v2prelim.models import HashModel, LockedDependency, Lockfile, LockMeta
        from conda_lock.src_parser import make_lock_spec
        from conda_lock.virtual_package import virtual_package_repo_from_specification

    # conda's MatchSpec as conda-lock vendors and uses it (untyped there).
    match_spec: Any = importlib.import_module("conda_lock._vendor.conda.models.match_spec").MatchSpec
    mapping = workdir / "pypi-mapping.json"  # names of pip packages: there are none (checked above)
    mapping.write_text("{}", encoding="utf-8")
    spec = make_lock_spec(
        src_files=[workdir / "environment.yml"], platform_overrides=platforms, mapping_url=str(mapping)
    )
    repo = virtual_package_repo_from_specification(workdir / "virtual-packages.yml")
    packages = []
    for platform in platforms:
        planned = {}
        for record in solved[platform]:
            merged: dict[str, list[Any]] = {}
            for dep in record["depends"]:
                match = match_spec(dep)
                merged.setdefault(match.name, []).append(match)
            dependencies = {}
            for name, matches in merged.items():
                one = matches[0] if len(matches) == 1 else match_spec.merge(matches)[0]
                dependencies[name] = one.version.spec_str if one.version is not None else ""
            planned[record["name"]] = LockedDependency(
                name=record["name"],
                version=record["version"],
                manager="conda",
                platform=platform,
                dependencies=dependencies,
                url=record["url"],
                hash=HashModel(md5=record["md5"] or "", sha256=record["sha256"]),
            )
        requested = {d.name: d for d in spec.dependencies[platform] if d.manager == "conda"}
        apply_categories(requested=requested, planned=planned, mapping_url=str(mapping))
        packages += list(planned.values())
    return Lockfile(
        package=packages,
        metadata=LockMeta(
            content_hash=compute_content_hashes(spec, repo),
            channels=list(spec.channels),
            platforms=spec.platforms,
            sources=["environment.yml"],
        ),
    )


def _write(lockfile: Any, path: Path) -> None:
    from conda_lock.lockfile import write_conda_lock_file

    write_conda_lock_file(lockfile, path, metadata_choices=set())
