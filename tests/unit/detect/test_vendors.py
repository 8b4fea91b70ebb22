"""AMD and Intel detection on recorded real machines (tests/data/amd, tests/data/intel: sysfs trees
and tool outputs, sources in tests/data/README.md), and tools that hang or print garbage."""

from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path

import pytest

from envkit.detect import detect_for_plan
from envkit.detect.amd import detect_amd, gfx_name, normalize_gfx, parse_kfd_properties
from envkit.detect.amd_tools import parse_amd_smi_static, parse_amd_smi_version, parse_rocm_smi_json
from envkit.detect.intel import detect_intel, parse_sycl_ls, parse_xpu_smi
from envkit.detect.jetson import parse_nv_tegra_release, read_l4t
from envkit.detect.vendors import VENDORS
from envkit.knowledge import load_knowledge
from envkit.resolve import Request, resolve
from envkit.resolve.target import target_from_facts
from envkit.system import System
from envkit.versions import NvVersion, Version
from tests.conftest import DATA, MachineBuilder

AMD = DATA / "amd"
INTEL = DATA / "intel"


def recorded_root(name: str, tmp_path: Path, base: Path = AMD) -> Path:
    """A copy of a recorded machine's tree (a fake root), so a test can add to it."""
    root = tmp_path / name
    shutil.copytree(base / name, root, symlinks=True)
    return root


def system_at(root: Path, machine: MachineBuilder) -> System:
    return System(env=machine.env, root=root, nvml=machine.nvml)


# -- the gfx target ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "name"),
    [(90402, "gfx942"), (90010, "gfx90a"), (110501, "gfx1151"), (120001, "gfx1201"), (90500, "gfx950"),
     (100300, "gfx1030"), (90006, "gfx906"), (0, None), (90016, None), (999999999, None)],
)  # fmt: skip
def test_gfx_target_version_decodes_as_the_kernel_encodes_it(version: int, name: str | None) -> None:
    # 90402 / 90010 / 110501 / 120001: ROCm/rocm-cli#343 and the KFD captures in tests/data/amd.
    assert gfx_name(version) == name


@pytest.mark.parametrize(
    ("text", "name"),
    [("gfx9010", "gfx90a"), ("gfx9012", "gfx90c"), ("gfx942", "gfx942"), ("GFX1100", "gfx1100"),
     ("gfx90a:sramecc+:xnack-", "gfx90a"), ("gfx18446744073709551615", None), ("N/A", None),
     ("gfx", None), ("rocm", None)],
)  # fmt: skip
def test_tools_spelling_of_a_gfx_target_is_normalised(text: str, name: str | None) -> None:
    assert normalize_gfx(text) == name


def test_kfd_properties_ignore_junk_lines() -> None:
    assert parse_kfd_properties("a 1\nb\nc d\ne 12345678901234567890123456\n") == {"a": 1}


# -- AMD: recorded KFD topologies -------------------------------------------------------------------


def test_mi210_node_is_eight_gfx90a_gpus(machine: MachineBuilder, tmp_path: Path) -> None:
    facts = detect_amd(system_at(recorded_root("mi210-x8", tmp_path), machine))
    assert [g.arch for g in facts.gpus] == ["gfx90a"] * 8
    assert {g.device_id for g in facts.gpus} == {"0x740f"}
    assert facts.gpus[0].pci_bus_id == "0000:63:00.0"  # location_id 25344 = bus 0x63
    assert facts.driver == "amdgpu" and facts.sources == ("sysfs",)
    assert facts.gpus[0].name == "AMD Instinct MI210"  # the product of device 0x740f is not guessed: tabled


def test_mi300x_in_cpx_mode_is_eight_gpus_of_eight_partitions(
    machine: MachineBuilder, tmp_path: Path
) -> None:
    facts = detect_amd(system_at(recorded_root("mi300x-x8-cpx", tmp_path), machine))
    assert len(facts.gpus) == 8
    assert {(g.arch, g.device_id) for g in facts.gpus} == {("gfx942", "0x74a1")}
    # 63 GPU nodes in the capture: the last GPU's eighth partition (location 58631) is not in it
    assert [g.partitions for g in facts.gpus] == [8] * 7 + [7]
    assert facts.gpus[0].pci_bus_id == "0000:05:00.0"


def test_mi308x_partitions_add_up_their_memory(machine: MachineBuilder, tmp_path: Path) -> None:
    facts = detect_amd(system_at(recorded_root("mi308x-x8-4part", tmp_path), machine))
    assert len(facts.gpus) == 8 and facts.gpus[0].partitions == 4
    # three partitions of 48 GiB and one of a little less: 192 GB of HBM, as the MI308X has
    assert facts.gpus[0].memory_total_mib == (3 * 51539607552 + 51522830336) // 2**20
    assert facts.gpus[0].arch == "gfx942"


