"""torch.installed, torch.duplicates, torch.cuda_libs: the torch build in the inspected environment.

The "undefined symbol" family of import failures (pytorch/pytorch#104259, #90673, #104591) comes
from CUDA libraries outside the wheel shadowing the ones the wheel bundles through its nvidia-*
wheels: the loader searches LD_LIBRARY_PATH (and LD_PRELOAD) before the wheel's own RUNPATH, so a
system cuDNN or NCCL of another version there is loaded instead. A toolkit's ``lib64/stubs``
folder on LD_LIBRARY_PATH puts a stub ``libcuda.so`` in front of the driver's.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Final, Optional

from envkit.checks._common import and_list, fix_lines, headline, join_lines, pip_command, torch_absent
from envkit.checks.compat import plan_fix
from envkit.checks.cuda_loader import loader_verdict, pasted_failures
from envkit.report import CheckResult, Status

if TYPE_CHECKING:
    from envkit.facts import Distribution, Facts, SharedLib, TorchFacts
    from envkit.versions import Version

__all__ = [
    "check_torch_cuda_libs",
    "check_torch_duplicates",
    "check_torch_installed",
]

COMPANIONS: Final = ("torch", "torchvision", "torchaudio")


def _where(facts: Facts) -> str:
    python = facts.python
    if python is None:
        return "the inspected environment"
    return f"{python.executable} ({python.selected_by})"


def check_torch_installed(facts: Facts) -> CheckResult:
    cid = "torch.installed"
    python = facts.python
    torch = facts.torch
    if python is not None and python.error:
        return CheckResult(
            cid,
            Status.FAIL,
            f"could not inspect {python.executable}",
            detail=python.error,
            fix=f"check that `{python.executable} -c pass` runs, or pick another with --python",
        )
    if not torch.installed and not (facts.reported("torch.version") or facts.reported("torch.distributions")):
        # A paste cut short: neither the version line nor the package list is there.
        return CheckResult(cid, Status.SKIP, "the text shows neither torch's version nor the package list")
    if not torch.installed:
        return CheckResult(
            cid,
            Status.WARN,
            f"torch is not installed in {_where(facts)}",
            detail=join_lines(torch.error),
            fix=plan_fix(facts),  # the resolver's plan for this machine
        )
    label = f"torch {torch.version or '(unknown version)'}"
    xpu = torch.version is not None and (torch.version.local or "").startswith("xpu")
    build = (
        f"CUDA {torch.cuda}"
        if torch.cuda
        else f"ROCm {torch.hip}"
        if torch.hip
        else "XPU"
        if xpu
        else "CPU-only"
    )
    if torch.cuda is None and torch.cuda_build:
        build = "a CUDA build"  # torch's own messages say so; its CUDA version is not in the text
    elif torch.cuda_build is None:
        build = "build not known"
    if torch.error:
        return CheckResult(
            cid,
            Status.FAIL,
            f"{label} is installed but broken: {torch.error}",
            detail=f"package folder: {torch.location}",
            fix=f"{pip_command(facts)} install --force-reinstall --no-deps torch=={_public(torch.version)}",
        )
    deep = torch.deep
    if deep is not None and deep.timed_out:
        hang = (deep.error or "").split(" (", 1)[0] or "import torch did not finish in time"
        return CheckResult(
            cid,
            Status.FAIL,
            f"{label}: {hang}",
            detail=join_lines(deep.error),
            fix=f"time it: {_python(facts)} -X importtime -c 'import torch'  (a hang there is "
            "usually a wedged GPU, see driver.loaded and gpu.health, or a slow network filesystem)",
        )
    if deep is not None and not deep.ok:
        return CheckResult(
            cid,
            Status.FAIL,
            f"{label} does not import",
            detail=join_lines(deep.error),
            fix=f"{pip_command(facts)} install --force-reinstall torch=={_public(torch.version)}  "
            "(see torch.cuda_libs and torch.duplicates first)",
        )
    detail = join_lines(
        f"package folder: {torch.location}" if torch.location else "",
        f"git version: {torch.git_version}" if torch.git_version else "",
        _deep_detail(facts),
        _said_detail(torch),
    )
    if deep is not None and torch.cuda and deep.cuda_available is False and facts.visible_gpus:
        warnings = [w for w in deep.warnings if "cuda" in w.lower() or "driver" in w.lower()]
        return CheckResult(
            cid,
            Status.FAIL,
            f"{label} ({build}) cannot use the GPU: torch.cuda.is_available() is False",
            detail=join_lines(*warnings, detail),
            fix="see driver.loaded; `envkit resolve` picks a build this driver runs",
        )
    return CheckResult(cid, Status.PASS, f"{label} ({build}) in {_where(facts)}", detail=detail)


def _python(facts: Facts) -> str:
    return facts.python.executable if facts.python is not None else "python"


def _public(version: object) -> str:
    text = str(version or "")
    return text.split("+", 1)[0] if text else "<version>"


def _deep_detail(facts: Facts) -> str:
    deep = facts.torch.deep
    if deep is None or not deep.ok:
        return ""
    lines = [f"cuda.is_available(): {deep.cuda_available}, devices: {deep.device_count}"]
    if deep.arch_list:
        lines.append(f"compiled architectures: {' '.join(deep.arch_list)}")
    if deep.cudnn:
        lines.append(f"cuDNN {deep.cudnn}")
    if deep.nccl:
        lines.append(f"NCCL {deep.nccl}")
    if deep.bf16_supported is not None:
        lines.append(f"bf16 (native): {deep.bf16_supported}")
    return "\n".join(lines)


def _said_detail(torch: TorchFacts) -> str:
    """What torch's own messages said (envkit.detect.torch_messages), for the record."""
    lines = [f"torch said: {torch.cuda_init_message}" if torch.cuda_init_message else ""]
    if torch.supported_arches:
        lines.append(f"architectures torch says it was built for: {' '.join(torch.supported_arches)}")
    for gpu in torch.incompatible_gpus:
        where = f"GPU {gpu.index} " if gpu.index is not None else ""
        cc = f" ({gpu.compute_capability.sm})" if gpu.compute_capability else ""
        lines.append(
            f"torch says {where}{gpu.name}{cc} cannot run this build ({gpu.reason.replace('_', ' ')})"
        )
    return join_lines(*lines)


