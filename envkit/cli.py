"""The command line. The only module that imports typer; each command parses, calls the core,
renders and returns an exit code.

This module alone has no ``from __future__ import annotations``: typer reads every command's
signature each time it starts, and with the annotations as strings it evaluated each one again
(39 ms of every envkit run's start; 9 ms with the objects). The two annotations that name
TYPE_CHECKING-only types are quoted.

The exit codes are envkit.errors.EXIT_CODES. One handler (``_Guarded``, the app's command group)
turns every way any command ends into its code, with one line on stderr.
"""

import contextlib
import datetime
import functools
import gc
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional

import typer
from typer.core import TyperGroup

from envkit import __version__
from envkit.errors import (
    ERROR_SCHEMA,
    EXIT_CHECK_FAILED,
    EXIT_CODES,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    EnvkitError,
)
from envkit.render.jsonout import print_json

if TYPE_CHECKING:
    from collections.abc import Iterator

    from envkit.report import Report, RunProgress
    from envkit.resolve.plan import PlanFlags


def _exit_code_lines() -> str:
    """EXIT_CODES for --help, one code a line, wrapped under its meaning: a paragraph that starts
    with "\\b" click prints as it is (it rewraps the others)."""
    import textwrap

    lines = ["\b", "Exit codes:"]
    for code, meaning in EXIT_CODES:
        lines += textwrap.wrap(
            meaning.replace("`", ""), width=76, initial_indent=f"  {code:<4} ", subsequent_indent=" " * 7
        )
    return "\n".join(lines)


HELP = "Get PyTorch 2 working on NVIDIA GPUs, and prove it.\n\n" + _exit_code_lines()

# Usage errors, --help and typer.Exit are typer's to print and to exit with (2, 0, the code given):
# click's exception classes, which typer 0.28 vendors (typer._click) and older releases import.
_TYPER_ENDINGS: tuple[type[BaseException], ...] = (
    typer.Exit,
    typer.Abort,
    next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"),
)


def _guarded(call: Callable[[], Any], *, command: str = "", json_out: bool = False) -> int:
    """Run a command and turn every way it can end into its exit code, with one line on stderr:
    the one handler of the command line. With ``--json`` (``json_out``) a command that fails prints
    an ``envkit.error/1`` document on stdout too, unless it already printed its own data.

    A stdout whose reader left (``| head -3``) ends the output quietly and the code is the work's;
    one that cannot be written (``> /dev/full``) is one line and exit 2 where the work did not fail
    (envkit.render.streams)."""
    from envkit.render import streams

    streams.begin()
    try:
        code = int(call() or 0)
    except _TYPER_ENDINGS as exc:
        if not isinstance(exc, _TYPER_ENDINGS[2]):  # --help, typer.Exit, typer.Abort: typer's own
            raise
        # A usage error (a bad flag or value): one line, as envkit's other errors, and where to look
        # (click would print the usage, a hint and the error: four lines).
        usage: Any = exc
        code = usage.exit_code
        where = usage.ctx.command_path if getattr(usage, "ctx", None) is not None else "envkit"
        stderr.print(f"[bold red]envkit:[/] {_escape(usage.format_message())}")
        stderr.print(f"  hint: `{where} --help` lists its options", markup=False)
        if json_out:
            _json_error(command, usage.format_message(), "", code)
    except EnvkitError as exc:
        if exc.exit_code == EXIT_INTERNAL:  # envkit's own data is wrong (KnowledgeError): a bug
            code = _internal_error(exc, command=command, json_out=json_out)
        else:
            stderr.print(f"[bold red]envkit:[/] {_escape(exc.message)}")
            if exc.hint:
                stderr.print(f"  hint: {_escape(exc.hint)}")
            code = exc.exit_code
            if json_out:
                _json_error(command, exc.message, exc.hint, code)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM and SIGHUP (envkit._signals)
        # What had to be undone is undone (create defers signals for that); more Ctrl-C or
        # SIGTERM while envkit says so and exits would only cut the message short.
        from envkit._signals import ignore_interrupts

        ignore_interrupts()
        code = int(getattr(exc, "exit_code", EXIT_INTERRUPTED))
        stderr.print(f"envkit: interrupted{f' ({exc})' if str(exc) else ''}")
        if json_out:
            _json_error(command, f"interrupted{f' ({exc})' if str(exc) else ''}", "", code)
    except Exception as exc:  # noqa: BLE001 -- the one handler for envkit's own bugs
        code = _internal_error(exc, command=command, json_out=json_out)
    return _stdout_kept(code)


def _stdout_kept(code: int) -> int:
    """``code``, or exit 2 with one line where stdout could not be written and the work did not fail
    (said once, whoever sees it first: the command's handler or the group's main)."""
    from envkit.render import streams

    streams.flush_stdout()
    now = streams.outcome()
    if now.failed is None:
        return code
    if not now.told:
        now.told = True
        why = now.failed.strerror or str(now.failed)
        stderr.print(f"[bold red]envkit:[/] cannot write to standard output ({_escape(why)})")
    return code or EXIT_USAGE


def _json_error(command: str, message: str, hint: str, code: int, **more: Any) -> None:
    """The ``envkit.error/1`` document of a failed ``--json`` run (README "JSON output"), printed
    only where the command has not printed data of its own (half a document and another after it
    would be no JSON at all)."""
    from envkit.render import streams

    if streams.outcome().written:
        return
    document = {
        "schema": ERROR_SCHEMA,
        "command": command,
        "error": message,
        "hint": hint or None,
        "exit_code": code,
        **more,
    }
    print_json(document)


def _internal_error(exc: BaseException, *, command: str = "", json_out: bool = False) -> int:
    log = _write_crash_log(exc)
    what = f"{type(exc).__name__}: {exc}"
    stderr.print(f"[bold red]envkit: internal error:[/] {_escape(what)}")
    if log is not None:
        stderr.print(f"  the details are in {log}; please attach it to a bug report")
    if json_out:
        _json_error(command, f"internal error: {what}", "", EXIT_INTERNAL, log=str(log) if log else None)
    return EXIT_INTERNAL


def _command_args(ctx: Any) -> list[str]:
    """The command line after ``envkit``: the command's name and its arguments, as click left them
    for the group to dispatch (click 8.2 keeps the name in ``_protected_args``, older ones in
    ``protected_args``)."""
    named = ctx._protected_args if hasattr(ctx, "_protected_args") else ctx.protected_args
    return [*named, *ctx.args]


# The kind of each option's value, by its metavar: envkit.errors' one check per kind runs on every
# value of that kind before the command does (tests/unit/test_hostile_cli.py walks every command's
# options and fails on a metavar missing here). Every other string value is checked for control
# characters (check_text); versions, GPUs, drivers and CUDA requests have their parsers.
def _check_mirror(value: str, label: str) -> str:
    """``--mirror``: a URL (``KIND=URL`` too) is checked as one; NAME and ``auto`` have no spaces."""
    from envkit.errors import check_text, check_url

    url = value.split("=", 1)[1] if "=" in value.split("://", 1)[0] else value
    return check_url(url.strip(), label) if "://" in url else check_text(value, label, spaces=False)


def _value_checks() -> dict[str, Callable[[str, str], str]]:
    from envkit.errors import check_name, check_path

    path = check_path
    return {
        "PATH": path,
        "FILE": path,
        "DIR": path,
        "TEMPLATE": path,  # a template's name, or its .toml path
        "A.json": path,
        "B.json": path,
        "REPORT|FOLDER...": path,
        "VERSION|PATH": path,  # --python: a version passes a path's check as it is
        "NAME": check_name,
        "MIRROR": _check_mirror,
    }


