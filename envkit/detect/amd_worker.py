"""AMD's ``amdsmi`` bindings asked in a child process: ``python envkit/detect/amd_worker.py MARKER``.

As with NVML (envkit/detect/nvml_worker.py): ``libamd_smi.so`` is a C library loaded into its
caller; one that crashes or spins must cost this child, not envkit. The record is printed between
MARKER twice; envkit.detect.amd_tools.parse_amdsmi_record reads it. Standard library and amdsmi
only (the bindings ROCm ships, and the ``amdsmi`` package), runnable on Python 3.8. Calls follow
ROCm/amdsmi py-interface/amdsmi_interface.py: amdsmi_init, amdsmi_get_processor_handles,
amdsmi_get_gpu_asic_info, amdsmi_get_gpu_device_bdf, amdsmi_get_gpu_driver_info,
amdsmi_get_gpu_vram_info, amdsmi_shut_down. A call that fails leaves its fields out.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
from typing import Any, Callable


def _ask(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 -- an unsupported field is left out, never a crash
        return None


def record_amdsmi(amdsmi: Any) -> dict[str, Any]:
    """What the bindings say: {"gpus": [...], "rocm_version": ...}."""
    amdsmi.amdsmi_init()
    try:
        gpus: list[dict[str, Any]] = []
        for handle in amdsmi.amdsmi_get_processor_handles()[:256]:
            gpu: dict[str, Any] = {}
            asic = _ask(amdsmi.amdsmi_get_gpu_asic_info, handle) or {}
            for key in ("market_name", "device_id", "target_graphics_version"):
                if key in asic:
                    gpu[key] = str(asic[key])
            bdf = _ask(amdsmi.amdsmi_get_gpu_device_bdf, handle)
            if bdf:
                gpu["bdf"] = str(bdf)
            driver = _ask(amdsmi.amdsmi_get_gpu_driver_info, handle) or {}
            if driver.get("driver_version"):
                gpu["driver_version"] = str(driver["driver_version"])
            vram = _ask(amdsmi.amdsmi_get_gpu_vram_info, handle) or {}
            if isinstance(vram.get("vram_size"), int):
                gpu["vram_mb"] = vram["vram_size"]
            gpus.append(gpu)
        record: dict[str, Any] = {"gpus": gpus}
        get_rocm = getattr(amdsmi, "amdsmi_get_rocm_version", None)
        rocm = _ask(get_rocm) if get_rocm is not None else None
        if isinstance(rocm, (tuple, list)) and len(rocm) == 2 and rocm[0]:
            record["rocm_version"] = str(rocm[1])
        return record
    finally:
        _ask(amdsmi.amdsmi_shut_down)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: amd_worker.py MARKER\n")
        return 2
    marker = argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or os.curdir) == here:
        del sys.path[0]  # never let envkit/detect/*.py shadow what amdsmi imports
    faulthandler.enable()
    try:
        import amdsmi  # type: ignore[import-not-found]
    except ImportError as exc:
        sys.stderr.write(f"cannot import amdsmi: {exc}\n")
        return 3
    try:
        record = record_amdsmi(amdsmi)
    except Exception as exc:  # noqa: BLE001 -- amdsmi_init failed: the parent says why
        sys.stderr.write(f"amdsmi: {type(exc).__name__}: {exc}\n")
        return 4
    sys.stdout.write(marker + json.dumps(record) + marker + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
