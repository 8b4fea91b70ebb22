"""envkit fleet: many saved node reports → majorities, the odd nodes out, failures, HTML."""

from __future__ import annotations

import dataclasses
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from envkit.checks import run_checks
from envkit.errors import InputError
from envkit.facts import (
    DeepTorchFacts,
    Distribution,
    DriverFacts,
    Facts,
    GpuFacts,
    HostFacts,
    NetInterface,
    PythonFacts,
    ToolkitFacts,
    TorchFacts,
)
from envkit.fleet.aggregate import build_fleet, load_fleet, read_report
from envkit.fleet.fingerprint import fingerprint
from envkit.render.fleet import render_fleet
from envkit.render.html import render_html
from envkit.report import Report, Status
from envkit.versions import ComputeCapability, NvVersion, Version

SITE = "/opt/envs/train/lib/python3.11/site-packages"


def node_gpus(node: int, count: int = 8) -> tuple[GpuFacts, ...]:
    """An HGX H100 board as NVML reports it; readings that drift (temperature, power) vary per node."""
    return tuple(
        GpuFacts(
            index=i,
            name="NVIDIA H100 80GB HBM3",
            uuid=f"GPU-{node:04x}{i:04x}-5d2a-7e0c-9b1f-4c3d2e1f0a9b",
            pci_bus_id=f"00000000:{0x18 + 0x10 * i:02X}:00.0",
            compute_capability=ComputeCapability(9, 0),
            memory_total_mib=81559,
            mig_enabled=False,
            persistence_mode=True,
            ecc_enabled=True,
            ecc_uncorrected_volatile=0,
            remapped_rows_pending=False,
            remapped_rows_failure=False,
            pcie_gen=1 + (node + i) % 5,  # idle GPUs drop the link generation
            pcie_gen_max=5,
            pcie_width=16,
            pcie_width_max=16,
            clock_events=("gpu_idle",),
            temperature_c=30 + (node * 7 + i) % 15,
            temperature_slowdown_c=87,
            power_w=68.0 + (node + i) % 9,
            power_limit_w=700.0,
            cuda_index=i,
        )
        for i in range(count)
    )


def torch_facts(version: str = "2.5.1+cu124", cuda: str = "12.4", vision: str = "0.20.1") -> TorchFacts:
    return TorchFacts(
        version=Version(version),
        cuda=Version(cuda),
        git_version="a8d6afb511a69687bbb2b7e88a3cf67917e1697e",
        location=f"{SITE}/torch",
        distributions=(
            Distribution("torch", Version(version), SITE),
            Distribution("torchvision", Version(f"{vision}+{version.split('+')[1]}"), SITE),
            Distribution("triton", Version("3.1.0"), SITE),
            Distribution("nvidia-cudnn-cu12", Version("9.1.0.70"), SITE),
            Distribution("nvidia-nccl-cu12", Version("2.21.5"), SITE),
            Distribution("nvidia-cublas-cu12", Version("12.4.5.8"), SITE),
            Distribution("numpy", Version("1.26.4"), SITE),
        ),
    )


def node_facts(node: int, **changes: Any) -> Facts:
    """One node of a training cluster (8 × H100, driver 550, torch 2.5.1+cu124), as doctor saves it."""
    facts = Facts(
        host=HostFacts(
            hostname=f"gpu-node-{node:03d}",
            os="Ubuntu 22.04.4 LTS",
            kernel="5.15.0-107-generic",
            arch="x86_64",
            nvidia_pci_devices=tuple(f"0000:{0x18 + 0x10 * i:02x}:00.0" for i in range(8)),
            nvidia_module_loaded=True,
            shm_bytes=512 * 1024**3,
            interfaces=(NetInterface("lo", True), NetInterface("eno1", True), NetInterface("ib0", True)),
            env={
                "NCCL_SOCKET_IFNAME": "ib0",
                "NCCL_IB_HCA": "mlx5",
                "LD_LIBRARY_PATH": "/usr/local/cuda-12.4/lib64",
                "SLURM_JOB_ID": str(4_200_000 + node),  # differs on every node, and means nothing
                "RANK": str(node),
            },
        ),
        driver=DriverFacts(
            version=NvVersion("550.54.15"),
            cuda_version=Version("12.4"),
            source="nvml",
            kernel_module="NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024",
        ),
        gpus=node_gpus(node),
        toolkits=(
            ToolkitFacts(
                nvcc="/usr/local/cuda-12.4/bin/nvcc",
                version=Version("12.4.131"),
                root="/usr/local/cuda-12.4",
                sources=("PATH",),
                on_path=True,
            ),
        ),
        python=PythonFacts(
            executable="/opt/envs/train/bin/python",
            selected_by="VIRTUAL_ENV",
            version=Version("3.11.9"),
            implementation="CPython",
            platform="linux-x86_64",
            glibc=Version("2.35"),
            prefix="/opt/envs/train",
            kind="venv",
            has_python_h=True,
            installers={"pip": "/opt/envs/train/bin/python -m pip"},
        ),
        torch=torch_facts(),
    )
    return dataclasses.replace(facts, **changes)


