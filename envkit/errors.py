"""Every error envkit raises on purpose, the exit codes of the command line, and the checks that
make a value given to envkit an InputError (one per kind of value: a name, a path, a URL).

The codes are a contract; ``EXIT_CODES`` below is their one description: ``envkit --help`` is built
from it and a test holds the README's "Exit codes" table to it. Each error class declares the code it
ends envkit with, in its own body (``__init_subclass__`` refuses a class that does not), so a code
means one thing wherever it comes from and no error becomes "internal error" by omission.

These classes only carry the code; the command line (envkit/cli.py) turns them into exit statuses.
"""

from __future__ import annotations

import math
import re
import unicodedata
import urllib.parse
from dataclasses import dataclass
from typing import ClassVar, Final, Optional

from envkit.redact import redact

__all__ = [
    "ERROR_SCHEMA",
    "EXIT_CHECK_FAILED",
    "EXIT_CODES",
    "EXIT_HANGUP",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_NO_BUILD",
    "EXIT_OK",
    "EXIT_STEP_FAILED",
    "EXIT_USAGE",
    "CreateFailed",
    "EnvkitError",
    "InputError",
    "KnowledgeError",
    "LockFailed",
    "NoBuildError",
    "RejectedBuild",
    "SolveFailed",
    "WayOut",
    "check_name",
    "check_path",
    "check_seconds",
    "check_text",
    "check_url",
]

EXIT_OK: Final = 0
EXIT_CHECK_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_NO_BUILD: Final = 3
EXIT_STEP_FAILED: Final = 4
EXIT_INTERNAL: Final = 70  # EX_SOFTWARE of BSD's sysexits.h: an internal software error
EXIT_HANGUP: Final = 129  # 128 + SIGHUP: the terminal or the ssh session closed (envkit._signals.Hangup)
EXIT_INTERRUPTED: Final = 130  # 128 + SIGINT, what a shell reports for a program Ctrl-C ended
# The document a failed ``--json`` run prints on stdout (README "JSON output"): schema, command,
# error, hint, exit_code.
ERROR_SCHEMA: Final = "envkit.error/1"

# What each code means, once. The text is the README table's (Markdown: `--strict`); --help shows it
# without the backticks.
EXIT_CODES: Final[tuple[tuple[int, str], ...]] = (
    (EXIT_OK, "healthy / done"),
    (EXIT_CHECK_FAILED, "a check failed (with `--strict`, a warning too)"),
    (EXIT_USAGE, "usage or input error: a bad flag, a malformed file, an unknown environment"),
    (EXIT_NO_BUILD, "no torch build satisfies the request"),
    (
        EXIT_STEP_FAILED,
        (
            "an installer or conda-lock step failed, or the new environment's torch did not work: "
            "`create` put the environment back as it was"
        ),
    ),
    (
        EXIT_INTERNAL,
        (
            "internal error: one line on stderr, the traceback in a log file under "
            "`~/.cache/envkit/logs/` whose path is printed"
        ),
    ),
    (EXIT_HANGUP, "hung up (SIGHUP: the terminal or ssh session closed); undone as for Ctrl-C"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C, or SIGTERM)"),
)
# Codes an error class may declare: 0 is success, 129 and 130 belong to signals, not to a class.
_ERROR_CODES: Final = frozenset(code for code, _ in EXIT_CODES) - {EXIT_OK, EXIT_HANGUP, EXIT_INTERRUPTED}


class EnvkitError(Exception):
    """An error with a message for the user: what failed, what was tried, what to do next.

    The message and the hint are redacted (envkit.redact) when set, so that no exception text,
    traceback or log carries a credential, whoever builds the text (an installer's argv, its output).

    Raised as is, an EnvkitError is an internal error (70): a message without a class is a bug.
    Every subclass declares ``exit_code`` in its own body, one of the documented codes.
    """

    exit_code: ClassVar[int] = EXIT_INTERNAL

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "exit_code" not in cls.__dict__:
            raise TypeError(
                f"{cls.__qualname__} must declare its exit code (exit_code = ...) in its own body: "
                "one of envkit.errors.EXIT_CODES"
            )
        code = cls.__dict__["exit_code"]
        if isinstance(code, bool) or not isinstance(code, int) or code not in _ERROR_CODES:
            raise TypeError(
                f"{cls.__qualname__}.exit_code = {code!r} is not a documented error code "
                f"(envkit.errors.EXIT_CODES: {', '.join(map(str, sorted(_ERROR_CODES)))})"
            )

    def __init__(self, message: str, *, hint: str = "") -> None:
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.hint = hint

    @property
    def hint(self) -> str:
        return self._hint

    @hint.setter
    def hint(self, value: str) -> None:
        self._hint = redact(value)


