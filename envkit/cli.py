"""The command line. The only module that imports typer; each command parses, calls the core,
renders and returns an exit code.

Exit codes: 0 healthy / done · 1 a check failed (with --strict, a warning too) · 2 usage or input
error · 3 no build satisfies the request · 70 internal error (traceback in a log file) · 130
interrupted.
"""

from __future__ import annotations

import datetime
import functools
import os
import platform
import sys
import traceback
from pathlib import Path
from typing import Annotated, Any, Callable, Optional, TypeVar

import typer
from rich.console import Console

from envkit import __version__
from envkit.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EnvkitError

F = TypeVar("F", bound=Callable[..., Any])

HELP = """Get PyTorch 2 working on NVIDIA GPUs, and prove it.

Exit codes: 0 healthy/done · 1 a check failed (--strict: or warned) · 2 usage or input error ·
3 no build satisfies the request · 70 internal error (traceback in a log file) · 130 interrupted.
"""

app = typer.Typer(
    help=HELP,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

stdout = Console(highlight=False, soft_wrap=True)
stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def _log_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "envkit" / "logs"


def _write_crash_log(exc: BaseException) -> Optional[Path]:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = _log_dir() / f"crash-{stamp}-{os.getpid()}.log"
    body = (
        f"# envkit {__version__} internal error\n\n"
        f"- command: {' '.join(sys.argv)}\n"
        f"- python: {sys.version.split()[0]} ({sys.executable})\n"
        f"- platform: {platform.platform()}\n\n"
        "```\n" + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)) + "```\n"
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    except OSError:
        return None
    return path


def guarded(fn: F) -> F:
    """Turn every way a command can end into its exit code, with one line on stderr."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            code = fn(*args, **kwargs)
        except EnvkitError as exc:
            stderr.print(f"[bold red]envkit:[/] {_escape(exc.message)}")
            if exc.hint:
                stderr.print(f"  hint: {_escape(exc.hint)}")
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            stderr.print("envkit: interrupted")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except typer.Exit:
            raise
        except Exception as exc:  # noqa: BLE001 -- the one handler for envkit's own bugs
            log = _write_crash_log(exc)
            what = f"{type(exc).__name__}: {exc}"
            stderr.print(f"[bold red]envkit: internal error:[/] {_escape(what)}")
            if log is not None:
                stderr.print(f"  the details are in {log}; please attach it to a bug report")
            raise typer.Exit(EXIT_INTERNAL) from None
        raise typer.Exit(code or 0)

    return wrapper  # type: ignore[return-value]


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _version(value: bool) -> None:
    if value:
        stdout.print(f"envkit {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print envkit's version and exit.", callback=_version, is_eager=True
        ),
    ] = False,
) -> None:
    """Get PyTorch 2 working on NVIDIA GPUs, and prove it."""


@app.command()
@guarded
def doctor(
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the envkit.report/1 JSON on stdout.")
    ] = False,
    deep: Annotated[
        bool, typer.Option("--deep", help="Also import torch in the target interpreter (slower).")
    ] = False,
    python: Annotated[
        Optional[str],
        typer.Option("--python", help="Inspect this interpreter (or environment folder)."),
    ] = None,
    env: Annotated[
        Optional[str],
        typer.Option("--env", help="Inspect the conda / envkit environment of this name."),
    ] = None,
    from_file: Annotated[
        Optional[str],
        typer.Option("--from", help="Diagnose a saved report instead of this machine."),
    ] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail too (exit 1).")] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds the whole run may take.", min=0.1)
    ] = 30.0,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show every check's detail.")
    ] = False,
) -> int:
    """What is on this machine, what is wrong, and the exact fix."""
    from envkit.doctor import diagnose, diagnose_file
    from envkit.system import System

    if from_file is not None:
        if python or env or deep:
            stderr.print(
                "envkit: --from reads a saved report; --python, --env and --deep do not apply"
            )
            return 2
        report = diagnose_file(from_file)
    else:
        report = diagnose(System(), python=python, env_name=env, deep=deep, timeout=timeout)
    if json_out:
        from envkit.render import render_json

        sys.stdout.write(render_json(report.to_json(strict=strict)) + "\n")
    else:
        from envkit.render import render_report

        render_report(report, stdout, verbose=verbose, strict=strict)
    return report.exit_code(strict=strict)


def main() -> None:
    """Console-script entry point."""
    app(prog_name="envkit")
