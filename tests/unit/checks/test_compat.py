"""The compatibility checks of doctor, with fixes made by the resolver for the machine."""

from __future__ import annotations

import dataclasses

from envkit.checks.compat import check_cpu_build_on_gpu, check_gpu_arch, check_torch_driver_compat
from envkit.checks.driver_support import check_driver_support
from envkit.facts import CondaPackage, DeepTorchFacts, Distribution, DriverFacts, Facts, GpuFacts, TorchFacts
from envkit.report import Status
from envkit.versions import ComputeCapability, NvVersion, Version
from tests.unit.checks.test_checks import HEALTHY, HEALTHY_GPU, PYTHON


def machine(
    driver: str,
    gpu_name: str,
    cc: tuple[int, int] | None,
    torch: str,
    cuda: str | None,
    **torch_extra: object,
) -> Facts:
    dists = (
        Distribution("torch", Version(torch), "/envs/pt/lib/python3.11/site-packages"),
        Distribution("torchvision", Version("0.1"), "/s"),
    )
    return dataclasses.replace(
        HEALTHY,
        driver=DriverFacts(version=NvVersion(driver), source="nvml"),
        gpus=(
            dataclasses.replace(
                HEALTHY_GPU, name=gpu_name, compute_capability=ComputeCapability(*cc) if cc else None
            ),
        ),
        python=dataclasses.replace(PYTHON, platform="linux-x86_64"),
        torch=TorchFacts(
            version=Version(torch), cuda=Version(cuda) if cuda else None, distributions=dists, **torch_extra
        ),  # type: ignore[arg-type]
    )


# torch.driver_compat -------------------------------------------------------------------------------


def test_cu130_wheel_on_a_570_driver_fails_with_the_exact_fix() -> None:
    facts = machine("570.86.10", "NVIDIA H100 80GB HBM3", (9, 0), "2.13.0+cu130", "13.0")
    result = check_torch_driver_compat(facts)
    assert result.status is Status.FAIL
    assert result.summary == "torch 2.13.0+cu130 (CUDA 13.0) needs driver ≥ 580.65.06; this is 570.86.10"
    first = result.fix.splitlines()[0]
    assert first.startswith("/envs/pt/bin/python -m pip install torch==")
    assert "+cu12" in first and "--index-url https://download.pytorch.org/whl/cu12" in first
    assert "torchvision==" in first and "torchaudio" not in first  # only what the env has
    assert result.fix.splitlines()[1] == "or upgrade the driver to ≥ 580.65.06"


def test_below_the_toolkit_driver_with_sass_for_every_gpu_passes() -> None:
    # Minor-version compatibility runs SASS; only newer PTX needs the toolkit's driver (NVIDIA's
    # CUDA Compatibility guide). The cu128 wheel has sm_90 SASS: nothing needs the JIT.
    facts = machine("550.54.15", "NVIDIA H100 80GB HBM3", (9, 0), "2.7.0+cu128", "12.8")
    result = check_torch_driver_compat(facts)
    assert result.status is Status.PASS
    assert "through minor-version compatibility" in result.summary
    assert "sm_90" in result.detail


def test_below_the_toolkit_driver_with_no_gpu_known_warns() -> None:
    facts = dataclasses.replace(
        machine("550.54.15", "NVIDIA H100 80GB HBM3", (9, 0), "2.7.0+cu128", "12.8"), gpus=()
    )
    result = check_torch_driver_compat(facts)
    assert result.status is Status.WARN
    assert "minor-version compatibility" in result.summary
    assert result.fix.startswith("upgrade the driver to ≥ 570.26")
    # Its way out is never the build already installed (the resolver would pick it again).
    assert "torch==2.7.0+cu128 " not in result.fix + " "


def test_below_the_toolkit_driver_a_gpu_with_only_ptx_fails() -> None:
    # torch's own list (--deep): sm_80 SASS and compute_80 PTX; an sm_90 GPU runs only the PTX,
    # which a driver below CUDA 12.8's own cannot JIT-compile.
    deep = DeepTorchFacts(ok=True, cuda_available=True, arch_list=("sm_80", "compute_80"))
    facts = machine("550.54.15", "NVIDIA H100 80GB HBM3", (9, 0), "2.7.0+cu128", "12.8", deep=deep)
    result = check_torch_driver_compat(facts)
    assert result.status is Status.FAIL
    assert "only PTX" in result.summary and "GPU 0" in result.summary
    assert "or upgrade the driver to ≥ 570.26" in result.fix


def test_matching_driver_passes() -> None:
    facts = machine("580.95.05", "NVIDIA H200", (9, 0), "2.11.0+cu130", "13.0")
    assert check_torch_driver_compat(facts).status is Status.PASS


def test_cpu_torch_and_no_driver_are_skipped() -> None:
    assert (
        check_torch_driver_compat(machine("580.95.05", "x", (9, 0), "2.11.0+cpu", None)).status is Status.SKIP
    )
    no_driver = dataclasses.replace(
        machine("580.95.05", "x", (9, 0), "2.11.0+cu130", "13.0"), driver=DriverFacts()
    )
    assert check_torch_driver_compat(no_driver).status is Status.SKIP


