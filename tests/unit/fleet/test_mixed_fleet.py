"""A mixed fleet (NVIDIA H100 and AMD MI300X nodes): grouped by GPU vendor and architecture, each
node compared with its own group; preflight --expect's gpu_vendor and gpu_arch."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rich.console import Console

from envkit.checks import run_checks
from envkit.checks.expect import Expectations, check_expectations, load_expectations
from envkit.facts import AccelGpu, Facts, VendorFacts
from envkit.fleet.aggregate import build_fleet
from envkit.render.fleet import render_fleet
from envkit.report import Report, Status
from tests.unit.fleet.test_fleet import node_facts


def amd_node(node: int, gpus: int = 8) -> Facts:
    """An MI300X node: the H100 node's host, no NVIDIA driver or GPU, eight gfx942 GPUs on amdgpu."""
    base = node_facts(node)
    amd = VendorFacts(
        "amd",
        gpus=tuple(
            AccelGpu(i, "AMD Instinct MI300X", arch="gfx942", memory_total_mib=196592) for i in range(gpus)
        ),
        driver="amdgpu",
        driver_version="6.12.12",
        sources=("sysfs",),
    )
    return dataclasses.replace(base, driver=dataclasses.replace(base.driver, version=None), gpus=(), amd=amd)


def report(facts: Facts) -> Report:
    return Report.new(facts, run_checks(facts))


def test_a_mixed_fleet_is_grouped_and_compared_within_each_group() -> None:
    facts = [node_facts(n) for n in range(1, 6)] + [amd_node(n) for n in range(6, 9)] + [amd_node(9, gpus=7)]
    fleet = build_fleet([(f"/r/n{i}.json", report(f)) for i, f in enumerate(facts)])
    assert [(g.label, len(g.nodes)) for g in fleet.groups] == [("nvidia sm_90", 5), ("amd gfx942", 4)]
    # The AMD nodes are not "odd" for their GPUs: only the MI300X node with seven GPUs deviates,
    # from its own group's eight.
    fails = {(d.node, d.key) for d in fleet.deviations if d.severity is Status.FAIL}
    assert fails == {("gpu-node-009", "gpu.count")}
    assert not any("no majority" in n and "gpu." in n for n in fleet.notes)
    doc = fleet.to_json()
    assert doc["groups"][1] == {"gpus": "amd gfx942", "nodes": [f"gpu-node-00{n}" for n in range(6, 10)]}
    console = Console(width=120, record=True)
    render_fleet(fleet, console)
    assert "amd gfx942: 4 nodes" in console.export_text()


def test_a_one_vendor_fleet_has_no_groups() -> None:
    fleet = build_fleet([(f"/r/n{n}.json", report(node_facts(n))) for n in range(1, 4)])
    assert fleet.groups == ()


def test_expect_gpu_vendor_and_gfx_arch(tmp_path: Path) -> None:
    path = tmp_path / "mi300x.toml"
    path.write_text('gpu_vendor = "amd"\ngpu_arch = "gfx942"\ngpu_count = 8\ngpu_model = "MI300X"\n')
    expect = load_expectations(str(path))
    results = {r.id: r for r in check_expectations(expect, amd_node(1))}
    assert {cid: r.status for cid, r in results.items()} == dict.fromkeys(
        ("expect.gpu_vendor", "expect.gpu_arch", "expect.gpu_count", "expect.gpu_model"), Status.PASS
    )
    # The same expectations on an H100 node: vendor, arch, count and model all drift.
    drift = {r.id: r for r in check_expectations(expect, node_facts(1))}
    assert drift["expect.gpu_vendor"].summary == "expected amd, found nvidia"
    assert all(r.status is Status.FAIL for r in drift.values())
    sm = check_expectations(Expectations("x", {"gpu_arch": "9.0"}), node_facts(1))
    assert sm[0].status is Status.PASS and "sm_90" in sm[0].summary


def test_bad_vendor_or_arch_is_an_input_error(tmp_path: Path) -> None:
    import pytest

    from envkit.errors import InputError

    for text, message in (
        ('gpu_vendor = "amdd"\n', "not one of nvidia, amd, intel"),
        ('gpu_arch = "zz"\n', "not an architecture"),
    ):
        path = tmp_path / "bad.toml"
        path.write_text(text)
        with pytest.raises(InputError, match=message):
            load_expectations(str(path))
