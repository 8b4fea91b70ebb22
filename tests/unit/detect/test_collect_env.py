"""Pasted `python -m torch.utils.collect_env` output -> Facts -> the diagnosis doctor gives.

Every setup under "Real setups" is a real machine from a public issue thread (URL in each). The thread's pasted
text is NOT copied: its facts are written down here as the fields of collect_env's own ``SystemEnv``
and rendered with torch's own ``pretty_str`` (the installed torch's format), or, for 1.x-era reports,
with the 1.x field layout those threads show. Fields a thread does not show are None, which
collect_env itself prints as "Could not collect". Then the noise of real pastes is added (quotes,
fences, CRLF, hard wraps, indentation, chatter, cuts) and the parsed facts are run through every
check.
"""

from __future__ import annotations

import json
import textwrap
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envkit.checks import CHECKS, run_checks
from envkit.detect.collect_env import SOURCE, UNREPORTED_CHECKS, looks_like_collect_env, parse_collect_env
from envkit.facts import Facts, facts_from_json, facts_to_json
from envkit.report import CheckResult, Status
from envkit.versions import ComputeCapability, NvVersion, Version
from tests.conftest import check_property, examples, torch_collect_env

DATA = Path(__file__).parents[2] / "data"
HEADER = "Collecting environment information...\n"


# Rendering ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def collect_env() -> ModuleType:
    # Importing torch warns about a missing numpy on the CPU test wheel; warnings are errors here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module: ModuleType = torch_collect_env()  # no torch import (tests/conftest.py)
    return module


Render = Callable[..., str]


@pytest.fixture(scope="module")
def render(collect_env: ModuleType) -> Render:
    """collect_env's own text for a machine given as SystemEnv fields (the rest None)."""

    def _render(**fields: Any) -> str:
        values: dict[str, Any] = dict.fromkeys(collect_env.SystemEnv._fields)
        unknown = set(fields) - set(values)
        assert not unknown, f"this torch's SystemEnv has no field {unknown}"
        values.update(fields)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            text: str = collect_env.pretty_str(collect_env.SystemEnv(**values))
        return HEADER + text + "\n"

    return _render


# The 1.x layout (no ROCm / Clang / libc / platform lines, "Is debug build: No"), as the 1.3 and 1.5
# reports in pytorch/pytorch#28321, #44303 and #40682 show it.
FORMAT_1X = """\
PyTorch version: {torch}
Is debug build: No
CUDA used to build PyTorch: {cuda}

OS: {os}
GCC version: {gcc}
CMake version: {cmake}

Python version: {python}
Is CUDA available: {available}
CUDA runtime version: {nvcc}
GPU models and configuration: {gpus}
Nvidia driver version: {driver}
cuDNN version: {cudnn}

Versions of relevant libraries:
{packages}
"""


def render_1x(**fields: str) -> str:
    gpus = fields["gpus"]
    fields["gpus"] = f"\n{gpus}\n" if "\n" in gpus else gpus
    return HEADER + FORMAT_1X.format(**fields)


# The noise of real pastes ----------------------------------------------------------------------------


def quoted(text: str, depth: int = 1) -> str:
    return "".join("> " * depth + line + "\n" for line in text.splitlines())


def crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


def fenced(text: str, lang: str = "") -> str:
    return f"```{lang}\n{text}```\n"


def details(text: str) -> str:
    return f"<details>\n<summary>The output of <code>python collect_env.py</code></summary>\n\n{text}\n</details>\n"


def hard_wrapped(text: str, width: int = 72) -> str:
    """What a mail client does: long lines broken at spaces."""
    out = []
    for line in text.splitlines():
        out += textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False) or [""]
    return "\n".join(out) + "\n"


def indented(text: str, by: int = 4) -> str:
    return textwrap.indent(text, " " * by)


def cut_after(text: str, label: str) -> str:
    """A partial paste: everything after the line that starts with ``label`` is gone."""
    lines = text.splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith(label))
    return "\n".join(lines[: end + 1]) + "\n"


def checks(facts: Facts) -> dict[str, CheckResult]:
    """The checks as ``doctor --from`` runs them on a paste: without those collect_env has no facts for."""
    return {r.id: r for r in run_checks(facts, only=[c for c in CHECKS if c not in UNREPORTED_CHECKS])}


# Real setups ------------------------------------------------------------------------------------------


def test_rtx_5090_d_with_a_cu126_wheel_has_no_kernels(render: Render) -> None:
    # https://github.com/pytorch/pytorch/issues/150733 (monkeycc, description): RTX 5090 D, torch
    # 2.6.0+cu126 in an Anaconda py312 env, driver 570.124.04, Ubuntu 24.10, cuDNN 9.8.0 in the ld
    # cache. The paste starts with torch's own sm_120 warning. Its package list is not in the stored
    # copy, so pip/conda are None ("Could not collect").
    report = render(
        torch_version="2.6.0+cu126",
        is_debug_build="False",
        cuda_compiled_version="12.6",
        hip_compiled_version="N/A",
        os="Ubuntu 24.10 (x86_64)",
        gcc_version="(Ubuntu 14.2.0-4ubuntu2) 14.2.0",
        libc_version="glibc-2.40",
        python_version="3.12.9 | packaged by Anaconda, Inc. | (main, Feb  6 2025, 18:56:27) [GCC 11.2.0] (64-bit runtime)",
        python_platform="Linux-6.11.0-21-generic-x86_64-with-glibc2.40",
        is_cuda_available="True",
        cuda_module_loading="LAZY",
        nvidia_gpu_models="GPU 0: NVIDIA GeForce RTX 5090 D",
        nvidia_driver_version="570.124.04",
        cudnn_version="Probably one of the following:\n/usr/lib/x86_64-linux-gnu/libcudnn.so.9.8.0",
        hip_runtime_version="N/A",
        miopen_runtime_version="N/A",
        pip_version="pip3",
    )
    warning = (
        "/home/mm/anaconda3/envs/py312/lib/python3.12/site-packages/torch/cuda/__init__.py:235: UserWarning: \n"
        "NVIDIA GeForce RTX 5090 D with CUDA capability sm_120 is not compatible with the current PyTorch installation.\n"
        "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n"
        "If you want to use the NVIDIA GeForce RTX 5090 D GPU with PyTorch, please check the instructions at https://pytorch.org/get-started/locally/\n"
        "\n  warnings.warn(\n"
    )
    body = report.replace(HEADER, HEADER + warning)
    text = crlf("### Versions\n\n" + details(fenced(body)))
    assert looks_like_collect_env(text)
    facts = parse_collect_env(text)

    assert facts.torch.version == Version("2.6.0+cu126") and facts.torch.cuda == Version("12.6")
    assert facts.driver.version == NvVersion("570.124.04") and facts.driver.source == SOURCE
    assert [(g.index, g.name, g.compute_capability) for g in facts.gpus] == [
        (0, "NVIDIA GeForce RTX 5090 D", ComputeCapability(12, 0))
    ]
    assert facts.toolkits == ()  # "CUDA runtime version: Could not collect"
    assert facts.python is not None
    assert facts.python.version == Version("3.12.9") and facts.python.platform == "linux-x86_64"
    assert facts.python.glibc == Version("2.40") and facts.python.selected_by == SOURCE
    assert [(lib.family, str(lib.version), lib.source) for lib in facts.host.cuda_libs] == [
        ("cudnn", "9.8.0", "ld.so.cache")
    ]
    assert facts.torch.deep is not None and facts.torch.deep.cuda_available is True
    assert any("sm_120 is not compatible" in w for w in facts.torch.deep.warnings)

    result = checks(facts)
    assert result["torch.gpu_arch"].status is Status.FAIL
    assert result["torch.gpu_arch"].summary == (
        "GPU 0 (NVIDIA GeForce RTX 5090 D, sm_120) has no code in torch 2.6.0+cu126"
    )
    assert "download.pytorch.org/whl/cu1" in result["torch.gpu_arch"].fix
    assert result["torch.driver_compat"].status is Status.PASS
    assert result["torch.cpu_build_on_gpu"].status is Status.PASS


