"""The NVIDIA side of the knowledge base: driver floors for every CUDA from 9.0, each toolkit's SASS
range, driver branches per architecture, and GPU names as nvidia-smi spells them."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.knowledge import KnowledgeError, load_knowledge, variant_cuda
from envkit.versions import ComputeCapability, NvVersion, Version, parse_compute_capability

K = load_knowledge()
CC = ComputeCapability


def cc_(text: str) -> ComputeCapability:
    cc = parse_compute_capability(text)
    assert cc is not None
    return cc


def _floor(cuda: str, windows: bool = False) -> tuple[str, str]:
    floor = K.driver_floor(Version(cuda), windows=windows)
    assert floor is not None, cuda
    return str(floor.minimum), str(floor.toolkit)


@pytest.mark.parametrize(
    "cuda",
    ["9.0", "9.1", "9.2", "10.0", "10.1", "10.2"]
    + [f"11.{m}" for m in range(9)]
    + [f"12.{m}" for m in (0, 1, 2, 3, 4, 5, 6, 8, 9)]
    + [f"13.{m}" for m in range(4)],
)
def test_every_cuda_from_9_0_has_a_toolkit_row_with_both_drivers(cuda: str) -> None:
    toolkit = K.toolkit(Version(cuda))
    assert toolkit is not None
    assert toolkit.sass, cuda
    assert (toolkit.windows_driver is None) == (Version(cuda) >= Version("13.0"))  # Table 3: N/A
    assert K.driver_floor(Version(cuda)) is not None


def test_cuda_10_and_older_need_their_own_toolkits_driver() -> None:
    # The case: torch 1.5.0+cu102 on driver 410.104 must not pass.
    floor = K.driver_floor(Version("10.2"))
    assert floor is not None and not floor.minor_version_compatibility
    assert str(floor.minimum) == "440.33"
    assert NvVersion("410.104") < floor.minimum
    assert _floor("10.2", windows=True) == ("441.22", "441.22")
    assert _floor("9.2") == ("396.26", "396.26")
    assert K.driver_floors(Version("10.0")) == (NvVersion("410.48"), NvVersion("410.48"))


def test_minor_version_compatibility_floors() -> None:
    assert _floor("11.8") == ("450.80.02", "520.61.05")
    assert _floor("11.8", windows=True) == ("452.39", "520.06")
    assert _floor("11.0") == ("450.51.05", "450.51.05")  # 11.0 GA shipped below the 11.x floor
    assert _floor("12.6") == ("525.60.13", "560.28.03")
    assert _floor("12.6", windows=True) == ("528.33", "560.76")  # Table 2: 528.33, not 527.41
    assert _floor("12.0", windows=True) == ("527.41", "527.41")  # 12.0 GA's own driver is lower
    assert _floor("13.0") == ("580.65.06", "580.65.06")
    floor = K.driver_floor(Version("13.2"), windows=True)  # no Windows column: Linux stands in
    assert floor is not None and str(floor.minimum) == "580.65.06"


def test_unknown_cuda_is_none_never_a_pass() -> None:
    assert K.driver_floor(Version("8.0")) is None
    assert K.driver_floors(Version("8.0")) == (None, None)
    assert K.driver_floor(Version("14.0")) is None
    assert K.sass_range(Version("8.0")) is None
    # A minor newer than the table keeps its family floor; its own driver is unknown, not invented.
    newer = K.driver_floor(Version("13.5"))
    assert newer is not None and newer.toolkit is None and str(newer.minimum) == "580.65.06"


def test_no_cuda_of_a_torch_variant_lacks_floors_and_sass() -> None:
    seen = {variant_cuda(v) for r in K.releases for vs in r.variants.values() for v in vs}
    for cuda in filter(None, seen):
        assert K.driver_floor(cuda) is not None, cuda
        assert K.sass_range(cuda) is not None, cuda


@pytest.mark.parametrize(
    ("cuda", "lowest", "highest"),
    [
        ("9.0", "3.0", "7.0"),
        ("10.2", "3.0", "7.5"),
        ("11.0", "3.5", "8.0"),
        ("11.1", "3.5", "8.6"),
        ("11.8", "3.5", "9.0"),
        ("12.0", "5.0", "9.0"),
        ("12.8", "5.0", "12.0"),
        ("12.9", "5.0", "12.1"),
        ("13.0", "7.5", "12.1"),
    ],
)
def test_sass_ranges(cuda: str, lowest: str, highest: str) -> None:
    assert K.sass_range(Version(cuda)) == (cc_(lowest), cc_(highest))


def test_what_each_toolkit_can_emit() -> None:
    def emits(cuda: str, cc: str) -> bool:
        toolkit = K.toolkit(Version(cuda))
        assert toolkit is not None
        return toolkit.emits(cc_(cc))

    assert not emits("10.2", "8.0")
    assert emits("11.0", "8.0") and not emits("11.0", "8.6") and not emits("11.0", "3.0")
    assert emits("11.8", "8.9") and emits("11.8", "9.0")
    assert not emits("12.0", "3.7")  # CUDA 12.0 removed Kepler
    assert emits("12.8", "10.0") and emits("12.8", "12.0") and not emits("12.8", "10.3")
    assert emits("12.9", "10.3") and emits("12.9", "12.1")
    assert not emits("13.0", "7.0") and not emits("13.0", "10.1") and emits("13.0", "11.0")


def _rules(cc: str, name: str | None = None) -> list[tuple[int | None, int | None]]:
    return [(r.first_branch, r.last_branch) for r in K.driver_rules if r.applies(cc_(cc), name)]


def _first(cc: str, name: str | None = None) -> int:
    return max(f for f, _ in _rules(cc, name) if f is not None)


def test_first_driver_branch_per_architecture() -> None:
    assert _first("7.5") == 410
    assert _first("8.0") == 450
    assert _first("8.6") == 455
    assert _first("8.9") == 520 and _first("9.0") == 520  # R470 cannot drive Hopper or Ada
    assert _first("10.0") == 570 and _first("12.0") == 570
    assert _first("10.3") == 575 and _first("12.1") == 575  # came after sm_100/sm_120
    assert _first("11.0") == 580


def test_a_product_rule_needs_the_products_name() -> None:
    server = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert _first("12.0", server) == 575
    assert _first("12.0", "NVIDIA GeForce RTX 5090") == 570
    assert _first("12.0") == 570  # without a name only the architecture's rule applies


def test_last_driver_branch_per_architecture() -> None:
    def last(cc: str) -> int:
        return min(b for _, b in _rules(cc) if b is not None)

    assert last("3.7") == 470 and last("3.0") == 470
    assert last("5.2") == 580 and last("6.1") == 580 and last("7.0") == 580
    assert last("2.1") == 390
    assert all(b is None for _, b in _rules("7.5"))


@pytest.mark.parametrize(
    ("name", "cc"),
    [
        ("NVIDIA A10G", "8.6"),
        ("A10G", "8.6"),
        ("NVIDIA A10", "8.6"),
        ("NVIDIA L20", "8.9"),
        ("NVIDIA L4", "8.9"),
        ("NVIDIA L40S", "8.9"),
        ("NVIDIA H20", "9.0"),
        ("NVIDIA H800", "9.0"),
        ("NVIDIA A800-SXM4-80GB", "8.0"),
        ("NVIDIA A2", "8.6"),
        ("NVIDIA A16", "8.6"),
        ("NVIDIA T4G", "7.5"),
        ("Tesla T4", "7.5"),
        ("NVIDIA H100 NVL", "9.0"),
        ("NVIDIA H200 NVL", "9.0"),
        ("NVIDIA GH200 480GB", "9.0"),
        ("NVIDIA B200", "10.0"),
        ("NVIDIA GB200", "10.0"),
        ("NVIDIA B300 SXM6 AC", "10.3"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "12.0"),
        ("NVIDIA GB10", "12.1"),
        ("NVIDIA Jetson AGX Thor", "11.0"),
        ("Orin", "8.7"),
        ("Xavier", "7.2"),
        ("NVIDIA Tegra X1", "5.3"),
        ("NVIDIA RTX 6000 Ada Generation", "8.9"),
        ("NVIDIA RTX A1000", "8.6"),
        ("Quadro P4000", "6.1"),
        ("Quadro RTX 5000", "7.5"),
        ("NVIDIA GeForce RTX 5090 D", "12.0"),
        ("NVIDIA GeForce RTX 4090 D", "8.9"),
        ("NVIDIA GeForce RTX 4060 Laptop GPU", "8.9"),
        ("NVIDIA GeForce RTX 3090 Ti", "8.6"),
        ("NVIDIA GeForce RTX 2080 Ti", "7.5"),
        ("NVIDIA GeForce GTX 1660 SUPER", "7.5"),
        ("NVIDIA GeForce GTX 1050 Ti", "6.1"),
        ("NVIDIA TITAN RTX", "7.5"),
        ("NVIDIA TITAN V", "7.0"),
        ("NVIDIA TITAN Xp", "6.1"),
        ("NVIDIA GeForce GTX TITAN X", "5.2"),
        ("NVIDIA GeForce GTX 750 Ti", "5.0"),
        ("Tesla K40m", "3.5"),
        ("Tesla M60", "5.2"),
        ("Tesla P40", "6.1"),
    ],
)
def test_gpu_names(name: str, cc: str) -> None:
    gpu = K.gpu_named(name)
    assert gpu is not None, name
    assert str(gpu.cc) == cc, (name, gpu.model)


def test_laptop_gpus_do_not_get_desktop_peaks() -> None:
    desktop, laptop = (
        K.gpu_named("NVIDIA GeForce RTX 4090"),
        K.gpu_named("NVIDIA GeForce RTX 4090 Laptop GPU"),
    )
    assert desktop is not None and desktop.bf16_tflops == 165.2
    assert laptop is not None and laptop.bf16_tflops is None
    a10g = K.gpu_named("NVIDIA A10G")
    assert a10g is not None and a10g.bf16_tflops is None  # NVIDIA publishes no A10G datasheet


def test_every_nvidia_row_cites_a_primary_source() -> None:
    for item in (*K.gpus, *K.toolkits.values(), *K.toolkit_updates, *K.families.values(), *K.driver_rules):
        assert item.source and "compat-data" not in item.source


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'source = "https://developer.nvidia.com/cuda-gpus"',
            'source = "compat-data.md §4a"',
            r"gpus.toml: \[\[gpu\]\] #1 \(GB10 \(DGX Spark\)\): field 'source': expected a primary source",
        ),
        ('source = "https://developer.nvidia.com/cuda-gpus"', 'source = " "', "field 'source'"),
    ],
)
def test_a_gpu_row_without_a_primary_source_is_refused(
    data_copy: Path, old: str, new: str, message: str
) -> None:
    _edit(data_copy / "gpus.toml", old, new)
    with pytest.raises(KnowledgeError, match=message):
        load_knowledge()


def test_a_family_without_minor_version_compatibility_has_no_floor(data_copy: Path) -> None:
    _edit(data_copy / "cuda.toml", "major = 10\n", 'major = 10\nlinux_min_driver = "410.48"\n')
    with pytest.raises(KnowledgeError, match="no floor where minor_version_compatibility = false"):
        load_knowledge()


def test_a_toolkit_row_needs_its_sass(data_copy: Path) -> None:
    _edit(
        data_copy / "cuda.toml",
        'sass = ["3.0", "3.2", "3.5", "3.7", "5.0", "5.2", "5.3", "6.0", "6.1", "6.2", "7.0"]\n',
        "",
    )
    with pytest.raises(KnowledgeError, match=r"\[\[toolkit\]\] #1 \(9.0\): field 'sass'"):
        load_knowledge()