def test_a_2018_kernel_without_gfx_target_version_gets_the_tabled_target(
    machine: MachineBuilder, tmp_path: Path
) -> None:
    facts = detect_amd(system_at(recorded_root("vega10-2018", tmp_path), machine))
    assert [g.device_id for g in facts.gpus] == ["0x6860", "0x6860"]
    assert {g.arch for g in facts.gpus} == {"gfx900"}
    assert any("states no gfx_target_version" in n for n in facts.notes)
    assert any("gfx900 from its device id 0x6860" in n for n in facts.notes)


def test_amdgpu_module_version_and_host_rocm(machine: MachineBuilder, tmp_path: Path) -> None:
    root = recorded_root("mi210-x8", tmp_path)
    (root / "sys/module/amdgpu").mkdir(parents=True)
    (root / "sys/module/amdgpu/version").write_text("6.12.12\n")
    (root / "opt/rocm/.info").mkdir(parents=True)
    (root / "opt/rocm/.info/version").write_text("6.4.1-83\n")
    facts = detect_amd(system_at(root, machine))
    assert facts.driver_version == "6.12.12" and str(facts.runtime) == "6.4.1"


def test_the_in_tree_amdgpus_kernel_version_is_not_a_dkms_version(
    machine: MachineBuilder, tmp_path: Path
) -> None:
    # amdgpu loaded without /sys/module/amdgpu/version is the kernel's own driver; amd-smi then reports
    # the kernel's version as DRIVER VERSION. A plain kernel 6.12.12 was read as AMD's DKMS module
    # 6.12.12, ROCm 6.4's kernel driver (driver.amd: "ROCm 6.4's kernel driver").
    from envkit.checks.vendors import check_amd_driver
    from envkit.facts import Facts

    root = recorded_root("mi210-x8", tmp_path)
    (root / "sys/module/amdgpu").mkdir(parents=True)
    machine.program(
        "amd-smi", (AMD / "amd-smi-static-mi300a-x4.txt").read_text().replace("6.9.0-rc5+", "6.12.12")
    )
    facts = detect_amd(system_at(root, machine))
    assert facts.driver_version is None
    assert any("6.12.12" in n and "kernel's own" in n for n in facts.notes)
    assert "ROCm 6.4" not in check_amd_driver(Facts(amd=facts)).summary


def test_no_amd_gpu_costs_no_process(machine: MachineBuilder) -> None:
    calls: list[object] = []

    def runner(*args: object, **kwargs: object) -> object:
        calls.append(args)
        raise AssertionError("no process may be started without an AMD GPU or AMD's tools")

    facts = detect_amd(System(env=machine.env, root=machine.root, run=runner))  # type: ignore[arg-type]
    assert facts.gpus == () and facts.driver is None and calls == []


# -- AMD: the tools ---------------------------------------------------------------------------------


def test_amd_smi_alone_names_the_gpus(machine: MachineBuilder) -> None:
    # No KFD tree (a container without /sys): amd-smi's list stands.
    machine.program("amd-smi", (AMD / "amd-smi-static-mi300a-x4.txt").read_text())
    facts = detect_amd(machine.system())
    assert [g.name for g in facts.gpus] == ["MI300A"] * 4
    # that README's amd-smi predates TARGET_GRAPHICS_VERSION: the device id 0x74a0 names gfx942
    assert {g.arch for g in facts.gpus} == {"gfx942"}
    assert facts.driver_version == "6.9.0-rc5+"  # the in-tree amdgpu: the kernel's version
    assert facts.gpus[0].memory_total_mib == 64289


def test_rocm_smi_gfx9010_is_gfx90a(machine: MachineBuilder) -> None:
    machine.program("rocm-smi", (AMD / "rocm-smi-productname-mi250x.json").read_text())
    facts = detect_amd(machine.system())
    assert [(g.arch, g.device_id) for g in facts.gpus] == [("gfx90a", "0x7408")]
    assert facts.sources == ("rocm-smi",)


def test_amd_smi_version_line() -> None:
    line = (AMD / "amd-smi-version-rocm6.1.txt").read_text()
    assert parse_amd_smi_version(line)["rocm version"] == "6.1.0"
    gpus, _ = parse_amd_smi_static((AMD / "amd-smi-static-asic-mi308x.txt").read_text())
    assert [(g.name, g.gfx) for g in gpus] == [("MI308X", "gfx942")]


