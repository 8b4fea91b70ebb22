"""Import torch in this interpreter and report what the build can do (``envkit doctor --deep``).

Runs in the TARGET interpreter (Python >= 3.8, stdlib + torch, nothing from envkit) and prints one
JSON object between the marker given as argv[1]. An import error is reported in the answer; a crash
leaves no answer, and the caller reports the crash.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Dict

from envkit_probe_util import bf16_native, emit, error_text, read_args


def main() -> None:
    marker, _config = read_args()
    start = time.monotonic()
    info: Dict[str, Any] = {"ok": False}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            import torch
        except BaseException as exc:  # a broken install can raise anything, even SystemExit
            info["error"] = "import torch failed: " + error_text(exc, lines=1000)
        else:
            info.update(describe(torch))
            info["ok"] = True
    # 1000 characters hold torch's longest own warning (the incompatible-device one, with the
    # build's whole arch list), which envkit reads as evidence (envkit.detect.torch_messages).
    info["warnings"] = sorted({str(w.message).strip()[:1000] for w in caught})
    info["duration_s"] = round(time.monotonic() - start, 3)
    emit(marker, info)


def describe(torch: Any) -> Dict[str, Any]:
    info: Dict[str, Any] = {
        "version": torch.__version__,
        "cuda_build": getattr(torch.version, "cuda", None),
    }
    cuda = torch.cuda
    available = bool(cuda.is_available())
    info["cuda_available"] = available
    info["device_count"] = int(cuda.device_count()) if available else 0
    try:
        info["arch_list"] = list(cuda.get_arch_list())
    except Exception:
        info["arch_list"] = []
    try:
        info["cudnn"] = torch.backends.cudnn.version()
    except Exception:
        info["cudnn"] = None
    try:
        nccl = cuda.nccl.version()
        info["nccl"] = ".".join(str(p) for p in nccl) if isinstance(nccl, tuple) else str(nccl)
    except Exception:
        info["nccl"] = None
    devices = []
    if available:
        for i in range(info["device_count"]):
            major, minor = cuda.get_device_capability(i)
            devices.append({"name": cuda.get_device_name(i), "cc": "%d.%d" % (major, minor)})
        try:
            info["bf16"] = bf16_native(torch)
        except Exception:
            info["bf16"] = None
    info["devices"] = devices
    info["xpu_available"] = _xpu_available(torch)
    return info


def _xpu_available(torch: Any) -> Any:
    """torch.xpu.is_available() where this build has the XPU runtime (torch._C._has_xpu), else None:
    a CUDA or CPU build answers without asking (cheap, and nothing to say)."""
    xpu = getattr(torch, "xpu", None)
    if xpu is None or not getattr(torch._C, "_has_xpu", False):
        return None
    try:
        return bool(xpu.is_available())
    except Exception:
        return False


if __name__ == "__main__":
    main()
