"""The messages' general forms, in variants the corpus (tests/data/diagnosis) does not hold: other
versions, paths, GPU names, platforms and wordings of the same producer. Each names the same cause
as its corpus sibling; a reader written for one fixture fails here."""

from __future__ import annotations

import pytest

from tests.unit.checks.test_error_checks import _cause

CONDA = "/opt/conda/envs/train/lib/python3.10/site-packages"
USER = "/home/ana/.local/lib/python3.12/site-packages"


@pytest.mark.parametrize(
    ("text", "cause", "summary_has", "fix_has"),
    [
        pytest.param(
            f"ImportError: {CONDA}/torch/lib/../../nvidia/cusparse/lib/libcusparse.so.12: undefined symbol: "
            "__nvJitLinkComplete_12_8, version libnvJitLink.so.12\n",
            "torch.cuda_libs",
            "nvJitLink ≥ 12.8",
            "LD_LIBRARY_PATH",
            id="nvjitlink-12.8-conda-env-relative-path",
        ),
        pytest.param(
            "OSError: libcudnn.so.8: cannot open shared object file: No such file or directory\n"
            f"torch 2.0.1+cu118 ({USER})\n",
            "torch.cuda_libs",
            "libcudnn.so.8",
            "",
            id="cudnn8-missing-user-site",
        ),
        pytest.param(
            "RuntimeError: The NVIDIA driver on your system is too old (found version 12020). Please update "
            "your GPU driver by downloading and installing a new version from the URL: "
            "http://www.nvidia.com/Download/index.aspx\ntorch==2.7.1+cu128\n",
            "torch.driver_compat",
            "",
            "",
            id="driver-too-old-12.2-for-cu128",
        ),
        pytest.param(
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.25 GiB. GPU 5 has a total capacity "
            "of 47.40 GiB of which 1.02 GiB is free. Process 4242 has 40.11 GiB memory in use. Process 4300 has "
            "2.10 GiB memory in use. Including non-PyTorch memory, this process has 4.15 GiB memory in use.\n",
            "gpu.memory",
            "GPU 5",
            "nvidia-smi",
            id="oom-two-other-processes-gpu5",
        ),
        pytest.param(
            "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 3; 10.76 GiB total capacity; "
            "9.61 GiB already allocated; 7.56 MiB free; 9.88 GiB reserved in total by PyTorch)\n",
            "gpu.memory",
            "GPU 3",
            "",
            id="oom-old-form-gpu3",
        ),
        pytest.param(
            "torch._C._cuda_init()\nRuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some "
            "cuda functions before calling NumCudaDevices() that might have already set an error? Error 803: "
            "system has unsupported display driver / cuda driver combination\n",
            "torch.cuda_available",
            "",
            "",
            id="error-803-from-device-count",
        ),
        pytest.param(
            "NVIDIA RTX PRO 6000 Blackwell Server Edition with CUDA capability sm_120 is not compatible with the "
            "current PyTorch installation.\nThe current PyTorch install supports CUDA capabilities sm_50 sm_60 "
            "sm_70 sm_75 sm_80 sm_86 sm_90.\ntorch==2.5.1+cu124\n",
            "torch.gpu_arch",
            "sm_120",
            "download.pytorch.org/whl/cu1",  # a CUDA build for the GPU torch named, not the CPU one
            id="rtx-pro-6000-server-sm120-on-cu124",
        ),
        pytest.param(
            "nvidia-container-cli: initialization error: nvml error: driver/library version mismatch: unknown\n",
            "driver.loaded",
            "",
            "reboot",
            id="nvml-mismatch-container-cli-lowercase",
        ),
        pytest.param(
            "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
            "NCCLUtils.hpp:317, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version "
            "2.26.2\nncclSystemError: System call (e.g. socket, malloc) or external library call failed or "
            "device error.\nLast error:\nError while creating shared memory segment /dev/shm/nccl-Ab12Cd "
            "(size 25167872), error: No space left on device (28)\n",
            "nccl.failure",
            "",
            "--shm-size",
            id="nccl-2.26-shm-no-space",
        ),
        pytest.param(
            '  File "/usr/lib/python3.11/site-packages/triton/backends/nvidia/driver.py", line 41, in '
            "libcuda_dirs\n    assert any(os.path.exists(os.path.join(path, 'libcuda.so.1')) for path in dirs), "
            "msg\nAssertionError: libcuda.so cannot found!\n",
            "torch.compile_toolchain",
            "",
            "ldconfig",
            id="triton-libcuda-cannot-found-newer-triton",
        ),
        pytest.param(
            "/tmp/tmpq1w2e3r4/main.c:5:10: fatal error: Python.h: No such file or directory\n"
            "    5 | #include <Python.h>\n      |          ^~~~~~~~~~\ncompilation terminated.\n"
            "torch._inductor.exc.InductorError: CalledProcessError: Command '['/usr/bin/gcc', "
            "'/tmp/tmpq1w2e3r4/main.c', '-O3', '-shared', '-fPIC', '-o', "
            "'/tmp/tmpq1w2e3r4/cuda_utils.cpython-313-x86_64-linux-gnu.so', '-lcuda', "
            "'-I/usr/include/python3.13']' returned non-zero exit status 1.\n",
            "torch.compile_toolchain",
            "",
            "python3.13-dev",
            id="python-h-3.13",
        ),
        pytest.param(
            f"ImportError: {CONDA}/xformers/_C.so: undefined symbol: "
            "_ZN3c1017RegisterOperatorsD1Ev\ntorch==2.6.0+cu126\nxformers==0.0.28.post3\n",
            "torch.extension_load",
            "xformers",
            "xformers",
            id="xformers-undefined-symbol-conda",
        ),
        pytest.param(
            "ImportError: /opt/venv/lib/python3.12/site-packages/flash_attn_2_cuda.cpython-312-aarch64-linux-"
            "gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEa\ntorch==2.8.0\nflash_attn==2.8.3\n",
            "torch.extension_load",
            "flash-attn",
            "flash-attn",
            id="flash-attn-aarch64-py312",
        ),
        pytest.param(
            "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
            "GPU 0: Tesla P40\ntorch==2.8.0+cu129\n",
            "torch.gpu_arch",
            "",
            "",
            id="no-kernel-image-p40-cu129",
        ),
        # Families the held-out cases (tests/data/diagnosis, held_out = true) showed missing; each
        # variant is another producer's or release's wording of the same message.
        pytest.param(
            '  File "/opt/conda/lib/python3.7/site-packages/torch/_ops.py", line 61, in __getattr__\n'
            "    op = torch._C._jit_get_operation(qualified_op_name)\n"
            "RuntimeError: No such operator torchvision::deform_conv2d\n",
            "torch.extension_load",
            "torchvision",
            "torchvision",
            id="torch1x-no-such-operator-deform-conv2d",
        ),
        pytest.param(
            "RuntimeError: CUDA error: invalid device function\nCUDA kernel errors might be asynchronously "
            "reported at some other API call, so the stacktrace below might be incorrect.\n",
            "torch.gpu_arch",
            "",
            "nvidia-smi",
            id="cuda-error-98-invalid-device-function",
        ),
        pytest.param(
            ":3:hip_module.cpp           :669 : 1462986195 us: [pid:311 tid:0x7fa5] hipLaunchKernel: Returned "
            "hipErrorInvalidDeviceFunction :\ntorch==2.5.1+rocm6.2\n",
            "torch.gfx_arch",
            "invalid device function",
            "rocminfo",
            id="hip-log-invalid-device-function-rocm62",
        ),
        pytest.param(
            f'  File "{USER}/torch_scatter/__init__.py", line 16, in <module>\n'
            "    torch.ops.load_library(spec.origin)\n"
            "OSError: libtorch_cpu.so: cannot open shared object file: No such file or directory\n",
            "torch.extension_load",
            "libtorch_cpu.so",
            "",
            id="extension-cannot-open-libtorch-cpu",
        ),
    ],
)
def test_the_general_form_names_the_cause(text: str, cause: str, summary_has: str, fix_has: str) -> None:
    cid, _status, summary, fix = _cause(text)
    assert cid == cause, (cid, summary)
    assert summary_has in summary and fix_has in fix, (summary, fix)
