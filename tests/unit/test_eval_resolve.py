"""The resolver's eval file (tests/data/resolve/targets.toml) is valid and covers what it must.

It checks the file, not the score: scripts/eval_resolve.py runs the CLI on every target.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from envkit.knowledge import load_knowledge
from envkit.resolve.target import AccelTarget, GpuTarget, parse_any_gpu
from envkit.versions import Version

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("eval_resolve", ROOT / "scripts" / "eval_resolve.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EVAL = _script()
TARGETS = EVAL.load_targets(EVAL.DEFAULT)
K = load_knowledge()


def test_enough_targets_on_every_platform() -> None:
    assert len(TARGETS) >= 45
    assert {t["platform"] for t in TARGETS} == set(EVAL.PLATFORMS)
    assert sum(t["expect"] == "no build" for t in TARGETS) >= 8
    assert any(not t.get("driver") and not t.get("gpus") for t in TARGETS)  # CPU-only machines
    assert any(t.get("channel") == "conda" for t in TARGETS)


def test_old_and_new_driver_branches_are_covered() -> None:
    branches = {int(t["driver"].split(".")[0]) for t in TARGETS if t.get("driver") and "." in t["driver"]}
    for branch in (418, 440, 450, 470, 525, 535, 550, 570, 580):
        assert branch in branches, branch


def test_every_gpu_name_is_one_envkit_knows() -> None:
    gpus = {g for t in TARGETS for g in t.get("gpus", [])}
    found = [parse_any_gpu(g, K) for g in gpus]  # every name parses (an unknown one raises)
    ccs = {g.cc for g in found if isinstance(g, GpuTarget)}
    # AMD (gfx targets) and Intel (XPU families) too.
    accel = {(g.vendor, g.arch) for g in found if isinstance(g, AccelTarget)}
    assert {("amd", "gfx942"), ("amd", "gfx1103"), ("intel", "bmg"), ("intel", "dg2")} <= accel
    # Kepler through Blackwell.
    for cc in ("3.7", "5.2", "6.1", "7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "12.0", "12.1"):
        assert any(f"{c.major}.{c.minor}" == cc for c in ccs), cc


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t["id"])
def test_expected_builds_name_known_releases(target: dict[str, object]) -> None:
    expect = str(target["expect"])
    if expect == "no build" or target.get("nightly") or target.get("index"):
        return  # a nightly's build, or a JetPack index's, is no release of the table's
    torch, variant = expect.split("+")
    release = K.release(Version(torch))
    assert release is not None, f"{target['id']}: torch {torch} is not in releases.toml"
    routes = release.variants.get(str(target["platform"]), ())
    assert variant in routes or target.get("channel") == "conda", f"{target['id']}: {variant} not in {routes}"
    assert re.fullmatch(r"\d+\.\d+", str(target["python"]))


def test_command_describes_the_whole_machine() -> None:
    cpu = next(t for t in TARGETS if not t.get("driver") and not t.get("gpus"))
    assert "--no-gpu" in EVAL.command(cpu)
    gpu = next(t for t in TARGETS if t.get("driver") and t.get("torch"))
    cmd = EVAL.command(gpu)
    assert cmd[cmd.index("--driver") + 1] == gpu["driver"]
    assert cmd[cmd.index("--torch") + 1] == gpu["torch"]


BASE = '[[target]]\nid = "a"\nplatform = "linux-x86_64"\npython = "3.11"\nexpect = "no build"\nwhy = "w"\nsources = ["s"]\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no \\[\\[target\\]\\] tables"),
        ('[[target]]\nid = "a"\n', "missing platform"),
        (BASE + BASE, "duplicate id"),
        (
            BASE.replace('"linux-x86_64"', '"bsd"'),
            "platform 'bsd'",
        ),
        (
            BASE.replace('"no build"', '"2.5.1"'),
            "expect must be",
        ),
    ],
)
def test_a_bad_file_is_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "targets.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(EVAL.TargetsError, match=message):
        EVAL.load_targets(path)
