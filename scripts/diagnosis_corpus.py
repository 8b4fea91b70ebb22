"""The diagnosis corpus: real setups from public issue threads, as the text a user pastes.

Three kinds of case (``kind`` in the case file): ``collect_env`` (the facts of a report, rendered
below), ``error`` (a traceback or log alone) and ``mixed`` (an issue body mixing an error with
listings: pip, conda, nvidia-smi, ldd, /proc/driver/nvidia/version …). The last two keep the text in
``cases/<slug>.txt``: the machine-printed lines that carry the facts, excerpted from the thread.

Each case under ``tests/data/diagnosis/cases/<slug>.toml`` keeps the *facts* a public thread shows (the
fields of ``torch.utils.collect_env.SystemEnv``, torch's own warnings that preceded the report) and what the
thread confirmed as the cause. No pasted text is kept: the text is rendered here with the formatter of the
installed torch (``torch.utils.collect_env.pretty_str``) and then given the noise real pastes carry
(quoted replies, code fences, CRLF, hard wraps, cut-off tails), chosen deterministically from the slug.

Used by ``scripts/eval_diagnosis.py`` (the measurement) and ``tests/unit/test_diagnosis_corpus.py``.
torch is a test dependency; this module imports it only when it renders.
"""

from __future__ import annotations

import hashlib
import random
import sys
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional
from unittest import mock

if TYPE_CHECKING:
    from types import ModuleType

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the venv runs 3.11; tomli is what tomllib was before 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
CASES_DIR = ROOT / "tests" / "data" / "diagnosis" / "cases"

# The classes of tests/data/diagnosis/README.md (issue 11's "What went wrong, by class"), and "healthy":
# setups whose bug was elsewhere, where any warning is a false alarm.
CLASSES = {
    "unknown-is-pass": "1: an old CUDA build on an old driver, where missing knowledge must not pass",
    "torch-warnings": "2: torch's own UserWarnings at the top of the paste",
    "unlisted-builds": "3: 1.x releases, nightlies, local builds: the build's CUDA bounds its archs",
    "cuda-without-driver": "4: a CUDA build of torch on a node where it cannot use CUDA",
    "driver-vs-arch": "5: a driver branch that cannot drive the GPU's architecture",
    "mig-mixed-companions": "6: MIG, mixed CUDA-major wheels, companions of another torch, shadowing libs",
    "gpu-names": "7: GPU names, cloud and China SKUs included",
    "knowledge": "8: facts the knowledge base had wrong",
    "healthy": "a healthy environment; the bug was elsewhere",
    # Error texts (issue 21): each class is a family of messages, found where it is produced.
    "loader": "9: the loader's failures in torch's own CUDA libraries (nvJitLink, cuSPARSE, …)",
    "extension": "10: compiled extensions built for another torch (flash-attn, vllm, torchvision's ops)",
    "cuda-runtime": "11: CUDA at start-up: no kernel image, 802/804, driver too old, a CPU build",
    "nvml": "12: NVML's driver/library version mismatch",
    "nccl": "13: NCCL errors and the reason NCCL gives",
    "compile": "14: torch.compile's toolchain: C compiler, Python.h, libcuda.so",
    "memory": "15: out of memory held by other processes",
}
# How the case reaches doctor --from: a rendered collect_env report, or a text kept beside the case.
KINDS = ("collect_env", "error", "mixed")
# Check ids the diagnosis work adds (issue 11); a case may expect them before they exist.
NEW_CHECK_IDS = frozenset({"torch.cuda_available", "torch.companions", "gpu.mig"})
TEXT_SUFFIX = ".txt"

# SystemEnv fields a case may set (torch 2.13's namedtuple; cpu_info may be omitted).
_LIST_FIELDS = ("pip_packages", "conda_packages", "nvidia_gpu_models")
_BOOL_FIELDS = ("is_debug_build", "is_cuda_available", "is_xnnpack_available")
_TORCH_LINES = (
    ("PyTorch version", "torch_version"),
    ("Is debug build", "is_debug_build"),
    ("CUDA used to build PyTorch", "cuda_compiled_version"),
)


@dataclass(frozen=True)
class Expect:
    cause: Optional[str]
    flagged: tuple[str, ...]
    healthy: bool
    allowed: tuple[str, ...]


@dataclass(frozen=True)
class Case:
    slug: str
    source: str
    title: str
    klass: str
    confirmed_by: str
    env: dict[str, Any]
    warnings: tuple[str, ...]
    expect: Expect
    cut_after: Optional[str] = None  # a paste the thread shows cut short: nothing after this label
    kind: str = "collect_env"
    text: Optional[str] = None  # error and mixed cases: the excerpted text (cases/<slug>.txt)
    held_out: bool = False  # gathered after the reader was written, by someone who did not write it


