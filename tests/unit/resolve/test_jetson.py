"""The Jetson route: NVIDIA's JetPack wheels by L4T release or JetPack driver (jetson.toml), never
download.pytorch.org's SBSA wheels before Thor; driver.support on a JetPack driver (540.4.0)."""

from __future__ import annotations

import dataclasses

import pytest

from envkit.checks.compat import check_gpu_arch
from envkit.checks.driver_support import check_driver_support
from envkit.errors import NoBuildError
from envkit.facts import DriverFacts, Facts, GpuFacts, HostFacts, PythonFacts, TorchFacts
from envkit.knowledge import load_knowledge
from envkit.report import Status
from envkit.resolve import Request, resolve
from envkit.resolve.jetson import jetpack_of
from envkit.resolve.target import Target, parse_gpu
from envkit.versions import ComputeCapability, NvVersion, Version

K = load_knowledge()
JP6_INDEX = "https://pypi.jetson-ai-lab.io/jp6/cu126"


def orin_facts(**torch: object) -> Facts:
    """An AGX Orin on JetPack 6.2.1 as detection sees it (the recorded nvidia-smi banner's driver
    and GPU, /etc/nv_tegra_release's L4T release), its Python 3.10 on linux-aarch64."""
    return Facts(
        host=HostFacts(os="Ubuntu 22.04.5 LTS", arch="aarch64", l4t_release="36.4.3"),
        driver=DriverFacts(version=NvVersion("540.4.0"), cuda_version=Version("12.6"), source="nvidia-smi"),
        gpus=(GpuFacts(index=0, name="Orin (nvgpu)", compute_capability=ComputeCapability(8, 7)),),
        python=PythonFacts(
            executable="/usr/bin/python3",
            selected_by="PATH",
            version=Version("3.10.12"),
            platform="linux-aarch64",
        ),
        torch=TorchFacts(**torch),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("driver", "l4t", "jetpack"),
    [
        ("540.4.0", None, "6.1 / 6.2"),  # the JetPack 6 driver nvidia-smi reports
        ("36.4.3", None, "6.1 / 6.2"),  # an L4T number in the driver's place
        ("35.3.1", None, "5.1.x"),
        (None, Version("36.3.0"), "6.0"),
        ("32.7.4", None, "4.x"),
    ],
)
def test_the_jetpack_of_a_driver_or_l4t_release(
    driver: str | None, l4t: Version | None, jetpack: str
) -> None:
    t = Target(platform="linux-aarch64", driver=NvVersion(driver) if driver else None, l4t=l4t)
    jp = jetpack_of(K, t)
    assert jp is not None and jp.jetpack == jetpack


def test_driver_support_on_a_jetpack_driver_names_what_it_runs() -> None:
    result = check_driver_support(orin_facts())
    assert result.status is Status.PASS
    assert "JetPack 6.1 / 6.2" in result.summary and JP6_INDEX in result.summary
    assert "runs no torch release" not in result.summary


def test_an_sbsa_or_pypi_torch_on_an_orin_is_a_finding_with_the_jetpack_fix() -> None:
    # What `pip install torch` from download.pytorch.org's cu126 folder puts on an Orin: SBSA code.
    result = check_gpu_arch(orin_facts(version=Version("2.6.0+cu126"), cuda=Version("12.6")))
    assert result.status is Status.FAIL
    assert f"--index-url {JP6_INDEX}" in result.fix and "download.pytorch.org" not in result.fix


def test_jetpack_5_and_older_get_their_way_out() -> None:
    xavier = Target(
        platform="linux-aarch64",
        driver=NvVersion("35.3.1"),
        gpus=(parse_gpu("Jetson AGX Xavier", K),),
        python=Version("3.8"),
    )
    with pytest.raises(NoBuildError) as info:
        resolve(K, xavier, Request())
    jetson = next(w for w in info.value.ways_out if w.rule == "jetson")
    assert "developer.download.nvidia.com/compute/redist/jp/v511/pytorch/torch-2.0.0+nv23.05" in jetson.text


def test_thor_runs_the_sbsa_cu130_wheels() -> None:
    thor = Target(
        platform="linux-aarch64",
        driver=NvVersion("580.65.06"),
        gpus=(parse_gpu("Jetson Thor", K),),
        python=Version("3.12"),
    )
    plan = resolve(K, thor, Request())
    assert plan.jetpack is None and plan.variant.startswith("cu13")
    assert plan.index_url is not None and plan.index_url.startswith("https://download.pytorch.org/whl/cu13")


def test_the_jetpack_6_way_out_for_flags_names_the_target_again() -> None:
    # `envkit resolve --platform linux-aarch64 --gpu 'Jetson AGX Orin' --driver 540.4.0` (Python
    # 3.11) on a workstation: the way out said `envkit resolve --python 3.10`, which plans for the
    # workstation. For flags it repeats them; for this machine it stays short.
    orin = Target(
        platform="linux-aarch64",
        driver=NvVersion("540.4.0"),
        gpus=(parse_gpu("Jetson AGX Orin", K),),
        python=Version("3.11"),
    )
    with pytest.raises(NoBuildError) as info:
        resolve(K, orin, Request())
    jetson = next(w for w in info.value.ways_out if w.rule == "jetson")
    command = "envkit resolve --platform linux-aarch64 --gpu 'Jetson AGX Orin' --driver 540.4.0 --python 3.10"
    assert jetson.text.endswith(command)
    here = dataclasses.replace(orin, described_by="this machine")
    with pytest.raises(NoBuildError) as info:
        resolve(K, here, Request())
    assert next(w for w in info.value.ways_out if w.rule == "jetson").text.endswith(
        ": envkit resolve --python 3.10"
    )
