"""verify.device: torch imports, CUDA works, torch sees the GPUs NVML sees, the build has code for
each of them, and a tiny kernel runs on each ("no kernel image is available" shows up here).

Config: {"nvml_gpus": int | null}, the GPUs NVML lets this process see.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List

from envkit_probe_util import covered, error_text, import_torch, run


def check_device(torch: Any, index: int) -> Dict[str, Any]:
    name = torch.cuda.get_device_name(index)
    major, minor = torch.cuda.get_device_capability(index)
    info: Dict[str, Any] = {"index": index, "name": name, "cc": "%d.%d" % (major, minor)}
    start = time.monotonic()
    try:
        device = torch.device("cuda", index)
        a = torch.arange(1024, device=device, dtype=torch.float32)
        total = float((a * 2).sum().item())
        x = torch.randn(64, 64, device=device)
        product = (x @ x).double().cpu()
        expect = x.double().cpu() @ x.double().cpu()
        torch.cuda.synchronize(device)
        info["ok"] = total == 2 * 1023 * 1024 / 2 and bool(
            torch.allclose(product, expect, rtol=1e-2, atol=1e-2)
        )
        if not info["ok"]:
            info["error"] = "wrong results from a tiny kernel"
    except Exception as exc:  # "no kernel image is available for execution on the device", …
        info["ok"] = False
        info["error"] = error_text(exc, 3)
    info["kernel_ms"] = round((time.monotonic() - start) * 1000, 1)
    return info


def main(config: Dict[str, Any]) -> Dict[str, Any]:
    torch, import_s, warnings = import_torch()
    metrics: Dict[str, Any] = {
        "import_s": import_s,
        "torch": torch.__version__,
        "cuda_build": torch.version.cuda,
    }
    nvml = config.get("nvml_gpus")
    available = bool(torch.cuda.is_available())
    if not available:
        # A matmul checked against plain Python: a broken BLAS or CPU dispatch shows up here.
        rows = [[float(i * 8 + j) for j in range(8)] for i in range(8)]
        expect = [[sum(rows[i][k] * rows[k][j] for k in range(8)) for j in range(8)] for i in range(8)]
        got = (torch.tensor(rows, dtype=torch.float64) @ torch.tensor(rows, dtype=torch.float64)).tolist()
        ok = got == expect
        if nvml:
            why = "a CPU-only build" if torch.version.cuda is None else "CUDA is not available"
            return {
                "status": "fail",
                "summary": "torch %s is %s, but NVML sees %d GPU(s)" % (torch.__version__, why, nvml),
                "detail": "\n".join(warnings),
                "failure_class": "cpu_build" if torch.version.cuda is None else "cuda_unavailable",
                "metrics": metrics,
            }
        return {
            "status": "pass" if ok else "fail",
            "summary": "torch %s imports and computes on the CPU (no CUDA device)" % torch.__version__,
            "metrics": metrics,
        }
    count = torch.cuda.device_count()
    arch_list: List[str] = list(torch.cuda.get_arch_list())
    metrics.update({"device_count": count, "arch_list": arch_list})
    devices = [check_device(torch, i) for i in range(count)]
    metrics["devices"] = devices
    problems = []
    if nvml is not None and count != nvml:
        problems.append("torch sees %d GPU(s), NVML sees %d" % (count, nvml))
    for d in devices:
        major, minor = (int(p) for p in d["cc"].split("."))
        if not covered(arch_list, major, minor):
            problems.append(
                "GPU %d (%s, sm_%d%d) is not in the build's architectures"
                % (d["index"], d["name"], major, minor)
            )
        if not d["ok"]:
            problems.append("GPU %d (%s): %s" % (d["index"], d["name"], d.get("error", "failed")))
    if problems:
        text = "\n".join(problems + warnings)
        kind = "no_kernel_image" if "no kernel image" in text or "not in the build" in text else "device"
        return {
            "status": "fail",
            "summary": problems[0],
            "detail": text,
            "failure_class": kind,
            "metrics": metrics,
        }
    names = sorted({d["name"] for d in devices})
    return {
        "status": "pass",
        "summary": "%d GPU(s) run kernels with torch %s (%s)" % (count, torch.__version__, ", ".join(names)),
        "metrics": metrics,
    }


if __name__ == "__main__":
    run(main)