def _short_location(location: str | None) -> str:
    if not location:
        return "an unknown location"
    home = os.path.expanduser("~")
    return location.replace(home, "~", 1) if location.startswith(home) else location


def check_torch_duplicates(facts: Facts) -> CheckResult:
    cid = "torch.duplicates"
    torch = facts.torch
    # CUDA wheels of two majors break `import torch` itself ("undefined symbol: ncclCommResume",
    # pytorch/pytorch#186591), so a paste whose torch line says N/A is still judged by its packages.
    cuda_wheels = [d for d in torch.distributions if d.cuda_major is not None]
    if not torch.installed and not torch.conda_packages and not cuda_wheels:
        return CheckResult(cid, Status.SKIP, torch_absent(facts))
    problems: list[str] = []
    fixes: list[str] = []
    pip = pip_command(facts, installs=False)  # uninstall and show, in this interpreter
    for name in COMPANIONS:
        dists = [d for d in torch.distributions if d.name == name]
        if len(dists) > 1:
            where = and_list([f"{d.version} in {_short_location(d.location)}" for d in dists])
            problems.append(f"{len(dists)} {name} installs: {where}")
            fixes.append(
                f"{pip} uninstall -y {name}  (repeat until `{pip} show {name}` finds none), then "
                "install one build"
            )
    conda_torch = next((p for p in torch.conda_packages if p.name in ("pytorch", "libtorch")), None)
    pip_torch = [d for d in torch.distributions if d.name == "torch"]
    if conda_torch is not None and pip_torch and _pip_owned(pip_torch, facts):
        channel = f" from {conda_torch.channel}" if conda_torch.channel else ""
        problems.append(
            f"conda package {conda_torch.name} {conda_torch.version} "
            f"({conda_torch.build}{channel}) and pip torch {pip_torch[0].version} in one env"
        )
        fixes.append(
            f"keep one: `{pip} uninstall -y torch` (keep conda's) or "
            f"`conda remove --force {conda_torch.name}` (keep pip's)"
        )
    mixed, keep, why = _mixed_cuda_wheels(torch.distributions, torch.cuda)
    if mixed:
        problems.append(
            f"CUDA wheels for two CUDA majors: {and_list([_dist_label(d) for d in mixed])} "
            f"beside CUDA {keep}'s{why}"
        )
        fixes.append(
            f"{pip} uninstall -y " + " ".join(d.name for d in mixed) + "  then reinstall torch "
            f"(`{pip} install --force-reinstall --no-deps` of the torch you have) so that one CUDA "
            "major's libraries remain"
        )
    if problems and facts.python is not None and facts.python.externally_managed:
        # PEP 668: pip refuses to uninstall from this interpreter too; a venv of its own is the way.
        fixes.append(
            "this Python is externally managed (PEP 668) and pip refuses to change it; install one "
            f"build into a venv instead: {pip_command(facts)} install torch"
        )
    if problems:
        return CheckResult(
            cid,
            Status.FAIL,
            headline(problems),
            detail=join_lines(
                *problems,
                "Python imports whichever comes first on sys.path; the other one's files and "
                "metadata make upgrades and uninstalls unpredictable."
                if len(problems) > len(mixed[:1])
                else "",
                "Both majors' libraries sit in site-packages/nvidia/; torch loads one library of "
                "each name, so a CUDA 12 NCCL or cuBLAS beside CUDA 13 ones is the 'undefined symbol' "
                "failure at `import torch` (pytorch/pytorch#186591)."
                if mixed
                else "",
                torch.error if mixed and torch.error else "",
            ),
            fix=fix_lines(fixes),
        )
    if not facts.reported("torch.distributions"):
        # A paste cut before its package list: no second install seen is not none there.
        return CheckResult(cid, Status.SKIP, "the package list is not in the text; duplicates not checked")
    return CheckResult(cid, Status.PASS, "one torch install")


