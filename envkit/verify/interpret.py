"""Turn a verify probe's answer (or its crash) into a check result with the fix for its failure class,
and compare measured throughput with the GPU's datasheet peak from the knowledge base."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Optional

from envkit.checks._common import headline, join_lines, pip_command
from envkit.knowledge import load_knowledge
from envkit.report import CheckResult, Status
from envkit.resolve import rules

if TYPE_CHECKING:
    from envkit.facts import Facts
    from envkit.system import ProbeOutcome

__all__ = ["MATMUL_WARN_FRACTION", "MEMORY_WARN_FRACTION", "interpret"]

# verify.perf warns below these fractions of the datasheet peak. Tuned matmuls reach 70–80 % of the
# dense bf16 peak (790 of 989 TFLOP/s on H200 through torch) and device-to-device copies ~75 % of the
# memory bandwidth (3.6 of 4.8 TB/s on H200), so half / 60 % leaves room for clocks and drivers while
# still catching a GPU stuck in a low power state or a throttled one.
MATMUL_WARN_FRACTION: Final = 0.5
MEMORY_WARN_FRACTION: Final = 0.6


def _compile_fix(kind: str, facts: Facts) -> str:
    python = facts.python
    version = python.version if python else None
    if kind == "no_compiler":
        return (
            "install a C/C++ compiler: sudo apt install build-essential (RHEL: sudo dnf install gcc-c++; "
            "conda: conda install -c conda-forge cxx-compiler), or point CXX at one"
        )
    if kind == "no_python_headers":
        dev = f"python{version.major}.{version.minor}-dev" if version else "python3-dev"
        return f"sudo apt install {dev} (RHEL: python3-devel); a conda or uv Python ships Python.h"
    if kind == "triton_missing":
        torch_version = facts.torch.version
        release = load_knowledge().release(torch_version) if torch_version else None
        pin = f"=={release.triton}" if release and release.triton else ""
        return f"{pip_command(facts)} install triton{pin}"
    if kind == "gpu_too_old":
        return (
            "Triton needs compute capability ≥ 7.0: on this GPU use torch.compile(backend='aot_eager') "
            "or run eager"
        )
    if kind == "ptx_toolchain":
        cuda = facts.torch.cuda
        own = rules.driver_floor(load_knowledge(), cuda).toolkit_driver if cuda else None
        return (
            f"upgrade the driver to ≥ {own} (the driver of torch's CUDA {cuda})"
            if own
            else "upgrade the driver"
        )
    return "run the probe's error through the PyTorch issue tracker; `envkit verify --json` has the full text"


def _device_fix(kind: str, facts: Facts) -> str:
    if kind in ("cpu_build", "no_kernel_image"):
        from envkit.checks.compat import plan_fix

        return plan_fix(facts)
    if kind == "crash":  # the probe died: importing torch alone shows where
        return "run `envkit doctor --deep` to see where torch breaks"
    return "run `envkit doctor` (driver.loaded, torch.driver_compat, torch.gpu_arch say why)"


DIST_FIXES: Final = {
    "wrong_values": (
        "the collectives returned wrong values: unset NCCL_ALGO / NCCL_PROTO / NCCL_P2P_DISABLE, check "
        "gpu.health (`envkit doctor`), and confirm with nccl-tests: all_reduce_perf -b 8 -e 1G -c 1"
    ),
    "rendezvous": "make MASTER_ADDR:MASTER_PORT reachable from every node (firewall, interface)",
    "dist": (
        "check NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME (`envkit doctor`, nccl.env), the firewall between "
        "nodes, and that every node runs the same torch; rerun with NCCL_DEBUG=WARN"
    ),
}


def _fix(check: str, kind: Optional[str], facts: Facts) -> str:
    kind = kind or ""
    if check == "compile":
        return _compile_fix(kind, facts)
    if check == "device":
        return _device_fix(kind, facts)
    if check == "dist":
        return DIST_FIXES.get(kind, DIST_FIXES["dist"])
    if check == "amp":
        return "check gpu.health (`envkit doctor`); a loss that diverges only under autocast is a bug"
    if check == "extensions":
        from envkit.checks.extensions import extension_fixes

        return (
            "\n".join(extension_fixes(facts))
            or "run `envkit doctor` (torch.extensions says what each was built for)"
        )
    return "see the detail"


def _perf(result: CheckResult, facts: Facts) -> CheckResult:
    """Compare each GPU's measured figures with its datasheet peak: a new result, whose devices
    carry ``*_of_peak`` beside the measured figures (the probe's result is left as it was)."""
    devices = result.metrics.get("devices")
    if not isinstance(devices, list):
        return result
    knowledge = load_knowledge()
    lows: list[str] = []
    lines: list[str] = []
    rated: list[Any] = []
    for measured in devices:
        if not isinstance(measured, dict):
            rated.append(measured)
            continue
        device = dict(measured)
        rated.append(device)
        gpu = knowledge.gpu_named(str(device.get("name", "")))
        label = f"GPU {device.get('index')} ({device.get('name')})"
        parts = [
            f"{key} {device[key]}"
            for key in ("bf16_tflops", "fp16_tflops", "tf32_tflops", "d2d_gbs")
            if key in device
        ]
        lines.append(f"{label}: " + ", ".join(parts))
        if gpu is None:
            lines.append(f"  no datasheet peak for {device.get('name')} in the knowledge base")
            continue
        for key, peak in (("bf16_tflops", gpu.bf16_tflops), ("fp16_tflops", gpu.fp16_tflops)):
            value = device.get(key)
            if peak and isinstance(value, (int, float)):
                device[key.replace("tflops", "of_peak")] = round(value / peak, 3)
                if value < MATMUL_WARN_FRACTION * peak:
                    lows.append(
                        f"{label}: {key.split('_')[0]} matmul {value} TFLOP/s is below "
                        f"{MATMUL_WARN_FRACTION:.0%} of the {peak:g} peak"
                    )
        bandwidth, copy = gpu.memory_bandwidth_gbs, device.get("d2d_gbs")
        if bandwidth and isinstance(copy, (int, float)):
            device["d2d_of_peak"] = round(copy / bandwidth, 3)
            if copy < MEMORY_WARN_FRACTION * bandwidth:
                lows.append(
                    f"{label}: device copy {copy} GB/s is below {MEMORY_WARN_FRACTION:.0%} "
                    f"of {bandwidth:g} GB/s"
                )
    metrics = {**result.metrics, "devices": rated}
    if lows:
        return CheckResult(
            result.id,
            Status.WARN,
            headline(lows),
            detail=join_lines(*lows, *lines),
            fix="check clocks and power (`nvidia-smi -q -d PERFORMANCE,POWER`), gpu.health, other jobs",
            metrics=metrics,
        )
    summary = "; ".join(lines[:2]) if lines else result.summary
    return CheckResult(result.id, result.status, summary, detail=join_lines(*lines), metrics=metrics)


def _torch_missing(data: dict[str, Any], facts: Facts) -> bool:
    """The probe could not import torch because the interpreter has none (not a broken torch)."""
    said = f"{data.get('detail') or ''} {data.get('error') or ''} {data.get('summary') or ''}"
    inspected = facts.python is not None and facts.python.error is None and facts.torch.error is None
    return "No module named 'torch'" in said or (inspected and not facts.torch.installed)


def _no_torch(cid: str, detail: str, facts: Facts) -> CheckResult:
    """torch is not there: say where, and give the command that installs the build for this machine
    into that interpreter (a venv from it when it is externally managed, PEP 668)."""
    from envkit.checks.compat import plan_fix

    python = facts.python
    where = f"{python.executable} ({python.selected_by})" if python else "the inspected interpreter"
    return CheckResult(
        cid, Status.FAIL, f"torch is not installed in {where}", detail=detail, fix=plan_fix(facts)
    )


def interpret_missing_extensions(facts: Facts) -> CheckResult:
    """verify.extensions where no extension envkit knows is installed: nothing to verify."""
    return CheckResult(
        "verify.extensions",
        Status.SKIP,
        "no extension envkit knows (flash-attn, xformers, vllm, bitsandbytes, …) is installed here",
    )


def interpret(check: str, outcome: Optional[ProbeOutcome], facts: Facts) -> CheckResult:
    """The check result of one probe run."""
    cid = f"verify.{check}"
    if outcome is None:
        return CheckResult(cid, Status.FAIL, "did not run before the time limit", fix="raise --timeout")
    data = outcome.data
    if data is None and outcome.result.timed_out:
        took = outcome.result.duration_s
        return CheckResult(
            cid,
            Status.FAIL,
            f"the {check} probe timed out after {took:.1f} s",
            detail=outcome.error or "",
            fix=(
                f"the probe ran past its time limit ({took:.1f} s): raise --timeout, or run "
                f"`envkit verify --checks {check} --timeout 600` alone to see whether it finishes "
                "(a first torch.compile or a busy GPU can take minutes; a hang is the driver's or NCCL's)"
            ),
            metrics={"returncode": outcome.result.returncode, "timed_out": True},
        )
    if data is None:
        first_line = outcome.error.splitlines()[0] if outcome.error else "no output"
        return CheckResult(
            cid,
            Status.FAIL,
            f"the {check} probe did not answer: {first_line}",
            detail=outcome.error or "",
            fix=_fix(check, "crash", facts),
            metrics={"returncode": outcome.result.returncode, "timed_out": outcome.result.timed_out},
        )
    status = Status(data["status"]) if data.get("status") in {s.value for s in Status} else Status.FAIL
    if status is Status.FAIL and _torch_missing(data, facts):
        return _no_torch(cid, str(data.get("detail") or data.get("error") or ""), facts)
    raw_metrics = data.get("metrics")
    metrics: dict[str, Any] = dict(raw_metrics) if isinstance(raw_metrics, dict) else {}
    kind = data.get("failure_class")
    if kind:
        metrics["failure_class"] = kind
    result = CheckResult(
        cid,
        status,
        str(data.get("summary") or check),
        detail=str(data.get("detail") or data.get("error") or ""),
        fix=_fix(check, kind, facts) if status in (Status.FAIL, Status.WARN) else "",
        metrics=metrics,
    )
    if check == "perf" and status is Status.PASS:
        return _perf(result, facts)
    return result
