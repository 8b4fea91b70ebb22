"""verify.extensions: each extension imports beside this torch, and where it has a kernel, one small
call runs on the verify device and agrees with torch's own result (flash-attn's forward, xformers'
memory-efficient attention, bitsandbytes' 8-bit matmul).

Config: {"extensions": [{"name": "flash-attn", "module": "flash_attn", "kernel": "flash_attn_func"}]}.
An import that fails is classified by the loader's words: "undefined symbol" (built for another
torch, or another C++ ABI), "cannot open shared object file" (a CUDA runtime or library it needs is
not there), "no kernel image" (no code for this GPU).
"""

from __future__ import annotations

import importlib
import re
import time
from typing import Any, Callable, Dict, List, Optional

from envkit_probe_util import error_text, import_torch, run


def classify(text: str) -> str:
    if "undefined symbol" in text:
        symbol = (
            text.split("undefined symbol:", 1)[1].strip().split()[0] if "undefined symbol:" in text else ""
        )
        # std::string is "Ss" in the old C++ ABI's mangling and "NSt7__cxx1112basic_string…" in the
        # C++11 one: a missing symbol with either was built with the other ABI than torch's.
        if "__cxx11" in symbol or re.search(r"Ss(?:[A-Z_0-9]|$)", symbol):
            return "cxx11_abi"
        return "undefined_symbol"
    if "cannot open shared object file" in text:
        return "missing_library"
    if "no kernel image" in text or "not compatible with the current" in text:
        return "no_kernel_image"
    if "No module named" in text:
        return "missing"
    return "import_error"


def _attention_inputs(torch: Any, device: Any) -> Any:
    gen = torch.Generator(device="cpu").manual_seed(0)
    shape = (1, 16, 2, 64)  # batch, sequence, heads, head dim
    q, k, v = (torch.randn(shape, generator=gen, dtype=torch.float32) for _ in range(3))
    return [t.to(device=device, dtype=torch.float16) for t in (q, k, v)]


def _reference(torch: Any, q: Any, k: Any, v: Any, causal: bool) -> Any:
    # (batch, seq, heads, dim) -> (batch, heads, seq, dim) for torch's own attention, in float32.
    qt, kt, vt = (t.float().transpose(1, 2) for t in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    return out.transpose(1, 2)


def flash_attn_func(torch: Any, module: Any, device: Any) -> str:
    fa = module.flash_attn_func

    q, k, v = _attention_inputs(torch, device)
    out = fa(q, k, v, causal=True)
    torch.cuda.synchronize(device)
    diff = float((out.float() - _reference(torch, q, k, v, True)).abs().max())
    if diff > 2e-2:
        raise AssertionError("flash_attn_func differs from torch's attention by %.4f" % diff)
    return "flash_attn_func forward (fp16, 1x16x2x64) matches torch's attention (max diff %.1e)" % diff


def memory_efficient_attention(torch: Any, module: Any, device: Any) -> str:
    xops = importlib.import_module("xformers.ops")

    q, k, v = _attention_inputs(torch, device)
    out = xops.memory_efficient_attention(q, k, v)
    torch.cuda.synchronize(device)
    diff = float((out.float() - _reference(torch, q, k, v, False)).abs().max())
    if diff > 2e-2:
        raise AssertionError("memory_efficient_attention differs from torch's attention by %.4f" % diff)
    return "memory_efficient_attention (fp16, 1x16x2x64) matches torch's attention (max diff %.1e)" % diff


def int8_matmul(torch: Any, module: Any, device: Any) -> str:
    bnb = module
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 64, bias=False).half()
    int8 = bnb.nn.Linear8bitLt(64, 64, bias=False, has_fp16_weights=False, threshold=0.0)
    int8.load_state_dict(linear.state_dict())
    int8 = int8.to(device)  # quantizes the weights to int8
    x = torch.randn(4, 64).half()
    out = int8(x.to(device)).float().cpu()
    expect = linear.float()(x.float())
    rel = float((out - expect).norm() / expect.norm())
    if rel > 0.05:
        raise AssertionError("the int8 matmul is off by %.3f (relative)" % rel)
    return "8-bit matmul (Linear8bitLt 64x64) within %.3f of fp32" % rel


KERNELS: Dict[str, Callable[[Any, Any, Any], str]] = {
    "flash_attn_func": flash_attn_func,
    "memory_efficient_attention": memory_efficient_attention,
    "int8_matmul": int8_matmul,
}


def one(torch: Any, ext: Dict[str, Any], device: Optional[Any]) -> Dict[str, Any]:
    found: Dict[str, Any] = {"name": ext.get("name"), "module": ext.get("module")}
    start = time.monotonic()
    try:
        module = importlib.import_module(str(ext.get("module")))
    except BaseException as exc:  # ImportError, OSError from the loader, RuntimeError from init
        text = error_text(exc, 4)
        found.update({"ok": False, "stage": "import", "error": text, "failure_class": classify(text)})
        return found
    found["version"] = str(getattr(module, "__version__", "") or "")
    found["import_s"] = round(time.monotonic() - start, 3)
    kernel = KERNELS.get(str(ext.get("kernel") or ""))
    if kernel is None:
        found.update({"ok": True, "kernel": None})
        return found
    if device is None:
        found.update({"ok": True, "kernel": "not run: no CUDA device"})
        return found
    try:
        found.update({"ok": True, "kernel": kernel(torch, module, device)})
    except BaseException as exc:
        text = error_text(exc, 4)
        found.update({"ok": False, "stage": "kernel", "error": text, "failure_class": classify(text)})
    return found


def main(config: Dict[str, Any]) -> Dict[str, Any]:
    torch, import_s, warnings = import_torch()
    device = torch.device("cuda", 0) if torch.cuda.is_available() else None
    results: List[Dict[str, Any]] = [one(torch, ext, device) for ext in config.get("extensions") or []]
    metrics: Dict[str, Any] = {"torch": torch.__version__, "import_s": import_s, "extensions": results}
    failed = [r for r in results if not r.get("ok")]
    if failed:
        first = failed[0]
        lines = ["%s: %s (%s)" % (r["name"], r.get("error", ""), r.get("failure_class")) for r in failed]
        return {
            "status": "fail",
            "summary": "%s does not %s beside torch %s: %s"
            % (
                first["name"],
                "import" if first.get("stage") == "import" else "run its kernel",
                torch.__version__,
                str(first.get("error", "")).splitlines()[-1][:160],
            ),
            "detail": "\n".join(lines + warnings),
            "failure_class": first.get("failure_class"),
            "metrics": metrics,
        }
    ran = [r for r in results if r.get("kernel") and not str(r["kernel"]).startswith("not run")]
    where = "on %s" % torch.cuda.get_device_name(0) if device is not None else "(no CUDA device: import only)"
    return {
        "status": "pass",
        "summary": "%d extension(s) import beside torch %s; %d kernel(s) ran %s"
        % (len(results), torch.__version__, len(ran), where),
        "detail": "\n".join(
            "%s %s: %s" % (r["name"], r.get("version", ""), r.get("kernel") or "imported") for r in results
        ),
        "metrics": metrics,
    }


if __name__ == "__main__":
    run(main)
