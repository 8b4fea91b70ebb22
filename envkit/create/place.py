"""Where ``envkit create`` may build, and what it may replace.

- NAME is a name, never a path (``create ../envs --force`` once meant "replace every environment").
- ``--force`` replaces only an environment: one envkit made (``<env>/envkit/created.json``), a venv
  (``pyvenv.cfg``, https://docs.python.org/3/library/venv.html) or a conda environment
  (``conda-meta/``, https://docs.conda.io/projects/conda/en/stable/user-guide/concepts/environments.html)
  — never a project folder, a conda installation holding other environments, or a link.
- One ``create`` of a place at a time: a lock file beside it (``flock``, which the kernel releases
  when the holder dies, so a killed run never leaves a stale lock).
- An old environment left moved aside by a run that was killed outright (SIGKILL, power loss) is
  found on the next run and put back, or the way to resolve it is spelled out.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Optional

from envkit import errors
from envkit.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "MARKER",
    "Target",
    "check_name",
    "check_not_busy",
    "check_prefix",
    "check_target",
    "is_environment",
    "leftover_backup",
    "leftovers",
    "locked",
    "side_path",
]

MARKER: Final = Path("envkit") / "created.json"


def check_name(name: str) -> None:
    """NAME: letters, digits and ``._-``, not starting with a dot, not too long (envkit.errors'
    one check of a name); InputError otherwise."""
    errors.check_name(name)


def check_prefix(prefix: Path) -> None:
    """A --prefix must name a folder inside another one (not ``/``)."""
    if prefix.parent == prefix or not prefix.name:
        raise InputError(f"--prefix {prefix}: not a place for an environment; name a folder inside it")


def side_path(prefix: Path, kind: str) -> Path:
    """envkit's own files beside an environment: ``.NAME.envkit-KIND`` (hidden, so never listed as one)."""
    return prefix.with_name(f".{prefix.name}.envkit-{kind}")


def leftovers(prefix: Path, kind: str = "old") -> list[Path]:
    """Folders an interrupted run left beside ``prefix`` (``.NAME.envkit-old-<ts>``), oldest first."""
    try:
        return sorted(prefix.parent.glob(f"{side_path(prefix, kind).name}-*"))
    except OSError:
        return []


# What a venv holds at its top: bin|Scripts, include|Include, lib|Lib, the lib64 link, pyvenv.cfg
# (https://docs.python.org/3/library/venv.html; Python 3.13's venv adds .gitignore), uv's venv adds
# CACHEDIR.TAG and .lock (uv's src/uv-virtualenv), and pip puts packages' data files under share/,
# etc/ and man/ of the prefix. envkit/ is envkit's own record of how it made the environment.
VENV_ENTRIES: Final = frozenset(
    {"bin", "Scripts", "include", "Include", "lib", "Lib", "lib64", "pyvenv.cfg", ".gitignore"}
    | {"CACHEDIR.TAG", ".lock", "share", "etc", "man", "envkit"}
)
# A conda environment's own entries besides what its packages installed (conda-meta/*.json "files"):
# its metadata, `conda config --env`'s .condarc, the .nonadmin flag of conda's installers.
CONDA_ENTRIES: Final = frozenset({"conda-meta", ".condarc", ".nonadmin", "envkit"})
_SHOWN: Final = 3  # foreign entries named in a refusal


def _conda_entries(path: Path) -> set[str]:
    """The top-level names the packages of a conda environment installed: the first part of each
    path in ``conda-meta/<package>.json``'s "files" (conda's PrefixRecord; micromamba and rattler
    write the same). A record that cannot be read proves nothing."""
    from envkit._files import parse_json, read_text

    names: set[str] = set()
    try:
        records = sorted((path / "conda-meta").glob("*.json"))
    except OSError:
        return names
    for record in records:
        try:
            data = parse_json(read_text(str(record)), str(record))
        except (InputError, ValueError):
            continue
        files = data.get("files") if isinstance(data, dict) else None
        if isinstance(files, list):
            names.update(f.replace("\\", "/").split("/", 1)[0] for f in files if isinstance(f, str) and f)
    return names


def _foreign(path: Path, conda: bool) -> list[str]:
    """The entries at the top of ``path`` that no venv or conda layout explains, sorted."""
    allowed = set(VENV_ENTRIES)
    if conda:
        allowed |= CONDA_ENTRIES | _conda_entries(path)
    try:
        entries = sorted(os.listdir(path))
    except OSError:
        return []
    return [name for name in entries if name not in allowed]


def _not_environment(path: Path) -> Optional[str]:
    """Why ``path`` is not something --force may replace, or None when envkit can prove that it is
    an environment: its marker, pyvenv.cfg or conda-meta/, and nothing at its top that a venv or
    a conda environment would not hold (a project with a venv made in its root has src/)."""
    if path.is_symlink():
        return "is a symbolic link"
    if not path.is_dir():
        return "is not a folder"
    if (path / ".git").exists():
        return "is a git work tree"
    if (path / "condabin").is_dir() or ((path / "envs").is_dir() and any((path / "envs").iterdir())):
        return "is a conda installation that holds other environments"
    conda = (path / "conda-meta").is_dir()
    if not ((path / MARKER).is_file() or (path / "pyvenv.cfg").is_file() or conda):
        return "is not an environment"
    foreign = _foreign(path, conda)
    if foreign:
        more = f" and {len(foreign) - _SHOWN} more" if len(foreign) > _SHOWN else ""
        return f"holds {', '.join(foreign[:_SHOWN])}{more}, which no environment's layout explains"
    return None


