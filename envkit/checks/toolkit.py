"""toolkit.nvcc: the CUDA toolkit that extension builds will use, against torch and the driver.

torch.utils.cpp_extension picks the toolkit from CUDA_HOME, then CUDA_PATH, then nvcc on PATH,
then /usr/local/cuda, and refuses a toolkit whose major version differs from the one torch was
built with ("The detected CUDA version (X) mismatches the version that was used to compile
PyTorch (Y)"); a minor difference only warns there. Code nvcc builds also needs a driver that
supports the toolkit's CUDA version.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final, Optional

from envkit.checks._common import fix_lines, headline, join_lines
from envkit.report import CheckResult, Status

if TYPE_CHECKING:
    from envkit.facts import Facts, ToolkitFacts

__all__ = ["build_toolkit", "check_toolkit_nvcc", "pick_build_toolkit"]

ID: Final = "toolkit.nvcc"


def build_toolkit(facts: Facts) -> Optional[ToolkitFacts]:
    """The toolkit a torch extension build would use, found the way cpp_extension finds it."""
    return pick_build_toolkit(facts.toolkits)


def pick_build_toolkit(toolkits: tuple[ToolkitFacts, ...]) -> Optional[ToolkitFacts]:
    """Of the toolkits found, the one cpp_extension takes (CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda)."""
    for source in ("CUDA_HOME", "CUDA_PATH", "PATH", "/usr/local/cuda"):
        for toolkit in toolkits:
            if source in toolkit.sources:
                return toolkit
    return toolkits[0] if toolkits else None


def _describe(t: ToolkitFacts) -> str:
    version = t.version or "unknown version"
    return f"nvcc {version} at {t.nvcc} (found via {', '.join(t.sources)})"


def check_toolkit_nvcc(facts: Facts) -> CheckResult:
    toolkit = build_toolkit(facts)
    torch_cuda = facts.torch.cuda
    all_found = [_describe(t) for t in facts.toolkits]
    if toolkit is None:
        need = f" (torch is built with CUDA {torch_cuda})" if torch_cuda else ""
        return CheckResult(
            ID,
            Status.SKIP,
            "no CUDA toolkit (nvcc) found; only needed to build CUDA extensions" + need,
            detail="looked on PATH, in CUDA_HOME, CUDA_PATH, /usr/local/cuda*, /opt/cuda and the "
            "active environments",
        )
    if toolkit.version is None:
        return CheckResult(
            ID,
            Status.WARN,
            f"{toolkit.nvcc} does not report a CUDA version",
            detail=join_lines(toolkit.error, *all_found),
            fix=f"run `{toolkit.nvcc} --version` to see why; fix or remove that toolkit",
        )
    version = toolkit.version
    warnings: list[str] = []
    fixes: list[str] = []
    if torch_cuda is not None and version.major != torch_cuda.major:
        warnings.append(
            f"nvcc {version} vs torch built with CUDA {torch_cuda}: building CUDA extensions "
            f'fails ("The detected CUDA version ({version.major}.{version.minor}) mismatches the '
            f'version that was used to compile PyTorch ({torch_cuda})")'
        )
        match = next((t for t in facts.toolkits if t.version and t.version.major == torch_cuda.major), None)
        if match is not None and match.root:
            fixes.append(f"export CUDA_HOME={match.root} PATH={match.root}/bin:$PATH")
        else:
            fixes.append(
                f"install a CUDA {torch_cuda.major}.x toolkit (e.g. {torch_cuda}) and point "
                f"CUDA_HOME at it, or use a torch build for CUDA {version.major}.x"
            )
    driver_cuda = facts.driver.cuda_version
    if driver_cuda is not None and (version.major, version.minor) > (
        driver_cuda.major,
        driver_cuda.minor,
    ):
        warnings.append(
            f"nvcc {version} is newer than the driver's CUDA {driver_cuda}: what it builds may "
            'not load ("the provided PTX was compiled with an unsupported toolchain")'
        )
        fixes.append(
            f"upgrade the driver to one for CUDA {version.major}.{version.minor}, "
            f"or build with a toolkit ≤ {driver_cuda}"
        )
    path_toolkit = next((t for t in facts.toolkits if t.on_path), None)
    if path_toolkit is not None and path_toolkit is not toolkit and path_toolkit.version != version:
        warnings.append(
            f"nvcc on PATH is {path_toolkit.version} but builds use {version} "
            f"({', '.join(s for s in toolkit.sources if s != 'PATH')})"
        )
        root = toolkit.root or os.path.dirname(os.path.dirname(toolkit.nvcc))
        fixes.append(f"export PATH={root}/bin:$PATH  (or unset CUDA_HOME to build with the PATH one)")
    if warnings:
        return CheckResult(
            ID,
            Status.WARN,
            headline(warnings),
            detail=join_lines(*warnings, "", *all_found),
            fix=fix_lines(fixes),
        )
    against = f", matches torch's CUDA {torch_cuda.major}.x" if torch_cuda else ""
    return CheckResult(
        ID,
        Status.PASS,
        f"nvcc {version} ({toolkit.root or toolkit.nvcc}){against}",
        detail=join_lines(*all_found),
    )