class InputError(EnvkitError):
    """Bad input: a flag value, a file that does not parse, an environment that does not exist."""

    exit_code: ClassVar[int] = EXIT_USAGE


@dataclass(frozen=True)
class RejectedBuild:
    """A reason NoBuildError gives: a candidate build (``2.5.1+cu121``), or a span of releases that
    fail alike (``count`` > 1: "torch 1.0.0 … 2.3.1 (12 releases)"), and the rule it fails."""

    candidate: str
    rule: str  # the resolver's rule: "torch", "cuda", "channel", "platform", "python", "gpu_driver", …
    reason: str
    count: int = 1


@dataclass(frozen=True)
class WayOut:
    """One way to a build: relax one rule (``rule``). ``candidate``: the build it leads to;
    ``driver``: the driver it needs ("525.60.13", or a branch "R520"); ``value``: the flag value it
    takes (``--cuda 12.1`` -> "12.1", a Python version)."""

    rule: str  # "driver", "gpu_driver", "cuda", "torch", "python", "channel", "cpu", "arch", "jetson"
    text: str
    candidate: Optional[str] = None
    driver: Optional[str] = None
    value: Optional[str] = None


class NoBuildError(EnvkitError):
    """No torch build satisfies the request on the target machine.

    It carries its reasons (``rejected``) and its ways out (``ways_out``) as records; the message is
    ``summary`` and those reasons (at most ``SHOWN`` single candidates, then the spans), the hint its
    ways out, nearest first. A caller that builds its own fix reads the records, not the text.
    """

    exit_code: ClassVar[int] = EXIT_NO_BUILD
    SHOWN: ClassVar[int] = 8

    def __init__(
        self,
        summary: str,
        *,
        rejected: tuple[RejectedBuild, ...] = (),
        ways_out: tuple[WayOut, ...] = (),
        hint: Optional[str] = None,
    ) -> None:
        self.summary = summary
        self.rejected = rejected
        self.ways_out = ways_out
        single = [r for r in self.rejected if r.count == 1]
        lines = [summary, *(f"  {r.candidate}: {r.reason}" for r in single[: self.SHOWN])]
        if len(single) > self.SHOWN:
            lines.append(f"  … and {len(single) - self.SHOWN} more")
        lines += [f"  {r.candidate}: {r.reason}" for r in self.rejected if r.count > 1]
        ways = "; or ".join(w.text for w in self.ways_out)
        super().__init__("\n".join(lines), hint=ways if hint is None else hint)


class CreateFailed(EnvkitError):
    """An installer step of ``envkit create`` failed (or the new torch did not work); the environment
    was removed, or the one ``--force`` replaced was put back. Raised by envkit.create.install.
    Its message and hint are redacted: an installer's output may echo an index URL."""

    exit_code: ClassVar[int] = EXIT_STEP_FAILED


class SolveFailed(EnvkitError):
    """A conda solve has no answer (envkit.create.backends.rattler, envkit.create.lock): the
    channels hold no set of packages that fits the request on the target (its ``__cuda``, its
    glibc), or none of the package at all. Exit 3, as the resolver's own refusal: no build
    satisfies the request; nothing was installed."""

    exit_code: ClassVar[int] = EXIT_NO_BUILD


class LockFailed(EnvkitError):
    """conda-lock could not run or did not finish (envkit.create.lock); no lock file was written."""

    exit_code: ClassVar[int] = EXIT_STEP_FAILED


class KnowledgeError(EnvkitError):
    """The knowledge base itself is wrong: a bug in envkit's data, not the user's input.

    Its tables are only ever read from envkit's own package (envkit/knowledge/*.toml, never a path
    the user gives), so a bad row is envkit's bug: an internal error, with the crash log."""

    exit_code: ClassVar[int] = EXIT_INTERNAL


# ---- values at the edge: one check per kind, used by every flag of that kind (envkit.cli) -------
#
# Versions, specifiers, GPUs and drivers have their parsers (envkit.versions, envkit.resolve);
# these are the kinds a parser does not cover. A value that reaches a file or a command line with a
# newline in it writes lines of its own (`--mirror "URL<newline>--extra-index-url http://elsewhere"`
# added an index to requirements.txt); one longer than the file system takes failed deep inside as
# an internal error.

