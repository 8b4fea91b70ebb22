"""Faulty stand-ins for what envkit asks about the machine: ``nvidia-smi`` and
``/proc/driver/nvidia/version`` that print garbage, crash or hang; NVML readings with fields of any
value or an error; a compiled ``libnvidia-ml.so.1`` that segfaults, aborts or spins (with the GIL
held, or on one GPU); a ``torch`` whose version file is garbage and whose import raises, exits,
aborts, floods its output or hangs. The property: ``envkit doctor --json`` answers, with exit 0 or
1, a report on stdout and no traceback, within its --timeout and a little more.

Recorded real outputs are the seeds (tests/data/nvidia-smi, proc-driver-version, nvml); their
sources are in tests/data/README.md.
"""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.hostile.invoke import invoke

__all__ = ["run_nvml", "run_nvml_library", "run_smi", "run_torch"]

DATA = Path(__file__).parents[1] / "data"
TIMEOUT = 2.0  # doctor's --timeout in these cases
SLACK = 4.0  # what an answer may take past it on a loaded machine (the interpreter's start, xdist)
GARBAGE = [
    b"",
    b"\x00\xff\xfe" * 50,
    b"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
    b"Driver Version: \x1b[2J999999999999999999999.1.1\n",
    b"9" * 5000 + b"\n",
    "GPU 0: NVIDIA H100 \u202e80GB (UUID: GPU-x)\n".encode(),
    b"name, compute_cap\nNVIDIA A100, 99.99\n,,,,\n",
]


def _recorded(folder: str) -> list[bytes]:
    return [p.read_bytes() for p in sorted((DATA / folder).iterdir()) if p.is_file() and p.suffix != ".md"]