class CaseError(ValueError):
    """A case file that does not have the shape above."""


def load_case(path: Path) -> Case:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CaseError(f"{path.name}: {exc}") from exc
    data = dict(data)
    expect = data.pop("expect", None)
    if not isinstance(expect, dict):
        raise CaseError(f"{path.name}: no [expect] table")
    meta = {key: data.pop(key, None) for key in ("source", "title", "class", "confirmed_by")}
    for key, value in meta.items():
        if not isinstance(value, str) or not value.strip():
            raise CaseError(f"{path.name}: `{key}` must be a non-empty string")
    warns = data.pop("warnings", [])
    noise = data.pop("noise", {})
    if not isinstance(warns, list) or not all(isinstance(w, str) for w in warns):
        raise CaseError(f"{path.name}: `warnings` must be a list of strings")
    cause = expect.get("cause")
    kind = data.pop("kind", "collect_env")
    held_out = data.pop("held_out", False)
    if not isinstance(held_out, bool):
        raise CaseError(f"{path.name}: `held_out` must be true or false")
    if kind not in KINDS:
        raise CaseError(f"{path.name}: `kind` must be one of {', '.join(KINDS)}")
    text = None
    if kind != "collect_env":
        fixture = path.with_suffix(TEXT_SUFFIX)
        try:
            text = fixture.read_text(encoding="utf-8")
        except OSError as exc:
            raise CaseError(f"{path.name}: a {kind} case keeps its text in {fixture.name}: {exc}") from exc
    return Case(
        slug=path.stem,
        source=str(meta["source"]),
        title=str(meta["title"]),
        klass=str(meta["class"]),
        confirmed_by=str(meta["confirmed_by"]),
        env=data,
        warnings=tuple(warns),
        expect=Expect(
            cause=str(cause) if cause else None,
            flagged=tuple(expect.get("flagged", ())),
            healthy=bool(expect.get("healthy", False)),
            allowed=tuple(expect.get("allowed", ())),
        ),
        cut_after=noise.get("cut_after") if isinstance(noise, dict) else None,
        kind=kind,
        text=text,
        held_out=held_out,
    )


def load_cases(directory: Path = CASES_DIR) -> list[Case]:
    return [load_case(path) for path in sorted(directory.glob("*.toml"))]


# Rendering ---------------------------------------------------------------------------------------------


def _collect_env() -> ModuleType:
    # Importing torch warns (numpy missing on the CPU test wheel); that is not part of any paste.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch.utils.collect_env as module
    found: ModuleType = module
    return found


def system_env(case: Case, module: Optional[ModuleType] = None) -> Any:
    """The case as torch's own ``SystemEnv``: what the thread shows, the rest as collect_env has it.

    collect_env's ``get_env_info`` (torch 2.13) stringifies the torch answers (``str(torch.version.debug)``,
    ``str(torch.cuda.is_available())``) and sets the HIP fields to "N/A" on a CUDA build; fields it could not
    collect are None, which ``pretty_str`` prints as "Could not collect".
    """
    module = module or _collect_env()
    fields = module.SystemEnv._fields
    unknown = set(case.env) - set(fields)
    if unknown:
        raise CaseError(f"{case.slug}: SystemEnv has no field {sorted(unknown)}")
    values: dict[str, Any] = dict.fromkeys(fields)
    values.update(
        hip_compiled_version="N/A",
        hip_runtime_version="N/A",
        miopen_runtime_version="N/A",
        is_xpu_available="False",
        caching_allocator_config="",
        pip_version="pip3",
    )
    for key, value in case.env.items():
        if key in _LIST_FIELDS and isinstance(value, list):
            value = "\n".join(str(v) for v in value)
        elif key in _BOOL_FIELDS and isinstance(value, bool):
            value = str(value)
        elif key == "python_version" and "bit runtime" not in str(value):
            value = f"{value} (64-bit runtime)"
        values[key] = value
    if values["cpu_info"] is None:
        values["cpu_info"] = "None"  # get_cpu_info's value when lscpu/wmic gave nothing
    return module.SystemEnv(**values)


