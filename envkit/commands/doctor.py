"""``envkit doctor``: detect this machine (or read a saved report, a paste, an error text) and run
every check on it."""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Final, Optional

from envkit._files import parse_json, read_bytes
from envkit.detect import begin_run, detect_all
from envkit.errors import InputError
from envkit.report import NO_PROGRESS, Report, decode_report, report_from_json

if TYPE_CHECKING:
    from envkit.detect.errtext import TextReading
    from envkit.facts import Facts
    from envkit.report import RunProgress
    from envkit.system import System

__all__ = ["DEFAULT_TIMEOUT_S", "MAX_TEXT_BYTES", "diagnose", "diagnose_file"]

DEFAULT_TIMEOUT_S = 30.0
# The most of a pasted text or log doctor reads (issue bodies are KiBs, a long log's tail is what
# matters); more is refused before it is read, so memory and time stay bounded.
MAX_TEXT_BYTES: Final = 10 * 1024 * 1024
_NOT_KNOWN: Final = "found no error or report envkit knows"


def diagnose(
    system: System,
    *,
    python: Optional[str] = None,
    env_name: Optional[str] = None,
    deep: bool = False,
    timeout: float = DEFAULT_TIMEOUT_S,
    progress: RunProgress = NO_PROGRESS,
    error_file: Optional[str] = None,
) -> Report:
    """Detect the machine and the chosen interpreter within ``timeout`` seconds, then check it;
    with ``error_file`` (``--error``), joined with what that error text says."""
    deadline = time.monotonic() + timeout
    reading = _read_text(error_file, "--error", deadline) if error_file is not None else None
    system, interp, start = begin_run(system, timeout=timeout, python=python, env_name=env_name)
    progress.stage(f"detecting; importing torch in {interp.path} (--deep)" if deep else "detecting")
    # Detection mostly waits on its child processes (the interpreter's probe, NVML's worker): the
    # checks' code and knowledge load meanwhile (a third of doctor's time when done after), once
    # the detectors have started: importing holds the GIL, and each thread's start waits for it.
    warm = threading.Thread(target=_prepare_checks, name="envkit-checks-warm", daemon=True)
    facts = detect_all(system, interp, deep=deep, then=warm.start)
    warm.join(max(0.0, deadline - time.monotonic()))
    if reading is not None:
        from envkit.detect.errtext import with_error_text

        facts = with_error_text(facts, reading.facts, error_file or "-")
    from envkit.checks import run_checks

    results = run_checks(facts)
    for result in results:
        progress.landed(result)
    return Report.new(facts, results, duration_s=round(time.monotonic() - start, 3))


def _prepare_checks() -> None:
    """Import the checks and read the knowledge they judge by (cached for the process); any failure
    is left for the checks themselves to meet and report."""
    try:
        import envkit.checks  # noqa: F401
        from envkit.knowledge import load_knowledge

        load_knowledge()
    except Exception:  # noqa: BLE001,S110 -- the same call on the main thread reports it
        pass


def _not_known(flag: str, path: str, what: str) -> InputError:
    from envkit.detect.errtext import READS

    return InputError(
        f"{flag} {path}: {_NOT_KNOWN} ({what}); envkit reads {READS}",
        hint="paste the whole traceback or log (the lines above the error too), or the output of "
        "`python -m torch.utils.collect_env`",
    )


def _raw(path: str, flag: str, deadline: Optional[float] = None) -> bytes:
    """The file's bytes, at most MAX_TEXT_BYTES: a larger file is refused before it is read (a
    stream is read to envkit's general cap, then refused); ``deadline`` bounds the wait."""
    if path != "-":
        try:
            size = os.stat(path).st_size
        except OSError:
            size = 0  # read_bytes says why it cannot be read
        if size > MAX_TEXT_BYTES:
            raise _too_big(flag, path, size)
    raw = read_bytes(path, label=f"{flag} {path}", deadline=deadline)
    if len(raw) > MAX_TEXT_BYTES:
        raise _too_big(flag, path, len(raw))
    return raw


def _too_big(flag: str, path: str, size: int) -> InputError:
    mib = (
        f"{size / 2**20:.0f} MiB" if size > MAX_TEXT_BYTES + 1 else f"more than {MAX_TEXT_BYTES // 2**20} MiB"
    )
    error = _not_known(flag, path, f"the text is {mib}; envkit reads at most {MAX_TEXT_BYTES // 2**20} MiB")
    log = path if path != "-" else "LOG"
    error.hint = f"give it the end of the log: tail -c 1000000 {log} | envkit doctor {flag} -"
    return error


def _text(raw: bytes, path: str, flag: str) -> str:
    if b"\x00" in raw[:65536]:
        raise _not_known(flag, path, "binary data, not text")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        # A log in another encoding still carries ASCII messages; text that is mostly not is binary.
        text = raw.decode("latin-1")
        printable = sum(ch.isprintable() or ch in "\r\n\t" for ch in text[:65536])
        if printable < 0.95 * min(len(text), 65536):
            raise _not_known(flag, path, "binary data, not text") from None
        return text


def _read_text(path: str, flag: str, deadline: Optional[float]) -> TextReading:
    """An error text (``--error``): it must hold something envkit knows."""
    from envkit.detect.errtext import read_error_text

    reading = read_error_text(_text(_raw(path, flag, deadline), path, flag))
    if not reading.known:
        raise _not_known(flag, path, _what_it_is(reading.facts))
    return reading


def _what_it_is(facts: Facts) -> str:
    notes = [n for n in facts.notes if "could not be read" in n]
    return notes[0] if notes else "no traceback, log line, listing or report envkit recognises"


def diagnose_file(path: str, *, timeout: Optional[float] = None) -> Report:
    """Run today's checks on the facts of a saved report (from this or another machine), on pasted
    ``python -m torch.utils.collect_env`` output, or on an error text (a traceback, a log, an issue
    body mixing them with listings); ``-`` reads standard input. ``timeout``: seconds the reading
    may take (a FIFO with no writer, a slow pipe); None waits."""
    raw = _raw(path, "--from", None if timeout is None else time.monotonic() + timeout)
    # The reader fleet and diff use: one msgspec pass for a well-formed report, else the slow path.
    from envkit.checks import CHECKS, run_checks

    fast = decode_report(raw, path)
    if fast is not None:
        return Report.new(fast.facts, run_checks(fast.facts), source=path)
    text = _text(raw, path, "--from")
    try:
        data = parse_json(text, f"--from {path}")
    except ValueError as exc:
        from envkit.detect.collect_env import UNREPORTED_CHECKS
        from envkit.detect.errtext import read_error_text

        reading = read_error_text(text)
        if not reading.known:
            # A file that starts as JSON was meant to be a report: say where it stops being JSON.
            what = f"not valid JSON: {exc}" if text.lstrip()[:1] in ("{", "[") else _what_it_is(reading.facts)
            raise _not_known("--from", path, what) from None
        # A paste says nothing of /dev/shm, GPU health or NCCL variables: those checks would only
        # guess, so they are left out.
        only = [cid for cid in CHECKS if cid not in UNREPORTED_CHECKS]
        return Report.new(reading.facts, run_checks(reading.facts, only), source=path)
    saved = report_from_json(data, path)
    return Report.new(saved.facts, run_checks(saved.facts), source=path)
