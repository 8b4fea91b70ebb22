"""One envkit (issue 22): each disagreement a new user met, as the command they ran, asserted fixed.
The properties that keep the parts agreeing are tests/unit/test_agreement*.py."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from envkit.checks import CHECKS
from envkit.commands import spec as spec_command
from envkit.errors import InputError, NoBuildError
from envkit.knowledge import load_knowledge
from envkit.report import Status
from envkit.resolve import Request, parse_cuda_request, resolve
from envkit.resolve.plan import PlanFlags
from envkit.resolve.target import Target, parse_gpu
from envkit.system import System
from envkit.versions import ComputeCapability, NvVersion, Version
from tests.unit.checks.test_compat import machine

K = load_knowledge()


def test_the_fix_for_cpu_torch_on_an_a100_with_driver_535_draws_no_warning() -> None:
    # doctor --from on CPU torch 2.5.1 / A100 / driver 535: its fix installed torch==2.14.1+cu126,
    # and doctor then warned torch.driver_compat (minor-version compatibility) and offered the same
    # build again. The wheel has sm_80 SASS: minor-version compatibility runs it in full.
    before = machine("535.104.05", "NVIDIA A100-SXM4-80GB", (8, 0), "2.5.1+cpu", None)
    fix = CHECKS["torch.cpu_build_on_gpu"](before).fix
    assert "torch==2.14.1+cu126 " in fix
    after = machine("535.104.05", "NVIDIA A100-SXM4-80GB", (8, 0), "2.14.1+cu126", "12.6")
    compat = CHECKS["torch.driver_compat"](after)
    assert compat.status is Status.PASS, compat
    assert "through minor-version compatibility" in compat.summary
    assert "docs.nvidia.com/deploy/cuda-compatibility" in compat.detail
    for cid in ("torch.gpu_arch", "torch.cpu_build_on_gpu", "driver.support"):
        assert CHECKS[cid](after).status is Status.PASS, cid


def _spec(tmp_path: Path, *args: str) -> list[Path]:
    flags = PlanFlags(driver="535.104.05", gpus=("A100",), platform="linux-x86_64", python="3.10")
    made = spec_command.render(
        System(),
        "pt2",
        flags,
        fmt=args[0],
        out=str(tmp_path),
        mirrors=(),
        pip_in_conda=False,
        name=None,
        to_stdout=False,
        force=True,
    )
    return list(made.written)


@pytest.mark.parametrize("fmt", ["docker", "apptainer"])
def test_the_dockerfile_for_a100_on_535_passes_its_own_check(tmp_path: Path, fmt: str) -> None:
    # spec pt2 --format docker --driver 535.104.05 --gpu A100 wrote FROM nvidia/cuda:12.6.2-runtime…,
    # which spec --check on the same target warned about (and proposed another base for).
    written = _spec(tmp_path, fmt)
    container = next(p for p in written if p.name in ("Dockerfile", "Apptainer.def"))
    text = container.read_text(encoding="utf-8")
    base = re.search(r"^(?:FROM|From:) (\S+)$", text, re.M)
    assert base is not None and base.group(1).startswith("nvidia/cuda:12.")
    assert K.cuda_for_driver(NvVersion("535.104.05")) >= Version(base.group(1).split(":")[1].split("-")[0])
    flags = PlanFlags(driver="535.104.05", gpus=("A100",), platform="linux-x86_64", python="3.10")
    for path in written:
        results = spec_command.check(System(), str(path), flags).results
        assert not [r for r in results if r.status in (Status.WARN, Status.FAIL)], (path.name, results)
    # The base image's origin is its publisher, not a third party's Dockerfile where its tag was seen.
    comments = " ".join(line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))
    comment = comments[comments.index("Base image:") :]
    assert "NVIDIA's CUDA image" in comment and "gitlab.com/nvidia/container-images/cuda" in comment
    assert "github.com" not in comments


@pytest.mark.parametrize(
    ("text", "cc", "name"),
    [
        ("4090", ComputeCapability(8, 9), "RTX 4090"),
        ("5090", ComputeCapability(12, 0), "RTX 5090"),
        ("1080", ComputeCapability(6, 1), "GTX 1080"),
        ("86", ComputeCapability(8, 6), None),  # a compute capability where one reads so
        ("100", ComputeCapability(10, 0), None),
    ],
)
def test_a_bare_model_number_is_the_geforce_not_a_compute_capability(
    text: str, cc: ComputeCapability, name: str | None
) -> None:
    # --gpu 4090 was read as compute capability 409.0 ("no NVIDIA GPU has compute capability 409.0").
    gpu = parse_gpu(text, K)
    assert (gpu.cc, gpu.name) == (cc, name)


def test_the_exit_3_list_leads_with_what_matters() -> None:
    # resolve --driver 418.39 --gpu sm_80 listed torch 1.13.1, 1.13.0, 1.12.1 … "no wheels for Python
    # 3.11" one per line, and its hint was only --cuda cpu.
    target = Target("linux-x86_64", NvVersion("418.39"), (parse_gpu("sm_80", K),), Version("3.11"))
    with pytest.raises(NoBuildError) as info:
        resolve(K, target, Request())
    rejected = info.value.rejected
    assert rejected[0].rule == "gpu_driver" and rejected[0].candidate.startswith("2.")
    python = [r for r in rejected if r.rule == "python"]
    assert len(python) == 1 and python[0].count > 1 and python[0].candidate.startswith("torch 1.")
    first = info.value.ways_out[0]
    assert (first.rule, first.driver) == ("driver", "450.80.02")
    # An RTX 5090 on R535: the branch it needs, with the build that branch then gets.
    target = dataclasses.replace(target, driver=NvVersion("535.104.05"), gpus=(parse_gpu("5090", K),))
    with pytest.raises(NoBuildError) as info:
        resolve(K, target, Request())
    assert info.value.ways_out[0].text.startswith(
        "upgrade the driver to ≥ 570.26, the R570 branch or newer (for torch "
    )


LOGIN_NODE_ENV = """name: pt
channels: [pytorch, nvidia, conda-forge]
dependencies:
  - python=3.11
  - pytorch=2.7.0
  - pytorch-cuda=12.1
  - torchvision=0.22.0
