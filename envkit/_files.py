"""Reading the files users name (one-line errors), parsing them without letting a hostile file
exhaust memory, time or the stack, and writing files whole or not at all: a temporary name in the
same folder, then a rename.

Every file a user names (``--from``, fleet and diff reports, ``--expect``, templates, spec files) is
read by :func:`read_text` and parsed by :func:`parse_json`, :func:`parse_toml` or
:func:`parse_yaml`, so each limit below holds for all of them.
"""

from __future__ import annotations

import errno
import importlib
import json
import os
import re
import select
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

from envkit.errors import InputError, check_path

__all__ = [
    "MAX_INPUT_BYTES",
    "MAX_NESTING",
    "check_output",
    "decode_text",
    "parse_json",
    "parse_toml",
    "parse_yaml",
    "read_bytes",
    "read_text",
    "write_atomic",
    "write_output",
]

# The largest file envkit reads. One node's report is ~10-100 KiB and a pasted collect_env text a few
# KiB; 64 MiB leaves room for anything real and keeps a mistaken `--from /var/log/huge.log` (or a
# hostile file) from being read whole into memory.
MAX_INPUT_BYTES: Final = 64 * 1024 * 1024
_PIECE: Final = 1024 * 1024  # what _read_file asks for at a time where the size is not known
# The deepest nesting of lists / tables envkit accepts in a file it reads. Its own reports nest 6
# deep; anything past this is not a report, and walking it would exhaust Python's stack
# (json, tomllib and PyYAML all recurse per level: `[[[[...` raises RecursionError).
MAX_NESTING: Final = 64


def _too_big(label: str, size: int, hint: str) -> InputError:
    # size is the file's own (fstat) when it is past the cap, else what was read: "more than".
    what = (
        f"{size / 2**20:.0f} MiB"
        if size > MAX_INPUT_BYTES + 1
        else f"more than {MAX_INPUT_BYTES // 2**20} MiB"
    )
    return InputError(
        f"{label}: the file is {what}; envkit reads files up to {MAX_INPUT_BYTES // 2**20} MiB",
        hint=hint or "is this the file you meant?",
    )


def read_bytes(
    path: str, *, label: Optional[str] = None, hint: str = "", deadline: Optional[float] = None
) -> bytes:
    """The bytes of a file a user named (``-``: standard input); InputError, prefixed ``label`` (the
    path by default), when it cannot be read, is larger than MAX_INPUT_BYTES, or has not ended by
    ``deadline`` (time.monotonic(); None: wait as long as it takes). A FIFO with no writer, a slow
    pipe or a terminal waits no longer than that."""
    label = label or path
    try:
        raw = _read_stdin(label, hint, deadline) if path == "-" else _read_file(path, label, hint, deadline)
    except OSError as exc:
        raise InputError(f"{label}: cannot read it ({_why(exc)})", hint=hint) from None
    if len(raw) > MAX_INPUT_BYTES:
        raise _too_big(label, len(raw), hint)
    return raw


def _read_stdin(label: str, hint: str, deadline: Optional[float]) -> bytes:
    stream = sys.stdin
    if stream is None:  # started with stdin closed (`<&-`): Python leaves sys.stdin None
        raise InputError(f"{label}: standard input is closed; nothing to read", hint=hint)
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):  # a stream without a descriptor (a test's BytesIO)
        return stream.buffer.read(MAX_INPUT_BYTES + 1)
    # The descriptor, not sys.stdin.buffer: a read abandoned at the deadline must not hold the
    # buffer's lock (the interpreter's exit would wait on it), and poll() needs the descriptor.
    return _read_rest(fd, b"", label, hint, deadline)


def _read_file(path: str, label: str, hint: str, deadline: Optional[float]) -> bytes:
    # os.open/os.read rather than open(): no buffered file object for a file read whole at once
    # (envkit fleet reads 10,000 of them). O_NONBLOCK: opening a FIFO that has no writer returns at
    # once instead of waiting for one (fifo(7)); the reads below wait, until the deadline.
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        size = st.st_size
        if size > MAX_INPUT_BYTES:
            raise _too_big(label, size, hint)
        first = b""
        if stat.S_ISREG(st.st_mode):
            # A read(64 MiB) allocates 64 MiB first: ask for the size fstat gave, and one byte more
            # to see a file that grew. A regular file read in full ends there.
            first = os.read(fd, size + 1) if size else b""
            if size and len(first) <= size:
                return first
        # fstat says 0 for pipes and /proc files (and a pipe's size on macOS is what it holds
        # now): read on, to the end or one byte past the cap.
        return _read_rest(fd, first, label, hint, deadline)
    finally:
        os.close(fd)