def test_cu121_wheel_on_a_470_driver_quoted_and_cut_short(render: Render) -> None:
    # https://github.com/pytorch/pytorch/issues/112553 (johnklehm, description): GKE COS node with
    # driver 470.182.03 (the title), torch 2.1.0+cu121, Python 3.11.6, Ubuntu 20.04.6, and torch's
    # "driver on your system is too old (found version 11040)" warning in front of the report. The
    # GPU model is not in the stored copy. Here the paste is quoted twice in a reply and cut after
    # the driver line.
    report = render(
        torch_version="2.1.0+cu121",
        is_debug_build="False",
        cuda_compiled_version="12.1",
        hip_compiled_version="N/A",
        os="Ubuntu 20.04.6 LTS (x86_64)",
        gcc_version="(Ubuntu 9.4.0-1ubuntu1~20.04.2) 9.4.0",
        cmake_version="version 3.27.7",
        libc_version="glibc-2.31",
        python_version="3.11.6 (main, Oct 31 2023, 20:55:52) [GCC 9.4.0] (64-bit runtime)",
        python_platform="Linux-5.15.107+-x86_64-with-glibc2.31",
        is_cuda_available="False",
        nvidia_driver_version="470.182.03",
    )
    warning = (
        "/opt/asdf/data/installs/python/3.11.6/lib/python3.11/site-packages/torch/cuda/__init__.py:138: "
        "UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version "
        "11040). Please update your GPU driver by downloading and installing a new version from the URL: "
        "http://www.nvidia.com/Download/index.aspx (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)\n"
        "  return torch._C._cuda_getDeviceCount() > 0\n"
    )
    partial = cut_after(report.replace(HEADER, HEADER + warning), "Nvidia driver version")
    text = "On Nov 1, 2023, johnklehm wrote:\n" + quoted(quoted(partial)) + "\nThanks, looking into it.\n"
    facts = parse_collect_env(text)

    assert facts.torch.version == Version("2.1.0+cu121") and facts.torch.cuda == Version("12.1")
    assert facts.driver.version == NvVersion("470.182.03")
    assert facts.python is not None and facts.python.version == Version("3.11.6")
    assert facts.host.kernel == "5.15.107+"
    assert facts.torch.deep is not None and facts.torch.deep.cuda_available is False
    assert any("found version 11040" in w for w in facts.torch.deep.warnings)
    cut = next(n for n in facts.notes if n.startswith("not in the pasted text"))
    assert "GPU models and configuration" not in cut and "Versions of relevant libraries" in cut

    result = checks(facts)
    assert result["torch.driver_compat"].status is Status.FAIL
    assert result["torch.driver_compat"].summary == (
        "torch 2.1.0+cu121 (CUDA 12.1) needs driver ≥ 525.60.13; this is 470.182.03"
    )
    # The paste lost its GPU lines: whether a GPU needs the wheel's PTX is not known, so the driver
    # that runs the build without a warning is CUDA 12.1's own, not 12.x's floor (rules.clean_driver).
    assert result["torch.driver_compat"].fix.splitlines()[-1] == "or upgrade the driver to ≥ 530.30.02"