def node_report(facts: Facts) -> dict[str, Any]:
    return Report.new(facts, run_checks(facts)).to_json()


def write_report(folder: Path, facts: Facts, name: str = "") -> Path:
    path = folder / f"{name or facts.host.hostname}.json"
    path.write_text(json.dumps(node_report(facts)), encoding="utf-8")
    return path


def by_node(fleet: Any) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for d in fleet.deviations:
        found.setdefault(d.node, set()).add(d.key)
    return found


def test_base_node_is_healthy() -> None:
    results = {r.id: r.status for r in run_checks(node_facts(1))}
    # Skipped for want of evidence, not passed: no --deep answer (can torch use CUDA?), no container.
    skipped = {"torch.cuda_available", "container.gpus", "container.cuda_driver", "container.capabilities"}
    # No error text to read (doctor --error), and torch.compile's toolchain was not looked for.
    skipped |= {"torch.extension_load", "gpu.memory", "nccl.failure", "torch.compile_toolchain"}
    skipped.add("torch.extensions")  # no extension (flash-attn, vllm, …) installed
    skipped |= {"driver.amd", "driver.intel", "torch.gfx_arch"}  # an NVIDIA node: no AMD / Intel GPU
    assert {i for i, s in results.items() if s is Status.SKIP} == skipped
    assert {s for i, s in results.items() if i not in skipped} == {Status.PASS}


def test_100_nodes_with_3_planted_deviations(tmp_path: Path) -> None:
    for n in range(1, 101):
        facts = node_facts(n)
        if n == 17:  # another driver (newer, so the checks still pass)
            facts = dataclasses.replace(
                facts, driver=dataclasses.replace(facts.driver, version=NvVersion("560.35.03"))
            )
        elif n == 42:  # one GPU fell off the bus
            facts = dataclasses.replace(facts, gpus=node_gpus(n, 7))
        elif n == 88:  # another torch build
            facts = dataclasses.replace(facts, torch=torch_facts("2.5.1+cu121", "12.1"))
        write_report(tmp_path, facts)

    fleet = load_fleet([str(tmp_path)])

    assert len(fleet.nodes) == 100
    assert [n.name for n in fleet.nodes[:3]] == ["gpu-node-001", "gpu-node-002", "gpu-node-003"]
    assert by_node(fleet) == {
        "gpu-node-017": {"driver.version"},
        "gpu-node-042": {"gpu.count"},
        "gpu-node-088": {"torch.version", "torch.cuda"},
    }
    assert not fleet.failures
    assert not fleet.splits()
    majority = {m.key: m for m in fleet.majorities}
    assert (majority["driver.version"].value, majority["driver.version"].nodes) == ("550.54.15", 99)
    assert majority["gpu.count"].value == "8"
    assert majority["nccl.version"].value == "2.21.5"
    assert majority["env.NCCL_SOCKET_IFNAME"].value == "ib0"
    assert "env.SLURM_JOB_ID" not in majority
    # The missing GPU sorts first (it fails the fleet); the rest follow by importance.
    first = fleet.deviations[0]
    assert (first.node, first.key, first.expected, first.actual, first.severity) == (
        "gpu-node-042",
        "gpu.count",
        "8",
        "7",
        Status.FAIL,
    )
    assert fleet.exit_code() == 1


def test_a_rolling_driver_update_is_a_warning(tmp_path: Path) -> None:
    reports = []
    for n in range(1, 6):
        facts = node_facts(n)
        if n == 3:
            facts = dataclasses.replace(facts, driver=DriverFacts(NvVersion("560.35.03"), Version("12.6")))
        reports.append((f"n{n}.json", Report.new(facts, run_checks(facts))))
    fleet = build_fleet(reports)
    assert by_node(fleet) == {"gpu-node-003": {"driver.version"}}
    assert fleet.deviations[0].severity is Status.WARN
    assert fleet.exit_code() == 0
    assert fleet.exit_code(strict=True) == 1