@pytest.mark.parametrize(
    "garbage",
    ["\x00\x01\xff\xfe garbage", "GPU: 0\n    ASIC:\n        TARGET_GRAPHICS_VERSION: gfx99999999\n",
     "{not json", "[1, 2, 3]"],
)  # fmt: skip
def test_tools_printing_garbage_are_unknown_not_a_traceback(machine: MachineBuilder, garbage: str) -> None:
    machine.program("amd-smi", garbage)
    machine.program("rocm-smi", garbage)
    root = recorded_root("mi210-x8", machine.root.parent)
    facts = detect_amd(system_at(root, machine))
    assert [g.arch for g in facts.gpus] == ["gfx90a"] * 8  # sysfs still answers
    with pytest.raises(ValueError, match="not"):
        parse_rocm_smi_json("[1]" if garbage.startswith("[") else "{not json")


def test_a_hung_amd_smi_is_bounded(machine: MachineBuilder) -> None:
    machine.program("amd-smi", "never printed", sleep=30)
    root = recorded_root("mi210-x8", machine.root.parent)
    start = time.monotonic()
    facts = detect_amd(system_at(root, machine).with_deadline(0.3))
    assert time.monotonic() - start < 5
    assert [g.arch for g in facts.gpus] == ["gfx90a"] * 8
    assert any("amd-smi" in n and "timed out" in n for n in facts.notes), facts.notes


# -- Intel ------------------------------------------------------------------------------------------


def test_panther_lake_igpu_on_xe(machine: MachineBuilder, tmp_path: Path) -> None:
    root = recorded_root("panther-lake-b080-xe", tmp_path, INTEL)
    facts = detect_intel(system_at(root, machine))
    assert [(g.device_id, g.arch, g.pci_bus_id) for g in facts.gpus] == [("0xb080", "ptl", "0000:00:02.0")]
    assert facts.driver == "xe"


def test_xpu_smi_names_an_arc_a770(machine: MachineBuilder) -> None:
    machine.program("xpu-smi", (INTEL / "xpu-smi-discovery-d0-arc-a770.txt").read_text())
    facts = detect_intel(machine.system())
    assert [(g.name, g.device_id, g.arch) for g in facts.gpus] == [
        ("Intel(R) Arc(TM) A770 Graphics", "0x56a0", "dg2")
    ]
    assert facts.driver_version == "17013219"


def test_sycl_ls_without_level_zero(machine: MachineBuilder) -> None:
    machine.program("sycl-ls", (INTEL / "sycl-ls-arc-a770-opencl-only.txt").read_text())
    facts = detect_intel(machine.system())
    assert facts.level_zero is False
    assert [(g.name, g.arch) for g in facts.gpus] == [("Intel(R) Arc(TM) A770 Graphics", "dg2")]
    assert any("OpenCL only" in n for n in facts.notes)


def test_sycl_ls_level_zero_line() -> None:
    text = "[level_zero:gpu][level_zero:0] Intel(R) Level-Zero, Intel(R) Arc(TM) B580 Graphics 20.1.0 [1.6.32224]\n"
    assert parse_sycl_ls(text) == (["Intel(R) Arc(TM) B580 Graphics"], [], "1.6.32224")
    assert parse_xpu_smi("|||\n---\n") == []


# -- Jetson, and the table of vendors --------------------------------------------------------------


def test_l4t_release_file(machine: MachineBuilder) -> None:
    line = (DATA / "jetson" / "nv_tegra_release-r36.4.3.txt").read_text()
    assert parse_nv_tegra_release(line) == "36.4.3"
    machine.file("/etc/nv_tegra_release", line)
    assert read_l4t(machine.system()) == "36.4.3"
    assert parse_nv_tegra_release("garbage") is None


def test_every_vendor_names_a_facts_field() -> None:
    from envkit.facts import Facts

    assert [v.name for v in VENDORS] == ["amd", "intel"]
    assert all(getattr(Facts(), v.name).vendor == v.name for v in VENDORS)


def test_the_recorded_jetson_is_detected_as_jetpack_6(machine: MachineBuilder) -> None:
    # A JetPack 6.2.1 AGX Orin: nvidia-smi's banner (driver 540.4.0; its --query-gpu answers nothing
    # readable there) and /etc/nv_tegra_release (L4T r36.4.3): the JetPack route's plan.
    machine.program(
        "nvidia-smi", (DATA / "nvidia-smi" / "jetson-agx-orin-jp6.2.1-540-banner.txt").read_text()
    )
    machine.file("/etc/nv_tegra_release", (DATA / "jetson" / "nv_tegra_release-r36.4.3.txt").read_text())
    facts = detect_for_plan(machine.system(), None)
    assert facts.driver.version == NvVersion("540.4.0") and facts.host.l4t_release == "36.4.3"
    k = load_knowledge()
    target = dataclasses.replace(
        target_from_facts(facts, k), platform="linux-aarch64", python=Version("3.10")
    )
    plan = resolve(k, target, Request())
    assert plan.jetpack == "6.1 / 6.2" and plan.index_url == "https://pypi.jetson-ai-lab.io/jp6/cu126"
