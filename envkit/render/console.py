"""Reports for people (rich) and for programs (JSON). The only core module that imports rich."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, cast

from rich.text import Text

from envkit.checks import AREAS
from envkit.checks._common import and_list, plural
from envkit.render.terminal import printable
from envkit.report import ASCII_GLYPHS, GLYPHS, CheckResult, Report, Status

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.resolve import Plan

if TYPE_CHECKING:
    from rich.console import Console

    from envkit.facts import DeepTorchFacts, Facts, VendorFacts

__all__ = ["glyphs_for", "render_checks", "render_mirrors", "render_plan", "render_report", "safe_console"]

# Check ids are padded to one column ("torch.cpu_build_on_gpu" is the longest).
ID_WIDTH: Final = 23
STYLES: Final = {
    Status.PASS: "green",
    Status.WARN: "yellow",
    Status.FAIL: "bold red",
    Status.SKIP: "dim",
}


class _SafeConsole:
    """A console whose ``print`` shows control characters instead of sending them (envkit.render.terminal):
    the strings shown come from reports and files made elsewhere. Strings are printed as plain
    text, never as rich markup, so ``[red]`` in a GPU name stays ``[red]``."""

    def __init__(self, console: Console) -> None:
        self._console = console

    def print(self, *objects: Any, **options: Any) -> None:
        self._console.print(*(_safe(o) for o in objects), **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._console, name)


def _safe(item: Any) -> Any:
    if isinstance(item, Text):
        text = item.copy()
        text.plain = printable(text.plain)  # one character for one: the styled spans stay in place
        return text
    if isinstance(item, str):
        return Text(printable(item))
    return item


def safe_console(console: Console) -> Console:
    """``console`` for untrusted text: every Text and string printed through it is made printable."""
    return console if isinstance(console, _SafeConsole) else cast("Console", _SafeConsole(console))


def glyphs_for(console: Console) -> dict[Status, str]:
    """The status marks this console can print: ✓ ! ✗ – on UTF-8, ASCII elsewhere."""
    return GLYPHS if (console.encoding or "").lower().startswith("utf") else ASCII_GLYPHS


def _facts_lines(facts: Facts) -> list[str]:
    lines = []
    driver = facts.driver
    if driver.version is not None:
        cuda = f" (CUDA {driver.cuda_version})" if driver.cuda_version else ""
        gpus = ""
        if facts.gpus:
            names: dict[str, int] = {}
            for g in facts.gpus:
                label = f"{g.name or 'unknown GPU'}" + (
                    f" (CC {g.compute_capability})" if g.compute_capability else ""
                )
                names[label] = names.get(label, 0) + 1
            gpus = " · " + and_list([f"{n} × {label}" for label, n in names.items()])
        lines.append(f"driver {driver.version}{cuda}{gpus}")
    elif not facts.reported("driver.version"):
        lines.append("NVIDIA driver: not in the text")
    elif not (facts.amd.gpus or facts.intel.gpus):
        lines.append("no NVIDIA driver")
    lines += [line for line in (_vendor_line(facts.amd), _vendor_line(facts.intel)) if line]
    if facts.errors.read:
        lines.append("read from the text: " + ", ".join(facts.errors.read))
    if facts.toolkits:
        lines.append("toolkits: " + and_list([f"nvcc {t.version or '?'} ({t.nvcc})" for t in facts.toolkits]))
    py = facts.python
    if py is not None:
        version = f"python {py.version}" if py.version else "python"
        lines.append(f"{version} {py.executable} (chosen by {py.selected_by})")
    torch = facts.torch
    if torch.installed:
        xpu = torch.version is not None and (torch.version.local or "").startswith("xpu")
        build = f"CUDA {torch.cuda}" if torch.cuda else "ROCm" if torch.hip else "XPU" if xpu else "CPU"
        lines.append(f"torch {torch.version or '?'} ({build})")
    if torch.deep is not None:  # what --deep asked for is shown without -v
        lines.append(_deep_line(torch.deep))
    return lines


def _variant_words(variant: str) -> str:
    """ "ROCm 7.2" for rocm7.2, "Intel XPU" for xpu, the variant itself otherwise."""
    if variant.startswith("rocm"):
        return f"ROCm {variant[4:]}"
    return "Intel XPU" if variant == "xpu" else variant


def _vendor_line(vendor: VendorFacts) -> str:
    """ "AMD: 8 × AMD Instinct MI300X (gfx942) · amdgpu 6.12.12 · ROCm 6.4.1"; "" without GPUs."""
    if not vendor.gpus:
        return ""
    names: dict[str, int] = {}
    for g in vendor.gpus:
        label = (g.name or "unknown GPU") + (f" ({g.arch})" if g.arch else "")
        if g.partitions > 1:
            label += f", {g.partitions} partitions"
        names[label] = names.get(label, 0) + 1
    parts = [and_list([f"{n} × {label}" for label, n in names.items()])]
    if vendor.driver:
        parts.append(" ".join(filter(None, (vendor.driver, vendor.driver_version))))
    if vendor.runtime is not None:
        parts.append(f"{'ROCm' if vendor.vendor == 'amd' else 'Level Zero'} {vendor.runtime}")
    if vendor.level_zero is False:
        parts.append("no Level Zero device")
    return f"{vendor.vendor.upper() if vendor.vendor == 'amd' else vendor.vendor.title()}: " + " · ".join(
        parts
    )


def _deep_line(deep: DeepTorchFacts) -> str:
    """``--deep``'s answer in one line: CUDA available, devices, arch list, cuDNN, NCCL, bf16."""
    if not deep.ok:
        return f"import torch (--deep): {deep.error or 'failed'}"
    parts = [f"cuda available: {_yes_no(deep.cuda_available)}"]
    if deep.xpu_available is not None:
        parts.append(f"xpu available: {_yes_no(deep.xpu_available)}")
    if deep.device_count is not None:
        parts.append(plural(deep.device_count, "device"))
    parts.append("arch list: " + (" ".join(deep.arch_list) or "none"))
    if deep.cudnn is not None:
        parts.append(f"cuDNN {deep.cudnn}")
    if deep.nccl is not None:
        parts.append(f"NCCL {deep.nccl}")
    parts.append(f"bf16: {_yes_no(deep.bf16_supported)}")
    return "torch --deep: " + " · ".join(parts)


