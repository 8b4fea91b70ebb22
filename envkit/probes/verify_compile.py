"""verify.compile: torch.compile (inductor) of a small transformer block (layer norm, attention, MLP)
on each device type; outputs match eager; cold and warm compile time and the speedup.

A failure is classified by what inductor raised (pytorch issues #129351, #97146, #90768, #143406):
no C/C++ compiler, missing Python headers, Triton missing, a GPU below compute capability 7.0 for
Triton, a PTX toolchain newer than the driver. The cache folders are the caller's (TORCHINDUCTOR_
CACHE_DIR, TRITON_CACHE_DIR): a fresh one makes the first compile cold.

Config: {"devices": ["cpu", "cuda"] (default: cuda when available, else cpu; envkit passes the
devices it chose, see envkit.verify.compile_devices), "iters": int}
"""

from __future__ import annotations

import os
import re
import shutil
import sysconfig
import time
from typing import Any, Dict, List, Optional

from envkit_probe_util import compare_speed, error_text, import_torch, run

# (class, pattern in the error text), first match wins.
CLASSES = [
    ("no_compiler", r"InvalidCxxCompiler|No working C\+\+ compiler|Failed to find C compiler"),
    ("no_compiler", r"C compiler not found|unable to execute '(gcc|cc|g\+\+|clang)'"),
    ("no_compiler", r"(gcc|g\+\+|cc|clang): (command )?not found"),
    ("no_python_headers", r"Python\.h: No such file|fatal error: Python\.h"),
    ("triton_missing", r"TritonMissing|Cannot find a working triton installation|No module named 'triton'"),
    ("gpu_too_old", r"too old to be supported by the triton GPU compiler|Found .* which is too old"),
    ("ptx_toolchain", r"PTX was compiled with an unsupported toolchain|CUDA_ERROR_UNSUPPORTED_PTX_VERSION"),
]


def classify(text: str) -> Optional[str]:
    for name, pattern in CLASSES:
        if re.search(pattern, text):
            return name
    return None


def make_block(torch: Any, dim: int = 64) -> Any:
    nn = torch.nn
    functional = torch.nn.functional
    module: Any = nn.Module

    class Block(module):  # type: ignore[misc]  # a pre-norm transformer block, as real models compile
        def __init__(self, dim: int = 64, heads: int = 4) -> None:
            super().__init__()
            self.heads = heads
            self.norm1 = nn.LayerNorm(dim)
            self.norm2 = nn.LayerNorm(dim)
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x: Any) -> Any:
            b, t, d = x.shape
            q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
            q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
            attn = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
            return x + self.mlp(self.norm2(x))

    return Block(dim)


def prerequisites(torch: Any, device: str) -> List[str]:
    """What inductor will need, checked before compiling: the failure then says why."""
    missing = []
    cxx = os.environ.get("CXX") or "g++"
    if device == "cpu" and not (shutil.which(cxx) or shutil.which("clang++") or shutil.which("c++")):
        missing.append("no C++ compiler on PATH (%s)" % cxx)
    include = sysconfig.get_paths().get("include") or ""
    if not os.path.isfile(os.path.join(include, "Python.h")):
        missing.append("Python.h is missing from %s" % include)
    if device == "cuda":
        try:
            import triton  # noqa: F401
        except Exception:
            missing.append("triton is not importable")
        major, _minor = torch.cuda.get_device_capability()
        if major < 7:
            missing.append("the GPU's compute capability %d.x is below Triton's 7.0" % major)
    return missing


def compile_on(torch: Any, device: str, iters: int) -> Dict[str, Any]:
    result: Dict[str, Any] = {"device": device}
    missing = prerequisites(torch, device)
    if missing:
        result["prerequisites"] = missing
    torch.manual_seed(0)
    model = make_block(torch, dim=128).to(device).eval()
    # Enough work per call to time (4 x 32 x 64 was a few microseconds of arithmetic in ~100 us of
    # launches: 0.01x, 1.20x, 1.08x and 238x on four runs of one machine).
    x = torch.randn(8, 64, 128, device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    try:
        with torch.no_grad():
            expect = model(x)
            torch._dynamo.reset()
            start = time.perf_counter()
            compiled = torch.compile(model, backend="inductor")
            got = compiled(x)
            sync()
            result["cold_compile_s"] = round(time.perf_counter() - start, 3)
            torch._dynamo.reset()  # recompile: dynamo again, inductor's graph cache this time
            start = time.perf_counter()
            compiled = torch.compile(model, backend="inductor")
            compiled(x)
            sync()
            result["warm_compile_s"] = round(time.perf_counter() - start, 3)
            torch.testing.assert_close(got, expect, rtol=1e-3, atol=1e-3)
            result.update(compare_speed(lambda: model(x), lambda: compiled(x), samples=iters, sync=sync))
            result["ok"] = True
    except Exception as exc:
        text = error_text(exc, 8)
        result["ok"] = False
        result["error"] = text
        result["failure_class"] = classify(text + "\n" + "\n".join(missing)) or "unknown"
    return result


def speed_text(result: Dict[str, Any]) -> str:
    """The speedup as a result (with its spread), or why it is none: a figure whose spread is not
    smaller than itself says nothing."""
    speedup, spread = result.get("speedup"), result.get("speedup_spread")
    if result.get("speedup_ok") and speedup is not None and spread is not None:
        return "%.2fx eager (±%.2f, %d samples)" % (speedup, spread, result.get("samples", 0))
    if speedup is None or spread is None:
        return "speedup not measured"
    return "speedup not measured: its spread (±%.2f) is not smaller than the figure (%.2fx)" % (
        spread,
        speedup,
    )


def main(config: Dict[str, Any]) -> Dict[str, Any]:
    torch, import_s, _warnings = import_torch()
    if not hasattr(torch, "compile"):
        return {"status": "skip", "summary": "torch %s has no torch.compile (needs 2.0)" % torch.__version__}
    # On a GPU node the CPU compile is the slow half and says nothing of the GPU path: not by default.
    devices = config.get("devices") or (["cuda"] if torch.cuda.is_available() else ["cpu"])
    iters = max(4, int(config.get("iters", 7)))  # timing samples, each of many calls
    results = [compile_on(torch, d, iters) for d in devices]
    metrics: Dict[str, Any] = {"import_s": import_s, "torch": torch.__version__, "devices": results}
    failed = [r for r in results if not r["ok"]]
    if failed:
        first = failed[0]
        return {
            "status": "fail",
            "summary": "torch.compile fails on %s: %s"
            % (first["device"], first["failure_class"].replace("_", " ")),
            "detail": "\n".join([first["error"], *first.get("prerequisites", [])]),
            "failure_class": first["failure_class"],
            "metrics": metrics,
        }
    parts = [
        "%s: cold %.1f s, warm %.2f s, %s"
        % (r["device"], r["cold_compile_s"], r["warm_compile_s"], speed_text(r))
        for r in results
    ]
    return {"status": "pass", "summary": "torch.compile works (" + "; ".join(parts) + ")", "metrics": metrics}


if __name__ == "__main__":
    run(main)
