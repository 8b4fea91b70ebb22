"""Every error envkit raises on purpose, and the exit codes of the command line.

The codes are a contract; ``EXIT_CODES`` below is their one description: ``envkit --help`` is built
from it and a test holds the README's "Exit codes" table to it. Each error class declares the code it
ends envkit with, in its own body (``__init_subclass__`` refuses a class that does not), so a code
means one thing wherever it comes from and no error becomes "internal error" by omission.

These classes only carry the code; the command line (envkit/cli.py) turns them into exit statuses.
"""

from __future__ import annotations

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
    "WayOut",
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


class LockFailed(EnvkitError):
    """conda-lock could not run or did not finish (envkit.create.lock); no lock file was written."""

    exit_code: ClassVar[int] = EXIT_STEP_FAILED


class KnowledgeError(EnvkitError):
    """The knowledge base itself is wrong: a bug in envkit's data, not the user's input.

    Its tables are only ever read from envkit's own package (envkit/knowledge/*.toml, never a path
    the user gives), so a bad row is envkit's bug: an internal error, with the crash log."""

    exit_code: ClassVar[int] = EXIT_INTERNAL
