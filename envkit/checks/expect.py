"""Expectations: what a node must look like (``envkit preflight --expect FILE``), and the drift checks
that compare it with the facts.

The file is TOML, one key per expectation, in the spirit of NHC's and Azure's per-SKU configs
(mej/nhc:nhc.conf@9c4a38c0c9f4, Azure/azurehpc-health-checks:conf/*.conf@0e0a1ac26a64). A malformed
file, an unknown key or a wrong type is an input error naming the file, the line and the key: a typo
must not silently turn a check off.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Optional

from envkit._files import parse_toml, read_text
from envkit.checks._common import and_list
from envkit.errors import InputError
from envkit.knowledge.vendors import normalize_gfx
from envkit.report import CheckResult, Status
from envkit.versions import NvVersion, Version, parse_compute_capability, parse_spec, parse_version

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

    from envkit.facts import Facts

__all__ = ["KEYS", "Expectations", "check_expectations", "load_expectations"]

# key -> (type, what it means). Types are checked before anything runs.
KEYS: Final[dict[str, tuple[type, str]]] = {
    "gpu_vendor": (str, "the GPUs' vendor: nvidia, amd or intel"),
    "gpu_count": (int, "number of GPUs the node must have: NVML's; AMD's or Intel's on such a node"),
    "gpu_model": (str, "substring of every GPU's name (e.g. H100, MI300X)"),
    "gpu_arch": (
        str,
        "every GPU's architecture: sm_90 (or 9.0), an AMD gfx target (gfx942), an Intel XPU family (bmg)",
    ),
    "min_gpu_memory_mib": (int, "least memory per GPU in MiB, as nvidia-smi shows it (81559 for H100 80GB)"),
    "min_driver": (str, "lowest driver version (e.g. 550.54.15)"),
    "cuda": (str, "torch's CUDA version (e.g. 12.1)"),
    "torch": (str, "torch version (2.5.1+cu121) or a PEP 440 spec (>=2.5,<2.6)"),
    "python": (str, "Python version or spec (3.11 or >=3.10)"),
    "min_nccl": (str, "lowest NCCL version (e.g. 2.21)"),
    "max_temperature_c": (int, "hottest a GPU may run, °C"),
    "require": (list, "checks that must run and pass (e.g. verify.dist)"),
    "ignore": (list, "checks not counted (e.g. python.shm)"),
}


_TYPE_NAMES: Final = {int: "an integer", str: "a string", list: "a list"}


@dataclass(frozen=True)
class Expectations:
    path: str
    values: dict[str, Any] = field(default_factory=dict)

    @property
    def require(self) -> tuple[str, ...]:
        return tuple(self.values.get("require", ()))

    @property
    def ignore(self) -> tuple[str, ...]:
        return tuple(self.values.get("ignore", ()))


def _line_of(text: str, key: str) -> int:
    for number, line in enumerate(text.splitlines(), start=1):
        if re.match(rf"^\s*{re.escape(key)}\s*=", line):
            return number
    return 0


def load_expectations(
    path: str, known_checks: tuple[str, ...] = (), *, deadline: Optional[float] = None
) -> Expectations:
    """Read and validate an expectations file; InputError says file:line and the key. ``deadline``
    (time.monotonic()): when the reading must be over (a FIFO, a slow pipe)."""
    text = read_text(path, label=f"--expect {path}", deadline=deadline)
    data = parse_toml(text, path)
    for key, value in data.items():
        value_any: Any = value
        where = f"{path}:{_line_of(text, key)}"
        if key not in KEYS:
            close = difflib.get_close_matches(key, list(KEYS), n=2, cutoff=0.6)
            hint = f"; did you mean {and_list(close)}?" if close else f"; known keys: {', '.join(KEYS)}"
            raise InputError(f"{where}: unknown key {key!r}{hint}")
        kind, meaning = KEYS[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise InputError(
                f"{where}: {key} must be {_TYPE_NAMES[kind]} ({meaning}), "
                f"not {type(value).__name__} {value!r}"
            )
        if kind is list and not all(isinstance(v, str) for v in value_any):
            raise InputError(f"{where}: {key} must be a list of check ids (strings)")
        if key in ("require", "ignore") and known_checks:
            unknown = [v for v in value_any if v not in known_checks]
            if unknown:
                raise InputError(f"{where}: {key} names unknown checks: {', '.join(unknown)}")
        _validate_value(key, value, where)
    return Expectations(path, dict(data))


def _validate_value(key: str, value: Any, where: str) -> None:
    if isinstance(value, str) and not value.strip():
        # An empty spec would match every version: a typo must not turn the check into "anything".
        raise InputError(f"{where}: {key} is empty; give the {KEYS[key][1]}, or remove the line")
    if key in ("min_driver", "min_nccl", "cuda") and parse_version(value) is None:
        raise InputError(f"{where}: {key} = {value!r:.60} is not a version")
    if key in ("torch", "python"):
        _spec(value, where, key)
    if key in ("gpu_count", "max_temperature_c", "min_gpu_memory_mib") and value < 0:
        raise InputError(f"{where}: {key} must not be negative")
    if key == "gpu_vendor" and value.strip().lower() not in VENDORS:
        raise InputError(f"{where}: gpu_vendor = {value!r:.60} is not one of {', '.join(VENDORS)}")
    if key == "gpu_arch" and _arch(value) is None:
        raise InputError(
            f"{where}: gpu_arch = {value!r:.60} is not an architecture (sm_90, 9.0, gfx942, bmg)"
        )


VENDORS: Final = ("nvidia", "amd", "intel")
_INTEL_FAMILIES: Final = ("pvc", "dg2", "bmg", "mtl-h", "arl-h", "lnl-m", "ptl")


def _arch(text: str) -> Optional[str]:
    """An architecture as envkit names it: sm_90, gfx942, bmg; None when ``text`` is none."""
    value = text.strip().lower()
    if value.startswith("gfx"):
        return normalize_gfx(value)
    if value in _INTEL_FAMILIES:
        return value
    cc = parse_compute_capability(value)
    return cc.sm if cc is not None else None


@dataclass(frozen=True)
class _Gpu:
    vendor: str
    name: str
    arch: Optional[str]
    memory_mib: Optional[int]


def _node_gpus(facts: Facts, vendor: Optional[str]) -> list[_Gpu]:
    """The node's GPUs of ``vendor``; without one, of the first of NVIDIA, AMD, Intel it has (an
    NVIDIA node's Intel iGPU is not one of its GPUs)."""
    found = {
        "nvidia": [
            _Gpu(
                "nvidia",
                g.name or "",
                g.compute_capability.sm if g.compute_capability else None,
                g.memory_total_mib,
            )
            for g in facts.gpus
        ],
        "amd": [_Gpu("amd", g.name or "", g.arch, g.memory_total_mib) for g in facts.amd.gpus],
        "intel": [
            _Gpu("intel", g.name or "", g.arch, g.memory_total_mib) for g in facts.intel.gpus if g.arch
        ],
    }
    if vendor is not None:
        return found[vendor]
    return next((gpus for gpus in found.values() if gpus), [])


