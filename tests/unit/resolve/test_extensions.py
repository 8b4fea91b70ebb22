"""resolve with extensions (--with): the newest torch build with a wheel of each, the exact wheel,
the reasons, the conflict paragraph, source builds only with --allow-build, and bad --with values.

The facts are the knowledge base's rows (flash-attn: Dao-AILab/flash-attention publish.yml and
setup.py at each tag, cited per row)."""

from __future__ import annotations

import pytest

from envkit.errors import InputError, NoBuildError
from envkit.knowledge import load_knowledge
from envkit.resolve import Request, resolve
from envkit.resolve.extensions import parse_extensions
from envkit.resolve.target import GpuTarget, Target
from envkit.versions import ComputeCapability, NvVersion, Version

K = load_knowledge()


def target(driver: str = "550.54.15", cc: tuple[int, int] = (9, 0), python: str = "3.11") -> Target:
    return Target(
        platform="linux-x86_64",
        driver=NvVersion(driver),
        gpus=(GpuTarget(ComputeCapability(*cc)),),
        python=Version(python),
    )


def with_(*texts: str, allow_build: bool = False, torch: str = "") -> Request:
    from packaging.specifiers import SpecifierSet

    return Request(
        torch=SpecifierSet(torch) if torch else None,
        extensions=parse_extensions(texts),
        allow_build=allow_build,
    )


def test_flash_attn_takes_the_newest_torch_it_has_wheels_for() -> None:
    plan = resolve(K, target(), with_("flash-attn"))
    # flash-attn 2.8.3.post1's wheels stop at torch 2.8 (publish.yml@a8aa52b1ab3e); R550 runs 12.x.
    assert plan.candidate == "2.8.0+cu126"
    (pick,) = plan.extensions
    assert (pick.name, str(pick.version), pick.where) == ("flash-attn", "2.8.3.post1", "url")
    assert pick.file == "flash_attn-2.8.3.post1+cu12torch2.8cxx11abiTRUE-cp311-cp311-linux_x86_64.whl"
    assert pick.url == (
        "https://github.com/Dao-AILab/flash-attention/releases/download/v2.8.3.post1/" + str(pick.file)
    )
    assert pick.requirement == f"flash-attn @ {pick.url}"
    data = plan.to_json()
    assert data["extensions"][0]["sha256"] is None  # GitHub assets: no published sha256
    assert "--constraint constraints.txt" in data["commands"]["extensions"]
    reasons = {r.candidate: r.reason for r in plan.rejected}
    assert "has no wheel for torch 2.14" in reasons["2.14.1+cu126"]


def test_the_abi_of_the_torch_build_picks_the_wheel() -> None:
    # torch 2.6.0's PyPI-default cu124 wheels use the old ABI, its cu126 ones the C++11 ABI.
    for cuda, abi in (("cu124", "FALSE"), ("cu126", "TRUE")):
        from packaging.specifiers import SpecifierSet

        from envkit.resolve.plan import parse_cuda_request

        request = Request(
            torch=SpecifierSet("==2.6.0"),
            cuda=parse_cuda_request(cuda),
            extensions=parse_extensions(["flash-attn"]),
        )
        (pick,) = resolve(K, target(driver="560.35.03"), request).extensions
        assert f"torch2.6cxx11abi{abi}-cp311" in str(pick.file)


def test_an_old_gpu_gets_the_conflict_paragraph_and_no_build_way_out() -> None:
    with pytest.raises(NoBuildError) as caught:
        resolve(K, target(cc=(7, 5)), with_("flash-attn"))
    text = caught.value.message
    assert "flash-attn supports compute capability 8.0 and newer; sm_75 is older" in text
    assert "leave flash-attn out" in text and "--allow-build" not in text


def test_no_wheel_for_the_torch_asked_for_says_so_and_allow_build_plans_the_build() -> None:
    with pytest.raises(NoBuildError) as caught:
        resolve(K, target(), with_("flash-attn", torch="==2.14.1"))
    assert "--allow-build" in caught.value.message + caught.value.hint
    plan = resolve(K, target(), with_("flash-attn", torch="==2.14.1", allow_build=True))
    (pick,) = plan.extensions
    assert pick.where == "build" and pick.build is not None and pick.no_build_isolation
    assert pick.build.arch_env == "FLASH_ATTN_CUDA_ARCHS" and pick.build.arch_list == "90"
    assert "CUDA 12.x" in pick.build.nvcc and "64-core" in pick.build.time
    assert any("built from source" in w for w in plan.warnings)


def test_allow_build_still_prefers_wheels() -> None:
    plan = resolve(K, target(), with_("flash-attn", allow_build=True))
    assert plan.candidate == "2.8.0+cu126" and plan.extensions[0].build is None