def _read_rest(fd: int, first: bytes, label: str, hint: str, deadline: Optional[float]) -> bytes:
    """Read ``fd`` to its end (or one byte past the cap), waiting for each piece at most until
    ``deadline``."""
    chunks, total = [first], len(first)
    poll = getattr(select, "poll", None)  # not on Windows: there the reads block
    poller = poll() if poll is not None else None
    if poller is not None:
        poller.register(fd, select.POLLIN)
    while total <= MAX_INPUT_BYTES:
        if poller is not None and deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(max(left, 0.0) * 1000):
                raise _timed_out(label, total, hint)
        elif poller is not None:
            poller.poll()
        try:
            chunk = os.read(fd, min(_PIECE, MAX_INPUT_BYTES + 1 - total))
        except BlockingIOError:  # a FIFO opened O_NONBLOCK whose writer has not written yet
            continue
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _timed_out(label: str, got: int, hint: str) -> InputError:
    what = "nothing arrived" if not got else f"the input did not end ({got} bytes arrived)"
    return InputError(f"{label}: {what} before the run's --timeout ran out", hint=hint)


def decode_text(raw: bytes, label: str, *, hint: str = "") -> str:
    """``raw`` (from read_bytes) as text; InputError when it is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{label}: not a text file (not UTF-8 at byte {exc.start})", hint=hint) from None


def read_text(
    path: str, *, label: Optional[str] = None, hint: str = "", deadline: Optional[float] = None
) -> str:
    """A text file a user named (``-``: standard input); InputError, prefixed ``label`` (the path by
    default), when it cannot be read, is larger than MAX_INPUT_BYTES or is not UTF-8 text."""
    label = label or path
    if (
        path == "-" and sys.stdin is not None and not hasattr(sys.stdin, "buffer")
    ):  # a text-only stream (tests that swap sys.stdin)
        text = sys.stdin.read(MAX_INPUT_BYTES + 1)
        if len(text) > MAX_INPUT_BYTES:
            raise _too_big(label, len(text), hint)
        return text
    return decode_text(read_bytes(path, label=label, hint=hint, deadline=deadline), label, hint=hint)


def _clean(value: Any, label: str) -> Any:
    """``value`` checked for nesting deeper than MAX_NESTING (iteratively: no recursion here), with
    lone surrogates (JSON's ``"\\ud800"``, which no UTF-8 output can carry) replaced by U+FFFD."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    dirty = False
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            dirty = dirty or _has_surrogate(item)
        elif isinstance(item, (dict, list)):
            if depth >= MAX_NESTING:
                raise _too_deep(label)
            if isinstance(item, dict):
                dirty = dirty or any(_has_surrogate(k) for k in item)
                item = list(item.values())
            stack.extend((child, depth + 1) for child in item if isinstance(child, (str, dict, list)))
    return _replace_surrogates(value) if dirty else value


def _has_surrogate(text: object) -> bool:
    if not isinstance(text, str):
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _fix(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text)


def _replace_surrogates(value: Any) -> Any:
    # Only reached for data already known to nest at most MAX_NESTING deep.
    if isinstance(value, str):
        return _fix(value)
    if isinstance(value, dict):
        return {_fix(k) if isinstance(k, str) else k: _replace_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    return value


def _too_deep(label: str) -> InputError:
    return InputError(f"{label}: nested more than {MAX_NESTING} levels deep; not a file envkit reads")


def parse_json(text: str, label: str) -> Any:
    """JSON text to data; ValueError (json's own, with its position; also an integer too long for
    Python to convert) when it is not JSON, InputError when it nests deeper than MAX_NESTING."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise _too_deep(label) from None
    return _clean(data, label)


def parse_toml(text: str, label: str, *, hint: str = "") -> dict[str, Any]:
    """TOML text to a table; InputError naming ``label`` when it is not TOML or nests too deep."""
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise _too_deep(label) from None
    except ValueError as exc:  # TOMLDecodeError, and int() past sys.get_int_max_str_digits()
        raise InputError(f"{label}: not valid TOML: {exc}", hint=hint) from None
    return _clean(data, label)  # type: ignore[no-any-return]


def _yaml_loader() -> Any:
    # PyYAML is imported only when a YAML file is read (and typed as Any: its stubs are not a
    # dependency). It is what conda-lock's own parser uses (conda_lock/src_parser/environment_yaml.py).
    try:
        yaml: Any = importlib.import_module("yaml")
    except ImportError:
        raise InputError("reading YAML files needs PyYAML", hint="pip install pyyaml") from None

    class NoAliasLoader(yaml.SafeLoader):  # type: ignore[misc]
        """SafeLoader without aliases: ``*name`` repeats a node without copying it, so nine lines of
        aliases expand to 10^9 list items when constructed (the "billion laughs" attack; PyYAML
        issue https://github.com/yaml/pyyaml/issues/211). conda environment files never need them.

        It stops past MAX_NESTING levels too, as it composes: PyYAML's scanner does work per open
        flow level for each token, so 100,000 "[" took 1.6 s before Python's recursion limit ended it
        (_clean refuses anything this deep anyway: a node deeper than MAX_NESTING + 1 has a list or
        mapping at depth MAX_NESTING above it)."""

        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"found an alias (*{event.anchor}); envkit does not read YAML aliases",
                    event.start_mark,
                )
            if self.depth > MAX_NESTING:
                raise RecursionError  # parse_yaml's "nested more than" error
            self.depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return yaml, NoAliasLoader


def parse_yaml(text: str, label: str) -> Any:
    """YAML text to data with PyYAML's safe loader, refusing aliases; InputError naming ``label``."""
    yaml, loader = _yaml_loader()
    try:
        data = yaml.load(text, Loader=loader)  # a SafeLoader subclass: no arbitrary objects
    except RecursionError:
        raise _too_deep(label) from None
    except yaml.MarkedYAMLError as exc:
        where = f" (line {exc.problem_mark.line + 1})" if exc.problem_mark is not None else ""
        raise InputError(f"{label}: not valid YAML{where}: {exc.problem or exc.context}") from None
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: an int past sys.get_int_max_str_digits()
        raise InputError(
            f"{label}: not valid YAML: {str(exc).splitlines()[0] if str(exc) else exc}"
        ) from None
    return _clean(data, label)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# How long a write to a FIFO waits for a reader to open it, or to take the next piece, when the
# caller gives no deadline of its own (fleet --html, spec: commands without a --timeout); preflight
# passes its run's deadline instead. Past it the write is refused.
FIFO_WAIT_S: Final = 10.0


def _kind(path: Path) -> Optional[str]:
    """What is at ``path`` once links are followed: None (nothing), "file", "folder", "fifo",
    "character device", "block device", "socket" (or "special file")."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link to itself: nothing envkit may follow or replace
            raise
        return None  # a dangling link (the file is made where it points), or a parent that is a file
    for test, name in (
        (stat.S_ISREG, "file"),
        (stat.S_ISDIR, "folder"),
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return name
    return "special file"


def _through_proc(path: Path) -> bool:
    """Whether ``path`` reaches its file through a /proc magic link (``/dev/stdout`` ->
    ``/proc/self/fd/1``): the file is another process's open file (the shell's ``> out.xml``),
    written where it stands, never replaced."""
    current = str(path)
    for _ in range(40):  # the kernel's own bound on links followed (MAXSYMLINKS)
        try:
            link = os.readlink(current)
        except OSError:
            return False
        current = os.path.join(os.path.dirname(current), link)
        if os.path.normpath(current).startswith("/proc/"):
            return True
    return False


def _write_in_place(path: Path, data: bytes, deadline: Optional[float]) -> None:
    """Write ``data`` into what is at ``path`` (a character device, a FIFO, a file reached through
    /proc) without replacing it: appended, as a shell's ``>>`` would. A FIFO with no reader, or one
    that stops reading, is waited for until ``deadline`` (time.monotonic()), then refused."""
    end = deadline if deadline is not None else time.monotonic() + FIFO_WAIT_S
    flags = os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
    flags |= getattr(os, "O_CLOEXEC", 0)
    while True:
        try:
            fd = os.open(path, flags)  # never O_CREAT, never O_TRUNC
            break
        except OSError as exc:
            # ENXIO: a FIFO nobody has opened for reading yet (open(2)); wait for one.
            if exc.errno != errno.ENXIO or time.monotonic() >= end:
                if exc.errno == errno.ENXIO:
                    raise OSError(errno.ENXIO, "no process is reading this FIFO") from None
                raise
            time.sleep(0.02)
    try:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                left = end - time.monotonic()
                if left <= 0 or not select.select([], [fd], [], left)[1]:
                    raise OSError(errno.ETIMEDOUT, "the reader stopped reading") from None
    finally:
        os.close(fd)


def write_atomic(path: str | Path, text: str, *, mode: int = 0o666, deadline: Optional[float] = None) -> Path:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never half.

    Only a regular file (or nothing) is replaced that way: a character device (``/dev/null``,
    a terminal), a FIFO or a file reached through ``/proc`` (``/dev/stdout``) is written in place
    (the device stays a device: ``--junit /dev/null`` as root must not make /dev/null a file);
    a block device, a socket or a folder is refused with an OSError. A link to a regular file
    replaces the file it points to, and a link to nothing makes it, as a shell's ``>`` would: the
    link stays (it is the user's). The file gets ``mode`` minus the umask, as ``open()`` would
    create it (mkstemp alone gives 0600).
    """
    target = Path(path)
    kind = _kind(target)
    if kind in ("character device", "fifo") or (kind == "file" and _through_proc(target)):
        _write_in_place(target, text.encode("utf-8"), deadline)
        return target
    if kind not in (None, "file"):
        raise OSError(errno.EINVAL, f"is a {kind}; envkit writes files, character devices and FIFOs")
    if target.is_symlink():  # to a file, or dangling: os.replace over the link would delete it
        target = Path(os.path.realpath(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, mode & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def check_output(path: str, *, label: str, folder: bool = False) -> Path:
    """Fail early, with a one-line InputError naming ``label`` (``--junit out.xml``), for an output
    path that cannot be written: a folder where a file is wanted (or a file where a folder is), a
    name too long, a parent that is a file, or a read-only place. Missing parents are fine: they
    are made when written."""
    check_path(path, label, named=True)  # control characters, NAME_MAX, PATH_MAX: envkit.errors
    target = Path(path)
    try:
        if folder:
            if target.exists() and not target.is_dir():
                raise InputError(f"{label}: not a folder")
        elif target.is_dir():
            raise InputError(f"{label}: is a folder; give a file name")
        else:
            kind = _kind(target)
            if kind in ("character device", "fifo"):  # written in place: it must take writes itself
                if not os.access(target, os.W_OK):
                    raise InputError(f"{label}: cannot write to this {kind} (not yours)")
                return target
            if kind not in (None, "file"):
                raise InputError(f"{label}: is a {kind}; envkit writes files, character devices and FIFOs")
        # The nearest existing folder above must be one and writable (os.access: EROFS too).
        parent = target if folder else target.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            raise InputError(f"{label}: {parent} is not a folder")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise InputError(f"{label}: cannot write in {parent} (read-only or not yours)")
    except OSError as exc:
        raise InputError(f"{label}: cannot write it ({_why(exc)})") from None
    return target


def _why(exc: OSError) -> str:
    if exc.errno == errno.ENAMETOOLONG:
        return "the name is too long"
    return exc.strerror or str(exc)


def write_output(path: str, text: str, *, label: str, deadline: Optional[float] = None) -> Path:
    """:func:`write_atomic` for a file a user asked for (``--junit``, ``--html``): InputError (exit 2)
    naming ``label`` when it cannot be written, instead of an internal error. ``deadline``: the
    run's (its --timeout), for a FIFO's reader; None: FIFO_WAIT_S."""
    check_output(path, label=label)
    try:
        return write_atomic(path, text, deadline=deadline)
    except OSError as exc:
        raise InputError(f"{label}: cannot write it ({_why(exc)})") from None