def _pip_owned(pip_torch: list[Distribution], facts: Facts) -> bool:
    # conda's own pytorch package also ships a torch-*.dist-info; pip's install differs in version.
    conda_versions = {str(p.version) for p in facts.torch.conda_packages if p.name == "pytorch"}
    return any(str(d.version).split("+")[0] not in conda_versions for d in pip_torch)


def _dist_label(dist: Distribution) -> str:
    return f"{dist.name} {dist.version}" if dist.version is not None else dist.name


def _mixed_cuda_wheels(
    dists: tuple[Distribution, ...], cuda: Optional[Version]
) -> tuple[list[Distribution], Optional[int], str]:
    """The CUDA library wheels of the wrong CUDA major (those torch's own CUDA does not name; without
    torch's CUDA, the major with fewer wheels, and on a tie the older one: a wheel left behind by an
    upgrade to a newer CUDA build), the major to keep, and why that one."""
    by_major: dict[int, list[Distribution]] = {}
    for d in dists:
        if d.cuda_major is not None:
            by_major.setdefault(d.cuda_major, []).append(d)
    if len(by_major) < 2:
        return [], None, ""
    if cuda is not None and cuda.major in by_major:
        keep, why = cuda.major, f" (torch is a CUDA {cuda} build)"
    else:
        keep = max(by_major, key=lambda m: (len(by_major[m]), m))
        why = " (torch's own CUDA is not known: the larger family, on a tie the newer, is kept)"
    wrong = [d for m, found in sorted(by_major.items()) if m != keep for d in found]
    return sorted(wrong, key=lambda d: d.name), keep, why


