"""AMD's own tools, each bounded: the ``amdsmi`` bindings (in a child, envkit.detect.amd_worker),
``amd-smi`` and ``rocm-smi``. Parsers are pure and tolerant; what a tool could not say is None.

Formats read (recorded real outputs in tests/data/amd/, sources in tests/data/README.md):

- ``amd-smi static --asic --bus --driver``: ``GPU: N`` blocks of indented ``KEY: value`` lines
  (ASIC ``MARKET_NAME``, ``DEVICE_ID``, ``TARGET_GRAPHICS_VERSION`` (amd-smi 6.2 on), BUS ``BDF``,
  DRIVER ``VERSION``); ``N/A`` is none.
- ``amd-smi version``: ``AMDSMI Tool: … | AMDSMI Library version: … | ROCm version: 6.1.0`` (newer
  releases add ``| amdgpu version: …``).
- ``rocm-smi --showproductname --showdriverversion --json``: ``{"card0": {"Card Series": …,
  "Card Model": "0x7408", "GFX Version": "gfx9010"}, "system": {"Driver version": …}}``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import secrets
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Final, Optional

from envkit._proc import short
from envkit.knowledge.vendors import normalize_gfx

if TYPE_CHECKING:
    from envkit._proc import ProcResult
    from envkit.system import System

__all__ = [
    "ToolAnswer",
    "ToolGpu",
    "ask_amd_tools",
    "normalize_gfx",
    "parse_amd_smi_static",
    "parse_amd_smi_version",
    "parse_amdsmi_record",
    "parse_rocm_smi_json",
]

TOOL_TIMEOUT_S: Final = 10.0
WORKER: Final = Path(__file__).with_name("amd_worker.py")
ROCM_BIN: Final = "/opt/rocm/bin"
MAX_TOOL_GPUS: Final = 256
_NONE: Final = frozenset({"", "n/a", "na", "none", "unknown", "not supported"})


@dataclass(frozen=True)
class ToolGpu:
    """One GPU as a tool reports it."""

    name: Optional[str] = None
    bus_id: Optional[str] = None
    device_id: Optional[str] = None
    gfx: Optional[str] = None
    memory_mib: Optional[int] = None
    source: str = ""


@dataclass(frozen=True)
class ToolAnswer:
    gpus: tuple[ToolGpu, ...] = ()
    driver_version: Optional[str] = None
    rocm: Optional[str] = None
    sources: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


def _value(text: Optional[str]) -> Optional[str]:
    if text is None:
        return None
    value = text.strip()
    return None if value.lower() in _NONE else value[:128]


def _gfx(text: Optional[str]) -> Optional[str]:
    value = _value(text)
    return normalize_gfx(value) if value else None


def _hex_id(text: Optional[str]) -> Optional[str]:
    value = _value(text)
    if value is None:
        return None
    match = re.fullmatch(r"(?:0x)?([0-9a-fA-F]{1,4})", value)
    return f"0x{int(match.group(1), 16):04x}" if match else None


def _mib(text: Optional[str]) -> Optional[int]:
    """64289 from amd-smi's "64289 MB" (its MB are MiB: the MI300A's 64289 MB is 62.8 GiB)."""
    match = re.fullmatch(r"(\d{1,9})\s*MB", (text or "").strip())
    return int(match.group(1)) if match else None


def parse_amd_smi_static(text: str) -> tuple[list[ToolGpu], Optional[str]]:
    """The GPUs of ``amd-smi static``'s text output (any subset of its sections).

    >>> gpus, _driver = parse_amd_smi_static("GPU: 0\\n    ASIC:\\n        MARKET_NAME: MI308X\\n"
    ...     "        DEVICE_ID: 0x74a2\\n        TARGET_GRAPHICS_VERSION: gfx942\\n")
    >>> gpus[0].name, gpus[0].device_id, gpus[0].gfx
    ('MI308X', '0x74a2', 'gfx942')
    """
    blocks: list[dict[str, str]] = []
    section = ""
    inside = False
    for raw in text.splitlines()[:200000]:
        line = raw.rstrip()
        if line and not raw.startswith((" ", "\t")):
            # A top-level "GPU: N" opens a GPU's block; any other ("CPU: 0") closes it.
            inside = bool(re.match(r"^GPU:\s*\d+\s*$", line))
            if inside:
                if len(blocks) >= MAX_TOOL_GPUS:
                    break
                blocks.append({})
                section = ""
            continue
        if not inside or ":" not in line:
            continue
        key, _, value = line.strip().partition(":")
        key = key.strip().upper()
        if not value.strip():
            section = key
            continue
        blocks[-1].setdefault(f"{section}.{key}", value.strip())
    gpus = []
    driver = next((v for b in blocks for v in [_value(b.get("DRIVER.VERSION"))] if v), None)
    for b in blocks:
        gpus.append(
            ToolGpu(
                name=_value(b.get("ASIC.MARKET_NAME")),
                bus_id=_value(b.get("BUS.BDF")),
                device_id=_hex_id(b.get("ASIC.DEVICE_ID")),
                gfx=_gfx(b.get("ASIC.TARGET_GRAPHICS_VERSION")),
                memory_mib=_mib(b.get("VRAM.SIZE")),
                source="amd-smi",
            )
        )
    return gpus, driver


def parse_amd_smi_version(text: str) -> dict[str, str]:
    """``amd-smi version``'s ``key: value | key: value`` line as a dict with lower-case keys.

    >>> parse_amd_smi_version("AMDSMI Tool: 23.4.2+505b858 | AMDSMI Library version: 24.2.0.0 | "
    ...     "ROCm version: 6.1.0")["rocm version"]
    '6.1.0'
    """
    found: dict[str, str] = {}
    for part in re.split(r"\s*\|\s*|\n", text)[:64]:
        key, sep, value = part.partition(":")
        value = _value(value) or ""
        if sep and value and len(key) <= 64:
            found[key.strip().lower()] = value.split()[0]
    return found


def parse_rocm_smi_json(text: str) -> tuple[list[ToolGpu], Optional[str]]:
    """GPUs and driver version of ``rocm-smi --showproductname --showdriverversion --json``.

    >>> gpus, _ = parse_rocm_smi_json('{"card0": {"Card Series": "AMD INSTINCT MI200", '
    ...     '"Card Model": "0x7408", "GFX Version": "gfx9010"}}')
    >>> gpus[0].gfx, gpus[0].device_id
    ('gfx90a', '0x7408')
    """
    try:
        data = json.loads(text)
    except ValueError:
        raise ValueError("not JSON") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    gpus: list[ToolGpu] = []
    driver = None
    for key, card in list(data.items())[: MAX_TOOL_GPUS + 1]:
        if not isinstance(card, dict):
            continue
        fields = {str(k).lower(): str(v) for k, v in card.items() if isinstance(v, (str, int))}
        if "driver version" in fields:
            driver = _value(fields["driver version"])
        if not str(key).startswith("card"):
            continue
        gpus.append(
            ToolGpu(
                name=_value(fields.get("card series") or fields.get("device name")),
                bus_id=_value(fields.get("pci bus")),
                device_id=_hex_id(fields.get("card model") or fields.get("device id")),
                gfx=_gfx(fields.get("gfx version")),
                source="rocm-smi",
            )
        )
    return gpus, driver


def parse_amdsmi_record(record: Any) -> tuple[list[ToolGpu], Optional[str], Optional[str]]:
    """The amdsmi worker's record: (GPUs, driver version, ROCm version); ValueError for garbage."""
    if not isinstance(record, dict) or not isinstance(record.get("gpus", []), list):
        raise ValueError("not an amdsmi record")
    gpus = []
    driver = None
    for item in record.get("gpus", [])[:MAX_TOOL_GPUS]:
        if not isinstance(item, dict):
            raise ValueError("a GPU entry is not an object")
        text = {k: str(v) for k, v in item.items() if isinstance(v, (str, int))}
        driver = driver or _value(text.get("driver_version"))
        memory = text.get("vram_mb", "")
        gpus.append(
            ToolGpu(
                name=_value(text.get("market_name")),
                bus_id=_value(text.get("bdf")),
                device_id=_hex_id(text.get("device_id")),
                gfx=_gfx(text.get("target_graphics_version")),
                memory_mib=int(memory) if memory.isdigit() and len(memory) < 10 else None,
                source="amdsmi",
            )
        )
    rocm = record.get("rocm_version")
    return gpus, driver, _value(rocm) if isinstance(rocm, str) else None