def test_cpu_only_torch_on_a_windows_laptop_with_an_rtx_4080(render: Render) -> None:
    # https://github.com/pytorch/pytorch/issues/122924 (R4yanW1ang, description): Windows 11,
    # `pip3 torch==2.2.2` whose "CUDA used to build PyTorch" is "Could not collect" (no CUDA build),
    # RTX 4080 Laptop GPU, driver 551.86, nvcc 12.4.99, conda's cudatoolkit 11.8.0 beside it (its
    # build column is cut off in the stored copy).
    report = render(
        torch_version="2.2.2",
        is_debug_build="False",
        hip_compiled_version="N/A",
        os="Microsoft Windows 11 Education",
        libc_version="N/A",
        python_version="3.10.13 | packaged by Anaconda, Inc. | (main, Sep 11 2023, 13:24:38) [MSC v.1916 64 bit (AMD64)] (64-bit runtime)",
        python_platform="Windows-10-10.0.22631-SP0",
        is_cuda_available="False",
        cuda_runtime_version="12.4.99",
        cuda_module_loading="N/A",
        nvidia_gpu_models="GPU 0: NVIDIA GeForce RTX 4080 Laptop GPU",
        nvidia_driver_version="551.86",
        hip_runtime_version="N/A",
        miopen_runtime_version="N/A",
        is_xnnpack_available="True",
        cpu_info="Architecture=9\nCurrentClockSpeed=2200\nDeviceID=CPU0\nFamily=207\nL2CacheSize=32768\n"
        "L2CacheSpeed=\nManufacturer=GenuineIntel\nMaxClockSpeed=2200\n"
        "Name=13th Gen Intel(R) Core(TM) i9-13980HX\nProcessorType=3\nRevision=",
        pip_version="pip3",
        pip_packages="numpy==1.26.4\ntorch==2.2.2\ntorchaudio==2.2.2\ntorchvision==0.17.2",
        conda_packages="blas                      1.0                         mkl\ncudatoolkit               11.8.0",
    )
    text = "### 🐛 Describe the bug\n\nCuda is not available.\n\n### Versions\n\n" + fenced(report, "text")
    text += "\ncc @ptrblck\n"
    facts = parse_collect_env(text)

    assert facts.torch.version == Version("2.2.2") and facts.torch.cuda is None
    assert facts.python is not None and facts.python.platform == "windows-x86_64"
    assert facts.toolkits[0].version == Version("12.4.99") and facts.toolkits[0].sources == (SOURCE,)
    assert [d.name for d in facts.torch.distributions] == ["numpy", "torch", "torchaudio", "torchvision"]
    assert [(p.name, str(p.version)) for p in facts.torch.conda_packages] == [
        ("blas", "1.0"),
        ("cudatoolkit", "11.8.0"),
    ]

    result = checks(facts)
    cpu = result["torch.cpu_build_on_gpu"]
    assert cpu.status is Status.FAIL
    assert cpu.summary == "torch 2.2.2 is a CPU-only build on a machine with 1 NVIDIA GPU(s)"
    assert "--index-url https://download.pytorch.org/whl/cu" in cpu.fix
    assert result["torch.installed"].summary == "torch 2.2.2 (CPU-only) in python (collect_env)"


def test_1x_report_conda_pytorch_beside_pip_torch(render: Render) -> None:
    # https://github.com/pytorch/pytorch/issues/28321 (tharindu-mathew, description): `conda install
    # pytorch torchvision cudatoolkit=10.1 -c pytorch` on Debian 9 with a pip torch 1.2.0 already
    # there; Tesla T4, driver 410.104, nvcc 10.0.130; torch 1.3.0 reports CUDA 10.1.243 and
    # is_available() No. The 1.3 layout, hand-rendered; a mail client wrapped the wide conda line.
    conda = "\n".join(
        [
            "[conda] blas                      1.0                         mkl",
            "[conda] mkl                       2019.4                      243",
            "[conda] mkl-service               2.3.0            py37he904b0f_0",
            "[conda] mkl_fft                   1.0.14           py37ha843d7b_0",
            "[conda] mkl_random                1.1.0            py37hd6b4f25_0",
            "[conda] pytorch                   1.3.0           py3.7_cuda10.1.243_cudnn7.6.3_0    pytorch",
            "[conda] torchvision               0.4.1                py37_cu101    pytorch",
        ]
    )
    text = render_1x(
        torch="1.3.0",
        cuda="10.1.243",
        os="Debian GNU/Linux 9.11 (stretch)",
        gcc="(Debian 6.3.0-18+deb9u1) 6.3.0 20170516",
        cmake="Could not collect",
        python="3.7",
        available="No",
        nvcc="10.0.130",
        gpus="GPU 0: Tesla T4",
        driver="410.104",
        cudnn="Could not collect",
        packages="[pip3] intel-numpy==1.15.1\n[pip3] numpy==1.15.1\n[pip3] torch==1.2.0\n"
        "[pip3] torchvision==0.4.0\n" + conda,
    )
    text = hard_wrapped(text, width=78)
    assert "\npy3.7_cuda10.1.243_cudnn7.6.3_0" in text  # the wrap happened: build and channel below
    facts = parse_collect_env(text)

    assert facts.torch.version == Version("1.3.0") and facts.torch.cuda == Version("10.1.243")
    assert facts.torch.variant == "cu101"
    pytorch = next(p for p in facts.torch.conda_packages if p.name == "pytorch")
    assert (str(pytorch.version), pytorch.build, pytorch.channel) == (
        "1.3.0",
        "py3.7_cuda10.1.243_cudnn7.6.3_0",
        "pytorch",
    )
    assert facts.gpus[0].compute_capability == ComputeCapability(7, 5)
    assert facts.python is not None and facts.python.version == Version("3.7")
    assert facts.python.platform == "linux-x86_64"  # assumed: the 1.x report names no architecture
    assert any("assumed linux-x86_64" in n for n in facts.notes)

    result = checks(facts)
    dup = result["torch.duplicates"]
    assert dup.status is Status.FAIL
    assert dup.summary == (
        "conda package pytorch 1.3.0 (py3.7_cuda10.1.243_cudnn7.6.3_0 from pytorch) and pip torch 1.2.0 in one env"
    )
    # collect_env's own is_available() answer, with a T4 on the machine:
    assert result["torch.installed"].status is Status.FAIL
    assert "torch.cuda.is_available() is False" in result["torch.installed"].summary
    # Not asserted: torch.driver_compat. 410.104 is below CUDA 10.1's 418.39, but the knowledge base
    # has no CUDA 10.x driver floors, so envkit cannot say so for this machine.


