"""verify.compile on a GPU node tests the GPU path; the CPU compile runs where there is no GPU or
when asked (--compile-devices). The choice is made from recorded Facts, without a GPU."""

from __future__ import annotations

import dataclasses
import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from envkit.errors import InputError
from envkit.facts import Facts
from envkit.report import report_from_json
from envkit.system import PROBES_DIR, System
from envkit.verify import compile_devices, parse_compile_devices, probe_specs

sys.path.insert(0, str(PROBES_DIR))
compile_probe = importlib.import_module("verify_compile")

# A real H200 node (driver 580, torch 2.11+cu130), as `envkit doctor --json` saved it.
REPORT = Path(__file__).parent.parent / "data" / "reports" / "h200-580-torch2.11-cu130.json"
H200 = report_from_json(json.loads(REPORT.read_text(encoding="utf-8")), str(REPORT)).facts


def test_a_gpu_node_compiles_for_the_gpu_only() -> None:
    assert H200.visible_gpus and H200.torch.cuda is not None
    assert compile_devices(H200) == ("cuda",)
    (spec,) = probe_specs(System(), H200, ["compile"], "/tmp/cache")
    assert spec.config["devices"] == ["cuda"]


def test_the_cpu_compile_runs_where_there_is_no_usable_gpu() -> None:
    assert compile_devices(Facts()) == ("cpu",)  # no GPU at all
    cpu_torch = dataclasses.replace(H200, torch=dataclasses.replace(H200.torch, cuda=None))
    assert compile_devices(cpu_torch) == ("cpu",)  # a GPU, but a CPU build of torch
    hidden = tuple(dataclasses.replace(g, visible=False) for g in H200.gpus)
    assert compile_devices(dataclasses.replace(H200, gpus=hidden)) == ("cpu",)  # CUDA_VISIBLE_DEVICES=""


def test_asked_for_devices_are_compiled_for() -> None:
    assert compile_devices(H200, ("cpu", "cuda")) == ("cpu", "cuda")
    assert compile_devices(Facts(), ("cuda",)) == ("cuda",)
    (spec,) = probe_specs(System(), H200, ["compile"], "/tmp/cache", devices=("cpu", "cuda"))
    assert spec.config["devices"] == ["cpu", "cuda"]


def test_parse_compile_devices() -> None:
    assert parse_compile_devices(None) is None
    assert parse_compile_devices("CPU, cuda,cpu") == ("cpu", "cuda")
    for bad in ("gpu", "cpu,tpu", " , "):
        with pytest.raises(InputError, match="--compile-devices"):
            parse_compile_devices(bad)


@pytest.mark.parametrize(("available", "expected"), [(True, ["cuda"]), (False, ["cpu"])])
def test_the_probe_alone_defaults_to_the_gpu_path(
    monkeypatch: pytest.MonkeyPatch, available: bool, expected: list[str]
) -> None:
    """The probe run without envkit's choice (no "devices"): a stand-in torch says whether CUDA is there."""
    torch = SimpleNamespace(
        __version__="2.11.0+cu130", compile=object(), cuda=SimpleNamespace(is_available=lambda: available)
    )
    compiled: list[str] = []

    def compile_on(_torch: Any, device: str, _iters: int) -> dict[str, Any]:
        compiled.append(device)
        return {"device": device, "ok": True, "cold_compile_s": 1.0, "warm_compile_s": 0.1, "speedup": 1.5}

    monkeypatch.setattr(compile_probe, "import_torch", lambda: (torch, 0.1, []))
    monkeypatch.setattr(compile_probe, "compile_on", compile_on)
    answer = compile_probe.main({})
    assert compiled == expected
    assert answer["status"] == "pass"
    compiled.clear()
    compile_probe.main({"devices": ["cpu", "cuda"]})
    assert compiled == ["cpu", "cuda"]


def test_a_bad_flag_is_one_line_and_exit_2() -> None:
    for command in (["verify"], ["preflight", "--verify", "compile"]):
        proc = subprocess.run(
            [sys.executable, "-m", "envkit", *command, "--compile-devices", "gpu"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().splitlines() == [
            "envkit: --compile-devices 'gpu': unknown gpu; choose from cpu, cuda"
        ]