# The longest name envkit takes: it becomes folder names with envkit's side files beside them
# (``.NAME.envkit-trash-1700000000``), and a file name holds at most NAME_MAX (255) bytes.
MAX_NAME_CHARS: Final = 200
NAME_MAX: Final = 255  # bytes in one path component (Linux, macOS, the BSDs: limits.h NAME_MAX)
PATH_MAX: Final = 4096  # bytes in a whole path (Linux's PATH_MAX; macOS's is 1024, found by the OS)
_NAME: Final = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*\Z")


def _shown(value: str) -> str:
    """``value`` for a message, at most 120 characters: as it is, or its repr where it holds control
    characters (escaped, so that a message never obeys them)."""
    text = repr(value) if _control(value) is not None else value
    return text if len(text) <= 120 else text[:119] + "…"


def _control(value: str) -> Optional[str]:
    """The first control or invisible formatting character in ``value`` (Unicode Cc and Cf:
    newline, ESC, NUL, the bidi overrides), or None."""
    return next((c for c in value if unicodedata.category(c) in ("Cc", "Cf")), None)


def check_text(value: str, label: str, *, spaces: bool = True) -> str:
    """Any value given to envkit: no control characters (a newline, ESC, NUL, a bidi override),
    and with ``spaces=False`` no whitespace either. Returns ``value``; InputError naming ``label``
    (``--mirror``) otherwise."""
    bad = _control(value)
    if bad is not None:
        raise InputError(
            f"{label} {_shown(value)}: holds the control character {bad!r}; not a value envkit takes"
        )
    if not spaces and any(c.isspace() for c in value):
        raise InputError(f"{label} {_shown(value)}: holds whitespace; not a value envkit takes")
    return value


def check_name(value: str, label: str = "environment name") -> str:
    """A name (``create NAME``, ``--env``, ``spec --name``): letters, digits, ``.``, ``_`` and ``-``,
    not starting with a dot, at most MAX_NAME_CHARS characters. Returns ``value``."""
    if len(value) > MAX_NAME_CHARS:
        raise InputError(
            f"{label} {_shown(value)}: {len(value)} characters; a name has at most {MAX_NAME_CHARS}"
        )
    if not _NAME.match(value):
        raise InputError(
            f"{label} {_shown(value)}: use letters, digits, '.', '_' and '-', not starting with '.'",
            hint="to name a place, pass a path (--prefix PATH)",
        )
    return value


def check_path(value: str, label: str, *, named: bool = False) -> str:
    """A path (``--from``, ``--output``, ``--prefix``, a template or report file): no control
    characters, no part longer than NAME_MAX bytes and no more than PATH_MAX bytes in all (what
    the file system would refuse with ENAMETOOLONG, said before anything is read or made).
    ``named``: ``label`` shows the value already (``--junit out.xml``). Returns ``value``."""
    bad = _control(value)
    where = label if named else f"{label} {_shown(value)}"
    if named and bad is not None:  # the label shows the value raw: a newline would start a 2nd line
        where = label.replace(value, _shown(value))
    if bad is not None:
        raise InputError(f"{where}: holds the control character {bad!r}; not a path envkit takes")
    raw = value.encode("utf-8", "surrogateescape")
    if len(raw) > PATH_MAX:
        raise InputError(f"{where}: {len(raw)} bytes; a path has at most {PATH_MAX}")
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > NAME_MAX:
        raise InputError(f"{where}: a part of it is {len(longest)} bytes; a file name has at most {NAME_MAX}")
    return value


def check_url(value: str, label: str) -> str:
    """An index or channel URL (``--mirror URL``): http(s), a host, no whitespace and no control
    characters anywhere (each would start a line or an argument of its own in a spec file or a
    command). Returns ``value``."""
    check_text(value, label, spaces=False)
    try:
        parts = urllib.parse.urlsplit(value)  # ValueError: an unclosed '[' ("Invalid IPv6 URL")
        host = parts.hostname
        parts.port  # noqa: B018 -- ValueError for a port that is not one (0-65535)
    except ValueError:
        host = None
    if not host or parts.scheme not in ("http", "https"):
        raise InputError(f"{label} {redact(_shown(value))}: not an http(s) URL")
    return value


# The longest wait envkit takes (--timeout): a week. Past it a deadline overflows the platform's
# time_t in the waits (`--timeout 1e300` and `inf` were exit 70), and NaN compares false with
# everything, so every wait ended at once.
MAX_SECONDS: Final = 7 * 24 * 3600.0


def check_seconds(value: float, label: str) -> float:
    """A duration in seconds (``--timeout``): a finite number above 0, at most MAX_SECONDS."""
    if not math.isfinite(value) or value <= 0 or value > MAX_SECONDS:
        raise InputError(f"{label} {value!r}: give seconds above 0 and at most {MAX_SECONDS:.0f} (a week)")
    return value
