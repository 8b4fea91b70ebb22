"""Error text read into Facts: every family in its general form (other versions, paths and GPU names
than the corpus has), and what terminals, rich and mail clients do to a paste.

Messages are written as their producers format them (the source of each is named in
envkit/detect/errtext); rich's boxed traceback is rendered by rich itself.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from envkit.detect.errtext import read_error_text
from envkit.detect.errtext.clean import blob, clean_lines
from envkit.versions import ComputeCapability, Version

SITE = "/home/{user}/{env}/lib/python{py}/site-packages"


def _site(user: str = "ana", env: str = ".venv", py: str = "3.10") -> str:
    return SITE.format(user=user, env=env, py=py)


# The loader (glibc elf/dl-lookup.c, elf/dl-load.c, elf/dl-version.c) -----------------------------


@pytest.mark.parametrize(
    ("py", "major", "minor", "lib"),
    [
        ("3.10", 12, 1, "cusparse"),
        ("3.12", 12, 4, "cusolver"),
        ("3.9", 12, 8, "cufft"),
        ("3.13", 13, 0, "cusparse"),
    ],
)
def test_an_nvjitlink_symbol_version_says_which_nvjitlink_is_needed(
    py: str, major: int, minor: int, lib: str
) -> None:
    path = f"{_site(py=py)}/torch/lib/../../nvidia/{lib}/lib/lib{lib}.so.{major}"
    text = (
        "Traceback (most recent call last):\n"
        f'  File "{_site(py=py)}/torch/__init__.py", line 367, in <module>\n'
        "    from torch._C import *  # noqa: F403\n"
        f"ImportError: {path}: undefined symbol: __nvJitLinkComplete_{major}_{minor}, version "
        f"libnvJitLink.so.{major}\n"
    )
    reading = read_error_text(text)
    assert reading.known and "traceback" in reading.read
    (failure,) = reading.facts.errors.load_failures
    assert failure.kind == "undefined_symbol"
    assert failure.provider == "nvjitlink" and failure.needs == Version(f"{major}.{minor}")
    assert failure.package == f"nvidia-{lib}" and failure.library == f"libnvJitLink.so.{major}"
    assert reading.facts.python is not None and reading.facts.python.version == Version(py)
    # What the text does not show is unknown, not absent.
    assert {"gpus", "driver.version", "torch.distributions"} <= set(reading.facts.unknown)
    # Only a CUDA build loads its nvidia-* wheels' libraries, whatever version line was cut off.
    assert reading.facts.torch.cuda_build_evidence == path and reading.facts.torch.cuda_build is True


def test_a_cpu_version_line_beside_torchs_own_cuda_library_failing_is_a_cuda_build() -> None:
    # A paste cut short (no "CUDA used to build PyTorch") read "PyTorch version: 2.5.1" as a CPU build.
    text = (
        "PyTorch version: 2.5.1\nIs debug build: False\nOS: Ubuntu 22.04.4 LTS (x86_64)\n"
        f"ImportError: {_site()}/torch/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister\n"
    )
    torch = read_error_text(text).facts.torch
    assert torch.cuda is None and torch.cuda_build is True and torch.variant is None
    other = read_error_text(
        f"ImportError: {_site()}/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi\n"
    )
    assert other.facts.torch.cuda_build_evidence is None  # an extension's file says nothing of torch's build


@pytest.mark.parametrize(
    ("module", "package"),
    [
        ("flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so", "flash-attn"),
        ("xformers/_C.so", "xformers"),
        ("vllm/_C.abi3.so", "vllm"),
        ("torchvision/_C.so", "torchvision"),
        ("detectron2/_C.cpython-39-x86_64-linux-gnu.so", "detectron2"),
        ("amp_C.cpython-311-x86_64-linux-gnu.so", "apex"),
        ("bitsandbytes/libbitsandbytes_cuda121.so", "bitsandbytes"),
        ("my_ops_ext/kernels.so", "my-ops-ext"),
    ],
)
def test_an_extension_missing_a_torch_symbol_names_its_package(module: str, package: str) -> None:
    symbol = "_ZNK3c1010TensorImpl36is_contiguous_nondefault_policy_implENS_12MemoryFormatE"
    text = f"ImportError: {_site(env='miniconda3/envs/x')}/{module}: undefined symbol: {symbol}"
    (failure,) = read_error_text(text).facts.errors.load_failures
    assert failure.package == package and failure.provider == "torch" and failure.symbol == symbol


def test_a_missing_cuda_runtime_names_the_cuda_it_was_built_for() -> None:
    text = (
        f'  File "{_site()}/mmcv/ops/__init__.py", line 2, in <module>\n'
        "    from .active_rotated_filter import active_rotated_filter\n"
        f'  File "{_site()}/mmcv/utils/ext_loader.py", line 13, in load_ext\n'
        "    ext = importlib.import_module('mmcv.' + name)\n"
        "ImportError: libcudart.so.11.0: cannot open shared object file: No such file or directory\n"
    )
    (failure,) = read_error_text(text).facts.errors.load_failures
    assert failure.kind == "cannot_open" and failure.provider == "cudart"
    assert failure.needs == Version("11.0") and failure.package == "mmcv"


def test_a_glibcxx_version_not_found() -> None:
    text = (
        "ImportError: /lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.32' not found (required by "
        f"{_site(py='3.12')}/torch/lib/libtorch_python.so)"
    )
    (failure,) = read_error_text(text).facts.errors.load_failures
    assert failure.kind == "version_not_found" and failure.provider == "libstdc++"
    assert failure.needs == Version("3.4.32") and failure.package == "torch"


def test_cudnn_9_cannot_load_its_sublibrary() -> None:
    text = (
        "Could not load library libcudnn_cnn.so.9. Error: libcudnn_cnn.so.9: cannot open shared object file"
    )
    failures = read_error_text(text).facts.errors.load_failures
    assert [(f.provider, f.needs) for f in failures] == [("cudnn", Version("9"))]


# torch's CUDA start-up and the CUDA runtime's error strings --------------------------------------


@pytest.mark.parametrize(
    ("said", "kind", "code"),
    [
        ("RuntimeError: CUDA error: system not yet initialized", "cuda_error", "802"),
        (
            "RuntimeError: CUDA error: forward compatibility was attempted on non supported HW",
            "cuda_error",
            "804",
        ),
        ("RuntimeError: CUDA error: unknown error", "unknown_error", None),
        (
            "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version",
            "driver_too_old",
            None,
        ),
        ("AssertionError: Torch not compiled with CUDA enabled", "not_compiled", None),
    ],
)
def test_cuda_runtime_errors_from_any_call(said: str, kind: str, code: str | None) -> None:
    facts = read_error_text(f"Traceback (most recent call last):\n  ...\n{said}\n").facts
    assert facts.torch.cuda_init_error == kind
    if code:
        assert facts.torch.cuda_init_message is not None and facts.torch.cuda_init_message.startswith(
            f"Error {code}"
        )


@pytest.mark.parametrize(
    "gpu", ["NVIDIA GeForce RTX 5080", "NVIDIA B200", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"]
)
def test_the_capability_warning_names_the_gpu_and_the_arch_list(gpu: str) -> None:
    text = (
        f"{_site()}/torch/cuda/__init__.py:287: UserWarning:\n"
        f"{gpu} with CUDA capability sm_120 is not compatible with the current PyTorch installation.\n"
        "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n"
        "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    )
    facts = read_error_text(text).facts
    assert facts.torch.supported_arches[-1] == "sm_90"
    assert facts.torch.incompatible_gpus[0].compute_capability == ComputeCapability(12, 0)
    assert facts.errors.event("no_kernel_image") is not None


# NVML, memory, NCCL, the compile toolchain ---------------------------------------------------------


def test_nvml_mismatch_from_nvidia_smi_and_the_kernel_log() -> None:
    text = (
        "$ nvidia-smi\nFailed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.127\n"
        "$ dmesg | tail -1\n[  12.3] NVRM: API mismatch: the client has the version 550.127.05, but\n"
        "NVRM: this kernel module has the version 550.90.07.  Please\n"
    )
    facts = read_error_text(text).facts
    assert facts.driver.nvml_error is not None and facts.driver.nvml_error.startswith("LibRmVersionMismatch")


@pytest.mark.parametrize(("gpu", "pid"), [(0, 31337), (3, 7)])
def test_an_oom_report_names_the_other_processes(gpu: int, pid: int) -> None:
    text = (
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {gpu} has a total "
        f"capacity of 79.25 GiB of which 1.06 GiB is free. Process {pid} has 70.00 GiB memory in use. "
        "Including non-PyTorch memory, this process has 8.17 GiB memory in use. Of the allocated memory "
        "7.50 GiB is allocated by PyTorch, and 150.00 MiB is reserved by PyTorch but unallocated."
    )
    oom = read_error_text(text).facts.errors.oom
    assert oom is not None and oom.gpu == gpu and oom.others == ((pid, 71680.0),)
    assert oom.total_mib == pytest.approx(81152.0) and oom.process_mib == pytest.approx(8366.08)


def test_the_old_oom_wording() -> None:
    text = (
        "RuntimeError: CUDA out of memory. Tried to allocate 64.00 MiB (GPU 1; 10.76 GiB total capacity; "
        "1.20 GiB already allocated; 12.44 MiB free; 1.30 GiB reserved in total by PyTorch)"
    )
    oom = read_error_text(text).facts.errors.oom
    assert oom is not None and oom.gpu == 1 and oom.process_mib == pytest.approx(1331.2)


@pytest.mark.parametrize(
    ("last", "cause"),
    [
        ("Error while creating shared memory segment /dev/shm/nccl-AbC123 (size 9637888)", "shm"),
        ("socketStartConnect: Connect to 10.1.2.3<45219> failed : No route to host", "socket"),
        ("Cuda failure 'peer access is not supported between these two devices'", "p2p"),
        ("NET/IB : Got async event : port error", "ib"),
    ],
)
def test_nccl_errors_and_their_reasons(last: str, cause: str) -> None:
    text = (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n"
        f"Last error:\n{last}\n"
    )
    facts = read_error_text(text).facts
    assert facts.errors.nccl is not None and facts.errors.nccl.cause == cause
    assert facts.errors.nccl_version == Version("2.20.5")


def test_the_compile_toolchain_messages() -> None:
    text = (
        "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\n"
        "RuntimeError: Failed to find C compiler. Please specify via CC environment variable.\n"
        "/tmp/tmpx/main.c:5:10: fatal error: Python.h: No such file or directory\n"
        "gcc /tmp/tmpx/main.c -O3 -shared -fPIC -o x.so -lcuda -I/usr/include/python3.11\n"
        "/usr/bin/ld: cannot find -lcuda: No such file or directory\n"
    )
    events = {e.family: e for e in read_error_text(text).facts.errors.events}
    assert set(events) == {"no_c_compiler", "no_python_h", "triton_lcuda"}
    assert events["no_python_h"].code == "python3.11"


def test_a_missing_operator_names_its_library() -> None:
    event = read_error_text("RuntimeError: operator torchaudio::lfilter does not exist").facts.errors.event(
        "torchvision_ops"
    )
    assert event is not None and event.code == "torchaudio::lfilter"


# Listings in a mixed issue body --------------------------------------------------------------------

MIXED = """### Describe the bug
It crashes on import.

