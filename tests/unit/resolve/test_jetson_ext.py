"""``--with`` on the Jetson route (jetson_ext): PyPI's aarch64 extension wheels are built against
PyPI's torch (vllm pins it in Requires-Dist), so on an Orin each extension is a source build against
the JetPack torch (--allow-build), a JIT package, or exit 3 saying why and what to do."""

from __future__ import annotations

import pytest

from envkit.errors import NoBuildError
from envkit.knowledge import load_knowledge
from envkit.resolve import Request, resolve
from envkit.resolve.extensions import parse_extensions
from envkit.resolve.target import Target, parse_gpu
from envkit.versions import NvVersion, Version

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