# Files written after a verdict: preflight's verdict (and its exit 1 for a node to drain) comes first,
# and a path that cannot be written is reported beside it (envkit._files.check_output runs the
# same path check then).
_CHECKED_WHEN_WRITTEN = frozenset({"--junit", "--metrics", "--nfd-labels"})


def _check_values(command: Any, params: dict[str, Any]) -> None:
    """Every value the command line gave ``command``, checked by its kind (``_value_checks``)."""
    from envkit.errors import check_seconds, check_text

    checks = _value_checks()
    for param in command.params:
        if _CHECKED_WHEN_WRITTEN.intersection(param.opts):
            continue
        value = params.get(param.name)
        values = value if isinstance(value, (list, tuple)) else [value]
        label = max(param.opts, key=len) if param.param_type_name == "option" else str(param.metavar)
        check = checks.get(param.metavar or "", check_text)
        for item in values:
            if isinstance(item, str) and not (item == "-" and check is checks["PATH"]):  # stdin
                check(item, label)
            elif isinstance(item, float) and param.metavar == "SECONDS":
                check_seconds(item, label)


def _checked_context(base: type) -> type:
    """A click Context class whose ``invoke`` of the command's own callback checks its values first."""

    class Checked(base):  # type: ignore[misc]
        def invoke(self, callback: Any, /, *args: Any, **kwargs: Any) -> Any:
            if callback is self.command.callback:
                _check_values(self.command, kwargs)
            return super().invoke(callback, *args, **kwargs)

    Checked._envkit_checked = True
    return Checked


class _Guarded(TyperGroup):
    """The app's command group: every command (one added tomorrow too) runs inside _guarded, and
    its values are checked by kind before it runs (_check_values)."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """click's main with sys.stdout guarded (envkit.render.streams.guarded_stdout): what click
        prints itself (--help, --version, completion) onto a full stdout is one line and exit 2."""
        from envkit.render import streams

        streams.begin()
        with streams.guarded_stdout():
            try:
                return super().main(*args, **kwargs)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                raise SystemExit(_stdout_kept(code)) from None

    def invoke(self, ctx: Any) -> Any:
        args = _command_args(ctx)
        options = args[: args.index("--")] if "--" in args else args
        call = functools.partial(super().invoke, ctx)
        raise typer.Exit(_guarded(call, command=args[0] if args else "", json_out="--json" in options))

    def resolve_command(self, ctx: Any, args: Any) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None and not getattr(command.context_class, "_envkit_checked", False):
            command.context_class = _checked_context(command.context_class)
        return name, command, rest


# Real invocations for each command's --help; the README shows the same ones under each command
# (tests/unit/test_help.py keeps the two equal).
EXAMPLES: dict[str, tuple[str, ...]] = {
    "doctor": (
        "envkit doctor",
        "envkit doctor --deep",
        "envkit doctor --env myenv --strict",
        "envkit doctor --json > node.json",
        "envkit doctor --from node.json",
        "python -m torch.utils.collect_env | envkit doctor --from -",
        "envkit doctor --from issue.txt",
        "python train.py 2>&1 | envkit doctor --error -",
    ),
    "resolve": (
        "envkit resolve",
        "envkit resolve --driver 535.104.05 --gpu sm_90 --python 3.11 --explain",
        "envkit resolve --cuda 12 --channel conda --json",
        "envkit resolve --no-gpu -q",
        "envkit resolve --driver 550.54.15 --gpu H100 --with flash-attn --with 'vllm>=0.6' --explain",
    ),
    "verify": (
        "envkit verify",
        "envkit verify --checks device,compile --env myenv",
        "envkit verify --checks device,perf --json > verify.json",
    ),
    "mirrors": (
        "envkit mirrors",
        "envkit mirrors --kind pypi",
        "envkit mirrors --probe --variant cu121",
    ),
    "preflight": (
        "envkit preflight",
        "envkit preflight --expect node.toml --verify device,dist",
        "envkit preflight --json --junit preflight.xml --timeout 50",
        "envkit preflight --every 5m --metrics /var/lib/node_exporter/textfile_collector/envkit.prom",
    ),
    "fleet": (
        "envkit fleet reports/",
        "envkit fleet reports/*.json --html fleet.html --strict",
    ),
    "diff": ("envkit diff works.json broken.json",),
    "spec": (
        "envkit spec --list",
        "envkit spec pt2 --cuda 12.1",
        "envkit spec pt2-train --format uv --driver 535.104.05 --gpu sm_80 -o env/",
        "envkit spec pt2 --channel conda --no-gpu --stdout",
        "envkit spec pt2 --format pixi --driver 535.104.05 --gpu A100 -o proj/",
        "envkit spec --check environment.yml",
    ),
    "create": (
        "envkit create pt2 --cuda 12.1",
        "envkit create train --template pt2-train --backend uv --dry-run",
        "envkit create pt2 --prefix /opt/envs/pt2 --wheelhouse wheels/ --offline --no-gpu",
        "envkit create pt2 --cuda 12.1 --channel conda --backend rattler --dry-run",
    ),
    "lock": ("envkit lock pt2 --driver 535.104.05 --lock-platform linux-64 --lock-platform linux-aarch64",),
    "check": (
        "envkit check --project .",
        "envkit check --project ~/src/app --gpu H100 --driver 550.54.15 --platform linux-x86_64",
    ),
    "add": (
        "envkit add torch torchvision --gpu H100 --driver 550.54.15",
        "envkit add torch --project ~/src/app --platform linux-x86_64 --platform macos-arm64 --dry-run",
        "envkit add torch --extras cpu,auto",
    ),
}


def _examples(command: str) -> str:
    """The Examples paragraph of a command's --help ("\b": click prints it as it is)."""
    return "\n".join(["\b", "Examples:", *(f"  {line}" for line in EXAMPLES[command])])


def _complete_templates(incomplete: str) -> list[str]:
    """Shell completion of template names (the built-in ones; a path completes as a file)."""
    from envkit.specs.template import list_templates

    return [t.name for t in list_templates() if t.name.startswith(incomplete)]


def _complete_verify_checks(incomplete: str) -> list[str]:
    """Shell completion of a comma list of verify checks: the last item completes."""
    from envkit.verify import ALL_CHECKS

    done, _, last = incomplete.rpartition(",")
    chosen = set(done.split(",")) if done else set()
    head = f"{done}," if done else ""
    return [head + c for c in ALL_CHECKS if c.startswith(last) and c not in chosen]