def test_h100_with_a_cu117_wheel_and_a_cuda_12_nvcc(render: Render) -> None:
    # https://github.com/pytorch/pytorch/issues/110153 (mathis-lambert, turn 3): H100 PCIe, torch
    # 2.0.1+cu117, nvcc 12.2.140, driver 535.104.12, Ubuntu 22.04.3, with torch's sm_90 warning.
    # Pasted from a mail reply: long lines hard-wrapped at 72 columns, then indented as code.
    report = render(
        torch_version="2.0.1+cu117",
        is_debug_build="False",
        cuda_compiled_version="11.7",
        hip_compiled_version="N/A",
        os="Ubuntu 22.04.3 LTS (x86_64)",
        gcc_version="(Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0",
        cmake_version="version 3.27.5",
        libc_version="glibc-2.35",
        python_version="3.10.12 (main, Jun 11 2023, 05:26:28) [GCC 11.4.0] (64-bit runtime)",
        python_platform="Linux-5.15.0-84-generic-x86_64-with-glibc2.35",
        is_cuda_available="True",
        cuda_runtime_version="12.2.140",
        cuda_module_loading="EAGER",
        nvidia_gpu_models="GPU 0: NVIDIA H100 PCIe",
        nvidia_driver_version="535.104.12",
        hip_runtime_version="N/A",
        miopen_runtime_version="N/A",
        is_xnnpack_available="True",
        cpu_info="Architecture:                       x86_64",
    )
    warning = (
        "/root/torchbuild/lib/python3.10/site-packages/torch/cuda/__init__.py:173: UserWarning:\n"
        "NVIDIA H100 PCIe with CUDA capability sm_90 is not compatible with the current PyTorch installation.\n"
        "The current PyTorch install supports CUDA capabilities sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86.\n\n"
    )
    text = indented(hard_wrapped(report.replace(HEADER, HEADER + warning)))
    assert "\n    (64-bit runtime)\n" in text  # the Python version line was wrapped
    facts = parse_collect_env(text)

    assert facts.python is not None and facts.python.version == Version("3.10.12")
    assert facts.host.env["CUDA_MODULE_LOADING"] == "EAGER"
    assert facts.gpus[0].compute_capability == ComputeCapability(9, 0)

    result = checks(facts)
    assert result["torch.gpu_arch"].status is Status.FAIL
    assert result["torch.gpu_arch"].summary == (
        "GPU 0 (NVIDIA H100 PCIe, sm_90) has no code in torch 2.0.1+cu117"
    )
    assert result["toolkit.nvcc"].status is Status.WARN
    assert result["toolkit.nvcc"].summary.startswith("nvcc 12.2.140 vs torch built with CUDA 11.7")
    assert result["torch.driver_compat"].status is Status.PASS


def test_tesla_p100_with_the_default_cu128_wheel(render: Render) -> None:
    # https://github.com/index-tts/index-tts/issues/815 (hippoKevin, description): Tesla
    # P100-PCIE-16GB (sm_60), Python 3.12, PyTorch 2.8.0+cu128, Ubuntu; "sm_60 is not compatible"
    # and "no kernel image is available". The driver is not given. Kaggle/kaggle-cli#1151 is the
    # same failure on Kaggle's P100s.
    report = render(
        torch_version="2.8.0+cu128",
        cuda_compiled_version="12.8",
        os="Ubuntu",
        python_version="3.12",
        nvidia_gpu_models="GPU 0: Tesla P100-PCIE-16GB",
    )
    text = "环境如下：\n\n" + fenced(report) + "\n请问支持 P100 吗？谢谢\n"
    facts = parse_collect_env(text)

    assert facts.driver.version is None
    assert any("Nvidia driver version" in n for n in facts.notes)  # collect_env could not collect it

    result = checks(facts)
    assert result["torch.gpu_arch"].status is Status.FAIL
    assert result["torch.gpu_arch"].summary == (
        "GPU 0 (Tesla P100-PCIE-16GB, sm_60) has no code in torch 2.8.0+cu128"
    )
    assert "sm_70" in result["torch.gpu_arch"].detail  # what the wheel has instead
    assert result["torch.driver_compat"].status is Status.SKIP


def test_two_gpus_on_a_510_driver_indented_with_crlf(render: Render) -> None:
    # https://github.com/pytorch/pytorch/issues/97457 (Michael-H777, comment): the working 1.13.1
    # env, torch 1.13.1+cu117 on an RTX 3090 and an RTX 3080 Ti, driver 510.108.03, Ubuntu 22.04.2.
    # The thread pasted it indented four spaces; here also with CRLF line ends.
    report = render(
        torch_version="1.13.1+cu117",
        is_debug_build="False",
        cuda_compiled_version="11.7",
        hip_compiled_version="N/A",
        os="Ubuntu 22.04.2 LTS (x86_64)",
        gcc_version="(Ubuntu 11.3.0-1ubuntu1~22.04) 11.3.0",
        libc_version="glibc-2.35",
        python_version="3.10.8 (main, Nov 24 2022, 14:13:03) [GCC 11.2.0] (64-bit runtime)",
        python_platform="Linux-5.15.0-67-generic-x86_64-with-glibc2.35",
        is_cuda_available="True",
        cuda_module_loading="LAZY",
        nvidia_gpu_models="GPU 0: NVIDIA GeForce RTX 3090\nGPU 1: NVIDIA GeForce RTX 3080 Ti",
        nvidia_driver_version="510.108.03",
        hip_runtime_version="N/A",
        miopen_runtime_version="N/A",
        is_xnnpack_available="True",
        cpu_info="Architecture:                    x86_64\nCPU op-mode(s):                  32-bit, 64-bit\n"
        "Address sizes:                   39 bits physical, 48 bits virtual",
    )
    facts = parse_collect_env(crlf(indented(report)))

    assert [(g.index, g.name, g.compute_capability) for g in facts.gpus] == [
        (0, "NVIDIA GeForce RTX 3090", ComputeCapability(8, 6)),
        (1, "NVIDIA GeForce RTX 3080 Ti", ComputeCapability(8, 6)),
    ]
    assert facts.host.os == "Ubuntu 22.04.2 LTS (x86_64)"

    result = checks(facts)
    assert result["torch.gpu_arch"].status is Status.PASS
    # Below CUDA 11.7's own driver (515), through minor-version compatibility; the wheel has SASS
    # for both GPUs, so nothing needs the PTX JIT that needs 515 (rules.build_on_driver): it runs.
    assert result["torch.driver_compat"].status is Status.PASS
    assert result["torch.driver_compat"].summary == (
        "torch 1.13.1+cu117 (CUDA 11.7) runs on driver 510.108.03 through minor-version compatibility"
    )
    assert result["driver.loaded"].summary == "driver 510.108.03 via collect_env, 2 GPUs"