def _yes_no(value: object) -> str:
    return "unknown" if value is None else "yes" if value else "no"


def _result(result: CheckResult, verbose: bool, glyphs: dict[Status, str]) -> Text:
    text = Text("  ")
    text.append(f"{glyphs[result.status]} ", style=STYLES[result.status])
    text.append(f"{result.id:<{ID_WIDTH}}", style="bold")
    text.append(" " + result.summary)
    if result.detail and (verbose or result.status in (Status.FAIL, Status.WARN)):
        shown = result.detail.splitlines() if verbose else result.detail.splitlines()[:3]
        for line in shown:
            text.append("\n      " + line, style="dim")
    if result.fix and result.status in (Status.FAIL, Status.WARN):
        for i, line in enumerate(result.fix.splitlines()):
            text.append("\n      " + ("fix: " if i == 0 else "     "), style="cyan")
            text.append(line)
    return text


def _cause(result: CheckResult, glyphs: dict[Status, str]) -> Text:
    """``Most likely cause: <id> — <summary>`` and its fix (envkit.report.rank_causes)."""
    style = STYLES[result.status]
    text = Text(f"{glyphs[result.status]} Most likely cause: ", style=style)
    text.append(result.id, style="bold")
    text.append(f" — {result.summary}")
    for i, line in enumerate(result.fix.splitlines()):
        text.append("\n  " + ("fix: " if i == 0 else "     "), style="cyan")
        text.append(line)
    return text


def render_report(
    report: Report,
    console: Console,
    *,
    verbose: bool = False,
    strict: bool = False,
    title: str = "envkit doctor",
) -> None:
    """Print the report grouped by area: one line per check, the fix under every warn/fail."""
    console = safe_console(console)
    glyphs = glyphs_for(console)
    header = Text(title, style="bold")
    where = report.source or report.host or "this machine"
    header.append(f" — {where}", style="dim")
    console.print(header)
    cause = report.cause
    if cause is not None:  # one answer first (issue 11): the most likely cause and its fix
        console.print(_cause(cause, glyphs))
        console.print()
    for line in _facts_lines(report.facts):
        console.print(Text("  " + line, style="dim"))
    for note in report.facts.notes:
        console.print(Text(f"  note: {note}", style="yellow"))
    by_area: dict[str, list[CheckResult]] = {}
    for result in report.checks:
        by_area.setdefault(result.area, []).append(result)
    order = list(AREAS) + [a for a in by_area if a not in AREAS]
    for area in order:
        if area not in by_area:
            continue
        console.print()
        console.print(Text(AREAS.get(area, area), style="bold underline"))
        for result in by_area[area]:
            console.print(_result(result, verbose, glyphs))
    counts = report.counts()
    console.print()
    parts = [f"{counts['pass']} passed"]
    if counts["warn"]:
        parts.append(plural(counts["warn"], "warning"))
    if counts["fail"]:
        parts.append(f"{counts['fail']} failed")
    if counts["skip"]:
        parts.append(f"{counts['skip']} skipped")
    verdict = "healthy" if report.exit_code(strict=strict) == 0 else "unhealthy"
    style = "green" if verdict == "healthy" else "bold red"
    tally = Text(f"{plural(len(report.checks), 'check')}: {', '.join(parts)} — ")
    tally.append(verdict, style=style)
    if report.duration_s is not None:
        tally.append(f" ({report.duration_s:.2f} s)", style="dim")
    console.print(tally)


