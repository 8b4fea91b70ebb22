"""``python -m envkit``, and the ``envkit`` command (pyproject.toml's [project.scripts]).

Ctrl-C, SIGTERM and SIGHUP are envkit's from the first instruction: the command line's imports
(envkit.cli, typer, rich: ~0.1 s) come after the handlers, not before them. A Ctrl-C during those
imports was Python's KeyboardInterrupt traceback, and SIGTERM or SIGHUP ended envkit silently.
"""

from __future__ import annotations

import contextlib
import sys


def main() -> None:
    """Console-script entry point: the handlers, then envkit.cli.main."""
    from envkit._signals import ignore_interrupts, sigterm_interrupts

    try:
        sigterm_interrupts()
        from envkit.cli import main as cli_main
    except KeyboardInterrupt as exc:  # nothing has started yet: one line, the signal's code
        ignore_interrupts()
        with contextlib.suppress(OSError, ValueError, AttributeError):  # stderr closed or gone
            sys.stderr.write(f"envkit: interrupted{f' ({exc})' if str(exc) else ''}\n")
        raise SystemExit(int(getattr(exc, "exit_code", 130))) from None  # envkit.errors.EXIT_INTERRUPTED
    cli_main()


if __name__ == "__main__":
    main()
