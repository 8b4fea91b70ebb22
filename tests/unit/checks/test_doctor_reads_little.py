"""doctor's budget (scripts/bench_doctor.py): it reads the knowledge of the extensions installed,
never the whole table (~25 TOML files, ~0.1 s of CPU on every run)."""

from __future__ import annotations

import dataclasses

from envkit.checks import run_checks
from envkit.detect import _with_extension_binaries
from envkit.facts import Distribution
from envkit.knowledge.extensions import load_extension, load_extensions
from envkit.system import System
from envkit.versions import Version
from tests.unit.checks.test_checks import HEALTHY


def test_the_checks_and_detection_read_only_the_installed_extensions() -> None:
    load_extensions.cache_clear()
    load_extension.cache_clear()
    site = "/envs/pt/lib/python3.11/site-packages"
    torch = dataclasses.replace(
        HEALTHY.torch,
        distributions=(
            *HEALTHY.torch.distributions,
            Distribution("flash-attn", Version("2.7.4.post1"), site),
        ),
    )
    facts = dataclasses.replace(HEALTHY, torch=torch)
    run_checks(facts)
    _with_extension_binaries(System(env={}), dataclasses.replace(torch, location=None), facts.python)
    assert load_extensions.cache_info().currsize == 0
    assert load_extension.cache_info().currsize >= 1  # flash-attn's own file was read