```
$ python -c "import xformers.ops"
WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:
    PyTorch 2.3.1+cu121 with CUDA 1201 (you have 2.4.0+cu121)
    Python  3.11.9 (you have 3.11.9)
```

<details><summary>pip list</summary>

```
Package                  Version
------------------------ ------------
torch                    2.4.0+cu121
torchvision              0.19.0+cu121
xformers                 0.0.27
nvidia-nccl-cu12         2.20.5
```
</details>

```
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
|   0  NVIDIA L40S                    On  |   00000000:3B:00.0 Off |                    0 |
| N/A   31C    P0             61W /  350W |       0MiB /  46068MiB |      0%      Default |
+-----------------------------------------+------------------------+----------------------+
|    0   N/A  N/A     40001      C   python                                      1024MiB |
```
nvcc: NVIDIA (R) Cuda compiler driver
Cuda compilation tools, release 12.1, V12.1.105
LD_LIBRARY_PATH=/usr/local/cuda-12.1/lib64
CUDA_VISIBLE_DEVICES=0
HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123
"""


def test_a_mixed_issue_body() -> None:
    reading = read_error_text(MIXED)
    facts = reading.facts
    assert {"pip list", "nvidia-smi", "nvcc --version", "environment variables"} <= set(reading.read)
    assert str(facts.torch.version) == "2.4.0+cu121" and facts.torch.cuda == Version("12.1")
    assert str(facts.driver.version) == "550.54.15" and facts.driver.cuda_version == Version("12.4")
    assert [(g.index, g.name, g.compute_capability) for g in facts.gpus] == [
        (0, "NVIDIA L40S", ComputeCapability(8, 9))
    ]
    assert facts.toolkits[0].version == Version("12.1.105")
    assert facts.host.env == {"LD_LIBRARY_PATH": "/usr/local/cuda-12.1/lib64", "CUDA_VISIBLE_DEVICES": "0"}
    assert "env" not in facts.host.unanswered and "HF_TOKEN" not in facts.host.env
    (built,) = facts.errors.load_failures
    assert built.kind == "built_for" and built.needs == Version("2.3.1+cu121") and built.package == "xformers"
    assert not {"gpus", "driver.version", "torch.version", "torch.distributions", "toolkits"} & set(
        facts.unknown
    )


def test_pip_freeze_and_conda_list() -> None:
    text = (
        "torch==2.2.2\ntorchvision==0.17.2\nflash-attn @ file:///tmp/flash_attn-2.5.8.whl\n\n"
        "# packages in environment at /opt/conda:\n#\n# Name Version Build Channel\n"
        "pytorch  2.1.2  py3.10_cuda11.8_cudnn8.7.0_0  pytorch\nnccl  2.19.3.1  h6103f9b_1  conda-forge\n"
        "vllm  0.4.2  pypi_0  pypi\n"
    )
    facts = read_error_text(text).facts
    names = {d.name: d.version for d in facts.torch.distributions}
    assert names["torch"] == Version("2.2.2") and "flash-attn" in names and names["vllm"] == Version("0.4.2")
    assert [(p.name, str(p.version)) for p in facts.torch.conda_packages] == [
        ("pytorch", "2.1.2"),
        ("nccl", "2.19.3.1"),
    ]


def test_a_conda_list_names_torchs_cuda_and_the_python() -> None:
    # The pytorch channel's build string carries its CUDA ("py3.11_cuda12.4_cudnn9.1.0_0"): read as a
    # CPU torch, doctor's torch.extensions blamed vllm and xformers for "torch 2.5.1+cpu".
    text = (
        "# packages in environment at /opt/conda/envs/llm:\n#\n# Name Version Build Channel\n"
        "python  3.11.9  h955ad1f_0\npytorch  2.5.1  py3.11_cuda12.4_cudnn9.1.0_0  pytorch\n"
        "xformers  0.0.28.post3  pypi_0  pypi\n"
    )
    facts = read_error_text(text).facts
    assert facts.torch.version == Version("2.5.1") and facts.torch.cuda == Version("12.4")
    assert facts.python is not None and facts.python.version == Version("3.11.9")
    cpu = text.replace("py3.11_cuda12.4_cudnn9.1.0_0", "py3.11_cpu_0")
    assert read_error_text(cpu).facts.torch.cuda is None


def test_xformers_info() -> None:
    text = (
        "xFormers 0.0.28.post1\nmemory_efficient_attention.cutlassF-pt:       available\n"
        "pytorch.version:                                   2.5.1+cu124\npytorch.cuda:       available\n"
        "gpu.compute_capability:                            8.9\ngpu.name:        NVIDIA GeForce RTX 4090\n"
        "build.torch_version:                               2.5.1+cu124\nbuild.cuda_version:         1204\n"
    )
    facts = read_error_text(text).facts
    assert facts.gpus[0].compute_capability == ComputeCapability(8, 9)
    assert facts.torch.deep is not None and facts.torch.deep.cuda_available is True
    assert not facts.errors.load_failures  # built for the torch it runs with


# What terminals, rich and mail clients do ----------------------------------------------------------


def test_rich_boxed_traceback_with_colours_and_a_path_cut_at_the_console_width() -> None:
    console = Console(file=io.StringIO(), width=72, force_terminal=True, color_system="truecolor")
    message = (
        f"{_site(user='bo', env='mc/envs/t', py='3.11')}/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so: "
        "undefined symbol: _ZN3c104cuda9SetDeviceEi"
    )
    try:
        raise ImportError(message)
    except ImportError:
        console.print_exception()
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "\x1b[" in text and "╭" in text
    (failure,) = read_error_text(text).facts.errors.load_failures
    assert failure.package == "flash-attn" and failure.symbol == "_ZN3c104cuda9SetDeviceEi"


def test_quoting_crlf_html_and_hard_wraps() -> None:
    said = (
        "CUDA initialization: The NVIDIA driver on your system is too old (found version 11080). Please "
        "update your GPU driver by downloading and installing a new version"
    )
    words = said.split(" ")
    wrapped = "\n".join(" ".join(words[i : i + 7]) for i in range(0, len(words), 7))
    text = (
        "<details><pre>\n" + "\r\n".join("> " + line for line in wrapped.splitlines()) + "\n</pre></details>"
    )
    facts = read_error_text(text).facts
    assert facts.torch.cuda_init_error == "driver_too_old" and facts.torch.reported_driver_cuda == Version(
        "11.8"
    )


def test_clean_lines_drops_colour_codes_and_fences() -> None:
    lines = clean_lines("```text\n\x1b[1;31mRuntimeError\x1b[0m: boom\x1b]8;;http://x\x1b\\\n```\n")
    assert lines == ["RuntimeError: boom"]
    assert blob(["a  b", "", "  c"]) == "a b c"


# Nothing known ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "It was a bright cold day in April, and the clocks were striking thirteen.\n" * 50,
        "name: ci\non:\n  push:\n    branches: [main]\njobs:\n  test:\n    runs-on: ubuntu-latest\n",
        "",
    ],
)
def test_text_without_anything_known(text: str) -> None:
    assert not read_error_text(text).known


# More general forms: older wordings and other tools' outputs ---------------------------------------


@pytest.mark.parametrize(
    ("said", "code"),
    [
        (
            "RuntimeError: cuda runtime error (803) : system has unsupported display driver / cuda driver combination at x.cpp:51",
            "803",
        ),
        ("ERROR: CUDA failure 804: forward compatibility was attempted on non supported HW", "804"),
        ("ggml_cuda_init: failed to initialize CUDA: system not yet initialized", "802"),
    ],
)
def test_cuda_start_up_errors_in_other_wordings(said: str, code: str) -> None:
    facts = read_error_text(said).facts
    assert facts.torch.cuda_init_error == "cuda_error"
    assert facts.torch.cuda_init_message is not None and facts.torch.cuda_init_message.startswith(
        f"Error {code}"
    )


def test_a_device_side_assert_is_not_a_start_up_error() -> None:
    facts = read_error_text(
        "RuntimeError: cuda runtime error (59) : device-side assert triggered at x.cu:10"
    ).facts
    assert facts.torch.cuda_init_error is None


def test_listings_of_other_tools() -> None:
    text = (
        "$ pip show torch\nName: torch\nVersion: 2.3.1+cu118\nSummary: Tensors\n"
        "$ cat /proc/driver/nvidia/version\nNVRM version: NVIDIA UNIX Open Kernel Module for x86_64  560.35.03  Release Build\n"
        "$ ldd libcublas.so.11\n\tlibcublasLt.so.11 => /opt/cuda-11.3/lib64/libcublasLt.so.11 (0x00007f00)\n"
        "$ echo $LD_LIBRARY_PATH\n/opt/cuda-11.3/lib64\n"
        "ii  libnccl2  2.19.3-1+cuda12.3  amd64  NVIDIA Collective Communication Library\n"
        "torch.cuda.is_available(): False\n"
    )
    reading = read_error_text(text)
    facts = reading.facts
    assert {"pip show", "/proc/driver/nvidia/version", "ldd", "system packages"} <= set(reading.read)
    assert str(facts.torch.version) == "2.3.1+cu118" and str(facts.driver.version) == "560.35.03"
    assert [(lib.family, lib.path, lib.source) for lib in facts.host.cuda_libs] == [
        ("cublas", "/opt/cuda-11.3/lib64/libcublasLt.so.11", "ldd")
    ]
    assert facts.host.env["LD_LIBRARY_PATH"] == "/opt/cuda-11.3/lib64"
    assert facts.errors.nccl_version == Version("2.19.3") and facts.errors.nccl_cuda == Version("12.3")
    assert facts.torch.deep is not None and facts.torch.deep.cuda_available is False


def test_a_link_time_reference_and_a_bare_module_name() -> None:
    text = (
        "ImportError: /opt/conda/lib/python3.9/site-packages/torch/lib/libtorch_cuda_cu.so: symbol "
        "cusparseSpSM_analysis, version libcusparse.so.11 not defined in file libcusparse.so.11 with link time reference\n"
        "ImportError: selective_scan_cuda.cpython-312-x86_64-linux-gnu.so: undefined symbol: _ZN3c107WarningC1ESt7variant\n"
    )
    failures = read_error_text(text).facts.errors.load_failures
    assert {(f.package, f.provider, f.needs) for f in failures} == {
        ("mamba-ssm", "torch", None),
        ("torch", "cusparse", Version("11")),
    }


@pytest.mark.parametrize(
    "said",
    [
        "RuntimeError: NCCL Error 2: unhandled system error",
        "node1: Test NCCL failure common.cu:892 'unhandled system error'",
        (
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.cpp:77, "
            "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.26.2+cuda12.8"
        ),
    ],
)
def test_nccl_results_in_every_wording(said: str) -> None:
    nccl = read_error_text(said).facts.errors.nccl
    assert nccl is not None and nccl.result == "unhandled system error" and nccl.cause is None


def test_an_oom_pasted_from_tried_to_allocate() -> None:
    oom = read_error_text(
        "Tried to allocate 1.50 GiB (GPU 3; 15.90 GiB total capacity; 2.10 GiB already allocated; "
        "10.06 MiB free; 2.20 GiB reserved in total by PyTorch)"
    ).facts.errors.oom
    assert oom is not None and oom.gpu == 3 and oom.free_mib == pytest.approx(10.06)