def render_plan(plan: Plan, console: Console, *, explain: bool = False) -> None:
    """The chosen build, its install command, warnings, and (--explain) what was passed over."""
    console = safe_console(console)
    header = Text("envkit resolve", style="bold")
    header.append(f" — {plan.target.describe()} ({plan.target.described_by})", style="dim")
    console.print(header)
    cuda = (
        f"CUDA {plan.cuda}"
        if plan.cuda
        else "CPU only"
        if plan.variant == "cpu"
        else _variant_words(plan.variant)
    )
    line = Text("  torch ")
    line.append(f"{plan.torch}", style="bold green")
    companions = " · ".join(
        f"{name} {getattr(plan, name)}" if name in plan.companions else f"{name}: build from source"
        for name in ("torchvision", "torchaudio")
    )
    line.append(f" + {plan.variant} ({cuda}) · {companions}")
    if plan.python:
        line.append(f" · Python {plan.python}")
    console.print(line)
    if plan.conda is not None:
        console.print(Text(f"  {plan.conda_command()}", style="cyan"))
        if plan.conda.why:
            console.print(Text(f"  channel: {plan.conda.why}"))
    else:
        console.print(Text(f"  {plan.pip_command()}", style="cyan"))
    for pick in plan.extensions:
        what = "built from source" if pick.build is not None else pick.file or pick.requirement
        line = Text(f"  {pick.name} ")
        line.append(f"{pick.version}", style="bold green")
        line.append(f" · {what}")
        if pick.sha256:
            line.append(f" · sha256 {pick.sha256[:16]}…", style="dim")
        console.print(line)
    command = plan.extension_command()
    if command is not None:
        console.print(Text(f"  {command}", style="cyan"))
        console.print(Text(f"  (constraints.txt: {' '.join(plan.requirements())})", style="dim"))
    for warning in plan.warnings:
        console.print(Text(f"  ! {warning}", style="yellow"))
    for note in plan.notes:
        console.print(Text(f"  {note}", style="dim"))
    if explain:
        console.print()
        if plan.rejected:
            console.print(Text("Passed over (newest first):", style="bold"))
            for rejection in plan.rejected:
                console.print(Text(f"  {rejection.candidate}: {rejection.reason}"))
        else:
            console.print(Text("Nothing newer was passed over.", style="dim"))


def render_mirrors(
    table: dict[str, Any], console: Console, *, verbose: bool = False, quiet: bool = False
) -> None:
    """One line per mirror (kind, name, URL, what it carries), its caveat, and its probe result.

    ``quiet``: name and URL only (and a failed probe); ``verbose``: each row's source too."""
    console = safe_console(console)
    for row in table["mirrors"]:
        if quiet:
            probe = row.get("probe")
            failed = f"  ✗ {probe['error']}" if probe is not None and not probe["ok"] else ""
            console.print(Text(f"{row['name']:14s}{row['url']}{failed}"))
            continue
        carries = ", ".join(row["variants"] or row["channels"]) or "-"
        line = Text(f"{row['kind']:13s}", style="dim")
        line.append(f"{row['name']:14s}", style="bold")
        line.append(f"{row['url']}  ({row['layout']}, {row['region']}; carries {carries})")
        console.print(line)
        probe = row.get("probe")
        if probe is not None:
            if probe["ok"] and row["kind"] == "pypi" and table.get("variant"):
                # PyPI answers for its default build only: no yes to a variant question.
                note = (
                    f"– {probe['elapsed_s']:.2f} s: torch's default build only, no {table['variant']} index"
                )
                console.print(Text(f"{'':27s}{note}", style="yellow"))
            elif probe["ok"]:
                console.print(Text(f"{'':27s}✓ {probe['elapsed_s']:.2f} s", style="green"))
            else:
                console.print(Text(f"{'':27s}✗ {probe['error']}", style="red"))
        if row["caveats"]:
            console.print(Text(f"{'':27s}{row['caveats']}", style="dim"))
        if verbose and row.get("source"):
            console.print(Text(f"{'':27s}source: {row['source']}", style="dim"))


def render_checks(
    checks: Sequence[CheckResult], console: Console, *, title: str, verbose: bool = False
) -> None:
    """A flat list of check results (e.g. ``envkit spec --check``), each with its fix."""
    console = safe_console(console)
    glyphs = glyphs_for(console)
    console.print(Text(title, style="bold"))
    for result in checks:
        console.print(_result(result, verbose, glyphs))