def test_1x_report_quoted_in_a_reply_two_titan_rtx_on_windows() -> None:
    # https://github.com/pytorch/pytorch/issues/40682 (ningdez, description): the 1.5 report quoted
    # with "> " in the thread itself; Windows Server 2019, torch 1.5.0+cu101, two TITAN RTX, driver
    # 442.92, nvcc 10.1.243, a cuDNN DLL in the toolkit folder. Here quoted once more by a reply.
    text = render_1x(
        torch="1.5.0+cu101",
        cuda="10.1",
        os="Microsoft Windows Server 2019 Standard",
        gcc="(MinGW.org GCC Build-20200227-1) 9.2.0",
        cmake="Could not collect",
        python="3.7",
        available="Yes",
        nvcc="10.1.243",
        gpus="GPU 0: TITAN RTX\nGPU 1: TITAN RTX",
        driver="442.92",
        cudnn=r"C:\Program Files\NVIDIA GPU Computing Toolkit\CUDA\v10.1\bin\cudnn64_7.dll",
        packages="[pip] numpy==1.19.0\n[pip] numpydoc==0.9.1\n[pip] torch==1.5.0+cu101\n"
        "[pip] torchvision==0.6.0+cu101\n"
        "[conda] blas                      1.0                         mkl\n"
        "[conda] mkl                       2019.4                      245\n"
        "[conda] mkl-service               2.3.0            py37hb782905_0",
    )
    facts = parse_collect_env("ningdez wrote:\n" + quoted(quoted(text), 1))

    assert facts.torch.version == Version("1.5.0+cu101") and facts.torch.cuda == Version("10.1")
    assert [g.name for g in facts.gpus] == ["TITAN RTX", "TITAN RTX"]
    # TITAN RTX is a Turing card (CUDA GPUs table: 7.5); the GPU table knows it by nvidia-smi's name.
    assert facts.gpus[0].compute_capability == ComputeCapability(7, 5)
    assert facts.python is not None and facts.python.platform == "windows-x86_64"
    assert facts.host.cuda_libs == ()  # a Windows DLL is not an ld.so cache entry
    assert any("cudnn64_7.dll" in n for n in facts.notes)

    result = checks(facts)
    assert result["torch.installed"].summary == "torch 1.5.0+cu101 (CUDA 10.1) in python (collect_env)"
    assert result["torch.cpu_build_on_gpu"].status is Status.PASS
    # The official 1.5.0+cu101 Windows wheel has sm_75 (pytorch/builder:main@30850f425c45
    # windows/cuda101.bat: 3.7+PTX;5.0;6.0;6.1;7.0;7.5), so both TITAN RTX are covered.
    assert result["torch.gpu_arch"].status is Status.PASS
    assert "sm_75" in result["torch.gpu_arch"].detail


def test_macos_report_from_a_mail_reply_with_hard_wraps(render: Render) -> None:
    # https://github.com/pytorch/pytorch/issues/121067 (daisysong76, comment 2024-10-22): an Intel
    # Mac, torch 2.2.2 (CPU), Python 3.10.13 built with Clang 15, answered by mail: runpy's
    # RuntimeWarning in front, lines hard-wrapped by the mail client, the prompt around it.
    report = render(
        torch_version="2.2.2",
        is_debug_build="False",
        hip_compiled_version="N/A",
        os="macOS 14.5 (x86_64)",
        clang_version="15.0.0 (clang-1500.1.0.2.5)",
        libc_version="N/A",
        python_version="3.10.13 (main, Dec 22 2023, 22:08:50) [Clang 15.0.0 (clang-1500.1.0.2.5)] (64-bit runtime)",
        python_platform="macOS-14.5-x86_64-i386-64bit",
        is_cuda_available="False",
        cuda_module_loading="N/A",
        hip_runtime_version="N/A",
        miopen_runtime_version="N/A",
        is_xnnpack_available="True",
        cpu_info="Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz",
        pip_version="pip3",
        pip_packages="mypy-extensions==1.0.0\nnumpy==1.26.4\nonnxruntime==1.19.2\ntorch==2.2.2",
    )
    prompt = "(venv) ***@***.*** Voyager2 % python3 -mtorch.utils.collect_env\n"
    runpy = (
        "/Users/daisysong/.pyenv/versions/3.10.13/lib/python3.10/runpy.py:126: RuntimeWarning: "
        "'torch.utils.collect_env' found in sys.modules after import of package 'torch.utils'\n"
        "  warn(RuntimeWarning(msg))\n"
    )
    text = hard_wrapped(
        prompt + runpy + report + "(venv) ***@***.*** Voyager2 %\n\nOn Tue, Oct 22, 2024 wrote:\n"
    )
    assert "\n(clang-1500.1.0.2.5)] (64-bit runtime)\n" in text
    facts = parse_collect_env(text)

    assert facts.torch.version == Version("2.2.2") and facts.torch.cuda is None
    assert facts.python is not None and facts.python.platform == "macos-x86_64"
    assert facts.python.version == Version("3.10.13") and facts.python.implementation == "CPython"
    assert facts.gpus == () and facts.driver.version is None and facts.toolkits == ()
    assert "numpy" in {d.name for d in facts.torch.distributions}

    result = checks(facts)
    assert result["torch.installed"].summary == "torch 2.2.2 (CPU-only) in python (collect_env)"
    assert result["torch.cpu_build_on_gpu"].status is Status.SKIP
    assert result["torch.driver_compat"].status is Status.SKIP


def test_1x_cpu_build_on_an_rtx_2080_ti_pasted_in_backticks() -> None:
    # https://github.com/pytorch/pytorch/issues/44303 (unlimition, description): torch 1.3.1 whose
    # "CUDA used to build PyTorch" is "Could not collect" (a CPU build), RTX 2080 Ti, driver 430.64,
    # nvcc 10.1.105, two libcudnn 7.6.5 in the ld cache. Pasted between single backticks, indented 4
    # (the package lines 8), as in the thread.
    text = render_1x(
        torch="1.3.1",
        cuda="Could not collect",
        os="Ubuntu 18.04.4 LTS",
        gcc="(Ubuntu 7.5.0-3ubuntu1~18.04) 7.5.0",
        cmake="version 3.10.2",
        python="3.7",
        available="No",
        nvcc="10.1.105",
        gpus="GPU 0: GeForce RTX 2080 Ti",
        driver="430.64",
        cudnn="Probably one of the following:\n/usr/lib/x86_64-linux-gnu/libcudnn.so.7.6.5\n"
        "/usr/local/cuda-10.1/targets/x86_64-linux/lib/libcudnn.so.7.6.5",
        packages=indented("[pip3] numpy==1.19.1\n[pip3] torch==1.3.1\n[pip3] torchvision==0.4.2"),
    )
    facts = parse_collect_env("`\n" + indented(text) + "`\n\nBut when I run\n")

    assert facts.torch.version == Version("1.3.1") and facts.torch.cuda is None
    assert [str(lib.version) for lib in facts.host.cuda_libs] == ["7.6.5", "7.6.5"]
    assert facts.toolkits[0].version == Version("10.1.105")

    result = checks(facts)
    assert result["torch.cpu_build_on_gpu"].status is Status.FAIL
    assert result["torch.cpu_build_on_gpu"].summary == (
        "torch 1.3.1 is a CPU-only build on a machine with 1 NVIDIA GPU(s)"
    )


