"""The loader's view of torch's CUDA libraries, on real ELF files: stand-ins built with gcc in the
layout of torch's wheels (sonames, DT_NEEDED, DT_RUNPATH with $ORIGIN), this machine's real CUDA 13
toolkit libraries, and glibc's own ld.so. Which rule found each file is checked against the
loader's own trace (LD_DEBUG=libs says it for every search)."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envkit.checks import CHECKS
from envkit.detect.loader import LDSO, loader_view, parse_list, parse_needed_by, parse_search
from envkit.facts import Distribution, Facts, PythonFacts, TorchFacts
from envkit.report import Status
from envkit.system import System
from envkit.versions import Version

pytestmark = [
    pytest.mark.host_tools,  # gcc and ld.so are this machine's on purpose
    pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc builds the stand-in libraries"),
    pytest.mark.skipif(not Path(LDSO["x86_64"]).is_file(), reason="an x86_64 glibc loader"),
]


def _so(
    out: Path,
    soname: str,
    *,
    needs: tuple[str, ...] = (),
    runpath: str = "",
    real: str = "",
    link: tuple[Path, ...] = (),
) -> Path:
    """A shared object with this soname and DT_NEEDED, written to out/<real or soname>."""
    out.mkdir(parents=True, exist_ok=True)
    src = out / f"{soname}.c"
    symbol = re.sub(r"\W", "_", soname)
    src.write_text(f"int {symbol}_marker(void) {{ return 1; }}\n", encoding="utf-8")
    target = out / (real or soname)
    argv = [
        "gcc",
        "-shared",
        "-fPIC",
        "-o",
        str(target),
        str(src),
        f"-Wl,-soname,{soname}",
        "-Wl,--no-as-needed",
    ]
    if runpath:
        argv += [f"-Wl,-rpath,{runpath}", "-Wl,--enable-new-dtags"]
    argv += [f"-l:{n}" for n in needs]
    argv += [f"-L{d}" for d in (out, *link)]
    subprocess.run(argv, check=True, capture_output=True, timeout=60)
    src.unlink()
    if real and real != soname:
        (out / soname).symlink_to(real)
    return target


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """site-packages/ with torch/lib and nvidia/*/lib as torch's CUDA 12 wheels lay them out, and a
    system CUDA 12.2 lib64 with another cuBLAS."""
    root = tmp_path_factory.mktemp("loader")
    site = root / "venv/lib/python3.11/site-packages"
    _so(site / "nvidia/cublas/lib", "libcublasLt.so.12", real="libcublasLt.so.12")
    _so(site / "nvidia/cublas/lib", "libcublas.so.12", needs=("libcublasLt.so.12",), runpath="$ORIGIN")
    _so(site / "nvidia/cuda_runtime/lib", "libcudart.so.12")
    system = root / "usr/local/cuda-12.2/lib64"
    _so(system, "libcublasLt.so.12", real="libcublasLt.so.12.2.5.6")
    _so(
        system,
        "libcublas.so.12",
        needs=("libcublasLt.so.12",),
        runpath="$ORIGIN",
        real="libcublas.so.12.2.5.6",
    )
    runpath = "$ORIGIN/../../nvidia/cublas/lib:$ORIGIN/../../nvidia/cuda_runtime/lib"
    lib = site / "torch/lib"
    link = (site / "nvidia/cublas/lib", site / "nvidia/cuda_runtime/lib")
    _so(lib, "libtorch_global_deps.so", needs=("libcudart.so.12",), runpath=runpath, link=link)
    _so(lib, "libtorch_cuda.so", needs=("libcublas.so.12", "libcudart.so.12"), runpath=runpath, link=link)
    return root


def _facts(root: Path) -> tuple[TorchFacts, PythonFacts]:
    site = root / "venv/lib/python3.11/site-packages"
    torch = TorchFacts(
        version=Version("2.5.1+cu124"),
        cuda=Version("12.4"),
        location=str(site / "torch"),
        distributions=(
            Distribution("torch", Version("2.5.1+cu124")),
            Distribution("nvidia-cublas-cu12", Version("12.4.5.8")),
            Distribution("nvidia-cuda-runtime-cu12", Version("12.4.127")),
        ),
    )
    return torch, PythonFacts("python", "test", platform="linux-x86_64", prefix=str(root / "venv"))


def _view(root: Path, **env: str) -> dict[str, tuple[str, str, bool | None, str]]:
    torch, python = _facts(root)
    libs, notes = loader_view(System(env={"PATH": os.defpath, **env}), torch, python)
    assert not notes
    return {lib.soname: (lib.via, lib.path or "", lib.bundled, lib.needed_by) for lib in libs}


def _traced(root: Path, **env: str) -> dict[str, str]:
    """Which rule ld.so itself says found each library (LD_DEBUG=libs: the search path line under
    which the file was tried last)."""
    lib = root / "venv/lib/python3.11/site-packages/torch/lib"
    proc = subprocess.run(
        [
            LDSO["x86_64"],
            "--preload",
            str(lib / "libtorch_global_deps.so"),
            "--list",
            str(lib / "libtorch_cuda.so"),
        ],
        env={"PATH": os.defpath, "LD_DEBUG": "libs", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    found: dict[str, str] = {}
    current = source = ""
    for line in proc.stderr.splitlines():
        if m := re.search(r"find library=(\S+) ", line):
            current = m.group(1)
        elif m := re.search(r"search path=\S+\s+\((\w+)", line):
            source = m.group(1)
        elif "search cache=" in line:
            source = "ld.so.cache"
        elif "trying file=" in line and current:
            found[current] = source
    return found


def test_the_wheels_own_libraries_resolve_through_runpath(wheel: Path) -> None:
    view = _view(wheel)
    assert view["libcublas.so.12"][:1] == ("RUNPATH",) and view["libcublas.so.12"][2] is True
    assert view["libcublasLt.so.12"][3] == "libcublas.so.12"  # DT_NEEDED of the wheel's cuBLAS
    assert view["libcudart.so.12"][2] is True
    traced = _traced(wheel)
    assert traced["libcublas.so.12"] == "RUNPATH" and traced["libcudart.so.12"] == "RUNPATH"


def test_a_toolkit_on_ld_library_path_wins_and_the_check_names_it(wheel: Path) -> None:
    toolkit = str(wheel / "usr/local/cuda-12.2/lib64")
    view = _view(wheel, LD_LIBRARY_PATH=toolkit)
    via, path, bundled, _by = view["libcublas.so.12"]
    assert (via, path, bundled) == ("LD_LIBRARY_PATH", f"{toolkit}/libcublas.so.12", False)
    assert _traced(wheel, LD_LIBRARY_PATH=toolkit)["libcublas.so.12"] == "LD_LIBRARY_PATH"
    torch, python = _facts(wheel)
    libs, _ = loader_view(System(env={"LD_LIBRARY_PATH": toolkit}), torch, python)
    facts = Facts(python=python, torch=dataclasses.replace(torch, loader=libs))
    result = CHECKS["torch.cuda_libs"](facts)
    assert result.status is Status.FAIL
    assert (
        "libcublas.so.12 resolves to" in result.summary
        and "cublas 12.2.5.6, via LD_LIBRARY_PATH" in result.summary
    )
    assert "the build needs nvidia-cublas-cu12 12.4.5.8" in result.summary
    assert f"drop the system CUDA folders from it: {toolkit}" in result.fix


def test_ld_preload_comes_first(wheel: Path) -> None:
    preloaded = str(wheel / "usr/local/cuda-12.2/lib64/libcublas.so.12")
    view = _view(wheel, LD_PRELOAD=preloaded)
    assert view["libcublas.so.12"][:3] == ("LD_PRELOAD", preloaded, False)


def test_the_real_cuda_13_toolkit(tmp_path: Path) -> None:
    toolkit = next(iter(sorted(Path("/usr/local").glob("cuda-13*/lib64"))), None)
    if toolkit is None or not (toolkit / "libcudart.so.13").exists():
        pytest.skip("no CUDA 13 toolkit on this machine")
    site = tmp_path / "venv/lib/python3.12/site-packages"
    _so(
        site / "torch/lib",
        "libtorch_cuda.so",
        needs=("libcudart.so.13",),
        runpath="$ORIGIN/../../nvidia/cu13/lib",
        link=(toolkit,),
    )
    torch = TorchFacts(cuda=Version("13.0"), location=str(site / "torch"))
    python = PythonFacts("python", "test", platform="linux-x86_64", prefix=str(tmp_path / "venv"))
    libs, _ = loader_view(System(env={"LD_LIBRARY_PATH": str(toolkit)}), torch, python)
    (cudart,) = [lib for lib in libs if lib.family == "cudart"]
    assert cudart.via == "LD_LIBRARY_PATH" and cudart.bundled is False
    # The real file's own name when it carries more than the major (libcudart.so.13.0.96), else the
    # toolkit folder's (/usr/local/cuda-13.0/): CUDA 13's toolkit ships libcudart.so.13 itself.
    real = os.path.basename(os.path.realpath(toolkit / "libcudart.so.13")).split(".so.", 1)[1]
    folder = toolkit.parent.name.removeprefix("cuda-")
    assert str(cudart.version) == (real if "." in real else folder)