def test_bad_with_values_are_input_errors() -> None:
    with pytest.raises(InputError) as caught:
        parse_extensions(["flash_atn"])
    assert "flash-attn" in caught.value.hint
    with pytest.raises(
        InputError, match=r"no flash-attn release is ==9\.1; the releases envkit knows: 2\.8\.3"
    ):
        parse_extensions(["flash-attn==9.1"])
    with pytest.raises(InputError, match="given twice"):
        parse_extensions(["flash-attn", "flash_attn>=2"])
    # A URL, a marker or extras were dropped without a word (the plan named another wheel).
    for text, what in (
        ("flash-attn @ https://example.invalid/f.whl", "a URL is"),
        ('flash-attn==2.8.3; python_version > "3"', "an environment marker is"),
        ("vllm[tensorizer]>=0.6", "extras are"),
    ):
        with pytest.raises(InputError, match=f"{what} not taken here") as caught:
            parse_extensions([text])
        assert caught.value.hint.startswith("--with '")
    with pytest.raises(InputError, match="torch is the build envkit resolves") as caught:
        parse_extensions(["torch==2.5"])
    assert "--torch" in caught.value.hint


def test_vllm_takes_the_torch_it_pins_and_its_pypi_build() -> None:
    plan = resolve(K, target(), with_("vllm>=0.6"))
    (pick,) = plan.extensions
    # vllm 0.19.1 pins torch==2.10.0 (its wheel's METADATA), whose PyPI build is cu128; R550 has no 13.x.
    assert (plan.candidate, str(pick.version)) == ("2.10.0+cu128", "0.19.1")
    assert (
        pick.where == "pypi"
        and pick.sha256 is not None
        and pick.requirement.endswith(f"#sha256={pick.sha256}")
    )
    reasons = {r.candidate: r.reason for r in plan.rejected}
    assert reasons["2.14.1+cu126"].startswith("vllm 0.34.0 requires torch==2.14.0")


def test_xformers_and_bitsandbytes_and_pyg_picks() -> None:
    plan = resolve(K, target(), with_("xformers", "bitsandbytes"))
    picks = {p.name: p for p in plan.extensions}
    # xformers 0.0.35 (stable ABI, torch>=2.10): the cu126 build from download.pytorch.org/whl/cu126.
    assert plan.candidate == "2.14.1+cu126"
    assert picks["xformers"].requirement == "xformers==0.0.35+cu126"
    assert picks["xformers"].index == "https://download.pytorch.org/whl/cu126"
    assert picks["bitsandbytes"].file == "bitsandbytes-0.50.1-py3-none-manylinux_2_24_x86_64.whl"
    pyg = resolve(K, target(), with_("torch-scatter", "torch-sparse"))
    # torch-sparse's wheels stop at torch 2.7 (its README): both from data.pyg.org's 2.7.0 pages.
    # R550 runs cu118 in full, cu126 only through minor-version compatibility: the resolver takes cu118.
    assert pyg.candidate == "2.7.1+cu118"
    assert {p.requirement for p in pyg.extensions} == {
        "torch-scatter==2.1.2+pt27cu118",
        "torch-sparse==0.6.18+pt27cu118",
    }
    assert {p.index for p in pyg.extensions} == {"https://data.pyg.org/whl/torch-2.7.0+cu118.html"}


def test_deepspeed_installs_from_its_sdist_and_apex_only_builds() -> None:
    plan = resolve(K, target(), with_("deepspeed"))
    (pick,) = plan.extensions
    assert pick.where == "sdist" and str(pick.file).endswith(".tar.gz") and pick.build is None
    assert any("JIT-compile on first use" in w for w in plan.warnings)
    with pytest.raises(NoBuildError):
        resolve(K, target(), with_("apex"))
    (apex,) = resolve(K, target(), with_("apex", allow_build=True)).extensions
    assert apex.build is not None and "exactly" in apex.build.nvcc
    assert apex.requirement == "apex @ git+https://github.com/NVIDIA/apex.git@25.09"


