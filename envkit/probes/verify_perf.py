"""verify.perf (opt-in): dense matmul TFLOP/s (bf16, fp16, tf32) and device-to-device copy
bandwidth on each GPU, for the caller to compare with the datasheet peak. On a machine without a GPU,
fp32 matmul and memory-copy figures of the CPU (there is no datasheet to compare with).

Timing uses CUDA events after a warm-up; FLOPs of an n×n matmul are 2n³; a copy moves 2× its bytes
(read + write), as nvbandwidth and stas00's tests count it.

Config: {"matmul_n": int, "copy_mib": int, "iters": int}
"""

from __future__ import annotations

import statistics
from typing import Any, Dict, List

from envkit_probe_util import error_text, import_torch, median_seconds, run


def cuda_time(torch: Any, fn: Any, iters: int) -> float:
    """Median seconds of ``fn()`` on the current stream, by CUDA events."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    samples: List[float] = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(float(start.elapsed_time(end)) / 1000.0)
    return statistics.median(samples)


def gpu(torch: Any, index: int, n: int, copy_mib: int, iters: int) -> Dict[str, Any]:
    torch.cuda.set_device(index)
    device = torch.device("cuda", index)
    result: Dict[str, Any] = {"index": index, "name": torch.cuda.get_device_name(index)}
    for label, dtype, tf32 in (
        ("bf16", torch.bfloat16, False),
        ("fp16", torch.float16, False),
        ("tf32", torch.float32, True),
    ):
        try:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a = torch.randn(n, n, device=device, dtype=dtype)
            b = torch.randn(n, n, device=device, dtype=dtype)
            seconds = cuda_time(torch, lambda a=a, b=b: torch.matmul(a, b), iters)
            result["%s_tflops" % label] = round(2 * n**3 / seconds / 1e12, 1)
            del a, b
        except Exception as exc:
            result["%s_error" % label] = error_text(exc, 2)
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        src = torch.empty(copy_mib * 1024 * 1024, dtype=torch.uint8, device=device)
        dst = torch.empty_like(src)
        seconds = cuda_time(torch, lambda: dst.copy_(src), iters)
        result["d2d_gbs"] = round(2 * src.numel() / seconds / 1e9, 1)
    except Exception as exc:
        result["d2d_error"] = error_text(exc, 2)
    torch.cuda.empty_cache()
    return result


def cpu(torch: Any, n: int, copy_mib: int, iters: int) -> Dict[str, Any]:
    a = torch.randn(n, n)
    b = torch.randn(n, n)
    matmul_s = median_seconds(lambda: torch.matmul(a, b), iters, warmup=1)
    src = torch.empty(copy_mib * 1024 * 1024, dtype=torch.uint8)
    dst = torch.empty_like(src)
    copy_s = median_seconds(lambda: dst.copy_(src), iters, warmup=1)
    return {
        "fp32_gflops": round(2 * n**3 / matmul_s / 1e9, 1),
        "copy_gbs": round(2 * src.numel() / copy_s / 1e9, 1),
        "threads": torch.get_num_threads(),
    }


def main(config: Dict[str, Any]) -> Dict[str, Any]:
    torch, import_s, _warnings = import_torch()
    iters = int(config.get("iters", 10))
    if torch.cuda.is_available():
        n = int(config.get("matmul_n", 8192))
        copy_mib = int(config.get("copy_mib", 1024))
        devices = [gpu(torch, i, n, copy_mib, iters) for i in range(torch.cuda.device_count())]
        return {
            "status": "pass",
            "summary": "measured %d GPU(s)" % len(devices),
            "metrics": {"import_s": import_s, "matmul_n": n, "devices": devices},
        }
    n = int(config.get("matmul_n", 1024))
    figures = cpu(torch, n, int(config.get("copy_mib", 256)), iters)
    return {
        "status": "pass",
        "summary": "CPU: fp32 matmul %.1f GFLOP/s, memory copy %.1f GB/s (no GPU: no datasheet peak)"
        % (figures["fp32_gflops"], figures["copy_gbs"]),
        "metrics": {"import_s": import_s, "matmul_n": n, "cpu": figures},
    }


if __name__ == "__main__":
    run(main)