"""


@pytest.mark.usefixtures("cli_machine")  # a machine without an NVIDIA driver or GPU: a login node
def test_spec_check_of_a_cuda_file_on_a_login_node_says_what_it_planned_for(tmp_path: Path) -> None:
    # spec --check environment.yml on a GPU-less login node, no target flags, turned a CUDA 12.1
    # file into a CPU fix (pytorch=2.7.0=cpu*) without saying it planned for the login node.
    from typer.testing import CliRunner

    from envkit import cli

    path = tmp_path / "environment.yml"
    path.write_text(LOGIN_NODE_ENV, encoding="utf-8")
    result = CliRunner().invoke(cli.app, ["spec", "--check", str(path)])
    assert result.exit_code == 1  # spec.channel: the pytorch channel stops at 2.5.1
    assert "=cpu*" not in result.stdout and "cuda-version=12" in result.stdout
    assert "asks for CUDA 12.1, and this machine has no NVIDIA driver or GPU" in result.stderr
    assert f"envkit spec --check {path} --driver VERSION --gpu MODEL" in result.stderr
    as_json = CliRunner().invoke(cli.app, ["spec", "--check", str(path), "--json"])
    import json

    assert "this machine has no NVIDIA driver or GPU" in json.loads(as_json.stdout)["notes"][0]
    # With the compute nodes' flags there is nothing to say.
    flagged = CliRunner().invoke(
        cli.app, ["spec", "--check", str(path), "--driver", "550.54.15", "--gpu", "A100"]
    )
    assert "note:" not in flagged.stderr


def test_a_strict_preflight_drains_with_the_warning_itself() -> None:
    # preflight --strict with a warning wrote "envkit: warnings (--strict)", not the promised
    # "envkit: <check id>: <summary>".
    from envkit.commands.preflight import drain_reason
    from envkit.facts import Facts
    from envkit.report import CheckResult, Report

    checks = [
        CheckResult("python.shm", Status.WARN, "512 MiB of shared memory"),
        CheckResult("nccl.env", Status.PASS, "ok"),
    ]
    report = Report.new(Facts(), checks)
    assert drain_reason(report) is None  # without --strict a warning drains nothing
    assert drain_reason(report, strict=True) == "envkit: python.shm: 512 MiB of shared memory"
    # A failure still comes first.
    failing = Report.new(Facts(), [*checks, CheckResult("driver.loaded", Status.FAIL, "no driver")])
    assert drain_reason(failing, strict=True) == "envkit: driver.loaded: no driver (+1 more)"


@pytest.mark.usefixtures("cli_machine")
def test_preflight_strict_on_a_machine_with_a_warning_names_it() -> None:
    from typer.testing import CliRunner

    from envkit import cli

    result = CliRunner().invoke(cli.app, ["preflight", "--strict"])
    plain = CliRunner().invoke(cli.app, ["preflight"])
    if plain.exit_code != 0 or result.exit_code == 0:
        pytest.skip(
            f"the fake machine has no warning-only finding (exit {plain.exit_code}/{result.exit_code})"
        )
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("envkit:")]
    assert re.match(r"envkit: [a-z_]+\.[a-z_]+: \S", line), line


INSTALLERS = Path(__file__).parents[1] / "data" / "installers"


@pytest.mark.parametrize("recorded", ["pip-23.2-unreachable-index.txt", "uv-0.13-unreachable-index.txt"])
def test_an_unreachable_index_ends_create_with_the_next_step(recorded: str) -> None:
    # create pt2 --cuda 12.1 with the index unreachable ended after pip's retry noise with
    # "removed the half-made …": no next step.
    from envkit.create.backends import Step
    from envkit.create.next_step import index_next_step

    target = Target("linux-x86_64", NvVersion("550.54.15"), (parse_gpu("A100", K),), Version("3.11"))
    plan = resolve(K, target, Request(cuda=parse_cuda_request("12.1")))
    url = plan.index_url
    assert url is not None

    class Install:  # what index_next_step reads of an Installation
        def __init__(self, argv: tuple[str, ...]) -> None:
            self.plan = plan
            self.steps = (Step("install torch", argv, 60.0),)

    output = (INSTALLERS / recorded).read_text(encoding="utf-8")
    step = index_next_step(output, Install(("pip", "install", "torch", "--index-url", url)))  # type: ignore[arg-type]
    assert step is not None and step.startswith("the index did not answer: ")
    assert "`envkit mirrors --probe --variant cu121`" in step
    assert "--mirror URL" in step and "--wheelhouse DIR with the cu121 wheels" in step
    # What the run already used is not suggested again: a mirror, a wheelhouse.
    mirrored = index_next_step(
        output,
        Install(("pip", "install", "--index-url", "https://mirror.example/whl/cu121", "--find-links", "/w")),  # type: ignore[arg-type]
    )
    assert mirrored is not None and "--mirror" not in mirrored and "--wheelhouse" not in mirrored
    # An installer failure of another kind gets no such step.
    assert index_next_step("error: No space left on device", Install(("pip",))) is None  # type: ignore[arg-type]


# --python takes a version or an interpreter on every command (as uv's does) ---------------------


def _venv(root: Path, version: str) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "pyvenv.cfg").write_text(f"home = /usr/bin\nversion = {version}\n", encoding="utf-8")
    python = root / "bin" / "python"
    python.symlink_to(sys.executable)
    return python


def test_a_version_finds_the_active_environment_then_path(tmp_path: Path) -> None:
    from envkit.detect.pyenv import select_interpreter
    from tests.conftest import write_program

    venv = _venv(tmp_path / "venv", "3.11.7")
    system = System(env={"VIRTUAL_ENV": str(tmp_path / "venv"), "PATH": str(tmp_path / "bin")})
    found = select_interpreter(system, python="3.11")
    assert (found.path, found.selected_by) == (str(venv), "--python 3.11 (VIRTUAL_ENV)")
    # Another version: python3.12 on PATH, if it runs as 3.12 (a pyenv shim of a missing one does not).
    write_program(tmp_path / "bin", "python3.12", "3.12.4\n")
    found = select_interpreter(system, python="3.12")
    assert (found.path, found.selected_by) == (str(tmp_path / "bin" / "python3.12"), "--python 3.12 (PATH)")
    write_program(tmp_path / "bin", "python3.13", "", rc=127, stderr="pyenv: python3.13: command not found")
    with pytest.raises(InputError) as info:
        select_interpreter(system, python="3.13")
    message = info.value.message
    assert message.startswith(
        "--python 3.13: no Python 3.13 found: the active environment (VIRTUAL_ENV) is Python 3.11.7"
    )
    assert "python3.13 on PATH does not run as Python 3.13" in message and "uv" in message
    assert "uv python install 3.13" in (info.value.hint or "")


def test_a_path_on_a_planning_command_is_read_for_its_version(tmp_path: Path) -> None:
    from envkit.planning import make_target

    target = make_target(System(), PlanFlags(driver="550.54.15", gpus=("A100",), python=sys.executable))
    assert target.python == Version(f"{sys.version_info[0]}.{sys.version_info[1]}")
    with pytest.raises(InputError, match="neither a Python version"):
        make_target(System(), PlanFlags(driver="550.54.15", python=str(tmp_path / "nothing")))


# Failures point to the next step, never to what was just run -----------------------------------


def test_a_deep_run_that_did_not_say_is_not_told_to_run_deep() -> None:
    from envkit.checks.compat import check_gpu_arch
    from envkit.facts import DeepTorchFacts

    # A local build (no official list) whose --deep probe did not answer: the hint names why, not
    # `envkit doctor --deep` again.
    deep = DeepTorchFacts(ok=False, error="import torch did not finish in 20 s")
    facts = machine("550.54.15", "NVIDIA A100-SXM4-80GB", (8, 0), "2.1.0a0+git1234", "12.1", deep=deep)
    result = check_gpu_arch(facts)
    assert result.status is Status.SKIP
    assert "envkit doctor --deep" not in result.detail
    assert "the --deep probe ran and did not report the build's architecture list" in result.detail
    shallow = machine("550.54.15", "NVIDIA A100-SXM4-80GB", (8, 0), "2.1.0a0+git1234", "12.1")
    assert "`envkit doctor --deep` reads the build's architecture list" in check_gpu_arch(shallow).detail


def test_a_container_spec_the_driver_cannot_start_says_which_driver_would() -> None:
    flags = PlanFlags(driver="470.82.01", gpus=("A100",), platform="linux-x86_64")
    with pytest.raises(InputError) as info:
        spec_command.render(
            System(), "pt2", flags, fmt="docker", out=".", mirrors=(), pip_in_conda=False,
            name=None, to_stdout=True, force=False,
        )  # fmt: skip
    assert "starts on driver 470.82.01" in info.value.message and "NVIDIA_REQUIRE_CUDA" in info.value.message
    assert info.value.hint is not None and info.value.hint.startswith(
        "upgrade the driver to ≥ 520.61.05 for nvidia/cuda:11.8.0"
    )
    assert "--format pip" in info.value.hint and "--python or --cuda" not in info.value.hint


# verify.compile's speedup: warmed up, enough work to time, repeated, with a spread ---------------


class _Clock:
    """A clock the timed functions advance: each call costs what the test says, exactly."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _probe_util() -> Any:
    from envkit.system import PROBES_DIR

    sys.path.insert(0, str(PROBES_DIR))
    import envkit_probe_util

    return envkit_probe_util


