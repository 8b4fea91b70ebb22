"""envkit diff: the facts and verdicts that differ between two machines, likeliest cause first."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from rich.console import Console

from envkit.checks import run_checks
from envkit.errors import InputError
from envkit.facts import DeepTorchFacts, Distribution, Facts, SharedLib, ToolkitFacts
from envkit.fleet.diff import diff_files, diff_reports
from envkit.fleet.fingerprint import TIERS, aspect, fingerprint
from envkit.render.fleet import render_diff
from envkit.report import Report, Status
from envkit.versions import NvVersion, Version
from tests.unit.fleet.test_fleet import node_facts, node_gpus, torch_facts, write_report


def report(facts: Facts) -> Report:
    return Report.new(facts, run_checks(facts))


def with_host(facts: Facts, **changes: object) -> Facts:
    return dataclasses.replace(facts, host=dataclasses.replace(facts.host, **changes))


def test_two_healthy_nodes_of_one_cluster_are_identical() -> None:
    # Host names, GPU UUIDs, temperatures, idle link generations, job ids and ranks all differ.
    diff = diff_reports(report(node_facts(1)), report(node_facts(2)))
    assert diff.identical
    assert diff.differences == ()
    assert diff.checks == ()
    assert (diff.a_name, diff.b_name) == ("gpu-node-001", "gpu-node-002")
    assert diff.to_json()["summary"] == {"differences": 0, "checks": 0, "identical": True}


def test_a_driver_difference_ranks_above_a_path_difference() -> None:
    a = node_facts(1)
    b = node_facts(2, driver=dataclasses.replace(a.driver, version=NvVersion("560.35.03")))
    b = dataclasses.replace(b, python=dataclasses.replace(a.python, executable="/usr/bin/python3"))
    diff = diff_reports(report(a), report(b))
    assert [d.key for d in diff.differences] == ["driver.version", "python.executable"]
    driver, path = diff.differences
    assert (driver.a, driver.b, driver.rank) == ("550.54.15", "560.35.03", 1)
    assert "driver decides which CUDA builds run" in driver.why
    assert path.rank == 7 and path.tier == "paths"


def test_every_tier_in_order() -> None:
    a = node_facts(1)
    torch_b = torch_facts("2.4.1+cu121", "12.1", vision="0.19.1")
    torch_b = dataclasses.replace(
        torch_b,
        distributions=tuple(
            Distribution(d.name, Version("2.20.5"), d.location)
            if d.name == "nvidia-nccl-cu12"
            # torch 2.4.1's own triton (torch.companions fails on 2.5's 3.1.0)
            else Distribution(d.name, Version("3.0.0"), d.location)
            if d.name == "triton"
            else d
            for d in torch_b.distributions
        ),
        location="/home/me/.local/lib/python3.11/site-packages/torch",
    )
    b = node_facts(
        2,
        driver=dataclasses.replace(a.driver, version=NvVersion("535.104.05"), cuda_version=Version("12.2")),
        torch=torch_b,
        toolkits=(
            ToolkitFacts(nvcc="/usr/bin/nvcc", version=Version("11.5.119"), root="/usr", on_path=True),
        ),
        python=dataclasses.replace(a.python, version=Version("3.10.12")),
    )
    b = with_host(
        b,
        kernel="5.15.0-119-generic",
        env={**a.host.env, "NCCL_P2P_DISABLE": "1", "LD_LIBRARY_PATH": "/opt/nccl/lib"},
        cuda_libs=(
            SharedLib("/opt/nccl/lib/libnccl.so.2.18.1", "nccl", Version("2.18.1"), "LD_LIBRARY_PATH"),
        ),
    )
    diff = diff_reports(report(a), report(b))
    keys = [d.key for d in diff.differences]
    assert keys[:4] == ["driver.version", "driver.cuda_version", "torch.version", "torch.cuda"]
    ranks = [d.rank for d in diff.differences]
    assert ranks == sorted(ranks)
    assert set(ranks) == set(TIERS)
    position = {k: i for i, k in enumerate(keys)}
    assert position["nccl.version"] < position["wheel.torchvision"] < position["syslib.nccl"]
    assert position["syslib.nccl"] < position["toolkit.nvcc"] < position["python.version"]
    assert position["env.LD_LIBRARY_PATH"] < position["env.NCCL_P2P_DISABLE"] < position["host.kernel"]
    assert keys[-1] in ("torch.location", "toolkit.roots")
    new_var = next(d for d in diff.differences if d.key == "env.NCCL_P2P_DISABLE")
    assert new_var.shown() == ("unset", "1")
    assert "SLURM" not in " ".join(keys) and "env.RANK" not in keys
    # nvcc 11.5 next to a CUDA 12 torch, a system NCCL on LD_LIBRARY_PATH, a debugging NCCL switch.
    assert [(c.id, c.worse.status) for c in diff.checks] == [
        ("toolkit.nvcc", Status.WARN),
        ("torch.cuda_libs", Status.WARN),
        ("nccl.env", Status.WARN),
    ]
    assert all(c.worse is c.b for c in diff.checks)


def test_a_failing_check_comes_first() -> None:
    a = node_facts(1)
    gpus = list(a.gpus)
    gpus[3] = dataclasses.replace(gpus[3], ecc_uncorrected_volatile=5)
    b = with_host(dataclasses.replace(a, gpus=tuple(gpus)), shm_bytes=64 * 1024**2)
    diff = diff_reports(report(a), report(b))
    assert [(c.id, c.severity) for c in diff.checks] == [("gpu.health", 3), ("python.shm", 3)]
    assert diff.checks[0].worse.summary.startswith("GPU 3 (NVIDIA H100 80GB HBM3): 5 uncorrected ECC")
    assert [d.key for d in diff.differences] == ["host.shm"]  # error counters are not facts to compare


def test_a_missing_gpu_and_a_deep_probe_on_one_side_only() -> None:
    a = node_facts(1)
    probe = DeepTorchFacts(ok=True, cuda_available=True, device_count=7, nccl=Version("2.21.5"), cudnn=90100)
    b = node_facts(2, gpus=node_gpus(2, 7), torch=dataclasses.replace(torch_facts(), deep=probe))
    diff = diff_reports(report(a), report(b))
    assert [d.key for d in diff.differences] == [
        "gpu.count",
        "gpu.memory",
        "gpu.pcie",
        "gpu.ecc",
        "gpu.persistence",
    ]
    assert diff.differences[0].shown() == ("8", "7")
    assert diff.notes == ("only B imported torch (doctor --deep); what torch saw at import is not compared",)
    # Both deep: what torch saw is compared too.
    both = diff_reports(report(dataclasses.replace(b, gpus=a.gpus)), report(b))
    assert "torch.device_count" not in [d.key for d in both.differences]
    assert fingerprint(b)["torch.device_count"] == "7"


def test_diff_files_and_json(tmp_path: Path) -> None:
    a = write_report(tmp_path, node_facts(1))
    b = write_report(tmp_path, with_host(node_facts(2), env={"CUDA_VISIBLE_DEVICES": "0,1"}))
    data = diff_files(str(a), str(b)).to_json()
    assert data["schema"] == "envkit.diff/1"
    assert data["a"] == "gpu-node-001"
    first = data["differences"][0]
    assert first["key"] == "env.LD_LIBRARY_PATH" and first["b"] is None and first["rank"] == 5
    assert first["tier"] == "environment variables"
    assert "env.CUDA_VISIBLE_DEVICES" in [d["key"] for d in data["differences"]]
    json.dumps(data)
    bad = tmp_path / "half.json"
    bad.write_text('{"schema": "envkit.report/1", "facts": ', encoding="utf-8")
    with pytest.raises(InputError, match=r"half\.json: not an envkit report"):
        diff_files(str(a), str(bad))


def test_every_key_says_why_it_matters() -> None:
    keys = set(fingerprint(node_facts(1))) | {"wheel.nvidia-cufft-cu12", "conda.pytorch", "syslib.cudnn"}
    keys |= {
        f"env.{v}" for v in ("LD_PRELOAD", "CUDA_HOME", "CUDA_LAUNCH_BLOCKING", "PYTHONPATH", "PATH", "X")
    }
    for key in keys:
        about = aspect(key)
        assert about.why and about.label and about.tier in TIERS, key
    assert aspect("env.PATH").tier == 7


def test_render_diff_text() -> None:
    a = node_facts(1)
    b = node_facts(
        2, driver=dataclasses.replace(a.driver, version=NvVersion("535.104.05"), cuda_version=Version("12.2"))
    )
    console = Console(record=True, width=120, color_system=None, force_terminal=False)
    render_diff(diff_reports(report(a), report(b)), console)
    out = console.export_text()
    assert "A: gpu-node-001  B: gpu-node-002" in out
    assert "driver.version  550.54.15 → 535.104.05" in out
    assert out.rstrip().endswith("look first at driver.version")
    console = Console(record=True, width=120, color_system=None, force_terminal=False)
    render_diff(diff_reports(report(a), report(a)), console)
    assert "no differences" in console.export_text()


def test_one_machine_before_and_after_is_named_by_file(tmp_path: Path) -> None:
    before = write_report(tmp_path, node_facts(1), name="before")
    after = write_report(tmp_path, with_host(node_facts(1), kernel="5.15.0-119-generic"), name="after")
    diff = diff_files(str(before), str(after))
    assert (diff.a_name, diff.b_name) == (str(before), str(after))
    assert [d.key for d in diff.differences] == ["host.kernel"]


def test_nvidia_ml_py_is_not_called_a_cuda_library_torch_loads() -> None:
    """nvidia-ml-py is NVML's Python bindings (NVIDIA's own PyPI project); torch loads none of it."""
    assert aspect("wheel.nvidia-nccl-cu12").why == "a CUDA library wheel torch loads at run time"
    assert aspect("wheel.nvidia-cuda-runtime").why == "a CUDA library wheel torch loads at run time"
    ml = aspect("wheel.nvidia-ml-py")
    assert ml.why == "an NVIDIA package (not a CUDA library torch loads)"
    both = Facts(
        torch=dataclasses.replace(
            torch_facts(),
            distributions=(
                Distribution("nvidia-ml-py", Version("12.560.30")),
                Distribution("nvidia-cudnn-frontend", Version("1.18.0")),
            ),
        )
    )
    # nvidia-cudnn-frontend is a Python package, not the cuDNN wheel: it keeps a row of its own.
    assert {"wheel.nvidia-ml-py", "wheel.nvidia-cudnn-frontend"} <= set(fingerprint(both))
