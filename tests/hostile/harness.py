"""The hostile harness: fuzzed inputs, faulty stand-ins and signals, tried in bulk, counted.

Each category tries cases of one kind and counts how many envkit survived (its property held: a
documented exit code other than 70, one line on an error, nothing left behind, no process left
running). A case that fails is kept with what was tried, and the run goes on: the table says
``tried`` and ``survived`` per category, so a run of thousands can be quoted as it is.

The default test suite runs a bounded sample of every category (tests/unit/test_fuzz.py, ~2 s);
``pytest -m slow`` runs a large one; ``python scripts/hostile.py --count N`` runs N of each and
prints the table.

Categories (see ``categories()``):
- the fuzzed files of tests/hostile/fuzz.py (reports, pastes, raw bytes, fleet and diff, expectation
  files, templates, spec files), driven by hypothesis;
- command lines: every command of the app with fuzzed values for its options (tests/hostile/cli_args.py);
- faults: stand-ins for nvidia-smi, /proc/driver/nvidia/version, NVML and torch that print garbage,
  crash or hang (tests/hostile/faults.py);
- signals: SIGINT, SIGTERM or SIGHUP at a random moment of a real create, verify or preflight
  (tests/hostile/signals.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

__all__ = ["Category", "Counts", "categories", "fake_machine", "run_categories", "table"]


@dataclass
class Counts:
    """What one category tried and what envkit survived; the first failures, to reproduce them."""

    name: str
    tried: int = 0
    survived: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def case(self, what: str, check: Callable[[], None]) -> None:
        """Try one case: ``check`` raises AssertionError when envkit did not survive it."""
        self.tried += 1
        try:
            check()
        except AssertionError as exc:
            if len(self.failures) < 5:
                self.failures.append(f"{what}: {str(exc)[:600]}")
        except Exception:  # noqa: BLE001 -- the harness's own error: counted as not survived, shown
            if len(self.failures) < 5:
                self.failures.append(f"{what}: harness error:\n{traceback.format_exc()[-1500:]}")
        else:
            self.survived += 1


@dataclass(frozen=True)
class Category:
    """One kind of hostile case. ``run(counts, n, rng)`` tries ``n`` cases (about: hypothesis may stop
    early where its strategy has fewer) into ``counts``; ``fast`` and ``slow`` are the sizes of the
    default suite's sample and of the slow run's."""

    name: str
    run: Callable[[Counts, int, random.Random], None]
    fast: int
    slow: int


# -- a fake machine for the commands that run in this process ---------------------------------------


@contextlib.contextmanager
def fake_machine(extra_env: Optional[Mapping[str, str]] = None) -> Iterator[Any]:
    """This process's commands see a fake machine (tests/conftest.py's cli_machine, without
    pytest): no driver, no GPU, the test interpreter as ``python``; offline, with a crash-log folder
    of its own. Yields the MachineBuilder (add stand-ins to it)."""
    import pytest

    import envkit.system
    from tests.conftest import MachineBuilder

    with (
        tempfile.TemporaryDirectory(prefix="envkit-hostile-") as folder,
        pytest.MonkeyPatch.context() as patch,
    ):
        built = MachineBuilder(Path(folder))
        (built.bin / "python").symlink_to(sys.executable)
        built.env.update(extra_env or {})

        @dataclasses.dataclass(frozen=True)
        class FakeMachine(envkit.system.System):
            env: Mapping[str, str] = dataclasses.field(default_factory=lambda: dict(built.env))
            root: Path = built.root
            nvml: Optional[Callable[[], Any]] = dataclasses.field(default_factory=lambda: built.nvml)

        patch.setattr(envkit.system, "System", FakeMachine)
        patch.setenv("XDG_CACHE_HOME", str(Path(folder) / "cache"))
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            patch.setenv(name, "http://127.0.0.1:9")  # nothing listens there: offline at once
        patch.setenv("NO_PROXY", "127.0.0.1,localhost,::1")
        patch.chdir(folder)  # whatever a command writes by default lands here
        yield built


# -- running and counting -----------------------------------------------------------------------


def run_categories(
    names: Optional[list[str]] = None, *, size: str = "fast", count: Optional[int] = None, seed: int = 0
) -> list[Counts]:
    """Run the named categories (all by default), each with its ``size`` sample or ``count`` cases."""
    results = []
    for category in categories():
        if names and category.name not in names:
            continue
        counts = Counts(category.name)
        n = count if count is not None else (category.fast if size == "fast" else category.slow)
        start = time.monotonic()
        category.run(counts, n, random.Random(f"{seed}:{category.name}"))
        counts.seconds = time.monotonic() - start
        results.append(counts)
    return results


def table(results: list[Counts]) -> str:
    """The counts as a table, with the first failures of each category below it."""
    width = max([len(r.name) for r in results] + [8])
    lines = [f"{'category':<{width}}  {'tried':>6}  {'survived':>8}  {'seconds':>7}"]
    for r in results:
        lines.append(f"{r.name:<{width}}  {r.tried:>6}  {r.survived:>8}  {r.seconds:>7.1f}")
    tried, survived = sum(r.tried for r in results), sum(r.survived for r in results)
    lines.append(f"{'total':<{width}}  {tried:>6}  {survived:>8}  {sum(r.seconds for r in results):>7.1f}")
    for r in results:
        for failure in r.failures:
            lines.append(f"\nFAILED {r.name}: {failure}")
    return "\n".join(lines)


def _categories() -> list[Category]:
    from tests.hostile import cli_args, faults, fuzz, signals

    found = [
        Category(name, fuzz.category_run(strategy, prop), fast=3, slow=400)
        for name, strategy, prop in fuzz.PROPERTIES
    ]
    found += [
        Category("command lines", cli_args.run, fast=8, slow=600),
        Category("faults: nvidia-smi and /proc", faults.run_smi, fast=1, slow=20),
        Category("faults: NVML readings", faults.run_nvml, fast=2, slow=120),
        # A compiled library and a real envkit per case (~1.5 s): the default suite has its own cases
        # of each kind (tests/unit/detect/test_nvml_isolation.py); the sample here is slow only.
        Category("faults: NVML library", faults.run_nvml_library, fast=0, slow=6),
        Category("faults: torch", faults.run_torch, fast=1, slow=12),
        Category("signals: create, verify, preflight", signals.run, fast=1, slow=15),
    ]
    return found


def categories() -> list[Category]:
    """Every category, in the order of the table (built when asked: they import envkit and hypothesis)."""
    return _categories()
