"""torch.compile_toolchain: what torch.compile's GPU path needs besides torch: a C compiler, the
interpreter's Python.h, and a libcuda.so to link against.

triton builds a small C launcher the first time a kernel runs (triton-lang/triton
python/triton/runtime/build.py @0419e8f0): with $CC, else gcc, else clang ("Failed to find C
compiler. Please specify via CC environment variable."), against the interpreter's include folder
(sysconfig's "include": "fatal error: Python.h: No such file or directory"), linked with -lcuda in
the folders where `/sbin/ldconfig -p` lists libcuda.so.1 (third_party/nvidia/backend/driver.py
@3992e08a ``libcuda_dirs``; "libcuda.so cannot found!" when it lists none, TRITON_LIBCUDA_PATH
overrides). The linker wants the unversioned libcuda.so there: a driver installed without its
development link (containers, WSL, some cloud images) has only libcuda.so.1, and GNU ld says
"cannot find -lcuda".
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final

from envkit.checks._common import fix_lines, headline, join_lines
from envkit.report import CheckResult, Status

if TYPE_CHECKING:
    from envkit.facts import Facts

__all__ = ["check_compile_toolchain"]

ID: Final = "torch.compile_toolchain"
_CC_FIX: Final = (
    "sudo apt-get install -y gcc (Debian/Ubuntu; sudo dnf install -y gcc on RHEL), or conda install -c "
    "conda-forge c-compiler, or export CC=<a C compiler>"
)
_LDCONFIG_FIX: Final = (
    "sudo ldconfig (after a driver install); if the driver's libraries are in a folder the cache does not "
    "list (Colab: /usr/lib64-nvidia; WSL: /usr/lib/wsl/lib): echo <that folder> | sudo tee "
    "/etc/ld.so.conf.d/nvidia.conf && sudo ldconfig, or export TRITON_LIBCUDA_PATH=<that folder>"
)


def _python_h_fix(facts: Facts, said: str | None) -> str:
    python = facts.python
    version = said.replace("python", "") if said else None
    if version is None and python is not None and python.version is not None:
        version = f"{python.version.major}.{python.version.minor}"
    pkg = f"python{version}-dev" if version else "python3-dev"
    return (
        f"sudo apt-get install -y {pkg} (Debian/Ubuntu; python3-devel on RHEL); a conda, uv or pyenv "
        "Python has its headers"
    )


def _lcuda_fix(facts: Facts) -> str:
    dirs = sorted({os.path.dirname(lib.path) for lib in facts.host.cuda_libs if lib.family == "cuda"})
    where = dirs[0] if dirs else "<the folder `ldconfig -p | grep libcuda.so.1` shows>"
    return (
        f"sudo ln -s libcuda.so.1 {where}/libcuda.so && sudo ldconfig, or export "
        "TRITON_LIBCUDA_PATH=<a folder holding libcuda.so>"
    )


def _from_text(facts: Facts) -> list[tuple[str, str]]:
    """(finding, fix) for each toolchain failure the error text shows."""
    found = []
    errors = facts.errors
    cc = errors.event("no_c_compiler")
    if cc is not None:
        what = "C++ compiler (inductor)" if cc.code == "c++" else "C compiler ($CC, gcc, clang: triton)"
        found.append((f"torch.compile found no {what}", _CC_FIX))
    header = errors.event("no_python_h")
    if header is not None:
        which = f" for {header.code}" if header.code else ""
        found.append(
            (
                f"Python.h{which} is missing: triton compiles its launcher against it",
                _python_h_fix(facts, header.code),
            )
        )
    if errors.event("triton_libcuda") is not None:
        found.append(("triton found no libcuda.so.1 in the ld.so cache (/sbin/ldconfig -p)", _LDCONFIG_FIX))
    if errors.event("triton_lcuda") is not None:
        found.append(
            (
                "the linker finds no libcuda.so (only libcuda.so.1): triton links with -lcuda",
                _lcuda_fix(facts),
            )
        )
    return found


def _on_machine(facts: Facts) -> list[tuple[str, str]]:
    """(finding, fix) for what this machine lacks (detected facts only)."""
    found: list[tuple[str, str]] = []
    host = facts.host
    if host.c_compiler is None:
        return found  # not detected here (a paste, a saved report of an older envkit)
    if host.c_compiler == "":  # looked for and not found (None: not looked for)
        found.append(("no C compiler ($CC, gcc, clang): torch.compile on the GPU will fail", _CC_FIX))
    if facts.python is not None and facts.python.has_python_h is False:
        found.append(
            (
                f"no Python.h for {facts.python.executable}: torch.compile on the GPU will fail",
                _python_h_fix(facts, None),
            )
        )
    cuda = [lib for lib in host.cuda_libs if lib.family == "cuda" and lib.source == "ld.so.cache"]
    if (
        facts.reported("host.cuda_libs")
        and facts.driver.version is not None
        and "TRITON_LIBCUDA_PATH" not in host.env
    ):
        names = {os.path.basename(lib.path) for lib in cuda}
        stubs = all("/stubs" in lib.path for lib in cuda)
        if not cuda or stubs:
            found.append(
                ("the ld.so cache lists no libcuda.so.1: triton cannot find the driver", _LDCONFIG_FIX)
            )
        elif "libcuda.so" not in names:
            found.append(
                ("only libcuda.so.1 is in the ld.so cache: triton's -lcuda will not link", _lcuda_fix(facts))
            )
    return found


def check_compile_toolchain(facts: Facts) -> CheckResult:
    said = _from_text(facts)
    if said:
        return CheckResult(
            ID,
            Status.FAIL,
            headline([f for f, _ in said]),
            detail=join_lines(
                *(f for f, _ in said),
                *(e.message for e in facts.errors.events if e.family.startswith(("no_", "triton_"))),
            ),
            fix=fix_lines(fix for _, fix in said),
        )
    torch = facts.torch
    if not torch.installed or torch.cuda_build is not True:
        return CheckResult(ID, Status.SKIP, "no CUDA build of torch: torch.compile's GPU path does not apply")
    if not any(d.name in ("triton", "pytorch-triton") for d in torch.distributions):
        return CheckResult(
            ID, Status.SKIP, "triton is not installed: torch.compile's GPU path does not apply"
        )
    lacking = _on_machine(facts)
    if lacking:
        return CheckResult(
            ID,
            Status.WARN,
            headline([f for f, _ in lacking]),
            detail=join_lines(
                *(f for f, _ in lacking), "eager mode works; torch.compile(model) fails at its first call"
            ),
            fix=fix_lines(fix for _, fix in lacking),
        )
    if not facts.host.c_compiler:
        return CheckResult(ID, Status.SKIP, "the compiler, Python.h and libcuda.so were not looked for here")
    return CheckResult(
        ID, Status.PASS, f"a C compiler ({facts.host.c_compiler}), Python.h and libcuda.so are there"
    )