def test_only_torchs_warning_survives_of_the_build(render: Render) -> None:
    # CompVis/latent-diffusion#102 (the reporter's paste): an RTX 3090 under the repository's
    # pinned torch, whose sm_86 warning is all the paste says about the build; collect_env printed
    # no torch lines and no package list. The warning is hard-wrapped by a mail client.
    report = render(
        python_version="3.8.5 (default, Sep  4 2020, 07:30:14)  [GCC 7.3.0] (64-bit runtime)",
        is_cuda_available="True",
        nvidia_gpu_models="GPU 0: NVIDIA GeForce RTX 3090",
    )
    warning = (
        "/opt/conda/lib/python3.8/site-packages/torch/cuda/__init__.py:104: UserWarning:\n"
        "NVIDIA GeForce RTX 3090 with CUDA capability sm_86 is not compatible with the current PyTorch "
        "installation.\nThe current PyTorch install supports CUDA capabilities sm_37 sm_50 sm_60 sm_70.\n"
        "If you want to use the NVIDIA GeForce RTX 3090 GPU with PyTorch, please check the instructions "
        "at https://pytorch.org/get-started/locally/\n\n  warnings.warn(incompatible_device_warn.format(\n"
    )
    facts = parse_collect_env(hard_wrapped(warning + report))

    torch = facts.torch
    assert torch.version is None and torch.cuda is None
    assert torch.installed and torch.cuda_build is True
    assert torch.supported_arches == ("sm_37", "sm_50", "sm_60", "sm_70")
    assert torch.arch_list == torch.supported_arches
    assert [(g.name, g.compute_capability) for g in torch.incompatible_gpus] == [
        ("NVIDIA GeForce RTX 3090", ComputeCapability(8, 6))
    ]
    assert facts.gpus[0].compute_capability == ComputeCapability(8, 6)
    # What the paste does not show is unknown, not absent.
    assert {"torch.version", "torch.distributions"} <= set(facts.unknown)
    assert facts.reported("gpus")

    result = checks(facts)
    assert result["torch.installed"].status is Status.PASS
    assert result["torch.installed"].summary.startswith("torch (unknown version) (a CUDA build)")
    assert (
        "architectures torch says it was built for: sm_37 sm_50 sm_60 sm_70"
        in result["torch.installed"].detail
    )
    assert result["torch.cuda_available"].status is Status.PASS  # "Is CUDA available: True"


def test_cuda_build_where_torch_finds_no_driver_cut_short(render: Render) -> None:
    # https://github.com/pytorch/pytorch/issues/74733: torch 1.7.0+cu110 on CentOS 7 where torch
    # warns it found no NVIDIA driver; here the paste stops after "Is CUDA available".
    report = render(
        torch_version="1.7.0+cu110",
        is_debug_build="True",
        cuda_compiled_version="11.0",
        hip_compiled_version="N/A",
        os="CentOS Linux 7 (Core) (x86_64)",
        python_version="3.6.4 (default, Mar 17 2022, 20:24:30)  [GCC 8.2.0] (64-bit runtime)",
        python_platform="Linux-4.14.0_1-0-0-38-x86_64-with-centos-7.5.1804-Core",
        is_cuda_available="False",
    )
    warning = (
        "/usr/lib/python3.6/site-packages/torch/cuda/__init__.py:52: UserWarning: CUDA initialization: "
        "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
        "driver from http://www.nvidia.com/Download/index.aspx (Triggered internally at  "
        "/pytorch/c10/cuda/CUDAFunctions.cpp:100.)\n  return torch._C._cuda_getDeviceCount() > 0\n"
    )
    text = quoted(cut_after(report.replace(HEADER, HEADER + warning), "Is CUDA available"))
    facts = parse_collect_env(text)

    assert facts.torch.cuda_init_error == "no_driver"
    assert {"gpus", "driver.version", "torch.distributions"} <= set(facts.unknown)
    assert "torch said: Found no NVIDIA driver on your system" in facts.notes

    # What the cut removed is not judged: no package list, no cuDNN line.
    assert checks(facts)["torch.duplicates"].status is Status.SKIP
    assert checks(facts)["torch.cuda_libs"].status is Status.SKIP
    result = checks(facts)["torch.cuda_available"]
    assert result.status is Status.FAIL
    assert result.summary == (
        "torch 1.7.0+cu110 (CUDA 11.0) cannot use CUDA: torch found no NVIDIA driver (libcuda could not be loaded)"
    )
    assert "nvidia-smi" in result.fix and "docker run --gpus all" in result.fix
    assert result.fix.splitlines()[-1] == (
        "or, to run on the CPU here: python -m pip install torch==1.7.0 --index-url https://download.pytorch.org/whl/cpu"
    )


def test_a_healthy_gpu_paste_passes_cuda_available(render: Render) -> None:
    report = render(
        torch_version="2.5.1+cu124",
        cuda_compiled_version="12.4",
        is_cuda_available="True",
        nvidia_gpu_models="GPU 0: NVIDIA H100 80GB HBM3\nGPU 1: NVIDIA H100 80GB HBM3",
        nvidia_driver_version="550.54.15",
        pip_version="pip3",
        pip_packages="[pip3] torch==2.5.1+cu124",
    )
    facts = parse_collect_env(report)
    assert facts.unknown == () or "torch.version" not in facts.unknown
    assert not facts.torch.spoke
    assert checks(facts)["torch.cuda_available"].status is Status.PASS


# Formats and noise, one at a time -----------------------------------------------------------------


