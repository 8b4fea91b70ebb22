"""The diagnosis corpus (tests/data/diagnosis/) is well formed: a measuring instrument, not the score.

Every case parses, cites an https thread, names a known class and real check ids (or the three the
diagnosis work adds), the corpus is big enough and covers every class, and the rendered pastes are text
that envkit's paste reader accepts -- a few of them through the real CLI. The figures themselves come
from scripts/eval_diagnosis.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from envkit.checks import CHECKS
from envkit.detect.collect_env import looks_like_collect_env, parse_collect_env
from envkit.detect.errtext import read_error_text
from tests.conftest import torch_collect_env

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import diagnosis_corpus as corpus  # noqa: E402 -- a script beside the package, not part of it

CASES = corpus.load_cases()
KNOWN_IDS = set(CHECKS) | corpus.NEW_CHECK_IDS


@pytest.fixture(scope="module")
def collect_env() -> ModuleType:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module: ModuleType = torch_collect_env()  # no torch import (tests/conftest.py)
    return module


def test_the_corpus_is_big_enough_and_covers_every_class() -> None:
    kinds = Counter(case.kind for case in CASES)
    assert kinds["collect_env"] >= 40 and kinds["error"] >= 20 and kinds["mixed"] >= 10, kinds
    assert sum(case.expect.healthy for case in CASES) >= 8
    counts = Counter(case.klass for case in CASES)
    assert set(counts) == set(corpus.CLASSES), f"classes without a case: {set(corpus.CLASSES) - set(counts)}"
    assert len({case.source for case in CASES}) == len(CASES), "two cases cite the same thread"


@pytest.mark.parametrize("case", CASES, ids=[c.slug for c in CASES])
def test_a_case_cites_its_thread_and_expects_real_checks(case: corpus.Case) -> None:
    assert case.source.startswith("https://"), case.source
    assert case.klass in corpus.CLASSES
    assert case.title and case.confirmed_by
    expected = [case.expect.cause] if case.expect.cause else []
    unknown = {*expected, *case.expect.flagged, *case.expect.allowed} - KNOWN_IDS
    assert not unknown, f"not a check id: {unknown}"
    if case.expect.healthy:
        assert case.klass == "healthy" and case.expect.cause is None and not case.expect.flagged
    else:
        assert case.klass != "healthy" and case.expect.cause in case.expect.flagged


TEXT_CASES = [c for c in CASES if c.kind != "collect_env"]


@pytest.mark.parametrize("case", TEXT_CASES, ids=[c.slug for c in TEXT_CASES])
def test_an_error_or_mixed_case_is_text_envkit_reads(case: corpus.Case) -> None:
    assert case.text is not None and len(case.text) < 4000, "excerpt the lines that carry the facts"
    reading = read_error_text(case.text)
    # A healthy case's error is not the environment's (a code bug): nothing there need be known.
    assert reading.known or case.expect.healthy, f"{case.slug}: nothing envkit knows in the text"
    listings = set(reading.read) - {"traceback", "log"}
    # A mixed body has a listing beside the error (pip, conda, nvidia-smi, ldd, /proc, …).
    assert bool(listings) == (case.kind == "mixed"), reading.read


COLLECT_ENV_CASES = [c for c in CASES if c.kind == "collect_env"]


@pytest.mark.parametrize("case", COLLECT_ENV_CASES, ids=[c.slug for c in COLLECT_ENV_CASES])
def test_every_case_renders_to_a_paste_envkit_reads(case: corpus.Case, collect_env: ModuleType) -> None:
    text = corpus.render(case, collect_env)
    assert text == corpus.render(case, collect_env), "the noise must be deterministic"
    assert looks_like_collect_env(text)
    facts = parse_collect_env(text)
    assert not any("could not be read" in note for note in facts.notes)
    if case.env.get("nvidia_driver_version"):
        assert facts.driver is not None and str(facts.driver.version) == case.env["nvidia_driver_version"]
    for line in [] if case.cut_after else case.env.get("pip_packages", []):
        name = line.split("==")[0].lower()
        assert any(d.name == name for d in facts.torch.distributions), f"{line} not read back"


def test_the_renderer_uses_torchs_own_format(collect_env: ModuleType) -> None:
    case = next(c for c in CASES if c.slug.startswith("pt-37320"))
    text = corpus.pretty(case, collect_env)
    assert "PyTorch version: 1.5.0\n" in text and "Nvidia driver version: 410.104\n" in text
    # Fields the thread does not show are collect_env's own "Could not collect".
    assert "Libc version: Could not collect\n" in text


@pytest.mark.parametrize("slug", ["pt-186591-nccl-cu12-and-cu13", "pt-130181-a100-mig-two-slices-nightly"])
def test_the_cli_accepts_a_rendered_paste(slug: str, tmp_path: Path, collect_env: ModuleType) -> None:
    case = corpus.load_case(corpus.CASES_DIR / f"{slug}.toml")
    paste = tmp_path / "paste.txt"
    paste.write_bytes(corpus.render(case, collect_env).encode())
    proc = subprocess.run(
        [sys.executable, "-m", "envkit", "doctor", "--from", str(paste), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    assert report["schema"] == "envkit.report/1" and report["checks"]


def test_a_broken_case_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('source = "https://example.org"\n', encoding="utf-8")
    with pytest.raises(corpus.CaseError, match="no \\[expect\\] table"):
        corpus.load_case(bad)