def check_torch_cuda_libs(facts: Facts) -> CheckResult:
    cid = "torch.cuda_libs"
    # The loader's own words (an error text) and its view of this machine come first: evidence.
    evidence = pasted_failures(facts) or loader_verdict(facts)
    if evidence is not None:
        return evidence
    torch = facts.torch
    libs = facts.host.cuda_libs
    problems: list[str] = []
    fixes: list[str] = []
    fail = False
    for lib in libs:
        if lib.source == "ld.so.cache":
            continue
        reason, severe = _shadow_reason(lib, facts)
        if reason:
            problems.append(f"{lib.path} ({lib.source}) {reason}")
            fixes.append(f"remove {os.path.dirname(lib.path) or lib.path} from {lib.source}")
            fail = fail or severe
    if problems:
        cached = [lib.path for lib in libs if lib.source == "ld.so.cache"]
        return CheckResult(
            cid,
            Status.FAIL if fail else Status.WARN,
            headline(problems),
            detail=join_lines(
                *problems,
                "The loader searches LD_LIBRARY_PATH before the torch wheel's own library folders; "
                "a different version there is the usual cause of 'undefined symbol' errors at "
                "`import torch`.",
                f"in the ld.so cache (harmless while the wheel has its own): {', '.join(cached)}"
                if cached
                else "",
            ),
            fix=fix_lines(fixes),
        )
    if "env" in facts.host.unanswered:
        pasted = _pasted_pairing(facts)
        if pasted is not None:
            return pasted
    if not facts.reported("host.cuda_libs"):
        # A paste cut before its cuDNN line: the system libraries are unknown, not absent.
        return CheckResult(cid, Status.SKIP, "the text stops before its CUDA library lines; not checked")
    if not torch.installed or torch.cuda is None:
        what = "torch is not installed" if not torch.installed else "torch is not a CUDA build"
        return CheckResult(cid, Status.SKIP, f"{what}; no CUDA libraries to compare")
    # Only the CUDA libraries torch loads: not nvidia-ml-py (NVML bindings) or nvidia-cudnn-frontend.
    bundled = [d.name for d in torch.distributions if d.cuda_library is not None]
    return CheckResult(
        cid,
        Status.PASS,
        "no system CUDA libraries shadow torch's"
        + (f" ({len(bundled)} bundled nvidia-* wheels)" if bundled else ""),
        detail=join_lines(*(_lib_line(lib) for lib in libs)),
    )


# The distribution's own library folders (/lib, /usr/lib64, /usr/lib/x86_64-linux-gnu, …): a cuDNN
# there came with a system package and is in the ld.so cache, which the loader searches after the
# wheel's RUNPATH, so it is harmless. A cuDNN anywhere else (/usr/local/cuda-12.3/lib64, a module
# system's /apps/cudnn/v8.0.3/lib64) is there for LD_LIBRARY_PATH, as NVIDIA's installation guide
# ("Post-installation Actions": export LD_LIBRARY_PATH=/usr/local/cuda-12.3/lib64…) and environment
# modules set it, and LD_LIBRARY_PATH is searched before the wheel's own folders.
_DISTRO_LIB_RE: Final = re.compile(r"^/(?:usr/)?lib(?:32|64)?(?:/[a-z0-9_]+-linux-gnu\w*)?/[^/]+$")
_LD_FIX: Final = (
    "unset LD_LIBRARY_PATH (or drop the system CUDA folders from it{dirs}) so that torch loads the "
    "CUDA libraries it bundles, then check: python -c 'import torch; print(torch.cuda.is_available(), "
    "torch.backends.cudnn.version())'"
)