def test_specs_carry_the_extensions_after_torch() -> None:
    """requirements.txt and uv's pyproject.toml, each read back with its own parser."""
    import tomllib

    from envkit.specs.render import render_specs
    from envkit.specs.template import load_template

    template = load_template("pt2-minimal")
    v100 = resolve(K, target(driver="535.104.05", cc=(7, 0)), with_("xformers"))
    req = render_specs(v100, template, "pip")["requirements.txt"]
    lines = [line for line in req.splitlines() if line and not line.startswith("#")]
    assert lines[-2:] == ["torch==2.7.0+cu118", "xformers==0.0.30+cu118"]  # on the torch index itself
    uv = tomllib.loads(render_specs(v100, template, "uv")["pyproject.toml"])
    assert uv["tool"]["uv"]["sources"]["xformers"] == {"index": "pytorch-cu118"}
    pyg = resolve(K, target(), with_("torch-scatter"))
    uv = tomllib.loads(render_specs(pyg, template, "uv")["pyproject.toml"])
    assert uv["tool"]["uv"]["find-links"] == ["https://data.pyg.org/whl/torch-2.8.0+cu126.html"]
    assert "torch-scatter==2.1.2+pt28cu126" in uv["project"]["dependencies"]


def test_pyg_lib_for_an_older_torch_minor_and_on_a_mac() -> None:
    # pyg-lib 0.8.0 has wheels for torch 2.10-2.13 (full_matrix_*.json@26a2d1a06a47), macOS's without
    # a variant in the version (_build_macos.yml: X+ptXY on the torch-X.Y.0+cpu page).
    (pick,) = resolve(K, target(), with_("pyg-lib", torch="==2.12.*")).extensions
    assert pick.requirement == "pyg-lib==0.8.0+pt212cu126"
    mac = Target(platform="macos-arm64", driver=None, gpus=(), python=Version("3.12"))
    (pick,) = resolve(K, mac, with_("pyg-lib")).extensions
    assert pick.requirement == "pyg-lib==0.8.0+pt213"
    assert pick.index == "https://data.pyg.org/whl/torch-2.13.0+cpu.html"


def test_no_source_build_of_flash_attn_against_a_cpu_torch() -> None:
    # flash-attn's setup.py compiles CUDA (nvcc) or HIP kernels only (BUILD_TARGET cuda | rocm,
    # Dao-AILab/flash-attention:setup.py@a8aa52b1ab3e): on a Mac or --no-gpu there is no build to plan,
    # and neither --allow-build nor --cuda cpu is a way out.
    mac = Target(platform="macos-arm64", driver=None, gpus=(), python=Version("3.12"))
    with pytest.raises(NoBuildError) as caught:
        resolve(K, mac, with_("flash-attn", allow_build=True))
    assert "its source build needs a CUDA or ROCm build of torch" in caught.value.message
    assert "--allow-build" not in caught.value.message + caught.value.hint
    gh200 = Target(
        platform="linux-aarch64",
        driver=NvVersion("560.35.03"),
        gpus=(GpuTarget(ComputeCapability(9, 0)),),
        python=Version("3.12"),
    )
    with pytest.raises(NoBuildError) as caught:
        resolve(K, gh200, with_("flash-attn"))
    assert "--allow-build" in caught.value.hint and "--cuda cpu" not in caught.value.hint


def test_bitsandbytes_on_an_mi300x_takes_its_rocm_library() -> None:
    # bitsandbytes 0.49.0 on packs ROCm libraries into its Linux x86_64 wheel (python-package.yml's
    # build-rocm, at 0.50.1: ROCm 6.4.4-7.14.0, gfx942 in build-rocm.sh); 0.48.x had that job disabled.
    from envkit.resolve.target import target_from_flags

    mi300x = target_from_flags(K, base=target(), gpus=("MI300X",), python="3.12")
    plan = resolve(K, mi300x, with_("bitsandbytes"))
    (pick,) = plan.extensions
    assert plan.candidate.split("+")[1].startswith("rocm")
    assert (str(pick.version), pick.file) == (
        "0.50.1",
        "bitsandbytes-0.50.1-py3-none-manylinux_2_24_x86_64.whl",
    )
    with pytest.raises(NoBuildError, match=r"bitsandbytes 0\.48\.2 has no wheel for rocm"):
        resolve(K, mi300x, with_("bitsandbytes==0.48.2"))


def test_pyg_packages_on_a_mac_take_the_cpu_page_without_a_local_version() -> None:
    # rusty1s/pytorch_scatter:README.md@3d10cdc83839 (PyTorch 2.8: macOS cpu ✅), building.yml there
    # (macos-14; 'Set version' skipped on macOS, so the wheel is plain 2.1.2 on torch-2.8.0+cpu.html).
    mac = Target(platform="macos-arm64", driver=None, gpus=(), python=Version("3.12"))
    picks = {p.name: p for p in resolve(K, mac, with_("torch-scatter", "torch-sparse")).extensions}
    assert picks["torch-scatter"].requirement == "torch-scatter==2.1.2"
    assert picks["torch-sparse"].requirement == "torch-sparse==0.6.18"
    assert picks["torch-scatter"].index == "https://data.pyg.org/whl/torch-2.7.0+cpu.html"