def _mangle(rng: random.Random, raw: bytes) -> bytes:
    """A recorded output cut short, with bytes flipped, or repeated; or garbage."""
    choice = rng.randrange(5)
    if choice == 0 or not raw:
        return rng.choice(GARBAGE)
    if choice == 1:
        return raw[: rng.randrange(len(raw) + 1)]
    if choice == 2:
        data = bytearray(raw)
        for _ in range(rng.randint(1, 20)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    if choice == 3:
        return raw * rng.randint(2, 50)
    return raw


def _answered(args: list[str], *, deadline: float) -> None:
    start = time.monotonic()
    result = invoke(args)
    took = time.monotonic() - start
    assert result.code in (0, 1), (result.code, result.stderr[-800:])
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr[-800:]
    assert json.loads(result.stdout)["schema"] == "envkit.report/1"
    assert took <= deadline, f"answered after {took:.1f} s"


def _program(path: Path, stdout: bytes, *, rc: int, sleep: float) -> None:
    out = path.with_name(f".{path.name}.out")
    out.write_bytes(stdout)
    path.write_text(
        f"#!/bin/sh\ncat '{out}'\n" + (f"sleep {sleep}\n" if sleep else "") + f"exit {rc}\n", encoding="utf-8"
    )
    path.chmod(0o755)


def run_smi(counts: Any, n: int, rng: random.Random) -> None:
    """nvidia-smi and /proc/driver/nvidia/version stand-ins, NVML absent (the fallbacks' turn)."""
    from tests.hostile.harness import fake_machine

    smi, proc = _recorded("nvidia-smi"), _recorded("proc-driver-version")
    for i in range(n):
        with fake_machine() as machine:
            sleep = 0.0 if i == 0 else rng.choice([0.0, 0.0, 0.0, 0.05, 30.0])  # the first never hangs
            output = _mangle(rng, rng.choice(smi))
            _program(machine.bin / "nvidia-smi", output, rc=rng.choice([0, 0, 1, 9, 255]), sleep=sleep)
            if rng.random() < 0.7:
                version = _mangle(rng, rng.choice(proc))
                target = machine.root / "proc/driver/nvidia/version"
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(version)
            what = f"nvidia-smi {output[:80]!r} sleep {sleep}"
            counts.case(
                what,
                lambda: _answered(["doctor", "--json", "--timeout", str(TIMEOUT)], deadline=TIMEOUT + SLACK),
            )


def _json_places(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(data, dict):
        for key, value in data.items():
            found += _json_places(value, (*prefix, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found += _json_places(value, (*prefix, i))
    return found


ODD_VALUES: list[Any] = [
    None,
    -1,
    0,
    2**64,
    1e300,
    "",
    "\x1b[2J",
    "9" * 400,
    [],
    {},
    {"error": "Unknown", "message": "Unknown Error"},
    {"error": "GpuIsLost", "message": "GPU is lost"},
    [99, 99],
    [-1, 0],
    True,
]
NVML_ERRORS = ["LibraryNotFound", "DriverNotLoaded", "NoPermission", "Unknown", "GpuIsLost", "Uninitialized"]


def run_nvml(counts: Any, n: int, rng: random.Random) -> None:
    """Recorded NVML readings of real machines with one to four values swapped for odd ones, or an
    NVML that fails to start with one of its errors."""
    from envkit.detect.nvml import RecordedNvml
    from tests.hostile.harness import fake_machine

    recordings = [json.loads(raw) for raw in _recorded("nvml")]
    for _ in range(n):
        with fake_machine() as machine:
            if rng.random() < 0.15:
                data: dict[str, Any] = {"init_error": rng.choice(NVML_ERRORS)}
            else:
                data = copy.deepcopy(rng.choice(recordings))
                places = _json_places(data)[1:]
                for _ in range(rng.randint(1, 4)):
                    place = rng.choice(places)
                    parent: Any = data
                    try:
                        for key in place[:-1]:
                            parent = parent[key]
                        parent[place[-1]] = copy.deepcopy(rng.choice(ODD_VALUES))
                    except (KeyError, IndexError, TypeError):
                        continue  # an earlier swap removed this place
            machine.nvml = lambda data=data: RecordedNvml(data)
            counts.case(
                f"nvml {json.dumps(data)[:300]}",
                lambda: _answered(["doctor", "--json", "--timeout", str(TIMEOUT)], deadline=TIMEOUT + SLACK),
            )


def run_nvml_library(counts: Any, n: int, rng: random.Random) -> None:
    """A compiled stand-in libnvidia-ml.so.1 (tests/unit/detect/test_nvml_isolation.py's) that
    answers, segfaults, aborts, spins, spins holding the GIL or hangs on its second GPU, loaded by the
    real pynvml in a real ``envkit doctor``."""
    import shutil

    from tests.unit.detect.test_nvml_isolation import KINDS, STAND_IN_C

    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if n <= 0 or cc is None:
        return
    with tempfile.TemporaryDirectory(prefix="envkit-hostile-nvml-") as folder:
        source = Path(folder) / "stand_in_nvml.c"
        source.write_text(STAND_IN_C, encoding="utf-8")
        built: dict[str, Path] = {}
        for i in range(n):
            kind = KINDS[i % len(KINDS)] if i < len(KINDS) else rng.choice(KINDS)
            if kind not in built:
                lib = Path(folder) / kind
                lib.mkdir()
                flags = [] if kind == "ok" else [f"-DSTAND_IN_{kind.upper().replace('-', '_')}"]
                subprocess.run(
                    [
                        cc,
                        "-shared",
                        "-fPIC",
                        "-O0",
                        *flags,
                        "-o",
                        str(lib / "libnvidia-ml.so.1"),
                        str(source),
                    ],
                    check=True,
                    timeout=60,
                )
                built[kind] = lib
            counts.case(f"libnvidia-ml.so.1 that does {kind}", lambda kind=kind: _doctor_process(built[kind]))


def _doctor_process(library: Path) -> None:
    env = {**os.environ, "LD_LIBRARY_PATH": str(library)}
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "envkit", "doctor", "--json", "--timeout", str(TIMEOUT)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    took = time.monotonic() - start
    assert result.returncode in (0, 1), (result.returncode, result.stderr[-800:])
    assert "Traceback" not in result.stderr, result.stderr[-800:]
    assert json.loads(result.stdout)["schema"] == "envkit.report/1"
    assert took <= TIMEOUT + SLACK + 2, f"answered after {took:.1f} s"


TORCH_INITS = [
    "",
    "raise ImportError('libcudnn.so.9: cannot open shared object file')\n",
    "raise SystemExit(3)\n",
    "import os\nos.abort()\n",
    "import os\nos._exit(0)\n",
    "import sys\nsys.stdout.write('x' * 10_000_000)\n",
    "print('\\x1b[2J garbage', flush=True)\n",
    "import time\ntime.sleep(60)\n",
    "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)\n",
    "__version__ = 5\ncuda = object()\n",
]
TORCH_VERSIONS = [
    "__version__ = '2.5.1+cu121'\ncuda = '12.1'\n",
    "__version__ = '9' * 5000\ncuda = None\n",
    "__version__ = '2.5.1+cu121'\ncuda = '\\x1b[2J'\n",
    "raise RuntimeError('no')\n",
    "\x00\xff",
    "",
    "__version__ = None\ncuda = 12\n",
]


def run_torch(counts: Any, n: int, rng: random.Random) -> None:
    """A torch package first on the probe interpreter's path (PYTHONPATH) whose version.py is odd
    and whose import (doctor --deep) raises, exits, aborts, floods or hangs."""
    from tests.hostile.harness import fake_machine

    for i in range(n):
        with fake_machine() as machine:
            site = Path(machine.root).parent / "site"
            torch = site / "torch"
            torch.mkdir(parents=True)
            init = TORCH_INITS[0] if i == 0 else rng.choice(TORCH_INITS)  # the first imports at once
            version = rng.choice(TORCH_VERSIONS)
            (torch / "__init__.py").write_text(init, encoding="utf-8")
            (torch / "version.py").write_text(version, encoding="utf-8", errors="surrogateescape")
            info = site / "torch-2.5.1.dist-info"
            info.mkdir()
            (info / "METADATA").write_text(
                "Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1\n", encoding="utf-8"
            )
            machine.env["PYTHONPATH"] = str(site)
            deep = rng.random() < 0.7
            args = ["doctor", "--json", "--timeout", str(TIMEOUT), *(["--deep"] if deep else [])]
            counts.case(
                f"torch __init__ {init[:60]!r} version {version[:60]!r} deep={deep}",
                lambda args=args: _answered(args, deadline=TIMEOUT + SLACK),
            )