def test_a_failing_node_fails_the_fleet(tmp_path: Path) -> None:
    for n in range(1, 5):
        facts = node_facts(n)
        if n == 2:
            gpus = list(facts.gpus)
            gpus[5] = dataclasses.replace(gpus[5], ecc_uncorrected_volatile=3)
            facts = dataclasses.replace(facts, gpus=tuple(gpus))
        write_report(tmp_path, facts)
    fleet = load_fleet(sorted(str(p) for p in tmp_path.iterdir()))
    assert not fleet.deviations
    assert [(f.node, f.check.id) for f in fleet.failures] == [("gpu-node-002", "gpu.health")]
    assert fleet.exit_code() == 1
    data = fleet.to_json()
    assert data["schema"] == "envkit.fleet/1"
    assert data["summary"] == {
        "nodes": 4,
        "healthy": 3,
        "failing": 1,
        "deviating": 0,
        "splits": [],
        "unreadable": 0,
        "status": "unhealthy",
        "strict": False,
        "exit_code": 1,
    }
    assert {"id": "gpu.health", "pass": 3, "warn": 0, "fail": 1, "skip": 0, "missing": 0} in data["checks"]
    json.dumps(data)  # plain JSON data all the way down


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", "invalid JSON"),
        ('{"schema": "something/1"}', "schema is 'something/1'"),
        ('{"schema": "envkit.report/1", "facts": {"gpus": "eight"}}', "facts.gpus: expected a list"),
    ],
)
def test_a_malformed_report_names_the_file(tmp_path: Path, text: str, words: str) -> None:
    write_report(tmp_path, node_facts(1))
    bad = tmp_path / "gpu-node-002.json"
    bad.write_text(text, encoding="utf-8")
    fleet = load_fleet([str(tmp_path)])  # the good report is still compared
    assert [n.name for n in fleet.nodes] == ["gpu-node-001"]
    (unreadable,) = fleet.unreadable
    assert unreadable.path == str(bad)
    assert str(bad) in unreadable.error
    assert words in unreadable.error
    assert fleet.exit_code() == 1
    assert fleet.exit_code(strict=True) == 2
    bad.rename(tmp_path / "only.json")
    (tmp_path / "gpu-node-001.json").unlink()
    with pytest.raises(InputError) as err:  # nothing readable: nothing to compare
        load_fleet([str(tmp_path)])
    assert words in err.value.message
    assert err.value.exit_code == 2


def test_unreadable_inputs_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no \*\.json reports"):
        load_fleet([str(tmp_path)])
    with pytest.raises(InputError, match="cannot read"):
        load_fleet([str(tmp_path / "missing.json")])
    with pytest.raises(InputError, match="give the report files"):
        load_fleet([])
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError, match="not a text file"):
        read_report(str(tmp_path / "binary.json"))


def test_an_even_split_is_a_tie_not_an_odd_node() -> None:
    a = node_facts(1)
    b = node_facts(2, gpus=node_gpus(2, 4))
    fleet = build_fleet([("a.json", Report.new(a, run_checks(a))), ("b.json", Report.new(b, run_checks(b)))])
    split = {m.key: m for m in fleet.splits()}
    assert set(split) == {"gpu.count"}
    assert split["gpu.count"].value is None
    assert split["gpu.count"].values == (("4", 1), ("8", 1))
    assert not fleet.deviations
    assert any("gpu.count: no majority" in n for n in fleet.notes)
    assert fleet.exit_code() == 1  # a split GPU count: the nodes cannot run one job shape


def test_reports_without_host_are_named_by_file_and_duplicates_kept() -> None:
    nameless = node_facts(1, host=dataclasses.replace(node_facts(1).host, hostname=None))
    report = dataclasses.replace(Report.new(nameless, run_checks(nameless)), host=None)
    twice = Report.new(node_facts(2), run_checks(node_facts(2)))
    fleet = build_fleet([("/r/rack3-07.json", report), ("/r/a.json", twice), ("/r/b.json", twice)])
    assert [n.name for n in fleet.nodes] == ["gpu-node-002", "gpu-node-002 (/r/b.json)", "rack3-07"]
    assert any("more than one report" in n for n in fleet.notes)