def test_which_search_found_each_file() -> None:
    # LD_DEBUG=libs as glibc 2.35 prints it: the last file tried under a search is the one taken.
    trace = (
        "  100:\tfind library=libcudnn.so.9 [0]; searching\n"
        "  100:\t search path=/s/nvidia/cudnn/lib\t\t(RUNPATH from file /s/torch/lib/libtorch_cuda.so)\n"
        "  100:\t  trying file=/s/nvidia/cudnn/lib/libcudnn.so.9\n"
        "  100:\t search cache=/etc/ld.so.cache\n"
        "  100:\t  trying file=/usr/lib/x86_64-linux-gnu/libcudnn.so.9\n"
        "  100:\tfind library=libnccl.so.2 [0]; searching\n"
        "  100:\t search path=/opt/nccl/lib/./glibc-hwcaps/x86-64-v3:/opt/nccl/lib\t\t(LD_LIBRARY_PATH)\n"
        "  100:\t  trying file=/opt/nccl/lib/./glibc-hwcaps/x86-64-v3/libnccl.so.2\n"
        "  100:\t  trying file=/opt/nccl/lib/./libnccl.so.2\n"
        "  100:\tfind library=libcufft.so.11 [0]; searching\n"
        "  100:\t search path=/lib/x86_64-linux-gnu\t\t(system search path)\n"
        "  100:\t  trying file=/lib/x86_64-linux-gnu/libcufft.so.11\n"
    )
    tried = parse_search(trace)
    assert tried["/usr/lib/x86_64-linux-gnu/libcudnn.so.9"] == "ld.so.cache"
    assert tried["/opt/nccl/lib/libnccl.so.2"] == "LD_LIBRARY_PATH"
    assert tried["/lib/x86_64-linux-gnu/libcufft.so.11"] == "default path"
    assert tried["/s/nvidia/cudnn/lib/libcudnn.so.9"] == "RUNPATH"  # tried, not taken: the list says which