def pretty(case: Case, module: Optional[ModuleType] = None) -> str:
    """collect_env's report for the case, as ``python -m torch.utils.collect_env`` prints it."""
    module = module or _collect_env()
    env = system_env(case, module)
    # pretty_str asks the *installed* torch whether CUDA is available (to print "No CUDA"); the answer
    # must be the reporter's, so the installed one is kept out of it when the reporter's was True.
    torch_available = case.env.get("is_cuda_available") is not True
    with mock.patch.object(module, "TORCH_AVAILABLE", torch_available), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text: str = module.pretty_str(env)
    # A thread that never shows the torch part of the report (only torch's warning and the GPU lines, say):
    # those lines are left out, as a reporter trimming the paste would, rather than printed as "Could not
    # collect", which collect_env itself never prints for them ("N/A" when torch does not import; a CPU
    # build's "CUDA used to build PyTorch" is "None" or "Could not collect").
    if "torch_version" not in case.env:
        unknown = [f"{label}: Could not collect" for label, key in _TORCH_LINES if key not in case.env]
        unknown.append("ROCM used to build PyTorch: N/A")
        text = "\n".join(line for line in text.splitlines() if line not in unknown)
    return "Collecting environment information...\n" + text + "\n"


def _warning_lines(case: Case) -> str:
    """torch's warnings as Python's ``warnings`` module prints them, above the report."""
    pyver = ".".join(str(case.env.get("python_version", "3.10")).split()[0].split(".")[:2])
    where = f"/usr/local/lib/python{pyver}/site-packages/torch/cuda/__init__.py"
    out = []
    for text in case.warnings:
        if text.startswith("CUDA initialization:"):
            out.append(f"{where}:188: UserWarning: {text}\n  return torch._C._cuda_getDeviceCount() > 0\n")
        else:
            out.append(f"{where}:444: UserWarning: {text}\n  warnings.warn(\n")
    return "".join(out)


def _rng(slug: str) -> random.Random:
    return random.Random(int.from_bytes(hashlib.sha256(slug.encode()).digest()[:8], "big"))


def _hard_wrap(text: str, width: int) -> str:
    lines = []
    for line in text.splitlines():
        lines += textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False) or [""]
    return "\n".join(lines) + "\n"


def _cut(text: str, rng: random.Random) -> str:
    """A tail lost to a paste limit: the conda lines (when there are any) stop part-way."""
    lines = text.splitlines()
    conda = [i for i, line in enumerate(lines) if line.startswith("[conda] ")]
    if len(conda) < 2:
        return text
    end = rng.randint(conda[0] + 1, conda[-1])
    tail = lines[end][: rng.randint(3, max(4, len(lines[end]) - 1))]
    return "\n".join([*lines[:end], tail]) + "\n"


def noise_for(slug: str) -> dict[str, Any]:
    """The paste noise a case gets: a pure function of the slug, so every run renders the same text."""
    rng = _rng(slug)
    return {
        "header": rng.random() < 0.8,
        "fence": rng.choice(["```", "```text", "```shell", None, None]),
        "quote": rng.random() < 0.25,
        "crlf": rng.random() < 0.2,
        "wrap": rng.choice([None, None, None, 72, 80]),
        "cut": rng.random() < 0.25,
        "seed": rng.random(),
    }


def render(case: Case, module: Optional[ModuleType] = None) -> str:
    """The text a user would paste for the case: warnings, report, and that case's noise; an error
    or mixed case's own excerpted text as it is."""
    if case.text is not None:
        return case.text
    noise = noise_for(case.slug)
    report = pretty(case, module)
    if not noise["header"]:
        report = report.split("\n", 1)[1]
    if case.cut_after:
        lines = report.splitlines()
        end = next((i for i, line in enumerate(lines) if line.startswith(case.cut_after)), len(lines) - 1)
        report = "\n".join(lines[: end + 1]) + "\n"
    elif noise["cut"]:
        report = _cut(report, random.Random(noise["seed"]))
    text = _warning_lines(case) + report
    if noise["wrap"]:
        text = _hard_wrap(text, noise["wrap"])
    if noise["fence"]:
        text = f"{noise['fence']}\n{text}```\n"
    if noise["quote"]:
        text = "".join("> " + line + "\n" for line in text.splitlines())
    if noise["crlf"]:
        text = text.replace("\n", "\r\n")
    return text


def main(argv: Optional[list[str]] = None) -> int:
    """Print one case's rendered paste: ``python scripts/diagnosis_corpus.py SLUG``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: diagnosis_corpus.py SLUG", file=sys.stderr)
        return 2
    path = CASES_DIR / f"{args[0]}.toml"
    if not path.is_file():
        print(f"diagnosis_corpus.py: no case {args[0]!r} in {CASES_DIR}", file=sys.stderr)
        return 2
    sys.stdout.write(render(load_case(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