def test_deep_and_shallow_reports_agree_on_nccl_and_cudnn() -> None:
    shallow = node_facts(1)
    probe = DeepTorchFacts(ok=True, cudnn=90100, nccl=Version("2.21.5"), cuda_available=True, device_count=8)
    deep = node_facts(2, torch=dataclasses.replace(torch_facts(), deep=probe))
    for key in ("nccl.version", "cudnn.version"):
        assert fingerprint(shallow)[key] == fingerprint(deep)[key]
    assert fingerprint(deep)["cudnn.version"] == "9.1.0"
    fleet = build_fleet([(f"{i}.json", Report.new(f, run_checks(f))) for i, f in enumerate([shallow, deep])])
    assert not fleet.deviations
    assert not fleet.splits()


class _Checker(HTMLParser):
    """Collects text and asserts that elements nest properly (void elements excepted)."""

    VOID = frozenset({"meta", "br", "hr", "img", "input", "link", "col"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.text: list[str] = []
        self.titles: list[str] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.titles += [v for k, v in attrs if k == "title" and v]
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1:]}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_html_page(tmp_path: Path) -> None:
    evil = "<script>alert(1)</script>"
    for n in range(1, 21):
        facts = node_facts(n)
        if n == 5:
            facts = dataclasses.replace(facts, host=dataclasses.replace(facts.host, hostname=evil))
        if n == 9:
            facts = dataclasses.replace(facts, gpus=node_gpus(9, 7))
        if n == 12:
            gpus = list(facts.gpus)
            gpus[0] = dataclasses.replace(gpus[0], error="GpuIsLost: GPU is lost")
            facts = dataclasses.replace(facts, gpus=tuple(gpus))
        write_report(tmp_path, facts, name=f"n{n}")
    fleet = load_fleet([str(tmp_path)])

    page = render_html(fleet)

    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page and "http" not in page  # nothing to run, nothing to fetch
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    parser = _Checker()
    parser.feed(page)
    parser.close()
    assert parser.stack == []
    assert "script" not in parser.tags
    text = "".join(parser.text)
    for node in fleet.nodes:
        assert node.name in text
    for cid in fleet.check_ids:
        assert cid in text
    assert evil in text  # shown as text, not run
    assert any(t.startswith("gpu-node-012 · gpu.health: fail") for t in parser.titles)
    assert any("gpu-node-009 differs: gpu.count: 7 (fleet: 8)" in t for t in parser.titles)
    assert len(page) < 200_000


def test_html_for_a_thousand_nodes_stays_compact() -> None:
    facts = node_facts(1)
    report = Report.new(facts, run_checks(facts))
    fleet = build_fleet([(f"/r/node{i}.json", dataclasses.replace(report, host=None)) for i in range(1000)])
    page = render_html(fleet)
    assert len(page) / 1000 < 3_000  # bytes a node: one short row of small cells


def test_render_fleet_text(tmp_path: Path) -> None:
    reports = []
    for n in range(1, 31):
        facts = node_facts(n)
        if n in (4, 5):
            facts = dataclasses.replace(facts, gpus=node_gpus(n, 7))
        if n == 6:
            gpus = list(facts.gpus)
            gpus[2] = dataclasses.replace(gpus[2], ecc_uncorrected_volatile=1)
            facts = dataclasses.replace(facts, gpus=tuple(gpus))
        reports.append((f"{n}.json", Report.new(facts, run_checks(facts))))
    console = Console(record=True, width=120, color_system=None, force_terminal=False)
    render_fleet(build_fleet(reports), console)
    out = console.export_text()
    assert "GPU count 7 (fleet: 8) on 2 nodes: gpu-node-004, gpu-node-005" in out
    assert "gpu-node-006  gpu.health" in out
    assert "NVIDIA driver" in out and "550.54.15" in out
    assert out.rstrip().endswith("unhealthy")


def test_a_folder_gives_its_json_files_sorted(tmp_path: Path) -> None:
    from envkit.fleet.aggregate import report_paths

    for name in ("b.json", "a.json", ".hidden.json", "c.JSON", "d.json.bak"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "e.json").mkdir()  # a folder named like a report is not one
    (tmp_path / "f.json").symlink_to(tmp_path / "a.json")
    assert report_paths([str(tmp_path)]) == [
        str(tmp_path / n) for n in (".hidden.json", "a.json", "b.json", "f.json")
    ]
    assert report_paths([str(tmp_path) + "/", str(tmp_path / "c.JSON")])[-1] == str(tmp_path / "c.JSON")