# torch.gpu_arch -----------------------------------------------------------------------------------


def test_rtx_5090_on_a_cu126_wheel_fails() -> None:
    facts = machine("575.51.03", "NVIDIA GeForce RTX 5090", (12, 0), "2.6.0+cu126", "12.6")
    result = check_gpu_arch(facts)
    assert result.status is Status.FAIL
    assert result.summary == "GPU 0 (NVIDIA GeForce RTX 5090, sm_120) has no code in torch 2.6.0+cu126"
    assert "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90" in result.detail
    assert "no kernel image is available" in result.detail
    assert "+cu128" in result.fix or "+cu129" in result.fix


def test_the_deep_probe_arch_list_wins() -> None:
    deep = DeepTorchFacts(
        ok=True, arch_list=("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120")
    )
    facts = machine("580.95.05", "NVIDIA GeForce RTX 5090", (12, 0), "2.9.0.dev0+git1234", "13.0", deep=deep)
    result = check_gpu_arch(facts)
    assert result.status is Status.PASS
    assert "reported by torch" in result.detail


def test_cuda_available_with_its_cuda_lost_is_judged_by_every_wheel_of_the_release() -> None:
    # A paste without "CUDA used to build PyTorch" but "Is CUDA available: True" (pt#31319): a CUDA
    # build of 1.3.1, CUDA unknown. Every 1.3.1 CUDA wheel starts at sm_37 (pytorch/builder 2aac90bd),
    # so a K40c (sm_35) runs none of them; an RTX 2080 (sm_75) is in all of them.
    available = DeepTorchFacts(ok=True, cuda_available=True)
    k40 = machine("440.33.01", "Tesla K40c", (3, 5), "1.3.1", None, deep=available)
    assert k40.torch.cuda_build is True and k40.torch.variant is None
    result = check_gpu_arch(k40)
    assert result.status is Status.FAIL
    assert "has no code in any CUDA wheel of torch 1.3.1" in result.summary
    assert "cu101" in result.detail and "cu92" in result.detail

    turing = machine("440.33.01", "GeForce RTX 2080", (7, 5), "1.3.1", None, deep=available)
    assert check_gpu_arch(turing).status is not Status.FAIL

    # Without the evidence that CUDA works, a plain version is the CPU build, as before.
    plain = machine("440.33.01", "Tesla K40c", (3, 5), "1.3.1", None)
    assert plain.torch.variant == "cpu" and check_gpu_arch(plain).status is Status.SKIP


def test_unknown_build_without_deep_is_skipped() -> None:
    facts = machine("580.95.05", "NVIDIA H200", (9, 0), "2.9.0a0+git1234", "12.8")
    result = check_gpu_arch(facts)
    assert result.status is Status.SKIP
    assert "--deep" in result.detail


def test_gpu_name_gives_the_cc_when_nvml_does_not() -> None:
    facts = machine("535.104.05", "Tesla P100-PCIE-16GB", None, "2.7.0+cu128", "12.8")
    result = check_gpu_arch(facts)
    assert result.status is Status.FAIL
    assert "sm_60" in result.summary


# torch.cpu_build_on_gpu ---------------------------------------------------------------------------


def test_cpu_wheel_on_a_gpu_machine_fails() -> None:
    facts = machine("580.95.05", "NVIDIA H200", (9, 0), "2.13.0+cpu", None)
    result = check_cpu_build_on_gpu(facts)
    assert result.status is Status.FAIL
    assert result.summary == "torch 2.13.0+cpu is a CPU-only build on a machine with 1 NVIDIA GPU(s)"
    assert "+cu130" in result.fix


def test_conda_env_gets_a_conda_fix() -> None:
    conda = (CondaPackage("pytorch", Version("2.1.0"), "py3.10_cpu_0", "pytorch"),)
    facts = machine("550.54.15", "NVIDIA A100-SXM4-80GB", (8, 0), "2.1.0", None, conda_packages=conda)
    result = check_cpu_build_on_gpu(facts)
    assert result.status is Status.FAIL
    assert result.fix.startswith("conda install ")


def test_cpu_build_without_gpu_is_skipped() -> None:
    facts = dataclasses.replace(machine("580.95.05", "x", (9, 0), "2.13.0+cpu", None), gpus=())
    assert check_cpu_build_on_gpu(facts).status is Status.SKIP


# driver.support ----------------------------------------------------------------------------------


def test_driver_past_r580_on_volta_fails() -> None:
    facts = machine("590.44.01", "Tesla V100-SXM2-32GB", (7, 0), "2.11.0+cu126", "12.6")
    result = check_driver_support(facts)
    assert result.status is Status.FAIL
    assert "R580 is the last branch" in result.summary
    # The last R580 driver envkit knows, and the build the resolver then picks: a fix that leads
    # to no other finding (tests/unit/test_agreement_fixes.py).
    assert result.fix.startswith("install driver 580.95.05 (or a newer one of the R580 branch), then: ")
    assert "torch==2.14.1+cu126" in result.fix