def _tool(system: System, name: str) -> Optional[str]:
    found = system.which(name)
    if found:
        return found
    candidate = system.path(f"{ROCM_BIN}/{name}")
    return str(candidate) if candidate.is_file() else None


def _failed(name: str, result: ProcResult) -> str:
    tail = result.tail(1)
    return short(f"{name}: {result.describe()}" + (f": {tail}" if tail else ""), 300)


def _amdsmi(system: System) -> tuple[Optional[ToolAnswer], list[str]]:
    """The amdsmi bindings, asked in a child (a library that crashes or spins costs the child)."""
    if system.root != Path("/") or importlib.util.find_spec("amdsmi") is None:
        return None, []
    marker = f"@@envkit-amdsmi-{secrets.token_hex(8)}@@"
    result = system.run_within([sys.executable, str(WORKER), marker], timeout=TOOL_TIMEOUT_S)
    blocks = result.stdout.split(marker)[1:-1:2]
    if not blocks:
        return None, [_failed("amdsmi", result)]
    try:
        gpus, driver, rocm = parse_amdsmi_record(json.loads(blocks[-1]))
    except ValueError as exc:
        return None, [f"amdsmi: an answer envkit cannot read ({exc})"]
    return ToolAnswer(tuple(gpus), driver, rocm, ("amdsmi",)), []


