"""verify.amp: a few training steps under autocast; the loss must stay finite and fall.

On CUDA: fp16 with a GradScaler (its scale must stay sane), and bf16 where the GPU supports it
natively: torch.cuda.is_bf16_supported(including_emulation=False), since recent torch says True on
T4/V100 through emulation (pytorch#124996). On the CPU: bf16 autocast.

Config: {"steps": int}
"""

from __future__ import annotations

import math
from typing import Any, Dict, List

from envkit_probe_util import bf16_native, error_text, import_torch, run


def train(torch: Any, device: str, dtype: Any, steps: int, scaler: Any = None) -> Dict[str, Any]:
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(256, 64, device=device)
    y = (x[:, :1] * 2.0 + x[:, 1:2] * -1.0).detach()  # a target the model can learn
    losses: List[float] = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=dtype):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        losses.append(float(loss.item()))
    result: Dict[str, Any] = {
        "device": device,
        "dtype": str(dtype).replace("torch.", ""),
        "first_loss": round(losses[0], 5),
        "last_loss": round(losses[-1], 5),
    }
    problems = []
    if not all(math.isfinite(v) for v in losses):
        problems.append("the loss became %s" % next(v for v in losses if not math.isfinite(v)))
    elif not losses[-1] < losses[0] * 0.9:
        problems.append("the loss did not fall (%.4g -> %.4g)" % (losses[0], losses[-1]))
    if scaler is not None:
        scale = float(scaler.get_scale())
        result["scale"] = scale
        # GradScaler starts at 2**16 and halves on every overflow; near 1 it has been overflowing.
        if not math.isfinite(scale) or scale < 1.0:
            problems.append("the GradScaler scale collapsed to %g (gradients overflow every step)" % scale)
    result["ok"] = not problems
    if problems:
        result["error"] = "; ".join(problems)
    return result


def grad_scaler(torch: Any) -> Any:
    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        try:
            return amp.GradScaler("cuda")
        except TypeError:  # torch < 2.3 has no device argument here
            pass
    return torch.cuda.amp.GradScaler()


def main(config: Dict[str, Any]) -> Dict[str, Any]:
    torch, import_s, _warnings = import_torch()
    steps = int(config.get("steps", 12))
    runs: List[Dict[str, Any]] = []
    notes = []
    if torch.cuda.is_available():
        runs.append(
            _guard(lambda: train(torch, "cuda", torch.float16, steps, grad_scaler(torch)), "cuda", "float16")
        )
        if bf16_native(torch):
            runs.append(_guard(lambda: train(torch, "cuda", torch.bfloat16, steps), "cuda", "bfloat16"))
        else:
            notes.append("bf16 skipped: the GPU has no native bf16 (compute capability < 8.0)")
    else:
        runs.append(_guard(lambda: train(torch, "cpu", torch.bfloat16, steps), "cpu", "bfloat16"))
    metrics = {"import_s": import_s, "torch": torch.__version__, "runs": runs, "notes": notes}
    bad = [r for r in runs if not r["ok"]]
    if bad:
        first = bad[0]
        return {
            "status": "fail",
            "summary": "%s autocast on %s: %s"
            % (first["dtype"], first["device"], first["error"].splitlines()[0]),
            "detail": "\n".join(r.get("error", "") for r in bad),
            "failure_class": "amp",
            "metrics": metrics,
        }
    parts = [
        "%s/%s loss %.3g -> %.3g" % (r["device"], r["dtype"], r["first_loss"], r["last_loss"]) for r in runs
    ]
    return {
        "status": "pass",
        "summary": "mixed precision trains (" + "; ".join(parts) + ")",
        "detail": "\n".join(notes),
        "metrics": metrics,
    }


def _guard(fn: Any, device: str, dtype: str) -> Dict[str, Any]:
    try:
        result: Dict[str, Any] = fn()
        return result
    except Exception as exc:
        return {"device": device, "dtype": dtype, "ok": False, "error": error_text(exc, 4)}


if __name__ == "__main__":
    run(main)