MINIMAL = (
    "PyTorch version: 2.4.1+cu121\n"
    "CUDA used to build PyTorch: 12.1\n"
    "GPU models and configuration: GPU 0: NVIDIA A100-SXM4-80GB\n"
    "Nvidia driver version: 550.54.15\n"
)


def test_oldest_pip_format_and_old_conda_pip_column() -> None:
    # 0.4-era `pip list --format=legacy` lines, and old conda's "<pip>" build column
    # (pytorch/pytorch#43058 shows "[conda] torch 1.6.0 <pip>").
    text = MINIMAL + (
        "Versions of relevant libraries:\n[pip] numpy (1.15.1)\n[pip] torch (2.4.1)\n"
        "[conda] torch                     2.4.1                     <pip>\n"
        "[conda] torchvision               0.19.1                    <pip>\n"
        "[conda] numpy                     1.26.4           pypi_0    pypi\n"
    )
    facts = parse_collect_env(text)
    assert [(d.name, str(d.version)) for d in facts.torch.distributions] == [
        ("numpy", "1.15.1"),
        ("torch", "2.4.1"),
        ("torchvision", "0.19.1"),
    ]
    assert facts.torch.conda_packages == ()  # pip's packages as conda lists them are not conda's
    assert checks(facts)["torch.duplicates"].status is Status.PASS


def test_uuid_mig_and_a_wrapped_gpu_name() -> None:
    text = (
        "PyTorch version: 2.4.1+cu121\nCUDA used to build PyTorch: 12.1\n"
        "GPU models and configuration:\n"
        "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-56622fc6-a9b3-5594-4c6d-b0b231be656a)\n"
        "MIG 3g.20gb Device 0:\n"
        "GPU 1: NVIDIA GeForce RTX\n3090\n\n"
        "Nvidia driver version: 550.54.15\n"
    )
    gpus = parse_collect_env(text).gpus
    assert [(g.index, g.name, g.mig_enabled) for g in gpus] == [
        (0, "NVIDIA A100-SXM4-40GB", True),
        (1, "NVIDIA GeForce RTX 3090", None),
    ]
    assert gpus[0].uuid == "GPU-56622fc6-a9b3-5594-4c6d-b0b231be656a"
    assert gpus[1].compute_capability == ComputeCapability(8, 6)


def test_torch_that_does_not_import_is_broken_when_pip_lists_it() -> None:
    text = (
        "PyTorch version: N/A\nIs debug build: N/A\nCUDA used to build PyTorch: N/A\n"
        "Nvidia driver version: 535.104.05\nGPU models and configuration: GPU 0: NVIDIA L4\n\n"
        "Versions of relevant libraries:\n[pip3] torch==2.3.0\n"
    )
    facts = parse_collect_env(text)
    assert facts.torch.version is None and facts.torch.deep is None
    assert facts.torch.error == "collect_env could not import torch (PyTorch version: N/A)"
    assert checks(facts)["torch.installed"].status is Status.FAIL


def test_rocm_build_records_hip_and_no_nvidia_gpu() -> None:
    text = (
        "PyTorch version: 2.5.1+rocm6.2\nCUDA used to build PyTorch: N/A\n"
        "ROCM used to build PyTorch: 6.2.41133-dd7f95766\n"
        "GPU models and configuration: AMD Instinct MI210 (gfx90a:sramecc+:xnack-)\n"
    )
    facts = parse_collect_env(text)
    assert facts.torch.hip == "6.2.41133-dd7f95766" and facts.torch.cuda is None
    assert facts.gpus == ()
    assert facts.torch.variant == "rocm6.2"
    # The AMD GPU with its gfx target: the ROCm checks judge the build against it.
    assert [(g.name, g.arch) for g in facts.amd.gpus] == [("AMD Instinct MI210", "gfx90a")]
    results = checks(facts)
    assert results["torch.gfx_arch"].status is Status.PASS
    assert results["torch.gpu_vendor"].status is Status.PASS
    assert results["driver.amd"].status is Status.SKIP
    # An RDNA 3 iGPU (gfx1103) no 2.5.1 ROCm wheel carries: a finding, with the plan's fix.
    apu = parse_collect_env(
        text.replace("AMD Instinct MI210 (gfx90a:sramecc+:xnack-)", "AMD Radeon 780M (gfx1103)")
    )
    assert apu.amd.gpus[0].arch == "gfx1103"
    assert checks(apu)["torch.gfx_arch"].status is Status.FAIL


def test_a_second_report_in_the_same_text_is_not_mixed_in() -> None:
    second = MINIMAL.replace("2.4.1+cu121", "2.5.0+cu124").replace("550.54.15", "560.35.03")
    facts = parse_collect_env(MINIMAL + "\nand on the other node:\n\n" + second)
    assert facts.torch.version == Version("2.4.1+cu121")
    assert facts.driver.version == NvVersion("550.54.15")
    assert any("second collect_env report" in n for n in facts.notes)


@pytest.mark.parametrize(
    ("platform", "expected"),
    [
        ("Linux-6.8.0-1015-aws-aarch64-with-glibc2.39", "linux-aarch64"),
        ("Linux-5.15.153.1-microsoft-standard-WSL2-x86_64-with-glibc2.35", "linux-x86_64"),
        ("macOS-14.5-arm64-arm-64bit", "macos-arm64"),
        ("Linux-4.14.0_1-0-0-38-x86_64-with-centos-7.5.1804-Core", "linux-x86_64"),
    ],
)
def test_python_platform(platform: str, expected: str) -> None:
    facts = parse_collect_env(MINIMAL + f"Python platform: {platform}\nLibc version: glibc-2.39\n")
    assert facts.python is not None and facts.python.platform == expected
    assert facts.host.wsl is ("WSL2" in platform)


def test_html_entities_and_tags_keep_condas_pip_column() -> None:
    text = "<pre>" + MINIMAL + "[conda] torch 2.4.1 &lt;pip&gt;<br>\n</pre>"
    facts = parse_collect_env(text)
    assert [d.name for d in facts.torch.distributions] == ["torch"]


def test_unreported_checks_are_checks() -> None:
    assert set(UNREPORTED_CHECKS) <= set(CHECKS)
    facts = parse_collect_env(MINIMAL)
    assert "python.shm" not in checks(facts) and "gpu.health" not in checks(facts)


