"""Every error envkit raises on purpose, and the exit codes of the command line.

The codes are a contract (README "Exit codes"); each error class carries its own, so a code means
one thing wherever it comes from:

    0    healthy / done
    1    a check failed (with --strict, a warning too)
    2    usage or input error: a bad flag, a malformed file, an unknown environment
    3    no torch build satisfies the request
    70   an internal error: the traceback goes to a log file whose path is printed
    130  interrupted (Ctrl-C)
"""

from __future__ import annotations

from typing import ClassVar, Final

from envkit.redact import redact

EXIT_OK: Final = 0
EXIT_CHECK_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_NO_BUILD: Final = 3
EXIT_INTERNAL: Final = 70
EXIT_INTERRUPTED: Final = 130


class EnvkitError(Exception):
    """An error with a message for the user: what failed, what was tried, what to do next.

    The message and the hint are redacted (envkit.redact) when set, so that no exception text,
    traceback or log carries a credential, whoever builds the text (an installer's argv, its output).
    """

    exit_code: ClassVar[int] = EXIT_INTERNAL

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


class NoBuildError(EnvkitError):
    """No torch build satisfies the request on the target machine."""

    exit_code: ClassVar[int] = EXIT_NO_BUILD