def test_a_speedup_is_a_median_of_paired_samples_with_its_spread(monkeypatch: pytest.MonkeyPatch) -> None:
    # verify.compile printed 0.01x, 1.20x, 1.08x and 238x for one check on four runs: no warm-up,
    # a call of a few microseconds, one timing each.
    util = _probe_util()
    clock = _Clock()
    monkeypatch.setattr(util.time, "perf_counter", clock)
    calls = {"eager": 0, "compiled": 0}

    def eager() -> None:
        calls["eager"] += 1
        clock.now += 0.004

    costs = iter([0.5] * 3 + [0.002] * 10_000)  # the first calls compile: slow, and untimed

    def compiled() -> None:
        calls["compiled"] += 1
        clock.now += next(costs)

    result = util.compare_speed(eager, compiled, samples=7, sample_s=0.02, warmup=3)
    assert result["speedup"] == 2.0 and result["speedup_spread"] == 0 and result["speedup_ok"] is True
    assert result["samples"] == 7 and result["calls_per_sample"] == 5  # 0.02 s of the slower per sample
    assert calls["eager"] == 3 + 1 + 7 * 5  # warm-up, calibration, samples
    # Samples that disagree by more than the figure: no result.
    jitter = iter([0.002, 0.0002, 0.05, 0.0004] * 5_000)

    def noisy() -> None:
        clock.now += next(jitter)

    shaky = util.compare_speed(eager, noisy, samples=8, sample_s=0.004, warmup=0)
    assert shaky["speedup_ok"] is False and shaky["speedup_spread"] >= shaky["speedup"]


