"""torch.extensions: installed extensions judged against the installed torch, with the exact fix.

The situations are real reports' (each cited); the facts are built the way doctor records them (a
distribution's name, version and Requires-Dist), and the knowledge is envkit's tables."""

from __future__ import annotations

from envkit.checks.extensions import check_extensions, extension_fixes
from envkit.facts import Distribution, DriverFacts, Facts, GpuFacts, PythonFacts, TorchFacts
from envkit.report import Status
from envkit.versions import ComputeCapability, NvVersion, Version


def facts(torch: str, *dists: Distribution, cc: tuple[int, int] = (8, 0), python: str = "3.11.9") -> Facts:
    return Facts(
        driver=DriverFacts(version=NvVersion("570.124.06")),
        gpus=(GpuFacts(index=0, name="NVIDIA A100-SXM4-80GB", compute_capability=ComputeCapability(*cc)),),
        python=PythonFacts(
            executable="/venv/bin/python",
            selected_by="VIRTUAL_ENV",
            version=Version(python),
            platform="linux-x86_64",
            installers={"pip": "/venv/bin/python -m pip"},
        ),
        torch=TorchFacts(
            version=Version(torch),
            cuda=Version("12.6") if "cu126" in torch else Version("12.4") if "cu124" in torch else None,
            distributions=(Distribution("torch", Version(torch)), *dists),
        ),
    )


def test_a_pyg_wheel_for_another_torch_fails_with_the_wheel_for_this_one() -> None:
    # The +ptXYcuNNN label says which torch a data.pyg.org wheel is for (rusty1s/pytorch_scatter
    # .github/workflows/building.yml@3d10cdc83839, "Set version").
    result = check_extensions(facts("2.7.1+cu126", Distribution("torch-scatter", Version("2.1.2+pt26cu124"))))
    assert result.status is Status.FAIL
    assert "torch-scatter 2.1.2+pt26cu124 was built for torch 2.6 cu124" in result.summary
    assert result.fix == (
        "/venv/bin/python -m pip install --force-reinstall --no-deps 'torch-scatter==2.1.2+pt27cu126' "
        "--find-links https://data.pyg.org/whl/torch-2.7.0+cu126.html"
    )


def test_flash_attn_with_no_wheel_for_this_torch_warns_and_names_the_wheel() -> None:
    # Dao-AILab/flash-attention#1832: torch 2.6.0, flash-attn 2.6.3 (whose wheels stop at torch 2.4),
    # "undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx11…".
    result = check_extensions(
        facts("2.6.0+cu124", Distribution("flash-attn", Version("2.6.3")), python="3.12.7")
    )
    assert result.status is Status.WARN
    assert "no prebuilt flash-attn 2.6.3 wheel fits torch 2.6.0+cu124" in result.summary
    # torch 2.6.0's cu124 wheels use the old C++ ABI: cxx11abiFALSE.
    assert "flash_attn-2.8.3.post1+cu12torch2.6cxx11abiFALSE-cp312-cp312-linux_x86_64.whl" in result.fix


def test_vllm_pinning_another_torch_fails_and_a_turing_gpu_is_too_old_for_flash_attn() -> None:
    vllm = Distribution("vllm", Version("0.19.1"), requires_torch=("torch==2.10.0",))
    result = check_extensions(facts("2.11.0+cu126", vllm))
    assert result.status is Status.FAIL and "vllm 0.19.1 requires torch==2.10.0" in result.summary
    fa = Distribution("flash-attn", Version("2.8.3"))
    old = check_extensions(facts("2.8.0+cu126", fa, cc=(7, 5)))
    assert old.status is Status.FAIL
    assert "flash-attn supports compute capability 8.0 and newer" in old.summary


def test_a_matching_stack_passes_and_nothing_known_skips() -> None:
    fa = Distribution("flash-attn", Version("2.8.3"))
    xf = Distribution("xformers", Version("0.0.29.post3"), requires_torch=("torch==2.6.0",))
    result = check_extensions(facts("2.6.0+cu124", fa, xf))
    assert result.status is Status.PASS, result.summary
    assert extension_fixes(facts("2.6.0+cu124", fa, xf)) == []
    assert check_extensions(facts("2.6.0+cu124")).status is Status.SKIP


def test_a_pasted_report_is_judged_from_its_pip_lines() -> None:
    from pathlib import Path

    from envkit.commands.doctor import diagnose_file

    paste = Path(__file__).parents[2] / "data" / "extensions" / "reports" / "flash-attn-1832-collect_env.txt"
    report = diagnose_file(str(paste))
    (result,) = [c for c in report.checks if c.id == "torch.extensions"]
    assert result.status is Status.WARN
    assert result.summary.startswith("no prebuilt flash-attn 2.6.3 wheel fits torch 2.6.0+cu124")
    assert "cu12torch2.6cxx11abiFALSE-cp312-cp312" in result.fix


def test_the_loaders_verdict_on_an_extension_binary() -> None:
    import dataclasses

    from envkit.facts import ExtensionBinary

    fa = Distribution("flash-attn", Version("2.6.3"))
    base = facts("2.6.0+cu124", fa)
    # Dao-AILab/flash-attention#1832's symbol: the C++11 ABI's std::string in c10::Error's constructor.
    symbol = "_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
    so = "/venv/lib/python3.12/site-packages/flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so"
    bad = ExtensionBinary("flash-attn", so, ("libc10.so", "libtorch.so"), (), (symbol,))
    result = check_extensions(
        dataclasses.replace(base, torch=dataclasses.replace(base.torch, extension_binaries=(bad,)))
    )
    assert result.status is Status.FAIL
    assert "was built for the other C++ ABI than torch's: the loader finds no _ZN3c105Error" in result.summary
    # Built from source against this torch: every symbol resolves, so no prebuilt wheel is needed.
    good = ExtensionBinary("flash-attn", so, ("libc10.so", "libtorch.so", "libcudart.so.12"), (), ())
    built = check_extensions(
        dataclasses.replace(base, torch=dataclasses.replace(base.torch, extension_binaries=(good,)))
    )
    assert built.status is Status.PASS and "was built here" in built.detail
    cuda11 = ExtensionBinary("flash-attn", so, ("libc10.so",), ("libcudart.so.11.0",), ())
    other = check_extensions(
        dataclasses.replace(base, torch=dataclasses.replace(base.torch, extension_binaries=(cuda11,)))
    )
    assert other.status is Status.FAIL and "was built for CUDA 11: torch is cu124" in other.summary
