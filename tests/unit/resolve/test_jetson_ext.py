"""``--with`` on the Jetson route (jetson_ext): PyPI's aarch64 extension wheels are built against
PyPI's torch (vllm pins it in Requires-Dist), so on an Orin each extension is a source build against
the JetPack torch (--allow-build), a JIT package, or exit 3 saying why and what to do."""

from __future__ import annotations

import pytest

from envkit.checks.extensions import check_extensions
from envkit.errors import NoBuildError
from envkit.facts import Distribution, DriverFacts, Facts, GpuFacts, HostFacts, PythonFacts, TorchFacts
from envkit.knowledge import load_knowledge
from envkit.report import Status
from envkit.resolve import Request, resolve
from envkit.resolve.extensions import parse_extensions
from envkit.resolve.target import Target, parse_gpu
from envkit.versions import ComputeCapability, NvVersion, Version

K = load_knowledge()
JP6_INDEX = "https://pypi.jetson-ai-lab.io/jp6/cu126"
# `envkit resolve --platform linux-aarch64 --gpu "Jetson AGX Orin" --driver 540.4.0 --python 3.10`
ORIN = Target(
    platform="linux-aarch64",
    driver=NvVersion("540.4.0"),
    gpus=(parse_gpu("Jetson AGX Orin", K),),
    python=Version("3.10"),
)


def test_vllm_on_an_orin_names_pypis_torch_pin_and_the_ways_out() -> None:
    # Before, the route ignored --with: the error said no torch fits and its way out was the JetPack
    # command without --with vllm, never why vllm cannot come with NVIDIA's torch.
    with pytest.raises(NoBuildError) as info:
        resolve(K, ORIN, Request(extensions=parse_extensions(["vllm"])))
    err = info.value
    assert err.exit_code == 3
    text = err.summary
    assert "\n" not in text
    assert "vllm 0.34.0" in text and "torch==2.14.0" in text and "JetPack 6.1 / 6.2 torch 2.5.0" in text
    assert "dusty-nv/jetson-containers" in text
    # No vllm release takes torch 2.5.0; 0.6.3.post1 requires torch==2.4.0, which JetPack 6 has.
    build = next(w for w in err.ways_out if w.value == "--allow-build")
    assert "vllm 0.6.3.post1" in build.text and "torch 2.4.0" in build.text


@pytest.mark.parametrize("name", ["flash-attn", "xformers"])
def test_compiled_extensions_on_an_orin_exit_3_naming_them(name: str) -> None:
    with pytest.raises(NoBuildError) as info:
        resolve(K, ORIN, Request(extensions=parse_extensions([name])))
    assert f"no build of {name} fits the JetPack torch" in info.value.summary
    assert "--allow-build (compiles" in info.value.summary


def test_allow_build_compiles_xformers_against_the_jetpack_torch() -> None:
    plan = resolve(K, ORIN, Request(extensions=parse_extensions(["xformers"]), allow_build=True))
    assert plan.jetpack == "6.1 / 6.2" and plan.index_url == JP6_INDEX
    (pick,) = plan.extensions
    assert pick.name == "xformers" and pick.where == "build"
    assert pick.build is not None and pick.build.arch_list == "8.7"
    assert plan.torch == Version("2.5.0")


def test_a_jit_extension_comes_with_the_jetpack_torch() -> None:
    # DeepSpeed's sdist compiles its ops against the torch it finds: nothing of PyPI's torch comes.
    plan = resolve(K, ORIN, Request(extensions=parse_extensions(["deepspeed"])))
    assert plan.index_url == JP6_INDEX
    assert [p.name for p in plan.extensions] == ["deepspeed"]


def _orin(torch: str, cuda: str, *dists: Distribution) -> Facts:
    """An AGX Orin on JetPack 6.2.1 (L4T 36.4.3, driver 540.4.0 as its nvidia-smi banner prints it),
    Python 3.10 on linux-aarch64, with ``torch`` and ``dists`` installed."""
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
        torch=TorchFacts(version=Version(torch), cuda=Version(cuda), distributions=dists),
    )


def test_doctor_names_the_extension_that_replaced_the_jetpack_torch() -> None:
    # `pip install vllm==0.34.0` on an Orin: its Requires-Dist torch==2.14.0 brought PyPI's torch.
    vllm = Distribution("vllm", Version("0.34.0"), requires_torch=("torch==2.14.0",))
    result = check_extensions(_orin("2.14.0", "13.0", vllm))
    assert result.status is Status.FAIL
    assert "vllm 0.34.0 requires torch==2.14.0" in result.summary and "JetPack 6.1 / 6.2" in result.summary
    assert f"--index-url {JP6_INDEX}" in result.fix and "envkit resolve --with vllm" in result.fix


def test_doctor_leaves_an_extension_that_pins_the_jetpack_torch_alone() -> None:
    # A source build of vllm 0.6.3.post1 against NVIDIA's torch 2.4.0: its pin is the JetPack's torch.
    vllm = Distribution("vllm", Version("0.6.3.post1"), requires_torch=("torch==2.4.0",))
    result = check_extensions(_orin("2.4.0", "12.6", vllm))
    assert "JetPack" not in result.summary and "JetPack" not in (result.detail or "")
