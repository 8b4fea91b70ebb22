"""torch.cuda_libs on evidence: the loader's own failures in an error text, and the loader's view of
this machine (which file ld.so picks for each library of torch's DT_NEEDED chain).

Two kinds of evidence beat the inference from LD_LIBRARY_PATH listings that checks/torch.py makes:

- an error text that quotes the loader about one of torch's CUDA libraries ("libcusparse.so.12:
  undefined symbol: __nvJitLinkAddData_12_1, version libnvJitLink.so.12": that cuSPARSE needs the
  nvJitLink of CUDA ≥ 12.1 and an older one was loaded; pytorch/pytorch#111469, #138460);
- the loader's view (envkit.detect.loader, TorchFacts.loader): a library that resolves outside the
  build's own wheels or conda prefix, through LD_LIBRARY_PATH, LD_PRELOAD or the ld.so cache,
  with its version against the one the build bundles.

glibc's ld.so searches LD_LIBRARY_PATH before a library's DT_RUNPATH (bminor/glibc elf/dl-load.c
``_dl_map_object``), and torch's wheels find their nvidia-* libraries through DT_RUNPATH
($ORIGIN/../../nvidia/*/lib): a CUDA toolkit's lib64 on LD_LIBRARY_PATH wins over them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final, Optional

from envkit.checks._common import fix_lines, headline, join_lines, pip_command
from envkit.facts import CUDA_LIBRARY_FAMILIES
from envkit.report import CheckResult, Status

if TYPE_CHECKING:
    from envkit.facts import Facts, LoadFailure, ResolvedLib
    from envkit.versions import Version

__all__ = ["LD_FIX", "is_torch_side", "loader_verdict", "pasted_failures"]

ID: Final = "torch.cuda_libs"
LD_FIX: Final = (
    "unset LD_LIBRARY_PATH (or drop the system CUDA folders from it{dirs}) so that torch loads the "
    "CUDA libraries it bundles, then check: python -c 'import torch; print(torch.cuda.is_available(), "
    "torch.backends.cudnn.version())'"
)
# The library families of torch's CUDA wheels, by the names a loader failure gives them (host.py's
# lib_family: "cudart" for nvidia-cuda-runtime, "nvrtc", "cupti", "cuda" for the driver's libcuda).
_TORCH_FAMILIES: Final = frozenset(
    {"cudart", "cublas", "cudnn", "cusparse", "cusparselt", "nvjitlink", "nccl", "cufft", "curand",
     "cusolver", "nvrtc", "cupti", "libstdc++"}
)  # fmt: skip
_WHEEL_OF: Final = {"cudart": "cuda-runtime", "nvrtc": "cuda-nvrtc", "cupti": "cuda-cupti"}


def is_torch_side(failure: LoadFailure) -> bool:
    """Whether a loader failure is torch's own (its libraries or its CUDA wheels'), not an
    extension's: torch.cuda_libs judges these, torch.extension_load the others."""
    if failure.package == "torch" or (failure.package or "").startswith("nvidia-"):
        return failure.provider in _TORCH_FAMILIES or failure.provider in (None, "torch")
    if failure.package is not None:
        return False
    if failure.kind == "cannot_open" and failure.provider == "torch":
        # torch's own libraries find libc10.so / libtorch*.so beside them through their $ORIGIN
        # RUNPATH; a module that cannot is one linked against torch and loaded without it (imported
        # before torch, or built against a torch elsewhere): an extension's failure.
        return False
    name = os.path.basename(failure.file)
    return (
        name.startswith(("libtorch", "libc10", "libcu", "libnv", "libnccl")) and failure.kind != "built_for"
    )


_LABELS: Final = {
    "nvjitlink": "nvJitLink",
    "cudart": "the CUDA runtime",
    "cudnn": "cuDNN",
    "nccl": "NCCL",
    "cublas": "cuBLAS",
    "cusparse": "cuSPARSE",
    "cusparselt": "cuSPARSELt",
    "cufft": "cuFFT",
    "curand": "cuRAND",
    "cusolver": "cuSOLVER",
    "nvrtc": "NVRTC",
    "cupti": "CUPTI",
}
# conda's package of each family (conda-forge and the nvidia channel name them alike).
_CONDA_PACKAGE: Final = {
    "cudart": "cuda-cudart",
    "nvrtc": "cuda-nvrtc",
    "cupti": "cuda-cupti",
    "cudnn": "cudnn",
}


def _family_label(family: Optional[str]) -> str:
    return _LABELS.get(family or "", family or "a library")


def _in_conda(path: str) -> bool:
    return any(part in path for part in ("/envs/", "/conda/", "/miniconda", "/anaconda", "/miniforge"))


def _wheel(facts: Facts, family: Optional[str]) -> Optional[str]:
    """The nvidia-* wheel of the family in the package list ("nvidia-nvjitlink-cu12 12.1.105")."""
    if family is None:
        return None
    name = _WHEEL_OF.get(family, family)
    dist = facts.torch.wheel_lib(name) if name in CUDA_LIBRARY_FAMILIES else None
    return f"{dist.name} {dist.version}" if dist is not None and dist.version is not None else None