def test_blackwell_on_r535_fails() -> None:
    facts = machine("535.104.05", "NVIDIA GeForce RTX 5090", (12, 0), "2.7.0+cu128", "12.8")
    result = check_driver_support(facts)
    assert result.status is Status.FAIL
    assert "needs driver R570 or newer" in result.summary


def test_old_driver_for_current_torch_warns() -> None:
    facts = machine("470.82.01", "Tesla T4", (7, 5), "2.0.0+cu117", "11.7")
    result = check_driver_support(facts)
    assert result.status is Status.WARN
    assert "too old for every current torch release" in result.summary
    assert "the newest it runs is 2.7.1+cu118" in result.summary
    # The way out is a command for this machine: the driver, then the build it then runs.
    assert result.fix == (
        "upgrade the driver to ≥ 525.60.13, then: /envs/pt/bin/python -m pip install "
        "torch==2.14.1+cu126 torchvision==0.29.1 --index-url https://download.pytorch.org/whl/cu126"
    )


def test_driver_that_runs_current_torch_passes_with_a_note() -> None:
    facts = machine("550.54.15", "NVIDIA H100 80GB HBM3", (9, 0), "2.5.1+cu124", "12.4")
    result = check_driver_support(facts)
    assert result.status is Status.PASS
    assert "the newest torch it runs is 2.14.1+cu126" in result.detail


def test_a_gpu_no_current_torch_has_is_not_said_to_run_it() -> None:
    """A Tesla K80 on R470 (its last branch): the driver is right for the GPU, but no current build
    has sm_37, so the summary says so instead of 'runs current torch (2.13-2.15)' (it said that on a
    pasted K80 report, pytorch-manylinux-binaries#13)."""
    facts = machine("470.256.02", "Tesla K80", (3, 7), "2.7.1+cu118", "11.8")
    result = check_driver_support(facts)
    assert result.status is Status.PASS
    assert "runs current torch" not in result.summary
    assert "no current torch" in result.summary and "runs on them" in result.summary
    assert "whatever the driver" in result.detail


def test_no_driver_is_skipped() -> None:
    assert check_driver_support(Facts()).status is Status.SKIP


def test_gpu_lost_does_not_count_as_usable() -> None:
    facts = machine("580.95.05", "NVIDIA H200", (9, 0), "2.13.0+cpu", None)
    lost = dataclasses.replace(facts, gpus=(GpuFacts(index=0, error="GpuIsLost"),))
    assert check_cpu_build_on_gpu(lost).status is Status.SKIP


# Evidence outranks tables ------------------------------------------------------------------------


def _working(facts: Facts) -> Facts:
    deep = DeepTorchFacts(ok=True, version=facts.torch.version, cuda_available=True, device_count=1)
    return dataclasses.replace(facts, torch=dataclasses.replace(facts.torch, deep=deep))


def test_a_driver_floor_contradicted_by_a_working_cuda_is_a_warning_naming_it() -> None:
    facts = _working(machine("570.86.10", "NVIDIA H100 80GB HBM3", (9, 0), "2.13.0+cu130", "13.0"))
    result = check_torch_driver_compat(facts)
    assert result.status is Status.WARN
    assert "needs driver ≥ 580.65.06; this is 570.86.10" in result.summary
    assert "yet torch.cuda.is_available() is True with 1 device here" in result.summary
    assert "the tables are right about releases in general" in result.detail
    # torch's own "too old" message is evidence too: then the failure stands.
    said = dataclasses.replace(facts.torch, cuda_init_error="driver_too_old")
    assert check_torch_driver_compat(dataclasses.replace(facts, torch=said)).status is Status.FAIL


def test_a_branch_rule_contradicted_by_a_working_cuda_is_a_warning() -> None:
    facts = machine("535.104.05", "NVIDIA GeForce RTX 5090", (12, 0), "2.7.0+cu128", "12.8")
    assert check_driver_support(facts).status is Status.FAIL
    result = check_driver_support(_working(facts))
    assert result.status is Status.WARN
    assert result.summary.startswith("GPU 0 (NVIDIA GeForce RTX 5090, sm_120) needs driver R570 or newer")
    assert result.summary.endswith("yet torch.cuda.is_available() is True with 1 device here")


def test_is_available_false_leaves_the_failure() -> None:
    facts = machine("570.86.10", "NVIDIA H100 80GB HBM3", (9, 0), "2.13.0+cu130", "13.0")
    deep = DeepTorchFacts(ok=True, cuda_available=False)
    facts = dataclasses.replace(facts, torch=dataclasses.replace(facts.torch, deep=deep))
    assert check_torch_driver_compat(facts).status is Status.FAIL