def _pasted_pairing(facts: Facts) -> Optional[CheckResult]:
    """A pasted report (LD_LIBRARY_PATH unknown): system CUDA libraries or a system toolkit beside
    the CUDA libraries a pip torch bundles. With a failed import that pairing is the cause (fail);
    without one, a system cuDNN of another version in a folder only LD_LIBRARY_PATH points at is a
    warning. A system cuDNN in the distribution's own folders alone is not."""
    cid = "torch.cuda_libs"
    torch = facts.torch
    wheels = [d for d in torch.distributions if d.cuda_library is not None]
    local = (torch.version.local or "") if torch.version is not None else ""
    conda_torch = any(p.name in ("pytorch", "libtorch") for p in torch.conda_packages)
    bundles = bool(wheels) or (local.startswith("cu") and not conda_torch)
    if not bundles:
        return None
    system = [lib for lib in facts.host.cuda_libs if lib.source == "ld.so.cache" and lib.family != "cuda"]
    toolkits = [t for t in facts.toolkits if t.version is not None]
    deep_error = torch.deep.error if torch.deep is not None and not torch.deep.ok else None
    failure = torch.error or deep_error
    ours = f" ({len(wheels)} nvidia-* CUDA wheels)" if wheels else f" (the {local} wheel bundles them)"
    if failure and (system or toolkits):
        found = [f"{lib.path} ({lib.family} {lib.version or '?'})" for lib in system]
        found += [
            f"a system CUDA {t.version} toolkit (nvcc; its lib64 is usually on LD_LIBRARY_PATH)"
            for t in toolkits
        ]
        dirs = sorted({os.path.dirname(lib.path) for lib in system if not _DISTRO_LIB_RE.match(lib.path)})
        dirs += [f"{t.root}/lib64" for t in toolkits if t.root]
        return CheckResult(
            cid,
            Status.FAIL,
            f"torch fails to load with system CUDA libraries beside its own{ours}: {headline(found)}",
            detail=join_lines(
                f"the failure: {failure}",
                *found,
                "The loader searches LD_LIBRARY_PATH before the torch wheel's own library folders, so "
                "a system cuDNN, NCCL, cuBLAS or nvJitLink of another version there is loaded instead of "
                "the one torch was built with: 'undefined symbol', 'Could not load library libcudnn…', "
                "'cuDNN version incompatibility' (pytorch/pytorch#119989, #111469, #80637).",
            ),
            fix=_LD_FIX.format(dirs=": " + ", ".join(dirs) if dirs else ""),
        )
    suspects = []
    for lib in system:
        if _DISTRO_LIB_RE.match(lib.path):
            continue
        wheel = torch.wheel_lib(lib.family)
        theirs = wheel.version if wheel is not None else None
        if (
            theirs is not None
            and lib.version is not None
            and len(lib.version.release) >= 2
            and lib.version.release == theirs.release[: len(lib.version.release)]
        ):
            continue  # the wheel's own version: harmless wherever it is
        bundled = f"{wheel.name} {theirs}" if wheel is not None else f"the {local} wheel's own {lib.family}"
        it_is = f"{lib.family} {lib.version}" if lib.version is not None else lib.family
        suspects.append(f"{lib.path} ({it_is}) would shadow {bundled} if its folder is on LD_LIBRARY_PATH")
    if not suspects:
        return None
    dirs = sorted({os.path.dirname(lib.path) for lib in system if not _DISTRO_LIB_RE.match(lib.path)})
    return CheckResult(
        cid,
        Status.WARN,
        headline(suspects),
        detail=join_lines(
            *suspects,
            "collect_env lists the cuDNN files of the ld.so cache; one outside the system's library "
            "folders is usually there for LD_LIBRARY_PATH (a toolkit's lib64, an environment module), "
            "which the loader searches before the torch wheel's own folders. The report does not show "
            "LD_LIBRARY_PATH: check `echo $LD_LIBRARY_PATH`.",
        ),
        fix=_LD_FIX.format(dirs=": " + ", ".join(dirs) if dirs else ""),
    )


def _shadow_reason(lib: SharedLib, facts: Facts) -> tuple[str, bool]:
    """Why a library outside the wheel breaks torch ("" when it does not), and whether it fails."""
    torch = facts.torch
    if lib.family == "cuda":
        if "/stubs" in lib.path:
            return "is the toolkit's link-time stub, not the driver's libcuda", True
        return "", False
    if torch.cuda is None:
        return "", False
    wheel = torch.wheel_lib(lib.family)
    if wheel is not None and wheel.version is not None:
        if (
            lib.version is not None
            and lib.version.release == wheel.version.release[: len(lib.version.release)]
        ):
            return "", False  # the same version as the wheel's: harmless
        it_is = f" (it is {lib.version})" if lib.version else ""
        severe = lib.version is None or lib.version.major != wheel.version.major
        return f"shadows {wheel.name} {wheel.version} that torch bundles{it_is}", severe
    if lib.family == "cudart" and lib.version is not None and lib.version.major != torch.cuda.major:
        return f"is CUDA runtime {lib.version}; torch is built with CUDA {torch.cuda}", True
    return "", False


def _lib_line(lib: SharedLib) -> str:
    return f"{lib.path} ({lib.source}, {lib.family} {lib.version or '?'})"