def _outside(path: str) -> Optional[str]:
    """The folder of a failing file that is not a wheel's (a toolkit's lib64, /usr/lib…), or None."""
    if "site-packages" in path or "dist-packages" in path or "/" not in path:
        return None
    return os.path.dirname(os.path.normpath(path))


def _finding(f: LoadFailure, facts: Facts) -> tuple[str, list[str], Optional[str]]:
    """(the finding, its detail lines, a folder outside the wheels it names)."""
    name = os.path.basename(f.file)
    what = _family_label(f.provider)
    folder = _outside(f.file)
    lines = [f"the loader said: {f.file}: " + _said(f)]
    if folder is not None:
        lines.append(
            f"{name} was loaded from {folder}, outside torch's wheels: LD_LIBRARY_PATH or the ld.so cache"
        )
    wheel = _wheel(facts, f.provider)
    if wheel is not None:
        lines.append(f"the wheel torch bundles: {wheel}")
    if f.kind == "undefined_symbol" and f.provider == "libstdc++":
        finding = f"{name} needs a newer C++ runtime than the libstdc++ the loader found"
    elif f.kind == "undefined_symbol":
        needs = f" ≥ {f.needs}" if f.needs else ""
        finding = (
            f"{name} needs {what}{needs} ({f.symbol}); the {f.library or what} the loader found lacks it"
        )
    elif f.kind == "version_not_found":
        found = os.path.basename(f.library or "")
        finding = f"{name} needs {f.symbol} from {found}; the one the loader found is older"
    else:
        finding = f"torch's {name} cannot be found by the loader"
    return finding, lines, folder


def _said(f: LoadFailure) -> str:
    if f.kind == "undefined_symbol":
        return f"undefined symbol: {f.symbol}" + (f", version {f.library}" if f.library else "")
    if f.kind == "version_not_found":
        return f"version `{f.symbol}' not found"
    return "cannot open shared object file"


def pasted_failures(facts: Facts) -> Optional[CheckResult]:
    """torch.cuda_libs from the loader failures an error text quotes about torch's own libraries."""
    failures = [f for f in facts.errors.load_failures if is_torch_side(f)]
    if not failures:
        return None
    findings: list[str] = []
    detail: list[str] = []
    folders: list[str] = []
    fixes: list[str] = []
    pip = pip_command(facts)
    for f in failures:
        finding, lines, folder = _finding(f, facts)
        findings.append(finding)
        detail += lines
        if folder is not None:
            folders.append(folder)
        # Where the text shows the loader found the provider (ldd's "X => /path"): outside the wheels,
        # that folder is the one to take off LD_LIBRARY_PATH.
        for lib in facts.host.cuda_libs:
            if lib.source == "ldd" and lib.family == f.provider and _outside(lib.path):
                detail.append(
                    f"ldd resolves {os.path.basename(lib.path)} to {lib.path}, outside torch's wheels"
                )
                folders.append(os.path.dirname(lib.path))
        if f.provider == "libstdc++":
            fixes.append(
                "use the environment's own C++ runtime: conda install -c conda-forge libstdcxx-ng (in a "
                "conda env), or put the folder of a newer libstdc++.so.6 first: "
                "export LD_LIBRARY_PATH=$CONDA_PREFIX/lib"
            )
        elif (
            _in_conda(f.file)
            and f.provider in _LABELS
            and f.needs is not None
            and f.provider not in ("nccl", "cudnn")
        ):
            # A conda env brings its CUDA libraries as packages: one of another CUDA major was
            # pulled in (pytorch/pytorch#90673: libcusparse 12 under a CUDA 11.7 build).
            package = _CONDA_PACKAGE.get(f.provider, f"lib{f.provider}")
            major = f.needs.major
            fixes.append(
                f'in the conda env: conda install "{package}>={major},<{major + 1}"  (conda list {package})'
            )
        elif f.kind == "cannot_open" and f.provider != "cuda":
            version = facts.torch.version.public if facts.torch.version else "<version>"
            fixes.append(
                f"{pip} install --force-reinstall torch=={version}  (its nvidia-* wheels are missing or "
                "broken)"
            )
    known = [p for p in ("LD_LIBRARY_PATH", "LD_PRELOAD") if p in facts.host.env]
    if known:
        detail.append("; ".join(f"{p}={facts.host.env[p]}" for p in known))
    detail.append(
        "glibc's loader searches LD_LIBRARY_PATH (and takes LD_PRELOAD's libraries first) before the "
        "wheel's own DT_RUNPATH folders: a CUDA toolkit's lib64 there gives torch another version of a "
        "library than the one it was built with (pytorch/pytorch#111469, #138460)"
    )
    dirs = sorted(set(folders))
    ld_fix = LD_FIX.format(dirs=": " + ", ".join(dirs) if dirs else "")
    # Where the text names a folder outside the wheels, that is the fix; else a conda env's own
    # package (if one is named) comes first.
    if dirs or not fixes:
        fixes.insert(0, ld_fix)
    else:
        fixes.append(ld_fix)
    return CheckResult(
        ID,
        Status.FAIL,
        headline(findings),
        detail=join_lines(*dict.fromkeys(detail)),
        fix=fix_lines(fixes),
    )