app = typer.Typer(
    cls=_Guarded,
    help=HELP,
    # `envkit --install-completion` (typer's own: bash, zsh, fish, PowerShell) completes the commands,
    # their options, template names and verify checks.
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


class _LazyConsole:
    """A rich Console made on first use: --json runs never import rich."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Any = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real(), name)

    def real(self) -> Any:
        """The rich Console itself (for rich objects that drive it, such as a live progress).

        It writes through envkit.render.streams (a reader that left, a full disk). On a terminal
        long lines wrap at word boundaries to its width (rich's wrapping); into a pipe or a file
        they stay whole, one line per line of data, for grep and the next program."""
        if self._console is None:
            from rich.console import Console

            from envkit.render import streams

            file = streams.stderr if self._options.get("stderr") else streams.stdout
            self._console = Console(file=file, highlight=False, soft_wrap=not file.isatty(), **self._options)
        return self._console


stdout: Any = _LazyConsole()
stderr: Any = _LazyConsole(stderr=True)


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
    from envkit._files import write_atomic
    from envkit.redact import redact

    try:
        # Redacted (argv and tracebacks hold mirror URLs), whole or not at all, for its owner only.
        write_atomic(path, redact(body), mode=0o600)
    except OSError:
        return None
    return path


def _escape(text: str) -> str:
    """``text`` for rich markup, redacted: the last line of defence for every message printed."""
    from rich.markup import escape

    from envkit.redact import redact
    from envkit.render.terminal import printable

    return escape(printable(redact(text)))  # printable: a message can quote a hostile file


# Options every reporting command shares, declared once.
Quiet = Annotated[
    bool, typer.Option("--quiet", "-q", help="No live progress or notes on stderr (errors still show).")
]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Show every check's detail.")]


# The target/request flags of resolve, spec, lock and create: declared once, read into PlanFlags by
# _plan_flags, so each means the same on every command.
Driver = Annotated[
    Optional[str],
    typer.Option("--driver", metavar="VERSION", help="Plan for this driver (e.g. 535.104.05; sets __cuda)."),
]
Gpu = Annotated[
    Optional[list[str]],
    typer.Option("--gpu", metavar="GPU", help="Plan for this GPU: sm_90, 8.6 or a model (repeatable)."),
]
NoGpu = Annotated[bool, typer.Option("--no-gpu", help="Plan for a machine without a GPU.")]
PlatformOpt = Annotated[
    Optional[str],
    typer.Option(
        "--platform", metavar="PLATFORM", help="linux-x86_64, linux-aarch64, windows-x86_64, macos-arm64."
    ),
]
# Options that several commands take mean one thing everywhere (tests/unit/test_flags.py reads every
# command's options and holds them to it). --python is a version or an interpreter, as uv's is: a
# command that inspects an interpreter finds one of that version; one that plans reads the version
# of the interpreter it is given.
PYTHON_HELP = "A Python version (3.11) or an interpreter (path or env folder)."
ENV_HELP = "The conda / envkit environment of this name (its interpreter, its Python and platform)."
TIMEOUT_HELP = "Seconds the whole run may take."

PlanPython = Annotated[
    Optional[str],
    typer.Option("--python", metavar="VERSION|PATH", help=PYTHON_HELP),
]
PlanEnv = Annotated[
    Optional[str],
    typer.Option("--env", metavar="NAME", help=ENV_HELP),
]
TorchSpec = Annotated[
    Optional[str], typer.Option("--torch", metavar="SPEC", help="torch version spec: 2.5.*, >=2.4, 2.5.1.")
]
Cuda = Annotated[
    str,
    typer.Option("--cuda", metavar="CUDA", help="auto | cpu | 12.1 | cu121 | 12 (newest 12.x) | rocm6.2."),
]
WithExt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--with",
        metavar="EXT",
        help="An extension with wheels for the build: flash-attn, 'vllm>=0.6', xformers, … (repeatable).",
    ),
]
AllowBuild = Annotated[
    bool,
    typer.Option("--allow-build", help="Plan a source build of an extension where no wheel fits."),
]
Nightly = Annotated[
    bool,
    typer.Option(
        "--nightly", "--pre", help="A nightly build (read from the nightly index now): not a release."
    ),
]
TestChannel = Annotated[
    bool,
    typer.Option("--test", help="A release candidate from the test channel (read now): not a release."),
]
ChannelOpt = Annotated[
    Optional[str],
    typer.Option(
        "--channel",
        metavar="CHANNEL",
        help="pip, conda or auto (create); default: the template's, else pip.",
    ),
]


def _plan_flags(
    *,
    driver: Optional[str],
    gpu: Optional[list[str]],
    no_gpu: bool,
    platform: Optional[str],
    python: Optional[str],
    env: Optional[str],
    torch: Optional[str],
    cuda: str,
    channel: str,
    extensions: Optional[list[str]] = None,
    allow_build: bool = False,
    nightly: bool = False,
    test: bool = False,
) -> "PlanFlags":
    """The shared flags as one PlanFlags (checked when the request and target are made of it)."""
    from envkit.errors import InputError
    from envkit.resolve.plan import PlanFlags

    if nightly and test:
        raise InputError("--nightly and --test are two channels: give one")

    return PlanFlags(
        driver=driver,
        gpus=tuple(gpu or ()),
        no_gpu=no_gpu,
        platform=platform,
        python=python,
        env_name=env,
        torch=torch,
        cuda=cuda,
        channel=channel,
        extensions=tuple(extensions or ()),
        allow_build=allow_build,
        prerelease="nightly" if nightly else "test" if test else None,
    )


@contextlib.contextmanager
def _run_progress(*, quiet: bool, json_out: bool) -> "Iterator[RunProgress]":
    """Live progress on stderr for a long run, only where a person watches: stderr is a terminal,
    and neither --quiet nor --json was given (stdout stays the data alone either way)."""
    from envkit.report import NO_PROGRESS

    if quiet or json_out or not sys.stderr.isatty():
        yield NO_PROGRESS
        return
    from envkit.render.progress import live_progress

    with live_progress(stderr.real()) as shown:
        yield shown


def _version(value: bool) -> None:
    if value:
        stdout.print(f"envkit {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", help="Print envkit's version and exit.", callback=_version, is_eager=True),
    ] = False,
) -> None:
    """Get PyTorch 2 working on NVIDIA GPUs, and prove it."""


@app.command(epilog=_examples("doctor"))
def doctor(
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the envkit.report/1 JSON on stdout.")
    ] = False,
    deep: Annotated[
        bool, typer.Option("--deep", help="Also import torch in the target interpreter (slower).")
    ] = False,
    python: Annotated[
        Optional[str],
        typer.Option("--python", metavar="VERSION|PATH", help=PYTHON_HELP),
    ] = None,
    env: Annotated[
        Optional[str],
        typer.Option("--env", metavar="NAME", help=ENV_HELP),
    ] = None,
    from_file: Annotated[
        Optional[str],
        typer.Option(
            "--from",
            metavar="FILE",
            help="Diagnose a saved report, a pasted collect_env, a traceback or log instead of this machine.",
        ),
    ] = None,
    error_file: Annotated[
        Optional[str],
        typer.Option(
            "--error",
            metavar="FILE",
            help="Join this traceback or log (- for stdin) with this machine's detection.",
        ),
    ] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail too (exit 1).")] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", metavar="SECONDS", help=TIMEOUT_HELP, min=0.1)
    ] = 30.0,
    output_format: Annotated[
        Optional[str],
        typer.Option(
            "--format",
            metavar="FORMAT",
            help="text (the table), json (as --json), openmetrics or prometheus (metrics text).",
        ),
    ] = None,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> int:
    """What is on this machine, what is wrong, and the exact fix."""
    from envkit.commands.doctor import diagnose, diagnose_file
    from envkit.system import System

    shape = _doctor_format(output_format, json_out)
    json_out = shape != "text"  # no live progress on stderr for any machine-read format
    if from_file is not None:
        if python or env or deep or error_file:
            stderr.print(
                "envkit: --from reads a saved report or a text; --python, --env, --deep and --error do "
                "not apply"
            )
            return 2
        if from_file == "-":
            _paste_prompt(timeout)
        report = diagnose_file(from_file, timeout=_left(timeout))
    else:
        if error_file == "-":
            _paste_prompt(timeout)
        with _run_progress(quiet=quiet or not deep, json_out=json_out) as progress:
            report = diagnose(
                System(),
                python=python,
                env_name=env,
                deep=deep,
                timeout=_left(timeout),
                progress=progress,
                error_file=error_file,
            )
    if shape == "json":
        print_json(report.to_json(strict=strict))
    elif shape in ("openmetrics", "prometheus"):
        from envkit.render.metrics import openmetrics_text, prometheus_text

        write = openmetrics_text if shape == "openmetrics" else prometheus_text
        _print_text(write(report, strict=strict))
    else:
        from envkit.render.console import render_report

        render_report(report, stdout, verbose=verbose, strict=strict)
    return report.exit_code(strict=strict)


def _paste_prompt(timeout: float) -> None:
    """``--from -`` on a terminal: say what to paste and how to end it, instead of waiting in
    silence (a pipe or a file needs no word)."""
    stdin = sys.stdin
    if stdin is None or not stdin.isatty():
        return
    end = "Ctrl-Z, then Enter" if os.name == "nt" else "Ctrl-D on a line of its own"
    stderr.print(
        "envkit: paste the error (a traceback or log), the output of `python -m torch.utils.collect_env`"
        f" or an `envkit doctor --json` report, then press {end}; envkit waits up to {timeout:g} s"
        " (--timeout)",
        markup=False,
    )


DOCTOR_FORMATS = ("text", "json", "openmetrics", "prometheus")


def _doctor_format(output_format: Optional[str], json_out: bool) -> str:
    """doctor's output: --format, else --json's json, else the table; both naming two is exit 2."""
    if output_format is None:
        return "json" if json_out else "text"
    if output_format not in DOCTOR_FORMATS:
        raise typer.BadParameter(
            f"{output_format!r}: one of {', '.join(DOCTOR_FORMATS)}", param_hint="--format"
        )
    if json_out and output_format != "json":
        raise typer.BadParameter(
            f"--json and --format {output_format} name two outputs", param_hint="--format"
        )
    return output_format


def _print_text(text: str) -> None:
    """Text written as it is on stdout, UTF-8 whatever the locale (as --json writes JSON)."""
    from envkit.render.streams import write_stdout

    write_stdout(text)


@app.command(epilog=_examples("resolve"))
def resolve(
    json_out: Annotated[bool, typer.Option("--json", help="Print the envkit.plan/1 JSON on stdout.")] = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="Say why each newer candidate was passed over.")
    ] = False,
    torch: TorchSpec = None,
    cuda: Cuda = "auto",
    channel: ChannelOpt = None,
    driver: Driver = None,
    gpu: Gpu = None,
    no_gpu: NoGpu = False,
    platform: PlatformOpt = None,
    python: PlanPython = None,
    env: PlanEnv = None,
    with_ext: WithExt = None,
    allow_build: AllowBuild = False,
    nightly: Nightly = False,
    test: TestChannel = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Same as --explain: what was passed over, and why.")
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print only the install command (or the JSON).")
    ] = False,
) -> int:
    """Which torch build, CUDA variant, Python and index fit this (or another) machine."""
    from envkit.planning import make_plan
    from envkit.system import System

    flags = _plan_flags(
        driver=driver,
        gpu=gpu,
        no_gpu=no_gpu,
        platform=platform,
        python=python,
        env=env,
        torch=torch,
        cuda=cuda,
        channel=channel or "pip",
        extensions=with_ext,
        allow_build=allow_build,
        nightly=nightly,
        test=test,
    )
    plan = make_plan(System(), flags)
    if json_out:
        print_json(plan.to_json())
    elif quiet:
        stdout.print(plan.conda_command() if plan.conda is not None else plan.pip_command(), markup=False)
    else:
        from envkit.render.console import render_plan

        render_plan(plan, stdout, explain=explain or verbose)
    return 0


CompileDevices = Annotated[
    Optional[str],
    typer.Option(
        "--compile-devices",
        metavar="DEVICES",
        help="Where verify.compile compiles: cpu, cuda or cpu,cuda (default: cuda on a GPU node, else cpu).",
    ),
]


@app.command(epilog=_examples("verify"))
def verify(
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the envkit.report/1 JSON on stdout.")
    ] = False,
    checks: Annotated[
        Optional[str],
        typer.Option(
            "--checks",
            metavar="CHECKS",
            autocompletion=_complete_verify_checks,
            help="Comma list of device, compile, amp, dist, perf, extensions (default: all but perf; "
            "extensions where one is installed).",
        ),
    ] = None,
    python: Annotated[
        Optional[str],
        typer.Option("--python", metavar="VERSION|PATH", help=PYTHON_HELP),
    ] = None,
    env: Annotated[
        Optional[str],
        typer.Option("--env", metavar="NAME", help=ENV_HELP),
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", metavar="SECONDS", help=TIMEOUT_HELP, min=1)] = 600.0,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail too (exit 1).")] = False,
    compile_devices: CompileDevices = None,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> int:
    """torch.compile, AMP and NCCL smoke kernels on the detected hardware."""
    from envkit.system import System
    from envkit.verify import parse_checks, parse_compile_devices
    from envkit.verify import verify as run_verify

    wanted = parse_checks(checks)
    compile_on = parse_compile_devices(compile_devices)
    with _run_progress(quiet=quiet, json_out=json_out) as progress:
        report = run_verify(
            System(),
            python=python,
            env_name=env,
            checks=wanted,
            timeout=_left(timeout),
            progress=progress,
            compile_on=compile_on,
        )
    if json_out:
        print_json(report.to_json(strict=strict))
    else:
        from envkit.render.console import render_report

        render_report(report, stdout, verbose=verbose, strict=strict, title="envkit verify")
    return report.exit_code(strict=strict)


@app.command(epilog=_examples("mirrors"))
def mirrors(
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the envkit.mirrors/1 JSON on stdout.")
    ] = False,
    probe: Annotated[
        bool, typer.Option("--probe", help="Fetch each mirror's page for the variant and time it.")
    ] = False,
    variant: Annotated[
        str,
        typer.Option(
            "--variant", metavar="VARIANT", help="Wheel variant the torch mirrors must serve (cu121, cpu, …)."
        ),
    ] = "cpu",
    kind: Annotated[
        Optional[str],
        typer.Option("--kind", metavar="KIND", help="Only torch-wheels, pypi or conda mirrors."),
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", metavar="SECONDS", help=TIMEOUT_HELP, min=0.1)] = 3.0,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Also each mirror's source.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only each mirror's name and URL.")] = False,
) -> int:
    """The package indexes and mirrors envkit knows, and (--probe) which ones serve a variant."""
    from envkit.mirrors.choose import mirror_table

    table = mirror_table(kind=kind, probing=probe, variant=variant, timeout=timeout)
    if json_out:
        print_json(table)
    else:
        from envkit.render.console import render_mirrors

        render_mirrors(table, stdout, verbose=verbose, quiet=quiet)
    verdict = table.get("verdict")
    if probe and verdict is not None:
        # One line: which mirrors serve the variant (PyPI answers no variant question), or why none.
        stderr.print(f"envkit: {verdict['summary']}", markup=False)
        return 0 if verdict["ok"] else 1
    return 0


@app.command(epilog=_examples("preflight"))
def preflight(
    expect: Annotated[
        Optional[str],
        typer.Option("--expect", metavar="FILE", help="TOML file of what this node must look like."),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the envkit.report/1 JSON on stdout.")
    ] = False,
    junit: Annotated[
        Optional[str], typer.Option("--junit", metavar="FILE", help="Also write JUnit XML to this file.")
    ] = None,
    metrics: Annotated[
        Optional[str],
        typer.Option(
            "--metrics",
            metavar="FILE",
            help="Also write Prometheus metrics there (node_exporter's textfile collector: NAME.prom).",
        ),
    ] = None,
    nfd_labels: Annotated[
        Optional[str],
        typer.Option(
            "--nfd-labels",
            metavar="FILE",
            help="Also write Node Feature Discovery labels there (a file in NFD's features.d/).",
        ),
    ] = None,
    npd: Annotated[
        bool,
        typer.Option(
            "--npd",
            help="node-problem-detector plugin: one line on stdout; exit 0 OK, 1 NonOK, 2 Unknown.",
        ),
    ] = False,
    every: Annotated[
        Optional[str],
        typer.Option(
            "--every",
            metavar="INTERVAL",
            help="Run again every INTERVAL (30s, 5m, 1h) until stopped, rewriting the files.",
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            metavar="SECONDS",
            help=TIMEOUT_HELP,  # a hard budget: Slurm kills a health check at 60 s (README)
            min=1,
        ),
    ] = 30.0,
    verify_checks: Annotated[
        Optional[str],
        typer.Option(
            "--verify",
            metavar="CHECKS",
            autocompletion=_complete_verify_checks,
            help="Also run these verify checks: device,compile,amp,dist,perf,extensions.",
        ),
    ] = None,
    python: Annotated[
        Optional[str], typer.Option("--python", metavar="VERSION|PATH", help=PYTHON_HELP)
    ] = None,
    env: Annotated[Optional[str], typer.Option("--env", metavar="NAME", help=ENV_HELP)] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail too (exit 1).")] = False,
    compile_devices: CompileDevices = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Also print the report (every check) on stdout.")
    ] = False,
    quiet: Quiet = False,
) -> int:
    """The cluster-provisioning gate: exit 0 healthy, 1 unhealthy (a one-line reason), 2 could not check."""
    from envkit.commands.preflight import Watchdog, drain_reason
    from envkit.commands.preflight import preflight as run_preflight
    from envkit.render.files import ReportFiles
    from envkit.system import System
    from envkit.verify import parse_checks, parse_compile_devices

    if npd and (json_out or verbose or every):
        raise typer.BadParameter(
            "the plugin prints one line: not with --json, -v or --every", param_hint="--npd"
        )
    if every is not None and (json_out or verbose):
        raise typer.BadParameter(
            "a watch writes files (--metrics, --nfd-labels, --junit): not --json or -v", param_hint="--every"
        )
    checks = parse_checks(verify_checks, option="--verify") if verify_checks else ()
    compile_on = parse_compile_devices(compile_devices)
    files = ReportFiles(junit=junit, metrics=metrics, nfd_labels=nfd_labels)

    def once(budget: float, progress: "RunProgress") -> "Report":
        # The watchdog answers if anything below gets stuck past the budget (a C call holding the GIL).
        with Watchdog(budget + 5.0, _unanswered(timeout + 5.0, npd=npd)):
            return run_preflight(
                System(),
                expect_path=expect,
                verify_checks=checks,
                python=python,
                env_name=env,
                timeout=budget,
                progress=progress,
                compile_on=compile_on,
            )

    if every is not None:
        return _watch(once, files, every=every, timeout=timeout, strict=strict)
    try:
        with _run_progress(quiet=quiet or not checks or npd, json_out=json_out) as progress:
            report = once(_left(timeout), progress)
    except EnvkitError as exc:
        if not npd:
            raise
        # Unknown to NPD (exit 2), with the reason as the condition's message.
        from envkit.render.npd import npd_message

        _print_text(npd_message(f"envkit: could not check: {exc.message}", {}) + "\n")
        raise
    # A FIFO at a path waits for its reader within the run's --timeout (a hard budget), not longer.
    file_errors = files.write(report, strict=strict, deadline=time.monotonic() + _left(timeout))
    if json_out:
        print_json(report.to_json(strict=strict))
    elif verbose:
        from envkit.render.console import render_report

        render_report(report, stdout, verbose=True, strict=strict, title="envkit preflight")
    code = report.exit_code(strict=strict)
    reason = (
        (drain_reason(report, strict=strict) or "envkit: preflight failed (envkit doctor shows why)")
        if code
        else None
    )
    if npd:
        from envkit.render.npd import npd_message

        _print_text(npd_message(reason, report.counts()) + "\n")
    if reason is not None:
        from envkit.render.streams import stderr as raw_stderr

        raw_stderr.write(reason + "\n")  # as it is: the drain reason a scheduler reads
    for error in file_errors:
        # Unhealthy stays 1 (the node must be drained either way); healthy becomes 2: asked-for output
        # is missing, and a reader of the file would otherwise go on with the previous run's.
        passed = "" if code else " (the checks passed; exit 2: the file was asked for)"
        stderr.print(f"[bold red]envkit:[/] {_escape(error.message)}{passed}")
    return code or (file_errors[0].exit_code if file_errors else 0)


def _watch(
    once: Callable[[float, "RunProgress"], "Report"], files: Any, *, every: str, timeout: float, strict: bool
) -> int:
    """preflight --every: the files rewritten after each run, a line on stderr when a verdict
    changes (envkit.commands.watch); ends with Ctrl-C or SIGTERM (exit 130)."""
    from envkit.commands.watch import parse_every, watch
    from envkit.render.files import WatchFiles
    from envkit.report import NO_PROGRESS

    interval = parse_every(every)
    files.check()  # a path that cannot be written is exit 2 before the first run, not a log line
    budgets = [_left(timeout)]  # the first run's budget counts from the process's start

    from envkit.render.streams import stderr as raw_stderr

    def log(line: str) -> None:
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
        raw_stderr.write(f"envkit: {now} {_plain(line)}\n")
        raw_stderr.flush()

    def run() -> "Report":
        return once(budgets.pop() if budgets else timeout, NO_PROGRESS)

    writer = WatchFiles(files, interval=interval, timeout=timeout, strict=strict, log=log)
    watch(
        run, interval=interval, landed=writer.landed, skipped_run=writer.skipped_run, log=log, strict=strict
    )
    return 0


def _plain(text: str) -> str:
    """One log line: redacted, control characters shown, newlines as spaces."""
    from envkit.redact import redact
    from envkit.render.terminal import printable

    return printable(redact(text)).replace("\n", " ").replace("\t", " ")


@app.command(epilog=_examples("fleet"))
def fleet(
    reports: Annotated[
        list[str],
        typer.Argument(
            metavar="REPORT|FOLDER...", help="Per-node envkit.report/1 JSON files, or folders of them."
        ),
    ],
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the envkit.fleet/1 JSON on stdout.")
    ] = False,
    html: Annotated[
        Optional[str], typer.Option("--html", metavar="FILE", help="Also write a self-contained HTML page.")
    ] = None,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Any deviation fails too (exit 1); an unreadable report is an input error (exit 2).",
        ),
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Name every node (long lists are cut otherwise).")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the closing tally line.")] = False,
) -> int:
    """Many nodes' reports side by side: the fleet's majority, the odd nodes out, failing checks.

    A report that cannot be read is listed with the reason and the others are still shown; the
    exit code is then 1 (2 with --strict)."""
    from envkit._files import check_output
    from envkit.fleet.aggregate import collector_paused

    if html:
        check_output(html, label=f"--html {html}")  # before reading a thousand reports
    with collector_paused():  # reading and writing out 10,000 nodes: see load_fleet
        return _fleet(reports, json_out, html, strict=strict, verbose=verbose, quiet=quiet)


def _fleet(
    reports: list[str], json_out: bool, html: Optional[str], *, strict: bool, verbose: bool, quiet: bool
) -> int:
    from envkit._files import write_output
    from envkit.fleet.aggregate import load_fleet

    fleet_view = load_fleet(reports)
    if html:
        from envkit.render.html import render_html

        write_output(html, render_html(fleet_view, strict=strict), label=f"--html {html}")
        stderr.print(f"wrote {html}", markup=False)  # stdout stays the table (or the JSON)
    if json_out:
        print_json(fleet_view.to_json(strict=strict, lazy=True))  # node entries streamed
    else:
        from envkit.render.fleet import render_fleet

        render_fleet(fleet_view, stdout, strict=strict, verbose=verbose, quiet=quiet)
    if fleet_view.unreadable:
        first = fleet_view.unreadable[0].error
        more = len(fleet_view.unreadable) - 1
        stderr.print(
            f"[bold red]envkit:[/] {_escape(first)}" + (f" (and {more} more unreadable)" if more else "")
        )
    return fleet_view.exit_code(strict=strict)


@app.command(epilog=_examples("diff"))
def diff(
    a: Annotated[str, typer.Argument(metavar="A.json", help="The report of the machine where it works.")],
    b: Annotated[str, typer.Argument(metavar="B.json", help="The report of the machine where it does not.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the envkit.diff/1 JSON on stdout.")] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Each differing check's detail too.")
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Only the closing line: how many differ, what to look at.")
    ] = False,
) -> int:
    """Why the same code works on one machine and not the other: the differing facts, worst first."""
    from envkit.fleet.diff import diff_files

    difference = diff_files(a, b)
    if json_out:
        print_json(difference.to_json())
    else:
        from envkit.render.fleet import render_diff

        render_diff(difference, stdout, verbose=verbose, quiet=quiet)
    return 0


@app.command(epilog=_examples("spec"))
def spec(
    template: Annotated[
        Optional[str],
        typer.Argument(
            metavar="TEMPLATE",
            autocompletion=_complete_templates,
            help="A template name (pt2, pt2-minimal, pt2-train) or a .toml path.",
        ),
    ] = None,
    fmt: Annotated[
        Optional[str],
        typer.Option(
            "--format",
            metavar="FORMAT",
            help="conda, pip, uv, conda-lock, pixi, docker or apptainer (default: --channel's, else the "
            "template's channel: conda for a conda template, else pip).",
        ),
    ] = None,
    out: Annotated[
        str, typer.Option("--output", "-o", metavar="DIR", help="Folder to write the files into.")
    ] = ".",
    mirror: Annotated[
        Optional[list[str]],
        typer.Option("--mirror", metavar="MIRROR", help="NAME, auto, URL or KIND=URL (repeatable)."),
    ] = None,
    pip_in_conda: Annotated[
        bool, typer.Option("--pip-in-conda", help="A conda env whose torch comes through pip.")
    ] = False,
    name: Annotated[
        Optional[str], typer.Option("--name", metavar="NAME", help="The environment's name in the spec.")
    ] = None,
    to_stdout: Annotated[bool, typer.Option("--stdout", help="Print the (single) file instead.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace files envkit did not write.")] = False,
    list_templates: Annotated[bool, typer.Option("--list", help="List the built-in templates.")] = False,
    check: Annotated[
        Optional[str],
        typer.Option(
            "--check",
            metavar="FILE",
            help="Check an existing environment.yml, requirements.txt or pixi.toml.",
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="With --check: the findings as JSON.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="With --check: warnings fail too.")] = False,
    torch: TorchSpec = None,
    cuda: Cuda = "auto",
    channel: ChannelOpt = None,
    driver: Driver = None,
    gpu: Gpu = None,
    no_gpu: NoGpu = False,
    platform: PlatformOpt = None,
    python: PlanPython = None,
    env: PlanEnv = None,
    with_ext: WithExt = None,
    allow_build: AllowBuild = False,
    nightly: Nightly = False,
    test: TestChannel = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="With --check: every finding's detail.")
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Do not list the files written (stderr).")
    ] = False,
) -> int:
    """Render a template into conda / pip / uv / conda-lock specs, or --check a spec people already have."""
    from envkit.commands import spec as spec_command
    from envkit.system import System

    flags = _plan_flags(
        driver=driver,
        gpu=gpu,
        no_gpu=no_gpu,
        platform=platform,
        python=python,
        env=env,
        torch=torch,
        cuda=cuda,
        channel=channel or "pip",  # the format decides (commands.spec checks --channel agrees)
        extensions=with_ext,
        allow_build=allow_build,
        nightly=nightly,
        test=test,
    )
    if json_out and check is None:  # --json always prints a document: here, the error's
        from envkit.errors import InputError

        raise InputError("--json applies to spec --check (the files spec writes are the output)")
    if list_templates:
        from envkit.render.spec import render_templates
        from envkit.specs.template import list_templates as builtin_templates

        render_templates(builtin_templates(), stdout)
        return 0
    if check is not None:
        checked = spec_command.check(System(), check, flags, strict=strict)
        if json_out:
            print_json(checked.to_json())
        else:
            from envkit.render.console import render_checks

            render_checks(checked.results, stdout, title=f"envkit spec --check {check}", verbose=verbose)
        for note in checked.notes:  # what the checks were made for: beside the data, not in it
            stderr.print(f"envkit: note: {note}", markup=False)
        return checked.exit_code
    if not to_stdout:
        from envkit._files import check_output

        check_output(out, label=f"--output {out}", folder=True)
    made = spec_command.render(
        System(),
        template or "pt2",
        flags,
        fmt=fmt,
        out=out,
        mirrors=mirror or [],
        pip_in_conda=pip_in_conda,
        name=name,
        to_stdout=to_stdout,
        force=force,
        channel=channel,
    )
    from envkit.render.spec import render_spec_files

    if not quiet:
        render_spec_files(made, stderr)
    if to_stdout:
        from envkit.render.streams import write_stdout

        write_stdout(made.single())
    return 0


@app.command(epilog=_examples("create"))
def create(
    name: Annotated[
        Optional[str],
        typer.Argument(
            metavar="NAME", help="The environment's name (conda env name, or envkit's envs folder)."
        ),
    ] = None,
    prefix: Annotated[
        Optional[str], typer.Option("--prefix", metavar="PATH", help="Create it at this path instead.")
    ] = None,
    template: Annotated[
        Optional[str],
        typer.Option(
            "--template",
            metavar="TEMPLATE",
            autocompletion=_complete_templates,
            help="Template name or .toml path (default: NAME's, else pt2).",
        ),
    ] = None,
    backend: Annotated[
        str,
        typer.Option(
            "--backend", metavar="BACKEND", help="auto, rattler, conda, mamba, micromamba, uv or venv."
        ),
    ] = "auto",
    mirror: Annotated[
        Optional[list[str]],
        typer.Option("--mirror", metavar="MIRROR", help="NAME, auto, URL or KIND=URL (repeatable)."),
    ] = None,
    wheelhouse: Annotated[
        Optional[str],
        typer.Option("--wheelhouse", metavar="DIR", help="A folder of wheels to install from too."),
    ] = None,
    offline: Annotated[bool, typer.Option("--offline", help="Install only from --wheelhouse.")] = False,
    from_lock: Annotated[
        Optional[str],
        typer.Option(
            "--from-lock", metavar="FILE", help="Install exactly this hashed pip lock (envkit lock)."
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan and the exact commands; change nothing.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Replace an existing environment (restored if anything fails).")
    ] = False,
    no_verify: Annotated[
        bool, typer.Option("--no-verify", help="Skip envkit verify in the new environment.")
    ] = False,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the envkit.create/1 JSON on stdout.")
    ] = False,
    torch: TorchSpec = None,
    cuda: Cuda = "auto",
    channel: ChannelOpt = None,
    driver: Driver = None,
    gpu: Gpu = None,
    no_gpu: NoGpu = False,
    platform: PlatformOpt = None,
    python: PlanPython = None,
    env: PlanEnv = None,
    with_ext: WithExt = None,
    allow_build: AllowBuild = False,
    nightly: Nightly = False,
    test: TestChannel = False,
    verbose: Verbose = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No plan or live progress on stderr (errors still show).")
    ] = False,
) -> int:
    """Resolve, write the specs, install, verify: all or nothing."""
    from envkit.commands import create as create_command
    from envkit.create.prepare import CreateRequest
    from envkit.render.create import install_progress, render_created, render_installation
    from envkit.system import System

    flags = _plan_flags(
        driver=driver,
        gpu=gpu,
        no_gpu=no_gpu,
        platform=platform,
        python=python,
        env=env,
        torch=torch,
        cuda=cuda,
        channel=channel or "pip",
        extensions=with_ext,
        allow_build=allow_build,
        nightly=nightly,
        test=test,
    )
    request = CreateRequest(
        name,
        prefix,
        template,
        flags,
        backend,
        tuple(mirror or ()),
        wheelhouse,
        offline,
        from_lock,
        channel=channel,
    )
    system = System()
    install = create_command.prepare(system, request)
    # The refusals (taken, not an environment, left-overs) come before the plan is shown, and the
    # same for --dry-run. A real run takes the place's lock first and judges under it: the lock
    # decides first (a create that is busy there has moved things aside that are its work).
    if dry_run:
        will = create_command.will(install, force=force, dry_run=True)
        if json_out:
            print_json({**install.to_json(), "status": "dry-run", "will": will})
        else:
            render_installation(install, stdout, will=will)
        return 0
    with create_command.holding(install):
        create_command.will(install, force=force)
        if quiet:
            created = create_command.run(system, install, force=force, verify=not no_verify, lock_held=True)
        else:
            render_installation(install, stderr)
            with install_progress(stderr) as progress:
                created = create_command.run(
                    system, install, force=force, verify=not no_verify, progress=progress, lock_held=True
                )
    if json_out:
        print_json(created.to_json())
    render_created(created, None if json_out else stdout, stderr, verbose=verbose)
    return created.exit_code


@app.command(epilog=_examples("lock"))
def lock(
    template: Annotated[
        str,
        typer.Argument(
            metavar="TEMPLATE",
            autocompletion=_complete_templates,
            help="Template name (pt2, pt2-minimal, pt2-train) or .toml path.",
        ),
    ] = "pt2",
    out: Annotated[
        str, typer.Option("--output", "-o", metavar="DIR", help="Folder for conda-lock.yml.")
    ] = ".",
    lock_platform: Annotated[
        Optional[list[str]],
        typer.Option(
            "--lock-platform",
            metavar="PLATFORM",
            help="conda subdir (linux-64, …) or, --channel pip, linux-x86_64 …; repeatable.",
        ),
    ] = None,
    mirror: Annotated[
        Optional[list[str]],
        typer.Option("--mirror", metavar="MIRROR", help="NAME, URL or KIND=URL (repeatable)."),
    ] = None,
    lock_format: Annotated[
        str,
        typer.Option("--format", metavar="FORMAT", help="--channel pip: pylock, requirements or both."),
    ] = "pylock,requirements",
    wheelhouse: Annotated[
        Optional[str],
        typer.Option("--wheelhouse", metavar="DIR", help="--channel pip: a folder of wheels to lock from."),
    ] = None,
    offline: Annotated[
        bool, typer.Option("--offline", help="--channel pip: from --wheelhouse alone.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="--channel pip: replace files envkit did not write.")
    ] = False,
    torch: TorchSpec = None,
    cuda: Cuda = "auto",
    channel: ChannelOpt = None,
    driver: Driver = None,
    gpu: Gpu = None,
    no_gpu: NoGpu = False,
    platform: PlatformOpt = None,
    python: PlanPython = None,
    env: PlanEnv = None,
    with_ext: WithExt = None,
    allow_build: AllowBuild = False,
    nightly: Nightly = False,
    test: TestChannel = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No conda-lock progress or notes on stderr.")
    ] = False,
) -> int:
    """Lock an environment: conda with conda-lock (envkit[lock]; __cuda from the target driver), or
    pip (--channel pip) with uv's resolver, every file hashed (pylock.toml, requirements.txt)."""
    from envkit._files import check_output
    from envkit.commands.lock import lock as run_lock
    from envkit.commands.lock import prepare_lock
    from envkit.system import System

    check_output(out, label=f"--output {out}", folder=True)
    flags = _plan_flags(
        driver=driver,
        gpu=gpu,
        no_gpu=no_gpu,
        platform=platform,
        python=python,
        env=env,
        torch=torch,
        cuda=cuda,
        channel=channel or "conda",  # conda unless --channel pip: the lock's kind
        extensions=with_ext,
        allow_build=allow_build,
        nightly=nightly,
        test=test,
    )
    if flags.channel == "pip":
        formats = tuple(f.strip() for f in lock_format.split(",") if f.strip())
        return _pip_lock(
            template,
            flags,
            out,
            tuple(lock_platform or ()),
            tuple(mirror or ()),
            formats,
            wheelhouse,
            offline,
            quiet,
            force,
        )
    system = System()
    job = prepare_lock(
        system,
        template,
        flags,
        platforms=tuple(lock_platform or ()),
        out_dir=out,
        mirrors=tuple(mirror or ()),
    )
    if quiet:
        path = run_lock(system, job)
    else:
        with stderr.status("conda-lock …") as status:
            path = run_lock(
                system, job, on_line=lambda line: status.update(line.strip()[:120]) if line.strip() else None
            )
        stderr.print(f"wrote {path}", markup=False)
    return 0


def _pip_lock(
    template: str,
    flags: "PlanFlags",
    out: str,
    platforms: tuple[str, ...],
    mirrors: tuple[str, ...],
    formats: tuple[str, ...],
    wheelhouse: Optional[str],
    offline: bool,
    quiet: bool,
    force: bool,
) -> int:
    """``envkit lock --channel pip``: uv's hashed locks of the plan, per platform."""
    from envkit.commands.lock import pip_lock, prepare_pip_lock
    from envkit.system import System

    system = System()
    jobs = prepare_pip_lock(
        system,
        template,
        flags,
        platforms=platforms,
        out_dir=out,
        mirrors=mirrors,
        formats=formats,
        wheelhouse=wheelhouse,
        offline=offline,
    )
    if quiet:
        paths = pip_lock(system, jobs, force=force)
    else:
        with stderr.status("uv pip compile …"):
            paths = pip_lock(system, jobs, force=force)
        for path in paths:
            stderr.print(f"wrote {path}", markup=False)
    return 0


Platforms = Annotated[
    Optional[list[str]],
    typer.Option(
        "--platform",
        metavar="PLATFORM",
        help="linux-x86_64, linux-aarch64, windows-x86_64, macos-arm64 (repeatable: cross-platform).",
    ),
]


@app.command(epilog=_examples("add"))
def add(
    packages: Annotated[
        Optional[list[str]],
        typer.Argument(metavar="PACKAGE...", help="torch, torchvision, torchaudio (default: torch)."),
    ] = None,
    project: Annotated[
        str, typer.Option("--project", metavar="DIR", help="The project folder (or one manifest file).")
    ] = ".",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the edits as a unified diff; change nothing.")
    ] = False,
    with_: Annotated[
        Optional[list[str]],
        typer.Option("--with", metavar="EXT", help="An extension to add with torch (repeatable)."),
    ] = None,
    extras: Annotated[
        Optional[str],
        typer.Option(
            "--extras",
            metavar="CUDAS",
            help="uv: one optional extra per build, e.g. cpu,auto or cpu,12.6 (uv sync --extra cu126).",
        ),
    ] = None,
    mirror: Annotated[
        Optional[list[str]],
        typer.Option("--mirror", metavar="MIRROR", help="NAME, URL or KIND=URL (repeatable)."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the envkit.add/1 JSON on stdout.")] = False,
    torch: TorchSpec = None,
    cuda: Cuda = "auto",
    channel: ChannelOpt = None,
    driver: Driver = None,
    gpu: Gpu = None,
    no_gpu: NoGpu = False,
    platform: Platforms = None,
    python: PlanPython = None,
    env: PlanEnv = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No plan or notes on stderr.")] = False,
) -> int:
    """Put the right torch build into the project you have: edit its manifest in place."""
    from envkit.commands.add import add as run_add
    from envkit.system import System

    flags = _plan_flags(
        driver=driver,
        gpu=gpu,
        no_gpu=no_gpu,
        platform=None,
        python=python,
        env=env,
        torch=torch,
        cuda=cuda,
        channel=channel or "pip",
    )
    added = run_add(
        System(),
        project,
        packages or ["torch"],
        flags,
        platforms=platform or (),
        channel=channel,
        with_=with_ or (),
        mirrors=mirror or (),
        extras=[e.strip() for e in extras.split(",") if e.strip()] if extras else (),
        dry_run=dry_run,
    )
    if json_out:
        print_json(added.to_json())
        return 0
    from envkit.render.project import render_added

    render_added(added, stdout, stderr, quiet=quiet)
    return 0


@app.command(epilog=_examples("check"))
def check(
    project: Annotated[
        str, typer.Option("--project", metavar="DIR", help="The project folder (or one manifest file).")
    ] = ".",
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the envkit.spec-check/1 JSON on stdout.")
    ] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail too (exit 1).")] = False,
    torch: TorchSpec = None,
    cuda: Cuda = "auto",
    driver: Driver = None,
    gpu: Gpu = None,
    no_gpu: NoGpu = False,
    platform: Platforms = None,
    python: PlanPython = None,
    env: PlanEnv = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Every finding's detail.")] = False,
) -> int:
    """Whether the project as written gets a torch that runs here (or on the target flags)."""
    from envkit.commands.check import check_project
    from envkit.system import System

    flags = _plan_flags(
        driver=driver,
        gpu=gpu,
        no_gpu=no_gpu,
        platform=None,
        python=python,
        env=env,
        torch=torch,
        cuda=cuda,
        channel="pip",
    )
    checked = check_project(System(), project, flags, platforms=platform or (), strict=strict)
    if json_out:
        print_json(checked.to_json())
    else:
        from envkit.render.console import render_checks

        render_checks(checked.results, stdout, title=f"envkit check --project {project}", verbose=verbose)
    return checked.exit_code


# When this process started, on time.monotonic()'s clock: set by main() (a process started to run
# envkit); None where envkit's commands run inside another program (typer's CliRunner, an
# embedding), whose age is none of the command's budget.
_PROCESS_START: Optional[float] = None


def _count_from_process_start() -> None:
    global _PROCESS_START  # set once, by main()
    from envkit._proc import process_age

    _PROCESS_START = time.monotonic() - process_age()


def _left(timeout: float) -> float:
    """What is left of a command's --timeout ("seconds the whole run may take"): the interpreter's
    start and the imports before the command ran count too (envkit._proc.process_age), where this
    process was started to run envkit (main()). At least a tenth of a second, so that a run whose
    start took it all still answers, with time-outs."""
    if _PROCESS_START is None:
        return timeout
    return max(timeout - (time.monotonic() - _PROCESS_START), 0.1)


def _unanswered(seconds: float, *, npd: bool = False) -> Callable[[], None]:
    """preflight's last resort, called by its watchdog's thread: one line, exit 1 (unhealthy: a
    node that cannot answer in time must be drained), whatever the main thread is doing (stuck in a
    C call, deaf to signals): os._exit, because sys.exit would only end the watchdog's thread.
    With --npd the line is also the plugin's stdout (NPD's condition message)."""

    def fire() -> None:
        line = f"envkit: preflight: no answer within {seconds:g} s (watchdog)\n"
        if npd:
            sys.stdout.write(line)
            sys.stdout.flush()
        sys.stderr.write(line)
        sys.stderr.flush()
        os._exit(EXIT_CHECK_FAILED)

    return fire


def _printable_anywhere() -> None:
    """A terminal or pipe whose encoding cannot show a character (LC_ALL=C's ASCII, latin-1) gets
    '?' for it instead of an encoding error: the report's "—" and "…" must not end a run with
    exit 70. (--json writes UTF-8 bytes to the buffer and is not affected.)"""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", "strict") == "strict":
            reconfigure(errors="replace")


def main() -> None:
    """Console-script entry point."""
    from envkit._signals import sigterm_interrupts

    try:
        _count_from_process_start()
        sigterm_interrupts()  # SIGTERM (Slurm, systemd, timeout) ends envkit as Ctrl-C does: exit 130
        _printable_anywhere()
        # What the imports made (modules, classes, typer's app) lives as long as the process: out
        # of the collector's sight, so that its full passes walk only what the command makes.
        gc.freeze()
        from envkit.render.streams import begin

        begin(own_process=True)
        app(prog_name="envkit")
    except KeyboardInterrupt as exc:
        # Ctrl-C, SIGTERM or SIGHUP before a command runs (the rest of the imports, typer building
        # the command tree, parsing the line): nothing was started; the same line and code as
        # inside one, not a traceback.
        from envkit._signals import ignore_interrupts

        ignore_interrupts()
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(f"envkit: interrupted{f' ({exc})' if str(exc) else ''}\n")
        raise SystemExit(int(getattr(exc, "exit_code", EXIT_INTERRUPTED))) from None
    finally:
        from envkit._proc import terminate_all

        terminate_all()  # no child outlives envkit: detectors run in daemon threads