def _amd_smi(system: System, tool: str) -> tuple[Optional[ToolAnswer], list[str]]:
    notes: list[str] = []
    static = system.run_within([tool, "static", "--asic", "--bus", "--driver"], timeout=TOOL_TIMEOUT_S)
    gpus: list[ToolGpu] = []
    driver = None
    if static.ok:
        gpus, driver = parse_amd_smi_static(static.stdout)
        if not gpus and static.stdout.strip():
            notes.append(f"amd-smi static: no GPU in its output ({short(static.stdout.strip(), 80)!r})")
    else:
        notes.append(_failed("amd-smi static", static))
    version = system.run_within([tool, "version"], timeout=TOOL_TIMEOUT_S)
    fields = parse_amd_smi_version(version.stdout) if version.ok else {}
    if not version.ok:
        notes.append(_failed("amd-smi version", version))
    driver = fields.get("amdgpu version") or driver
    if not gpus and not fields:
        return None, notes
    return ToolAnswer(tuple(gpus), driver, fields.get("rocm version"), ("amd-smi",)), notes


def _rocm_smi(system: System, tool: str) -> tuple[Optional[ToolAnswer], list[str]]:
    argv = [tool, "--showproductname", "--showdriverversion", "--json"]
    result = system.run_within(argv, timeout=TOOL_TIMEOUT_S)
    if not result.ok:
        return None, [_failed("rocm-smi", result)]
    try:
        gpus, driver = parse_rocm_smi_json(result.stdout)
    except ValueError as exc:
        return None, [f"rocm-smi: an answer envkit cannot read ({exc}: {short(result.stdout.strip(), 60)!r})"]
    return ToolAnswer(tuple(gpus), driver, None, ("rocm-smi",)), []


def ask_amd_tools(system: System, *, wanted: bool) -> ToolAnswer:
    """What AMD's tools say, the first that lists GPUs winning (amdsmi, amd-smi, rocm-smi). Run
    when sysfs shows an AMD GPU (``wanted``) or the tools are installed; never otherwise."""
    amd_smi, rocm_smi = _tool(system, "amd-smi"), _tool(system, "rocm-smi")
    if not wanted and amd_smi is None and rocm_smi is None:
        return ToolAnswer()
    notes: list[str] = []
    answers: list[ToolAnswer] = []
    attempts: list[Callable[[], tuple[Optional[ToolAnswer], list[str]]]] = [lambda: _amdsmi(system)]
    if amd_smi:
        attempts.append(lambda: _amd_smi(system, amd_smi))
    if rocm_smi:
        attempts.append(lambda: _rocm_smi(system, rocm_smi))
    for attempt in attempts:
        answer, more = attempt()
        notes += more
        if answer is not None:
            answers.append(answer)
            if answer.gpus:
                break
    gpus = next((a.gpus for a in answers if a.gpus), ())
    return ToolAnswer(
        gpus=gpus,
        driver_version=next((a.driver_version for a in answers if a.driver_version), None),
        rocm=next((a.rocm for a in answers if a.rocm), None),
        sources=tuple(s for a in answers for s in a.sources),
        notes=tuple(notes),
    )
