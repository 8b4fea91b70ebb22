"""envkit's Python API: the names in envkit.__all__, imported lazily, returning the records the
commands print (never printing or exiting)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import envkit

REPORT = Path(__file__).parents[1] / "data" / "reports" / "h200-580-torch2.11-cu130.json"


def test_import_envkit_is_cheap() -> None:
    """`import envkit` loads no envkit module, rich or typer (the API is imported on first use)."""
    code = "import sys, envkit; print(sorted(m for m in sys.modules if m.split('.')[0] in ('envkit', 'rich', 'typer')))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "['envkit']"


def test_all_names_resolve() -> None:
    for name in envkit.__all__:
        assert getattr(envkit, name) is not None, name
    assert set(envkit.__all__) <= set(dir(envkit))
    with pytest.raises(AttributeError):
        envkit.no_such_name  # noqa: B018


def test_api_names_survive_importing_the_subpackages() -> None:
    """envkit.resolve and envkit.verify are subpackages: the functions are named so that importing
    them never hides an API name."""
    import envkit.resolve.plan
    import envkit.verify

    assert callable(envkit.make_plan) and callable(envkit.run_verify) and callable(envkit.doctor)


def test_make_plan_for_a_described_machine() -> None:
    plan = envkit.make_plan(driver="535.104.05", gpus=["sm_90"], python="3.11", platform="linux-x86_64")
    assert isinstance(plan, envkit.Plan)
    assert plan.variant.startswith("cu12")  # 535 cannot run CUDA 13 (minor-version floor 580.65.06)
    assert plan.pip_command().startswith(f"pip install torch=={plan.torch}+{plan.variant}")
    assert plan.to_json()["schema"] == "envkit.plan/1"


def test_make_plan_errors_are_envkit_errors() -> None:
    with pytest.raises(envkit.InputError):
        envkit.make_plan(channel="apt", no_gpu=True, python="3.11", platform="linux-x86_64")
    with pytest.raises(envkit.NoBuildError) as info:
        envkit.make_plan(torch="==2.0.0", cuda="13.0", no_gpu=True, python="3.11", platform="linux-x86_64")
    assert isinstance(info.value, envkit.EnvkitError)


def test_doctor_reads_a_saved_report(capsys: pytest.CaptureFixture[str]) -> None:
    report = envkit.doctor(from_file=str(REPORT))
    assert isinstance(report, envkit.Report)
    assert report.source == str(REPORT)
    assert all(
        isinstance(c, envkit.CheckResult) and isinstance(c.status, envkit.Status) for c in report.checks
    )
    assert report.exit_code() in (0, 1)
    assert json.loads(json.dumps(report.to_json()))["schema"] == "envkit.report/1"
    assert capsys.readouterr() == ("", "")  # the API prints nothing
    with pytest.raises(envkit.InputError):
        envkit.doctor(from_file=str(REPORT), deep=True)


def test_doctor_on_this_machine(cli_machine: object) -> None:
    heard: list[str] = []

    class Recorder:
        def stage(self, text: str) -> None:
            heard.append(text)

        def running(self, check_ids: object) -> None:
            pass

        def landed(self, result: envkit.CheckResult) -> None:
            heard.append(result.id)

    report = envkit.doctor(timeout=20, progress=Recorder())
    assert isinstance(report.facts, envkit.Facts)
    assert heard[0] == "detecting"
    assert heard[1:] == [c.id for c in report.checks]


def test_run_verify_rejects_unknown_checks() -> None:
    with pytest.raises(envkit.InputError, match="unknown nope"):
        envkit.run_verify(checks=["nope"])