def loader_verdict(facts: Facts) -> Optional[CheckResult]:
    """torch.cuda_libs from the loader's view of this machine (TorchFacts.loader): each library that
    resolves outside the build's own files, with its version against the bundled one. None when the
    view was not taken (a paste, a CPU build) or every library is the build's own."""
    fails: list[str] = []
    warns: list[str] = []
    detail: list[str] = []
    reported: list[ResolvedLib] = []
    missing: list[ResolvedLib] = []
    for lib in facts.torch.loader:
        if lib.family is None:
            continue
        if lib.path is None:
            missing.append(lib)
            fails.append(f"{lib.soname} (needed by {lib.needed_by}) is found nowhere the loader looks")
            continue
        finding = _resolved_line(lib, facts) if lib.bundled is False else None
        if finding is None:
            continue
        line, severe = finding
        (fails if severe else warns).append(line)
        detail.append(f"{lib.soname} (needed by {lib.needed_by}) -> {lib.path} via {lib.via}")
        reported.append(lib)
    if not fails and not warns:
        return None
    return CheckResult(
        ID,
        Status.FAIL if fails else Status.WARN,
        headline(fails + warns),
        detail=join_lines(
            *fails,
            *warns,
            *detail,
            "the loader's order (glibc elf/dl-load.c): LD_PRELOAD, DT_RPATH (without DT_RUNPATH), "
            "LD_LIBRARY_PATH, DT_RUNPATH, /etc/ld.so.cache, the default folders",
        ),
        fix=fix_lines(_loader_fixes(reported, missing, facts)),
    )


def _loader_fixes(reported: list[ResolvedLib], missing: list[ResolvedLib], facts: Facts) -> list[str]:
    """What makes the loader pick the build's own files: the variable that points elsewhere, or,
    when torch's RUNPATH finds nothing of its own, the wheel reinstalled beside torch."""
    fixes = []
    if any(lib.via == "LD_PRELOAD" for lib in reported):
        fixes.append("unset LD_PRELOAD (or drop the CUDA libraries from it)")
    dirs = sorted(
        {os.path.dirname(lib.path or "") for lib in reported if lib.via in ("LD_LIBRARY_PATH", "RPATH")}
    )
    if dirs:
        fixes.append(LD_FIX.format(dirs=": " + ", ".join(dirs)))
    wheels = []
    for lib in reported:
        if lib.via in ("ld.so.cache", "default path", "RUNPATH"):
            wheel = facts.torch.wheel_lib(_WHEEL_OF.get(lib.family or "", lib.family or ""))
            if wheel is not None and wheel.version is not None:
                wheels.append(f"{wheel.name}=={wheel.version}")
    if wheels:  # torch's RUNPATH ($ORIGIN/../../nvidia/<lib>/lib) did not reach the wheel's folder
        fixes.append(f"{pip_command(facts)} install --force-reinstall {' '.join(sorted(set(wheels)))}")
    if missing:
        version = facts.torch.version.public if facts.torch.version else "<version>"
        fixes.append(f"{pip_command(facts)} install --force-reinstall torch=={version}")
    return fixes or [LD_FIX.format(dirs="")]


def _resolved_line(lib: ResolvedLib, facts: Facts) -> Optional[tuple[str, bool]]:
    """The finding for a library resolved outside the build, and whether it breaks torch: another
    major, or older than the build's own (a newer minor of the same major usually loads). None when
    the build bundles no copy of its own (a source build, an NGC image: the system's is by design)
    and nothing says the system's is the wrong one."""
    wheel = facts.torch.wheel_lib(_WHEEL_OF.get(lib.family or "", lib.family or ""))
    it = f"{lib.family} {lib.version}" if lib.version is not None else f"{lib.family} of unknown version"
    where = f"{lib.soname} resolves to {lib.path} ({it}, via {lib.via})"
    if wheel is None or wheel.version is None:
        built = facts.torch.cuda
        if lib.family != "cudart" or built is None or lib.version is None or not _breaks(lib.version, built):
            return None
        return f"{where}; the build was made with CUDA {built}", True
    needs = f"{wheel.name} {wheel.version}"
    if lib.version is None:
        return f"{where}; the build bundles {needs}", False
    if _breaks(lib.version, wheel.version):
        return f"{where}; the build needs {needs}", True
    return f"{where}; the build bundles {needs} (newer of the same major: usually loads)", False


def _breaks(found: Version, needed: Version) -> bool:
    """Another major, or older than the one needed (compared to the found version's precision)."""
    return found.major != needed.major or found.release < needed.release[: len(found.release)]