# What is not collect_env output ------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "nvidia-smi/h100-nvl-x2-550-banner.txt",
        "nvidia-smi/h100-nvl-x2-550-q.txt",
        "nvcc/12.8.txt",
        "proc-driver-version/565-open-ubuntu24.04.txt",
    ],
)
def test_other_recorded_outputs_are_not_collect_env(path: str) -> None:
    text = (DATA / path).read_text(encoding="utf-8")
    assert not looks_like_collect_env(text)
    facts = parse_collect_env(text)
    assert facts.torch.version is None and facts.driver.version is None and facts.gpus == ()
    assert facts.notes == ("the text is not `python -m torch.utils.collect_env` output",)


def test_a_json_report_and_prose_are_not_collect_env() -> None:
    report = json.dumps({"schema": "envkit.report/1", "facts": facts_to_json(Facts())}, indent=2)
    assert not looks_like_collect_env(report)
    assert not looks_like_collect_env("")
    assert not looks_like_collect_env("My PyTorch version is 2.1 and the OS: Ubuntu. Any ideas?")


# Never raises ----------------------------------------------------------------------------------------


# Lines built from what reports are made of, so that most examples reach the reader.
STARTS = [
    "PyTorch version: ",
    "Is debug build: ",
    "CUDA used to build PyTorch: ",
    "ROCM used to build PyTorch: ",
    "OS: ",
    "Libc version: ",
    "Python version: ",
    "Python platform: ",
    "Is CUDA available: ",
    "CUDA runtime version: ",
    "CUDA_MODULE_LOADING set to: ",
    "GPU models and configuration:",
    "Nvidia driver version: ",
    "cuDNN version: ",
    "CPU:",
    "Versions of relevant libraries:",
    "GPU 0: ",
    "GPU 12:",
    "MIG ",
    "[pip3] ",
    "[pip] ",
    "[conda] ",
    "UserWarning: ",
    "CUDA initialization: The NVIDIA driver on your system is too old (found version ",
    "Found no NVIDIA driver on your system",
    " with CUDA capability sm_",
    "The current PyTorch install supports CUDA capabilities ",
    "Found GPU0 ",
    " which is of cuda capability ",
    "Collecting environment information...",
    "```",
    "<details>",
    "=====",
    "",
]
VALUES = [
    "2.6.0+cu126",
    "1.3.0",
    "N/A",
    "None",
    "Could not collect",
    "No CUDA",
    "Yes",
    "False",
    "570.124.04",
    "12.8",
    "10.1.243",
    "NVIDIA GeForce RTX 5090",
    "Tesla P100-PCIE-16GB",
    "(UUID: GPU-1234)",
    "Probably one of the following:",
    "/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0",
    "Linux-6.8.0-x86_64-with-glibc2.39",
    "Windows-10-10.0.22631-SP0",
    "macOS-14.5-arm64-arm-64bit",
    "glibc-2.35",
    "3.12.9 (main) [GCC 11.2.0] (64-bit runtime)",
    "torch==2.4.1",
    "numpy (1.15.1)",
    "pytorch   2.0.1   py3.10_cuda11.8_cudnn8.7.0_0   pytorch",
    "torch 1.6.0 <pip>",
    "numpy 1.26.4 pypi_0 pypi",
    "：",
    "\x00",
    "\u2028",
    "&lt;pip&gt;",
]
LINE = st.builds(
    lambda quote, start, a, b: quote + start + a + b,
    st.sampled_from(["", "> ", "> > ", ">>", "    ", "\t", "`"]),
    st.sampled_from(STARTS),
    st.one_of(st.sampled_from(VALUES), st.text(max_size=16)),
    st.one_of(st.just(""), st.sampled_from(VALUES), st.text(max_size=8)),
)
PASTE = st.builds(
    lambda lines, eol: eol.join(lines), st.lists(LINE, max_size=40), st.sampled_from(["\n", "\r\n", "\r"])
)


@examples(60, 400)  # 400 examples take ~2 s: the long run is in the slow job
def test_never_raises_and_round_trips_through_json(max_examples: int) -> None:
    check_property(max_examples, _never_raises_and_round_trips, PASTE)


def _never_raises_and_round_trips(text: str) -> None:
    looks_like_collect_env(text)
    facts = parse_collect_env(text)
    assert not any(n.startswith("collect_env text could not be read") for n in facts.notes)
    assert facts_from_json(json.loads(json.dumps(facts_to_json(facts)))) == facts
    assert not any(r.summary.startswith("envkit could not run") for r in run_checks(facts))


@settings(max_examples=100)
@given(st.text())
def test_never_raises_on_any_text(text: str) -> None:
    facts = parse_collect_env(text)
    assert not any(n.startswith("collect_env text could not be read") for n in facts.notes)


@pytest.mark.parametrize(
    ("line", "version", "cuda", "hip"),
    [
        ("[pip3] torch==2.10.0.dev20250901+rocm7.0", "2.10.0.dev20250901+rocm7.0", None, "7.0"),
        ("[pip3] torch==2.5.1+cu121", "2.5.1+cu121", Version("12.1"), None),
        ("[pip3] torch==2.5.1", "2.5.1", None, None),
    ],
)
def test_a_paste_of_package_lines_alone_names_the_build(
    line: str, version: str, cuda: Version | None, hip: str | None
) -> None:
    """A paste cut down to its package lines (pytorch/pytorch#164346 quoted only its ROCm nightly's
    [pip3] lines) read as 'torch ? (CPU)': the version and the CUDA or ROCm of the wheel's local
    version are the build's, where the 'used to build' lines are not in the text."""
    facts = parse_collect_env(f"Versions of relevant libraries:\n[pip3] numpy==2.1.2\n{line}\n")
    assert facts.torch is not None
    assert (str(facts.torch.version), facts.torch.cuda, facts.torch.hip) == (version, cuda, hip)
    # Where the paste says what it was built with, that answer stands ("None": no CUDA).
    said = parse_collect_env(
        "PyTorch version: N/A\nCUDA used to build PyTorch: None\nROCM used to build PyTorch: N/A\n\n"
        f"Versions of relevant libraries:\n{line}\n"
    )
    assert said.torch is not None and said.torch.cuda is None
