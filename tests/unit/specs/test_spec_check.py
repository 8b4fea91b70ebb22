"""`envkit spec --check`: spec files as people write them, checked against the knowledge base and a
target machine; and every file envkit renders passes its own check."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest
from typer.testing import CliRunner

from envkit import cli
from envkit.errors import EXIT_USAGE, InputError
from envkit.knowledge import load_knowledge
from envkit.report import CheckResult, Status
from envkit.resolve import Channel, Request, parse_cuda_request, parse_torch_spec, resolve
from envkit.resolve.target import Target, parse_gpu
from envkit.specs.check import CHECK_IDS, check_spec
from envkit.specs.read import conda_range, parse_conda_spec, parse_requirement, read_spec
from envkit.specs.render import render_specs, spec_mirrors
from envkit.specs.template import load_template
from envkit.versions import NvVersion, Version

K = load_knowledge()
H100 = ("535.104.05", "sm_90")

# As people copy it from a tutorial: cudatoolkit 12.1 never existed.
PT2_AS_COPIED = """\
name: pt2
channels: [pytorch, nvidia, defaults]
dependencies: [python=3.10, pytorch=2.1.0, torchvision=0.16.0, cudatoolkit=12.1]
"""


def target(driver: Optional[str] = None, *gpus: str, platform: str = "linux-x86_64") -> Target:
    return Target(platform, NvVersion(driver) if driver else None, tuple(parse_gpu(g, K) for g in gpus))


def check(tmp_path: Path, text: str, t: Target, name: str = "environment.yml") -> dict[str, CheckResult]:
    path = tmp_path / name
    path.write_text(text)
    results = check_spec(path, K, t)
    assert tuple(r.id for r in results) == CHECK_IDS
    for r in results:  # every failure and warning says how to fix it
        assert r.fix or r.status in (Status.PASS, Status.SKIP), r
    return {r.id: r for r in results}


def failed(results: dict[str, CheckResult]) -> set[str]:
    return {i for i, r in results.items() if r.status is Status.FAIL}


def test_the_environment_file_people_copy(tmp_path: Path) -> None:
    r = check(tmp_path, PT2_AS_COPIED, target(*H100))
    assert failed(r) == {"spec.cudatoolkit"}  # exit 1
    toolkit = r["spec.cudatoolkit"]
    assert "cudatoolkit=12.1: no such package; cudatoolkit stops at 11.8" in toolkit.summary
    assert "replace `cudatoolkit=12.1` with `pytorch-cuda=12.1`" in toolkit.fix
    assert r["spec.channel"].status is Status.PASS  # 2.1.0 is on -c pytorch
    assert r["spec.companions"].status is Status.PASS  # torchvision 0.16.0 is 2.1.0's
    assert r["spec.driver"].status is Status.PASS  # 535 runs CUDA 12.1
    assert r["spec.arch"].status is Status.PASS  # cu121 has sm_90


def test_the_copied_file_on_an_old_driver(tmp_path: Path) -> None:
    r = check(tmp_path, PT2_AS_COPIED, target("470.82.01", "sm_70"))
    assert failed(r) == {"spec.cudatoolkit", "spec.driver"}
    assert "`pytorch-cuda=11.8`" in r["spec.cudatoolkit"].fix  # what this driver runs
    driver = r["spec.driver"]
    assert "driver 470.82.01 cannot run CUDA 12.1" in driver.summary
    assert "use cu118" in driver.fix and "pytorch-cuda=11.8" in driver.fix


def test_no_target_skips_the_machine_checks(tmp_path: Path) -> None:
    r = check(tmp_path, PT2_AS_COPIED, target())
    assert r["spec.driver"].status is Status.SKIP and "--driver" in r["spec.driver"].summary
    assert r["spec.arch"].status is Status.SKIP and "--gpu" in r["spec.arch"].summary


def test_pytorch_2_6_was_never_on_the_pytorch_channel(tmp_path: Path) -> None:
    text = "channels: [pytorch, nvidia]\ndependencies: [pytorch=2.6, pytorch-cuda=12.4]\n"
    r = check(tmp_path, text, target("560.35.03", "sm_90"))
    channel = r["spec.channel"]
    assert channel.status is Status.FAIL
    assert "the pytorch channel never published it (its last torch is 2.5.1)" in channel.summary
    assert "#138506" in channel.detail
    assert "pytorch=2.5.1" in channel.fix and "pip" in channel.fix


def test_versions_that_do_not_belong_together(tmp_path: Path) -> None:
    text = (
        "channels: [pytorch, nvidia]\ndependencies: [pytorch=2.1.0, torchvision=0.17.0, pytorch-cuda=12.1]\n"
    )
    r = check(tmp_path, text, target(*H100))
    assert failed(r) == {"spec.companions"}
    assert r["spec.companions"].fix == "torchvision=0.16.0"


def test_conda_cuda_packages(tmp_path: Path) -> None:
    r = check(
        tmp_path, "channels: [pytorch, nvidia]\ndependencies: [pytorch=2.4.1, pytorch-cuda=12.6]\n", target()
    )
    assert "pytorch-cuda=12.6: no such version" in r["spec.cudatoolkit"].summary
    r = check(
        tmp_path, "channels: [pytorch, nvidia]\ndependencies: [pytorch=2.1.0, pytorch-cuda=12.4]\n", target()
    )
    assert "torch 2.1.0 comes with pytorch-cuda 11.8, 12.1" in r["spec.cudatoolkit"].summary
    # cudatoolkit exists up to 11.8, but -c pytorch builds since 1.13 ignore it.
    r = check(tmp_path, "channels: [pytorch]\ndependencies: [pytorch=2.1.0, cudatoolkit=11.8]\n", target())
    assert r["spec.cudatoolkit"].status is Status.WARN
    assert "`pytorch-cuda=11.8`" in r["spec.cudatoolkit"].fix
    # conda-forge's pytorch does not use pytorch-cuda.
    r = check(
        tmp_path, "channels: [conda-forge]\ndependencies: [pytorch=2.8.0, pytorch-cuda=12.4]\n", target()
    )
    assert r["spec.channel"].status is Status.WARN
    assert r["spec.channel"].fix == "replace `pytorch-cuda=12.4` with `cuda-version=12.4`"


def test_conda_forge_major_only(tmp_path: Path) -> None:
    text = "channels: [conda-forge]\ndependencies: ['pytorch=2.8.0=cuda*', cuda-version=12]\n"
    r = check(tmp_path, text, target("520.61.05", "sm_80"))
    assert "cannot run CUDA 12.x" in r["spec.driver"].summary
    assert r["spec.arch"].status is Status.SKIP  # the minor, so the arch list, is conda's choice


# requirements.txt -------------------------------------------------------------------------------


def test_requirements_that_fit(tmp_path: Path) -> None:
    text = (
        "--index-url https://download.pytorch.org/whl/cu121\n"
        "torch==2.1.0+cu121  # the CUDA 12.1 build\n"
        "torchvision==0.16.0+cu121\n"
    )
    r = check(tmp_path, text, target(*H100), "requirements.txt")
    assert failed(r) == set()
    assert r["spec.cudatoolkit"].status is Status.SKIP
    assert r["spec.mirror"].status is Status.PASS


def test_requirements_for_the_wrong_machine(tmp_path: Path) -> None:
    text = "-i https://download.pytorch.org/whl/cu121\ntorch==2.1.0+cu121\n"
    r = check(tmp_path, text, target("570.86.10", "RTX 5090"), "requirements.txt")
    arch = r["spec.arch"]
    assert arch.status is Status.FAIL and "has no code for RTX 5090 (sm_120)" in arch.summary
    assert "cu128" in arch.fix or "cu13" in arch.fix
    r = check(tmp_path, text, target("470.82.01", "sm_70"), "requirements.txt")
    assert r["spec.driver"].status is Status.FAIL and "cu118" in r["spec.driver"].fix


def test_requirements_for_a_variant_the_release_lacks(tmp_path: Path) -> None:
    r = check(tmp_path, "torch==2.1.0+cu124\n", target(*H100), "requirements.txt")
    assert "torch 2.1.0 has no cu124 build for linux-x86_64" in r["spec.channel"].summary


def test_companions_of_pip_requirements(tmp_path: Path) -> None:
    r = check(tmp_path, "torch==2.1.0+cu121\ntorchvision==0.16.0+cu118\n", target(), "requirements.txt")
    assert "torchvision==0.16.0+cu118 is a cu118 build, torch a cu121 one" in r["spec.companions"].summary
    r = check(tmp_path, "torch==2.1.0\ntorchvision==0.16.2\n", target(), "requirements.txt")
    assert r["spec.companions"].status is Status.WARN  # wheels pin torch to the patch release


def test_plain_pypi_torch_is_the_default_build(tmp_path: Path) -> None:
    r = check(tmp_path, "torch==2.1.0\n", target("470.82.01", "sm_70"), "requirements.txt")
    assert "cannot run CUDA 12.1" in r["spec.driver"].summary  # PyPI's 2.1.0 is the cu121 build
    r = check(tmp_path, "torch==2.1.0+cpu\n", target(*H100), "requirements.txt")
    assert r["spec.driver"].status is Status.WARN and "CPU build" in r["spec.driver"].summary


def test_pypi_mirror_for_a_non_default_build(tmp_path: Path) -> None:
    text = "-i https://pypi.tuna.tsinghua.edu.cn/simple\ntorch==2.1.0+cu118\n"
    r = check(tmp_path, text, target("520.61.05", "sm_80"), "requirements.txt")
    mirror = r["spec.mirror"]
    assert mirror.status is Status.FAIL
    assert "tuna serves only PyPI's torch (PyPI's torch 2.1.0 is the cu121 build)" in mirror.summary
    assert "--index-url https://download.pytorch.org/whl/cu118" in mirror.fix
    assert "--extra-index-url https://pypi.tuna.tsinghua.edu.cn/simple" in mirror.fix


def test_index_misuse(tmp_path: Path) -> None:
    flat = "--index-url https://mirrors.aliyun.com/pytorch-wheels/cu121\ntorch==2.1.0+cu121\n"
    r = check(tmp_path, flat, target(), "requirements.txt")
    assert r["spec.mirror"].status is Status.FAIL and "--find-links" in r["spec.mirror"].fix
    extra = "--extra-index-url https://download.pytorch.org/whl/cu118\ntorch>=2.1\n"
    r = check(tmp_path, extra, target(), "requirements.txt")
    assert r["spec.mirror"].status is Status.WARN and "not pinned to +cu118" in r["spec.mirror"].summary
    nightly = "--extra-index-url https://download.pytorch.org/whl/nightly/cu128\ntorch==2.7.0+cu128\n"
    r = check(tmp_path, nightly, target(), "requirements.txt")
    assert "nightly" in r["spec.mirror"].summary and "torchtriton" in r["spec.mirror"].detail


def test_conda_mirror_without_the_channel(tmp_path: Path) -> None:
    text = (
        "channels:\n"
        "  - https://mirrors.tuna.tsinghua.edu.cn/anaconda/cloud/pytorch\n"
        "  - https://mirrors.tuna.tsinghua.edu.cn/anaconda/cloud/nvidia\n"
        "dependencies: [pytorch=2.1.0, pytorch-cuda=12.1]\n"
    )
    r = check(tmp_path, text, target(*H100))
    assert "tuna-conda does not mirror the nvidia channel" in r["spec.mirror"].summary
    assert r["spec.channel"].status is Status.PASS  # the mirrored channel is still "pytorch"


def test_credentials_never_reach_a_result(tmp_path: Path) -> None:
    text = "--index-url https://bot:s3cret@pypi.tuna.tsinghua.edu.cn/simple\ntorch==2.1.0+cu118\n"
    results = check(tmp_path, text, target(), "requirements.txt")
    for r in results.values():
        assert "s3cret" not in f"{r.summary}{r.detail}{r.fix}"


# reading the files ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "name", "spec", "build", "channel"),
    [
        ("pytorch=2.1.0", "pytorch", "==2.1.0.*", None, None),
        ("pytorch=2.1", "pytorch", "==2.1.*", None, None),
        ("pytorch==2.1.0", "pytorch", "==2.1.0", None, None),
        ("pytorch::pytorch=2.5.1=*cuda*", "pytorch", "==2.5.1.*", "*cuda*", "pytorch"),
        ("cudatoolkit 11.8", "cudatoolkit", "==11.8", None, None),
        ("cudatoolkit 11.8.*", "cudatoolkit", "==11.8.*", None, None),
        ("pytorch>=2.1,<2.2", "pytorch", "<2.2,>=2.1", None, None),
        (
            "pytorch 2.1.0 py3.10_cuda12.1_cudnn8.9.2_0",
            "pytorch",
            "==2.1.0",
            "py3.10_cuda12.1_cudnn8.9.2_0",
            None,
        ),
        ("pytorch", "pytorch", "", None, None),
        (
            "https://conda.example.com/pytorch::pytorch=2.1",
            "pytorch",
            "==2.1.*",
            None,
            "https://conda.example.com/pytorch",
        ),
    ],
)
def test_conda_specs(line: str, name: str, spec: str, build: Optional[str], channel: Optional[str]) -> None:
    pin = parse_conda_spec(line)
    assert pin is not None
    assert (pin.name, str(pin.spec), pin.build, pin.channel) == (name, spec, build, channel)


def test_conda_ranges_envkit_cannot_read() -> None:
    assert conda_range("2.1|2.2", fuzzy=False) is None
    pin = parse_conda_spec("pytorch[version='>=2']")
    assert pin is not None and pin.spec is None


def test_requirement_lines() -> None:
    pin = parse_requirement("torch==2.1.0+cu121")
    assert pin is not None and (str(pin.spec), pin.local) == ("==2.1.0", "cu121")
    url = "torch @ https://download.pytorch.org/whl/cu121/torch-2.1.0%2Bcu121-cp310-cp310-linux_x86_64.whl"
    pin = parse_requirement(url)
    assert pin is not None and (str(pin.spec), pin.local) == ("==2.1.0", "cu121")
    assert parse_requirement("not a requirement!") is None


def test_requirements_file_options(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text(
        "# pinned for the cluster\n"
        "--index-url=https://download.pytorch.org/whl/cu121\n"
        "-fhttps://example.com/wheels/\n"
        "--extra-index-url https://pypi.org/simple\n"
        "-r base.txt\n"
        "torch==2.1.0+cu121 \\\n"
        "    --hash=sha256:0123\n"
        "numpy>=1.26 ; python_version >= '3.10'\n"
        "-e .\n"
    )
    spec = read_spec(path)
    assert spec.index_url == "https://download.pytorch.org/whl/cu121"
    assert spec.find_links == ("https://example.com/wheels/",)
    assert spec.extra_index_urls == ("https://pypi.org/simple",)
    assert spec.pip["torch"].local == "cu121" and "numpy" in spec.pip
    assert any("base.txt" in n for n in spec.notes) and any("-e ." in n for n in spec.notes)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("dependencies: [pytorch\n", "not valid YAML"),
        ("- pytorch\n", "not a conda environment file"),
        ("channels: pytorch\ndependencies: []\n", "field 'channels'"),
    ],
)
def test_bad_environment_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "environment.yml"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as info:
        check_spec(path, K, target())
    assert str(path) in info.value.message


NOT_A_SPEC_FILES = {
    "empty.txt": "",
    "blank.txt": "\n   \n# only a comment\n",
    "empty.yml": "",
    "report.json": '{"schema": 1, "facts": {"driver": {"version": "550.54.15"}}}\n',
    "report.txt": '{\n  "schema": 1\n}\n',  # a report saved under another name
    "mine.toml": 'name = "mine"\ndescription = """\nPyTorch\n"""\nconda_packages = ["nccl"]\n',
    "notes.txt": "remember to install torch!\n",
}


@pytest.mark.parametrize("name", sorted(NOT_A_SPEC_FILES))
def test_files_that_are_no_spec_are_refused(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text(NOT_A_SPEC_FILES[name])
    with pytest.raises(InputError) as info:
        check_spec(path, K, target())
    assert info.value.message == (
        f"{path}: not an environment.yml, requirements.txt, Dockerfile, Apptainer definition, "
        "Compose file or Kubernetes manifest"
    )
    assert info.value.hint


def test_the_command_line_refuses_them_with_exit_2(tmp_path: Path) -> None:
    # The app in this process (typer's runner): the same command and error guard as `python -m
    # envkit` (test_cli's entry-point test runs the real process), on a target the flags describe
    # whole, so nothing is detected (three interpreter starts and their probes: ~2.5 s).
    described = ["--no-gpu", "--python", "3.11", "--platform", "linux-x86_64"]
    for name in ("empty.txt", "report.json", "mine.toml"):
        path = tmp_path / name
        path.write_text(NOT_A_SPEC_FILES[name])
        run = CliRunner().invoke(cli.app, ["spec", "--check", str(path), *described])
        assert run.exit_code == EXIT_USAGE, (name, run.stdout, run.stderr)
        assert f"{path}: not an environment.yml, requirements.txt" in run.stderr
        assert "Traceback" not in run.stderr and not run.stdout.strip()


@pytest.mark.parametrize(
    "text",
    ["torch==2.5.1\n", "-r base.txt\n", "--index-url https://download.pytorch.org/whl/cu121\n", "-e .\n"],
)
def test_one_requirement_or_option_line_is_a_requirements_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text("# pinned\n" + text)
    assert read_spec(path).kind == "pip"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read it"):
        check_spec(tmp_path / "nope.txt", K, target())


# envkit's own files pass ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "torch", "cuda", "channel", "pip_in_conda", "mirror"),
    [
        ("conda", "2.5.1", "12.1", "conda", False, None),
        ("conda", "2.4.1", "cpu", "conda", False, None),
        ("conda", "2.5.1", "12.1", "pip", True, None),
        ("pip", "2.5.1", "12.1", "pip", False, None),
        ("pip", "2.5.1", "12.4", "pip", False, "tuna"),
        ("pip", "2.5.1", "12.1", "pip", False, "sjtu"),
        ("pip", None, "auto", "pip", False, None),
    ],
)
def test_rendered_specs_pass_their_own_check(
    tmp_path: Path,
    fmt: str,
    torch: Optional[str],
    cuda: str,
    channel: str,
    pip_in_conda: bool,
    mirror: Optional[str],
) -> None:
    gpu = cuda != "cpu"  # a CPU build on a GPU machine is a warning of its own
    t = Target(
        "linux-x86_64",
        NvVersion("550.54.14") if gpu else None,
        (parse_gpu("sm_90", K),) if gpu else (),
        Version("3.11"),
    )
    plan = resolve(
        K, t, Request(parse_torch_spec(torch) if torch else None, parse_cuda_request(cuda), Channel(channel))
    )
    mirrors = spec_mirrors([mirror], plan.variant) if mirror else None
    files = render_specs(plan, load_template("pt2"), fmt, mirror=mirrors, pip_in_conda=pip_in_conda)
    (name, text), *_ = files.items()
    results = check(tmp_path, text, t, name)
    assert failed(results) == set()
    # A warning only where the resolver warned too (a driver older than the variant's own).
    warned = {i for i, r in results.items() if r.status is Status.WARN}
    assert warned == ({"spec.driver"} if plan.warnings else set())
