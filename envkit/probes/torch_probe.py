"""Import torch in this interpreter and report what the build can do (``envkit doctor --deep``).

Runs in the TARGET interpreter (Python >= 3.8, stdlib + torch, nothing from envkit) and prints one
JSON object between the marker given as argv[1]. An import error is reported in the answer; a crash
leaves no answer, and the caller reports the crash.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
import warnings
from typing import Any, Dict


def main() -> None:
    marker = sys.argv[1] if len(sys.argv) > 1 else "@@"
    start = time.monotonic()
    info: Dict[str, Any] = {"ok": False}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            import torch
        except BaseException as exc:  # a broken install can raise anything, even SystemExit
            lines = traceback.format_exception_only(type(exc), exc)
            info["error"] = "import torch failed: " + "".join(lines).strip()
        else:
            info.update(describe(torch))
            info["ok"] = True
    info["warnings"] = sorted({str(w.message).strip()[:300] for w in caught})
    info["duration_s"] = round(time.monotonic() - start, 3)
    sys.stdout.write(marker + json.dumps(info) + marker + "\n")
    sys.stdout.flush()


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
            # including_emulation=False: on T4/V100 recent torch otherwise says True through
            # emulation (pytorch#124996).
            info["bf16"] = bool(cuda.is_bf16_supported(including_emulation=False))
        except TypeError:
            info["bf16"] = bool(cuda.is_bf16_supported())
        except Exception:
            info["bf16"] = None
    info["devices"] = devices
    return info


if __name__ == "__main__":
    main()
