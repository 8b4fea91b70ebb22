from __future__ import annotations

import os

import pytest

from envkit.detect.host import (
    detect_cuda_libs,
    detect_host,
    lib_family,
    parse_ldconfig,
    relevant_env,
)
from envkit.versions import Version

# `ldconfig -p` lines in the format glibc prints them.
LDCONFIG = (
    "1234 libs found in cache `/etc/ld.so.cache'\n"
    "\tlibcudnn.so.8 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcudnn.so.8\n"
    "\tlibssl.so.3 (libc6,x86-64) => /lib/x86_64-linux-gnu/libssl.so.3\n"
    "\tlibnccl.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl.so.2\n"
)


def test_relevant_env_keeps_cuda_nccl_torch_and_drops_secrets() -> None:
    env = {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "NCCL_SOCKET_IFNAME": "eth0",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
        "HOME": "/root",
        "AWS_SECRET_ACCESS_KEY": "x",
        "NVIDIA_API_KEY": "y",
        "TORCH_HUB_TOKEN": "z",
    }
    assert relevant_env(env) == {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
        "NCCL_SOCKET_IFNAME": "eth0",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    }


def test_lib_family() -> None:
    assert lib_family("libcudnn.so.8.9.2") == ("cudnn", "8.9.2")
    assert lib_family("libcudnn_cnn_infer.so.8") == ("cudnn", "8")
    assert lib_family("libcublasLt.so.12") == ("cublas", "12")
    assert lib_family("libcudart.so") == ("cudart", None)
    assert lib_family("libcuda.so.1") == ("cuda", "1")
    assert lib_family("libnvJitLink.so.12") == ("nvjitlink", "12")
    assert lib_family("libcudadevrt.a") is None
    assert lib_family("libssl.so.3") is None


def test_parse_ldconfig() -> None:
    assert parse_ldconfig(LDCONFIG) == [
        ("libcudnn.so.8", "/usr/lib/x86_64-linux-gnu/libcudnn.so.8"),
        ("libssl.so.3", "/lib/x86_64-linux-gnu/libssl.so.3"),
        ("libnccl.so.2", "/usr/lib/x86_64-linux-gnu/libnccl.so.2"),
    ]


def test_cuda_libs_from_ld_library_path_with_symlinked_versions(machine) -> None:  # type: ignore[no-untyped-def]
    libdir = machine.root / "opt/cudnn/lib"
    libdir.mkdir(parents=True)
    (libdir / "libcudnn.so.8.9.2").write_text("")
    os.symlink("libcudnn.so.8.9.2", libdir / "libcudnn.so.8")
    (libdir / "libz.so.1").write_text("")
    machine.env["LD_LIBRARY_PATH"] = "/opt/cudnn/lib:/does/not/exist"
    machine.env["LD_PRELOAD"] = "/opt/nccl/libnccl.so.2.18.1"
    machine.program("ldconfig", LDCONFIG)
    libs = detect_cuda_libs(machine.system())
    by_source = {(lib.source, lib.path): lib for lib in libs}
    linked = by_source[("LD_LIBRARY_PATH", "/opt/cudnn/lib/libcudnn.so.8")]
    assert linked.version == Version("8.9.2")  # the symlink's target names the full version
    assert by_source[("LD_PRELOAD", "/opt/nccl/libnccl.so.2.18.1")].family == "nccl"
    assert ("ld.so.cache", "/usr/lib/x86_64-linux-gnu/libnccl.so.2") in by_source
    assert not any("libz" in p or "libssl" in p for _s, p in by_source)


def test_host_tree(machine) -> None:  # type: ignore[no-untyped-def]
    machine.file("/etc/os-release", 'NAME="Ubuntu"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\n')
    for addr, vendor, cls in [
        ("0000:07:00.0", "0x10de", "0x030200"),  # NVIDIA 3D controller (a data-center GPU)
        ("0000:07:00.1", "0x10de", "0x040300"),  # NVIDIA audio function: not a GPU
        ("0000:00:02.0", "0x8086", "0x030000"),  # Intel VGA
    ]:
        machine.file(f"/sys/bus/pci/devices/{addr}/vendor", vendor + "\n")
        machine.file(f"/sys/bus/pci/devices/{addr}/class", cls + "\n")
    machine.file("/sys/module/nvidia/version", "550.54.15\n")
    machine.file("/sys/class/net/eth0/flags", "0x1003\n")
    machine.file("/sys/class/net/ib0/flags", "0x1002\n")
    machine.file("/proc/version", "Linux version 6.5.0 (buildd@lcy02)\n")
    host = detect_host(machine.system())
    assert host.os == "Ubuntu 22.04.4 LTS"
    assert host.nvidia_pci_devices == ("0000:07:00.0",)
    assert host.nvidia_module_loaded is True
    assert [(i.name, i.up) for i in host.interfaces] == [("eth0", True), ("ib0", False)]
    assert host.wsl is False
    assert host.shm_bytes is None  # no /dev/shm in this tree


def test_wsl_is_recognised(machine) -> None:  # type: ignore[no-untyped-def]
    machine.file("/proc/version", "Linux version 5.15.153.1-microsoft-standard-WSL2\n")
    assert detect_host(machine.system()).wsl is True


@pytest.mark.slow  # this machine itself: the fake roots above are the default suite's
@pytest.mark.host_tools
def test_real_machine_shm_and_interfaces() -> None:
    from envkit.system import System

    host = detect_host(System(env={}))
    assert host.shm_bytes is None or host.shm_bytes > 0
    assert any(i.name == "lo" for i in host.interfaces)