def _spec(value: str, where: str, key: str) -> SpecifierSet:
    spec = parse_spec(value)
    if spec is None:
        raise InputError(f"{where}: {key} = {value!r:.60} is neither a version nor a PEP 440 spec")
    return spec


def _result(key: str, ok: bool, expected: str, actual: str, fix: str = "") -> CheckResult:
    cid = f"expect.{key}"  # the id names the key; the summary is expected vs actual
    if ok:
        return CheckResult(cid, Status.PASS, f"{actual} (expected {expected})")
    return CheckResult(cid, Status.FAIL, f"expected {expected}, found {actual}", fix=fix)


def check_expectations(expect: Expectations, facts: Facts) -> list[CheckResult]:
    """One drift check per expectation: expected vs actual, fail on drift."""
    v = expect.values
    results: list[CheckResult] = []
    vendor = str(v["gpu_vendor"]).strip().lower() if "gpu_vendor" in v else None
    gpus = _node_gpus(facts, vendor)
    if vendor is not None:
        present = [name for name in VENDORS if _node_gpus(facts, name)]
        results.append(
            _result(
                "gpu_vendor",
                vendor in present,
                vendor,
                " + ".join(present) or "no GPU",
                "see driver.loaded, driver.amd and driver.intel: the vendor's driver must see its GPUs",
            )
        )
    if "gpu_count" in v:
        results.append(
            _result(
                "gpu_count",
                len(gpus) == v["gpu_count"],
                str(v["gpu_count"]),
                str(len(gpus)),
                "see driver.loaded and gpu.health; `nvidia-smi -L` and `dmesg | grep -i xid` for a lost GPU",
            )
        )
    if "gpu_model" in v:
        wrong = [g for g in gpus if v["gpu_model"].lower() not in (g.name or "").lower()]
        names = and_list(sorted({g.name or "unknown" for g in wrong})) if wrong else "all match"
        results.append(
            _result(
                "gpu_model",
                bool(gpus) and not wrong,
                f"{v['gpu_model']!r} in every GPU name",
                names if gpus else "no GPU",
            )
        )
    if "gpu_arch" in v:
        arch = _arch(str(v["gpu_arch"]))
        other = sorted({g.arch or "unknown" for g in gpus if g.arch != arch})
        results.append(
            _result(
                "gpu_arch",
                bool(gpus) and not other,
                f"{arch} on every GPU",
                and_list(other) if other else ("all match" if gpus else "no GPU"),
            )
        )
    if "min_gpu_memory_mib" in v:
        small = [g for g in gpus if g.memory_mib is None or g.memory_mib < v["min_gpu_memory_mib"]]
        results.append(
            _result(
                "min_gpu_memory_mib",
                bool(gpus) and not small,
                f"≥ {v['min_gpu_memory_mib']} MiB per GPU",
                f"{len(small)} GPU(s) below" if small else "all above",
            )
        )
    driver = facts.driver.version
    if "min_driver" in v:
        floor = NvVersion(v["min_driver"])
        results.append(
            _result(
                "min_driver",
                driver is not None and driver >= floor,
                f"≥ {floor}",
                str(driver or "no driver"),
                f"upgrade the driver to ≥ {floor}",
            )
        )
    torch = facts.torch
    if "torch" in v:
        spec = _spec(v["torch"], expect.path, "torch")
        ok = torch.version is not None and spec.contains(torch.version, prereleases=True)
        results.append(
            _result(
                "torch",
                ok,
                str(v["torch"]),
                str(torch.version or "not installed"),
                "install the fleet's torch build (`envkit resolve --torch ...` prints the command)",
            )
        )
    if "cuda" in v:
        want = Version(v["cuda"])
        ok = torch.cuda is not None and (torch.cuda.major, torch.cuda.minor) == (want.major, want.minor)
        results.append(_result("cuda", ok, str(want), str(torch.cuda or "a CPU-only build")))
    if "python" in v:
        version = facts.python.version if facts.python else None
        wanted = str(v["python"]).strip()
        if re.fullmatch(r"\d+\.\d+", wanted):  # "3.11" means any 3.11.x, as people write it
            ok = version is not None and f"{version.major}.{version.minor}" == wanted
        else:
            ok = version is not None and _spec(wanted, expect.path, "python").contains(version)
        results.append(_result("python", ok, wanted, str(version or "unknown")))
    if "min_nccl" in v:
        nccl_floor = Version(v["min_nccl"])
        nccl = facts.torch.nccl_version()
        results.append(
            _result(
                "min_nccl",
                nccl is not None and nccl >= nccl_floor,
                f"≥ {nccl_floor}",
                str(nccl) if nccl else "unknown (no nvidia-nccl wheel; run with --deep or --verify device)",
            )
        )
    if "max_temperature_c" in v:
        hot = [
            g for g in facts.gpus if g.temperature_c is not None and g.temperature_c > v["max_temperature_c"]
        ]
        hottest = max((g.temperature_c for g in facts.gpus if g.temperature_c is not None), default=None)
        results.append(
            _result(
                "max_temperature_c",
                not hot,
                f"≤ {v['max_temperature_c']} °C",
                f"{hottest} °C" if hottest is not None else "no reading",
                "check the airflow and fans; `nvidia-smi -q -d TEMPERATURE`",
            )
        )
    return results


def apply_require_ignore(expect: Expectations, checks: list[CheckResult]) -> list[CheckResult]:
    """Required checks must have run and passed; ignored ones are kept but not counted."""
    by_id = {c.id: c for c in checks}
    out = []
    for check in checks:
        if check.id in expect.ignore:
            out.append(
                CheckResult(
                    check.id,
                    Status.SKIP,
                    f"ignored by {expect.path}: {check.summary}",
                    detail=check.detail,
                    metrics=check.metrics,
                )
            )
        elif check.id in expect.require and check.status is not Status.PASS:
            out.append(
                CheckResult(
                    check.id,
                    Status.FAIL,
                    f"required by {expect.path}: {check.summary}",
                    detail=check.detail,
                    fix=check.fix,
                    metrics=check.metrics,
                )
            )
        else:
            out.append(check)
    for cid in expect.require:
        if cid not in by_id:
            out.append(
                CheckResult(
                    cid,
                    Status.FAIL,
                    f"required by {expect.path} but did not run",
                    fix=f"run it: envkit preflight --verify {cid.removeprefix('verify.')}",
                )
            )
    return out