def is_environment(path: Path) -> bool:
    """An environment --force may replace: envkit's marker, a venv's pyvenv.cfg, or conda-meta/."""
    return _not_environment(path) is None


@dataclass(frozen=True)
class Target:
    """What create does with what is at the prefix before it installs anything."""

    prefix: Path
    restore: Optional[Path] = None  # a left-over backup to put back first
    replace: bool = False  # an environment is there, and --force replaces it

    def notes(self) -> list[str]:
        notes = []
        if self.restore is not None:
            notes.append(f"puts back {self.prefix} from {self.restore}, left by an interrupted envkit create")
        if self.replace:
            notes.append(f"replaces the environment {self.prefix} (--force; put back if anything fails)")
        return notes


def leftover_backup(prefix: Path) -> Optional[Path]:
    """The old environment a killed run left moved aside, when it can go back under its name (the
    name is free and there is one); InputError with the commands to resolve it otherwise."""
    backups = leftovers(prefix)
    present = os.path.lexists(prefix)
    if backups and (present or len(backups) > 1):
        raise _leftover_error(prefix, backups, present=present)
    return backups[0] if backups else None


def check_target(prefix: Path, *, force: bool) -> Target:
    """Decide what happens to ``prefix``, or refuse (InputError) — the same for ``--dry-run``."""
    restore = leftover_backup(prefix)
    there = restore if restore is not None else (prefix if os.path.lexists(prefix) else None)
    if there is None:
        return Target(prefix)
    if not force:
        raise InputError(
            f"{prefix} already exists; envkit never touches an existing environment",
            hint="pass --force to replace it, or choose another name or --prefix",
        )
    if os.path.ismount(there):
        # --force moves the old environment aside (a rename), which a mount point refuses (EBUSY):
        # the run failed after resolving and laying out, as an installer failure (exit 4).
        raise InputError(
            f"{prefix} is a mount point; --force cannot move it aside to replace it",
            hint=f"create the environment in a folder inside it (--prefix {prefix / 'env'})",
        )
    why = _not_environment(there)
    if why is not None:
        raise InputError(
            f"{prefix} is not an environment; refusing to replace it ({there} {why})",
            hint="--force replaces only an environment (pyvenv.cfg, conda-meta/ or envkit/created.json,"
            " and nothing else at its top); move what is yours out of it, or choose another NAME or"
            " --prefix",
        )
    return Target(prefix, restore=restore, replace=True)


def _leftover_error(prefix: Path, backups: list[Path], *, present: bool) -> InputError:
    import shlex

    newest = shlex.quote(str(backups[-1]))
    here = shlex.quote(str(prefix))
    others = " ".join(shlex.quote(str(b)) for b in backups[:-1])
    drop = f"rm -rf {others} && " if others else ""
    if present:
        how = (
            f"to keep {prefix}: rm -rf {' '.join(shlex.quote(str(b)) for b in backups)}; to go back to"
            f" the previous one: {drop}rm -rf {here} && mv {newest} {here}"
        )
    else:
        how = f"to put back the newest: {drop}mv {newest} {here}"
    return InputError(
        f"an interrupted envkit create left the previous environment of {prefix} at"
        f" {', '.join(str(b) for b in backups)}; refusing to guess which to keep",
        hint=how,
    )


@contextlib.contextmanager
def locked(prefix: Path) -> Iterator[Path]:
    """Hold ``.NAME.envkit-lock`` beside ``prefix`` (creating the parent folder if needed).

    InputError at once when another envkit holds it (with that run's pid) or when the place cannot
    be written (a read-only file system); what this made is removed again when it fails.
    """
    path = side_path(prefix, "lock")
    made = _make_parents(prefix)
    try:
        fd = _acquire(path, prefix)
    except BaseException:
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield path
    finally:
        # Unlinking while still holding it: a run that opened the old file sees the inode change
        # in _acquire and tries again on the new one.
        with contextlib.suppress(OSError):
            path.unlink()
        os.close(fd)


def _cannot_write(prefix: Path, exc: OSError) -> InputError:
    where = f" ({exc.filename})" if exc.filename else ""
    return InputError(
        f"cannot create {prefix}: {exc.strerror or exc}{where}",
        hint="choose a --prefix on a writable file system" if exc.errno == errno.EROFS else "",
    )


def _make_parents(prefix: Path) -> list[Path]:
    """mkdir -p of the prefix's parent; the folders it made, deepest first (to remove them again)."""
    folder = prefix.parent
    missing = []
    for candidate in (folder, *folder.parents):
        if os.path.lexists(candidate):
            break
        missing.append(candidate)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        for made in missing:
            with contextlib.suppress(OSError):
                made.rmdir()
        raise _cannot_write(prefix, exc) from None
    return missing


def _acquire(path: Path, prefix: Path) -> int:
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise _cannot_write(prefix, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            busy = _busy(prefix, path, fd)
            os.close(fd)
            raise busy from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def _busy(prefix: Path, path: Path, fd: int) -> InputError:
    holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    who = f" (pid {holder})" if holder.isdigit() else ""
    return InputError(
        f"another envkit create{who} is creating {prefix} right now",
        hint=f"wait for it to finish, or choose another name or --prefix (its lock: {path})",
    )


def check_not_busy(prefix: Path) -> None:
    """InputError when another envkit create holds ``prefix``'s lock; writes nothing (--dry-run)."""
    path = side_path(prefix, "lock")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return  # no lock file: nobody is creating it
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _busy(prefix, path, fd) from None
    finally:
        os.close(fd)
