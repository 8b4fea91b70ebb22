"""envkit: get PyTorch 2 working on NVIDIA GPUs, and prove it.

The Python API (stable: the names in ``__all__``)::

    import envkit

    report = envkit.doctor()                      # envkit.Report: facts, checks, cause
    plan = envkit.make_plan(driver="535.104.05", gpus=["sm_90"], python="3.11")
    print(plan.pip_command())

Everything is imported on first use, so ``import envkit`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# Each public name and the module it lives in. (No TYPE_CHECKING imports of them here: the import
# contracts read those as imports, and every module that imports __version__ would depend on all.)
_LAZY = {
    "doctor": "envkit.api",
    "make_plan": "envkit.api",
    "run_verify": "envkit.api",
    "preflight": "envkit.api",
    "Report": "envkit.report",
    "CheckResult": "envkit.report",
    "Status": "envkit.report",
    "Facts": "envkit.facts",
    "Plan": "envkit.resolve.plan",
    "PlanFlags": "envkit.resolve.plan",
    "Rejection": "envkit.resolve.plan",
    "RunProgress": "envkit.report",
    "EnvkitError": "envkit.errors",
    "InputError": "envkit.errors",
    "NoBuildError": "envkit.errors",
}

__all__ = [
    "CheckResult",
    "EnvkitError",
    "Facts",
    "InputError",
    "NoBuildError",
    "Plan",
    "PlanFlags",
    "Rejection",
    "Report",
    "RunProgress",
    "Status",
    "__version__",
    "doctor",
    "make_plan",
    "preflight",
    "run_verify",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'envkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once imported, an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