def test_what_ld_so_prints() -> None:
    assert parse_list("\tlibc10.so => /t/libc10.so (0x0001)\n\tlinux-vdso.so.1 (0x7f)\n") == [
        ("libc10.so", "/t/libc10.so")
    ]
    trace = "   12:\tfile=libcublas.so.12 [0];  needed by /site/torch/lib/libtorch_cuda.so [0]\n"
    assert parse_needed_by(trace) == {"libcublas.so.12": "/site/torch/lib/libtorch_cuda.so"}


def _versioned(out: Path, soname: str, symbols: tuple[str, ...], node: str) -> None:
    """A library defining ``symbols`` in version node ``node`` (nvJitLink's scheme: every symbol
    carries the release it came in, __nvJitLinkAddData_12_4@@libnvJitLink.so.12)."""
    out.mkdir(parents=True, exist_ok=True)
    src, script = out / "v.c", out / "v.map"
    src.write_text("".join(f"int {s}(void) {{ return 0; }}\n" for s in symbols), encoding="utf-8")
    script.write_text(f"{node} {{ global: {'; '.join(symbols)}; local: *; }};\n", encoding="utf-8")
    argv = ["gcc", "-shared", "-fPIC", "-o", str(out / soname), str(src), f"-Wl,-soname,{soname}"]
    subprocess.run([*argv, f"-Wl,--version-script={script}"], check=True, capture_output=True, timeout=60)
    src.unlink()
    script.unlink()


def test_a_real_versioned_symbol_failure_reads_as_the_loader_says_it(tmp_path: Path) -> None:
    """glibc's own words for an older nvJitLink on LD_LIBRARY_PATH under the wheel's cuSPARSE
    (pytorch/pytorch#111469's form, at another version): dlopen prints them, the reader and
    torch.cuda_libs name the version needed and the folder."""
    from envkit.detect.errtext import read_error_text

    site = tmp_path / "venv/lib/python3.11/site-packages"
    wheel, old = site / "nvidia/nvjitlink/lib", tmp_path / "usr/local/cuda-12.1/lib64"
    _versioned(
        wheel,
        "libnvJitLink.so.12",
        ("__nvJitLinkAddData_12_1", "__nvJitLinkAddData_12_4"),
        "libnvJitLink.so.12",
    )
    _versioned(old, "libnvJitLink.so.12", ("__nvJitLinkAddData_12_1",), "libnvJitLink.so.12")
    cusparse = site / "nvidia/cusparse/lib"
    cusparse.mkdir(parents=True)
    (cusparse / "c.c").write_text(
        "int __nvJitLinkAddData_12_4(void);\nint cusparse_marker(void) { return __nvJitLinkAddData_12_4(); }\n",
        encoding="utf-8",
    )
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(cusparse / "libcusparse.so.12"), str(cusparse / "c.c"),
         "-Wl,-soname,libcusparse.so.12", "-Wl,-z,now", "-Wl,-rpath,$ORIGIN/../../nvjitlink/lib",
         "-Wl,--enable-new-dtags", f"-L{wheel}", "-l:libnvJitLink.so.12"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    load = [sys.executable, "-c", f"import ctypes; ctypes.CDLL({str(cusparse / 'libcusparse.so.12')!r})"]
    assert subprocess.run(load, capture_output=True, timeout=60).returncode == 0  # the wheel's own: loads
    proc = subprocess.run(
        load,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": os.defpath, "LD_LIBRARY_PATH": str(old)},
    )
    said = proc.stderr.strip().splitlines()[-1]
    assert said.endswith("undefined symbol: __nvJitLinkAddData_12_4, version libnvJitLink.so.12"), said
    facts = read_error_text(said).facts
    (failure,) = facts.errors.load_failures
    assert (failure.kind, failure.provider, str(failure.needs)) == ("undefined_symbol", "nvjitlink", "12.4")
    result = CHECKS["torch.cuda_libs"](facts)
    assert result.status is Status.FAIL and "nvJitLink ≥ 12.4" in result.summary
    assert result.fix.startswith("unset LD_LIBRARY_PATH")