def test_a_speedup_without_a_result_is_not_printed_as_one() -> None:
    from envkit.system import PROBES_DIR

    sys.path.insert(0, str(PROBES_DIR))
    import verify_compile

    good = {"speedup": 1.42, "speedup_spread": 0.05, "speedup_ok": True, "samples": 7}
    assert verify_compile.speed_text(good) == "1.42x eager (±0.05, 7 samples)"
    bad = {"speedup": 238.0, "speedup_spread": 400.0, "speedup_ok": False, "samples": 7}
    assert verify_compile.speed_text(bad).startswith("speedup not measured: its spread (±400.00)")
    assert "238" not in verify_compile.speed_text(bad).split(":")[0]


def test_an_unhealthy_fleet_names_the_command_that_shows_why(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from envkit import cli

    report = json.loads(
        (Path(__file__).parents[1] / "data" / "reports" / "h200-580-torch2.11-cu130.json").read_text()
    )
    (tmp_path / "a.json").write_text(json.dumps(report), encoding="utf-8")
    for check in report["checks"]:
        if check["id"] == "torch.driver_compat":
            check["status"], check["summary"] = "fail", "torch 2.11.0+cu130 needs driver ≥ 580.65.06"
    (tmp_path / "b.json").write_text(json.dumps(report), encoding="utf-8")
    result = CliRunner().invoke(cli.app, ["fleet", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "-q"])
    assert result.exit_code == 1
    assert result.stdout.strip().endswith(
        f"unhealthy; next: envkit doctor --from {tmp_path / 'b.json'} (its cause and fix)"
    )
