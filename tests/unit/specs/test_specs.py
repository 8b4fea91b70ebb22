"""Spec rendering: every format read back by its own tool's parser (conda-lock for the conda files,
packaging for requirements, tomllib for uv), the index and credential rules, atomic writing, and a
real `pip install --dry-run` where the PyTorch index is reachable."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml
from packaging.requirements import Requirement

from envkit.errors import InputError
from envkit.knowledge import load_knowledge
from envkit.mirrors.choose import load_mirrors, probe
from envkit.resolve import Channel, Plan, Request, Route, parse_cuda_request, parse_torch_spec, resolve
from envkit.resolve.plan import PlanFlags
from envkit.resolve.target import Target, parse_gpu
from envkit.specs.pip import GENERATED_MARK
from envkit.specs.render import render_specs, spec_flags, spec_mirrors, write_specs
from envkit.specs.template import Template, load_template
from envkit.versions import NvVersion, Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

K = load_knowledge()
MIRRORS = {m.name: m for m in load_mirrors()}
PT2, MINIMAL, TRAIN = load_template("pt2"), load_template("pt2-minimal"), load_template("pt2-train")
SECRET = "s3cret-t0ken"


def plan(
    driver: Optional[str] = "535.104.05",
    *gpus: str,
    torch: Optional[str] = None,
    cuda: str = "auto",
    channel: str = "pip",
    python: str = "3.11",
    platform: str = "linux-x86_64",
) -> Plan:
    target = Target(
        platform=platform,
        driver=NvVersion(driver) if driver else None,
        gpus=tuple(parse_gpu(g, K) for g in gpus),
        python=Version(python),
    )
    request = Request(parse_torch_spec(torch) if torch else None, parse_cuda_request(cuda), Channel(channel))
    return resolve(K, target, request)


@pytest.fixture
def mapping(tmp_path: Path) -> str:
    """A local PyPI -> conda name mapping: conda-lock would otherwise download one from GitHub."""
    path = tmp_path / "mapping.json"
    path.write_text("{}")
    return str(path)


def conda_lock(module: str) -> Any:
    """A conda-lock module (the `test` extra has it). Its vendored conda warns, on import, that its
    own vendored frozendict is deprecated: not envkit's warning to fix."""
    pytest.importorskip("conda_lock", reason="conda-lock (the test extra) parses the conda files")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        return importlib.import_module(module)


def conda_lock_parse(text: str, tmp_path: Path, mapping: str, platform: str = "linux-64") -> Any:
    """environment.yml read by conda-lock's own parser."""
    path = tmp_path / "environment.yml"
    path.write_text(text)
    parser = conda_lock("conda_lock.src_parser.environment_yaml")
    return parser.parse_environment_file(path, [platform], mapping_url=mapping)


def deps(spec: Any, platform: str = "linux-64") -> dict[str, Any]:
    return {(d.manager, d.name): d for d in spec.dependencies[platform]}


def requirement_lines(text: str) -> tuple[list[str], list[Requirement]]:
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    options = [line for line in lines if line.startswith("-")]
    return options, [Requirement(line) for line in lines if not line.startswith("-")]


# conda --------------------------------------------------------------------------------------------


def test_conda_pytorch_channel_route(tmp_path: Path, mapping: str) -> None:
    p = plan("535.104.05", "sm_90", torch="2.5.1", cuda="12.1", channel="conda")
    text = render_specs(p, PT2, "conda", knowledge=K)["environment.yml"]
    assert text.startswith(f"# {GENERATED_MARK}")
    spec = conda_lock_parse(text, tmp_path, mapping)
    assert [c.url for c in spec.channels] == ["pytorch", "nvidia", "defaults"]
    d = deps(spec)
    torch = d[("conda", "pytorch")]
    assert (torch.version, torch.build, torch.conda_channel) == ("2.5.1", "*cuda*", "pytorch")
    assert d[("conda", "pytorch-cuda")].version == "12.1.*"
    assert d[("conda", "torchvision")].version == "0.20.1.*"
    assert d[("conda", "python")].version == "3.11.*"
    assert ("conda", "cudatoolkit") not in d


def test_conda_cpu_and_minimal(tmp_path: Path, mapping: str) -> None:
    p = plan(None, torch="2.4.1", cuda="cpu", channel="conda")
    d = deps(conda_lock_parse(render_specs(p, MINIMAL, "conda")["environment.yml"], tmp_path, mapping))
    assert ("conda", "cpuonly") in d and ("conda", "pytorch-cuda") not in d
    assert d[("conda", "pytorch")].build == "*cpu*"
    assert ("conda", "torchvision") not in d  # pt2-minimal: torch only


def test_conda_forge_route_forces_the_cuda_build(tmp_path: Path, mapping: str) -> None:
    p = plan("570.86.10", "sm_90", torch="2.8.0", channel="conda")
    assert p.conda is not None and p.conda.route is Route.CONDA_FORGE
    text = render_specs(p, TRAIN, "conda")["environment.yml"]
    spec = conda_lock_parse(text, tmp_path, mapping)
    assert [c.url for c in spec.channels] == ["conda-forge"]  # conda-lock drops "nodefaults"
    assert "nodefaults" in yaml.safe_load(text)["channels"]
    d = deps(spec)
    # The feedstock's CUDA 12.9 build of 2.8.0, by its build string and cuda-version (conda.toml).
    assert (d[("conda", "pytorch")].version, d[("conda", "pytorch")].build) == ("2.8.0", "cuda129*")
    assert d[("conda", "cuda-version")].version == "12.9.*"
    assert ("conda", "pytorch-cuda") not in d
    # pt2-train's shared packages come from conda, so conda-forge's lightning sees the conda torch.
    assert d[("conda", "lightning")].version == ">=2.2"
    assert not any(manager == "pip" for manager, _ in d)


def test_pt2_train_on_the_pytorch_channel_uses_conda_forge_not_defaults(tmp_path: Path, mapping: str) -> None:
    p = plan("535.104.05", "sm_90", torch="2.5.1", cuda="12.1", channel="conda")
    spec = conda_lock_parse(render_specs(p, TRAIN, "conda")["environment.yml"], tmp_path, mapping)
    assert [c.url for c in spec.channels] == ["pytorch", "nvidia", "conda-forge"]


def test_pip_in_conda(tmp_path: Path, mapping: str) -> None:
    p = plan("535.104.05", "sm_90", torch="2.5.1", cuda="12.1")
    # conda env create: pip options in the pip: section (conda writes them to a requirements file).
    data = yaml.safe_load(render_specs(p, TRAIN, "conda", pip_in_conda=True)["environment.yml"])
    (pip,) = [d["pip"] for d in data["dependencies"] if isinstance(d, dict)]
    assert pip[0] == "--index-url https://download.pytorch.org/whl/cu121"
    assert pip[1] == "--extra-index-url https://pypi.org/simple"  # for lightning & co., safe: see test_pip_*
    reqs = {r.name: r for r in map(Requirement, pip[2:])}
    assert str(reqs["torch"].specifier) == "==2.5.1+cu121"
    assert {"lightning", "torchmetrics", "tensorboard"} <= set(reqs)
    assert not any(str(d).startswith(("pytorch", "lightning")) for d in data["dependencies"])
    # conda-lock reads no pip options: the same environment lists the index under pip-repositories.
    files = render_specs(p, TRAIN, "conda-lock", pip_in_conda=True)
    spec = conda_lock_parse(files["environment.yml"], tmp_path, mapping)
    assert [r.url for r in spec.pip_repositories] == ["https://download.pytorch.org/whl/cu121"]
    assert deps(spec)[("pip", "torch")].version == "==2.5.1+cu121"


def test_pip_extras_of_a_conda_environment(tmp_path: Path, mapping: str) -> None:
    extra = Template("x", "d", pip_packages=("flash-attn>=2",))
    p = plan("535.104.05", "sm_90", torch="2.5.1", cuda="12.1", channel="conda")
    d = deps(conda_lock_parse(render_specs(p, extra, "conda")["environment.yml"], tmp_path, mapping))
    assert d[("pip", "flash-attn")].version == ">=2"
    assert d[("conda", "pytorch")].conda_channel == "pytorch"


def test_conda_mirror_maps_the_channels_it_carries(tmp_path: Path, mapping: str) -> None:
    p = plan("535.104.05", "sm_90", torch="2.5.1", cuda="12.1", channel="conda")
    text = render_specs(p, PT2, "conda", mirror=MIRRORS["tuna-conda"])["environment.yml"]
    channels = yaml.safe_load(text)["channels"]
    assert channels[0] == "https://mirrors.tuna.tsinghua.edu.cn/anaconda/cloud/pytorch"
    assert channels[1] == "nvidia"  # TUNA has no nvidia channel
    assert "tuna-conda does not mirror the nvidia channel" in text
    conda_lock_parse(text, tmp_path, mapping)


# conda-lock's virtual packages --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("driver", "windows", "cuda"),
    [
        ("535.104.05", False, "12.2"),  # Table 3: 12.2 GA needs 535.54.03
        ("525.60.13", False, "12.0"),
        ("470.82.01", False, "11.4"),
        ("570.86.10", False, "12.8"),
        ("580.65.06", False, "13.0"),
        ("536.25", True, "12.2"),
    ],
)
def test_cuda_for_driver(driver: str, windows: bool, cuda: str) -> None:
    assert K.cuda_for_driver(NvVersion(driver), windows=windows) == Version(cuda)


def _virtual(text: str) -> dict[str, str]:
    model = conda_lock("conda_lock.virtual_package").VirtualPackageSpec
    spec = model.model_validate(yaml.safe_load(text))  # conda-lock's own model of the file
    (subdir,) = spec.subdirs.values()
    return dict(subdir.packages)


def test_virtual_packages_follow_the_target_driver(tmp_path: Path, mapping: str) -> None:
    files = render_specs(
        plan("535.104.05", "sm_90", torch="2.5.1", cuda="12.1", channel="conda"), PT2, "conda-lock"
    )
    assert set(files) == {"environment.yml", "virtual-packages.yml"}
    assert _virtual(files["virtual-packages.yml"])["__cuda"] == "12.2"
    assert yaml.safe_load(files["environment.yml"])["platforms"] == ["linux-64"]
    conda_lock_parse(files["environment.yml"], tmp_path, mapping)


def test_virtual_packages_without_a_driver() -> None:
    cpu = render_specs(plan(None, torch="2.4.1", cuda="cpu", channel="conda"), PT2, "conda-lock")
    assert "__cuda" not in _virtual(cpu["virtual-packages.yml"])
    gpu = render_specs(plan(None, torch="2.5.1", cuda="12.4", channel="conda"), PT2, "conda-lock")
    assert _virtual(gpu["virtual-packages.yml"])["__cuda"] == "12.4"  # the plan's own CUDA
    win = render_specs(
        plan("551.61", torch="2.5.1", cuda="12.4", channel="conda", platform="windows-x86_64"),
        PT2,
        "conda-lock",
    )
    assert (
        "win-64" in win["virtual-packages.yml"] and _virtual(win["virtual-packages.yml"])["__cuda"] == "12.4"
    )


@pytest.mark.parametrize(("driver", "torch"), [(None, "2.8.0"), ("570.86.10", "2.8.0"), (None, "2.4.1")])
def test_a_cpu_conda_spec_has_no_cuda_warning(
    tmp_path: Path, mapping: str, driver: Optional[str], torch: str
) -> None:
    # conda-forge (2.8.0) and the pytorch channel (2.4.1), with and without a driver on the target.
    p = plan(driver, torch=torch, cuda="cpu", channel="conda")
    assert p.cuda is None and not any("__cuda" in w for w in p.warnings)
    files = render_specs(p, PT2, "conda-lock")
    for name, text in files.items():
        comments = "\n".join(line for line in text.splitlines() if line.startswith("#"))
        assert "__cuda virtual package" not in comments and "CUDA 11.4" not in comments, name
    assert "CPU build" in files["virtual-packages.yml"]
    conda_lock_parse(files["environment.yml"], tmp_path, mapping)  # still conda-lock's input
    assert "__cuda" not in render_specs(p, PT2, "conda")["environment.yml"]
    # A CUDA plan on conda-forge keeps both: there __cuda does choose the build.
    gpu = plan("570.86.10", "sm_90", torch="2.8.0", channel="conda")
    assert any("GPU architectures of the pip cu129 wheel" in w for w in gpu.warnings)
    assert "CUDA 11.4" in render_specs(gpu, PT2, "conda-lock")["virtual-packages.yml"]


# pip ----------------------------------------------------------------------------------------------


def test_pip_requirements() -> None:
    text = render_specs(plan("535.104.05", "sm_90", torch="2.5.1", cuda="12.1"), PT2, "pip")[
        "requirements.txt"
    ]
    options, reqs = requirement_lines(text)
    # The official index carries torch's own dependencies: no PyPI beside it, nothing to confuse.
    assert options == ["--index-url https://download.pytorch.org/whl/cu121"]
    assert [str(r) for r in reqs] == ["torch==2.5.1+cu121", "torchvision==0.20.1", "torchaudio==2.5.1"]


def test_pip_extra_index_only_where_safe() -> None:
    p = plan("535.104.05", "sm_90", torch="2.5.1", cuda="12.1")
    text = render_specs(p, TRAIN, "pip", mirror=MIRRORS["tuna"])["requirements.txt"]
    options, reqs = requirement_lines(text)
    assert options == [
        "--index-url https://download.pytorch.org/whl/cu121",
        "--extra-index-url https://pypi.tuna.tsinghua.edu.cn/simple",
    ]
    assert "dependency-confusion" in text and "pinned to +cu121" in text
    assert {r.name for r in reqs} >= {"torch", "lightning"}
    # A torch index given as a URL may host private names: no PyPI beside it, and the file says why.
    url = spec_mirrors(["https://artifacts.example.com/pytorch/cu121"], "cu121")
    text = render_specs(p, TRAIN, "pip", mirror=url)["requirements.txt"]
    options, _ = requirement_lines(text)
    assert options == ["--index-url https://artifacts.example.com/pytorch/cu121"]
    assert "No --extra-index-url" in text and "may host private names" in text


def test_pypi_mirror_serves_the_default_build_itself() -> None:
    p = plan("550.54.14", "sm_90", torch="2.5.1", cuda="12.4")  # 2.5.1's PyPI default is cu124
    options, reqs = requirement_lines(render_specs(p, PT2, "pip", mirror=MIRRORS["tuna"])["requirements.txt"])
    assert options == ["--index-url https://pypi.tuna.tsinghua.edu.cn/simple"]
    assert str(reqs[0]) == "torch==2.5.1"  # no +cu124 on PyPI


def test_flat_mirror_is_find_links() -> None:
    p = plan("535.104.05", "sm_90", torch="2.5.1", cuda="12.1")
    options, reqs = requirement_lines(
        render_specs(p, PT2, "pip", mirror=MIRRORS["aliyun"])["requirements.txt"]
    )
    assert options == ["--find-links https://mirrors.aliyun.com/pytorch-wheels/cu121/"]
    assert str(reqs[0]) == "torch==2.5.1+cu121"
    with pytest.raises(InputError, match="flat listing"):
        render_specs(p, PT2, "conda-lock", mirror=MIRRORS["aliyun"], pip_in_conda=True)


def test_macos_has_no_variant_index() -> None:
    p = plan(None, torch="2.5.1", cuda="cpu", platform="macos-arm64")
    options, reqs = requirement_lines(render_specs(p, MINIMAL, "pip")["requirements.txt"])
    assert options == [] and str(reqs[0]) == "torch==2.5.1"


# uv -----------------------------------------------------------------------------------------------


def test_uv_pyproject() -> None:
    p = plan("535.104.05", "sm_90", torch="2.5.1", cuda="12.1")
    data = tomllib.loads(render_specs(p, TRAIN, "uv", mirror=MIRRORS["tuna"])["pyproject.toml"])
    project, uv = data["project"], data["tool"]["uv"]
    assert project["name"] == "pt2-train" and project["requires-python"] == "==3.11.*"
    assert {Requirement(r).name for r in project["dependencies"]} >= {"torch", "torchvision", "lightning"}
    torch_index, pypi_index = uv["index"]
    assert torch_index == {
        "name": "pytorch-cu121",
        "url": "https://download.pytorch.org/whl/cu121",
        "explicit": True,
    }
    assert pypi_index["default"] is True and pypi_index["url"] == "https://pypi.tuna.tsinghua.edu.cn/simple"
    assert uv["sources"] == {n: {"index": "pytorch-cu121"} for n in ("torch", "torchvision", "torchaudio")}
    assert uv["environments"] == ["sys_platform == 'linux' and platform_machine == 'x86_64'"]


def test_uv_flat_index() -> None:
    p = plan("535.104.05", "sm_90", torch="2.5.1", cuda="12.1")
    data = tomllib.loads(render_specs(p, MINIMAL, "uv", mirror=MIRRORS["aliyun"])["pyproject.toml"])
    (index,) = data["tool"]["uv"]["index"]
    assert index["format"] == "flat" and index["explicit"] is True


# credentials --------------------------------------------------------------------------------------


def test_credentials_are_never_written(tmp_path: Path, mapping: str) -> None:
    p = plan("535.104.05", "sm_90", torch="2.5.1", cuda="12.1")
    torch_mirror = spec_mirrors([f"https://bot:{SECRET}@artifacts.example.com/whl"], "cu121")
    pypi = spec_mirrors([f"pypi=https://bot:{SECRET}@artifacts.example.com/pypi/simple"], "cu121")
    for fmt, extra in (
        ("pip", {}),
        ("uv", {}),
        ("conda", {"pip_in_conda": True}),
        ("conda-lock", {"pip_in_conda": True}),
    ):
        for name, text in render_specs(p, TRAIN, fmt, mirror=(*torch_mirror, *pypi), **extra).items():
            assert SECRET not in text and "bot:" not in text, (fmt, name)
    req = render_specs(p, MINIMAL, "pip", mirror=torch_mirror)["requirements.txt"]
    assert (
        "--index-url https://${ENVKIT_TORCH_INDEX_USERNAME}:${ENVKIT_TORCH_INDEX_PASSWORD}@artifacts" in req
    )
    uv = render_specs(p, MINIMAL, "uv", mirror=torch_mirror)["pyproject.toml"]
    assert "UV_INDEX_TORCH_CU121_USERNAME" in uv
    assert tomllib.loads(uv)["tool"]["uv"]["index"][0]["url"] == "https://artifacts.example.com/whl/cu121"
    lock = render_specs(p, MINIMAL, "conda-lock", mirror=torch_mirror, pip_in_conda=True)["environment.yml"]
    spec = conda_lock_parse(lock, tmp_path, mapping)
    assert spec.pip_repositories[0].url.startswith("https://${ENVKIT_TORCH_INDEX_USERNAME}:")


# errors -------------------------------------------------------------------------------------------


def test_render_errors() -> None:
    pip_plan = plan("535.104.05", "sm_90", torch="2.5.1", cuda="12.1")
    with pytest.raises(InputError, match="no conda route"):
        render_specs(pip_plan, PT2, "conda")
    with pytest.raises(InputError, match="--pip-in-conda applies"):
        render_specs(pip_plan, PT2, "pip", pip_in_conda=True)
    with pytest.raises(InputError, match="--format 'poetry'"):
        render_specs(pip_plan, PT2, "poetry")
    with pytest.raises(InputError, match="both torch-wheels mirrors"):
        render_specs(pip_plan, PT2, "pip", mirror=[MIRRORS["sjtu"], MIRRORS["nju"]])
    with pytest.raises(InputError, match="conda channel mirror"):
        render_specs(pip_plan, PT2, "pip", mirror=MIRRORS["tuna-conda"])
    conda_plan = plan("535.104.05", "sm_90", torch="2.5.1", cuda="12.1", channel="conda")
    with pytest.raises(InputError, match="serves pip wheels"):
        render_specs(conda_plan, PT2, "conda", mirror=MIRRORS["sjtu"])


# the flags a template implies, and --mirror values ------------------------------------------------


def test_spec_flags() -> None:
    flags = spec_flags(PT2, PlanFlags(torch="2.5.*"), "conda")
    assert flags.channel == "conda" and flags.python == "3.11"
    assert parse_torch_spec(str(flags.torch)) == parse_torch_spec(">=2.0,==2.5.*")
    assert spec_flags(PT2, PlanFlags(), "conda", pip_in_conda=True).channel == "pip"
    assert spec_flags(PT2, PlanFlags(python="3.12"), "pip").python == "3.12"
    assert spec_flags(PT2, PlanFlags(env_name="work"), "pip").python is None  # the environment's Python
    assert spec_flags(Template("x", "d"), PlanFlags(), "uv").torch is None
    with pytest.raises(InputError, match="--torch"):
        spec_flags(PT2, PlanFlags(torch="two"), "pip")


def test_spec_mirrors_by_kind() -> None:
    found = spec_mirrors(["sjtu", "tuna", "tuna-conda"], "cu121")
    assert [m.kind for m in found] == ["torch-wheels", "pypi", "conda"]
    (url,) = spec_mirrors(["https://pypi.example.com/simple"], "cu121")
    assert url.kind == "pypi"
    (conda,) = spec_mirrors(["conda=https://conda.example.com/cloud"], "cu121")
    assert conda.kind == "conda"
    with pytest.raises(InputError, match="both pypi mirrors"):
        spec_mirrors(["tuna", "ustc"], "cu121")


def test_the_header_command_renders_the_same_plan() -> None:
    p = plan("535.104.05", "sm_90", torch="2.5.1", cuda="12.1", channel="conda")
    line = render_specs(p, PT2, "conda")["environment.yml"].splitlines()[1]
    args = line.removeprefix("#   envkit spec pt2 ").split()
    flags = dict(zip(args[::2], args[1::2]))
    again = plan(
        flags["--driver"], flags["--gpu"], torch=flags["--torch"], cuda=flags["--cuda"], channel="conda"
    )
    assert again.candidate == p.candidate and again.conda == p.conda


# writing ------------------------------------------------------------------------------------------


def test_write_specs(tmp_path: Path) -> None:
    files = render_specs(
        plan("535.104.05", "sm_90", torch="2.5.1", cuda="12.1", channel="conda"), PT2, "conda-lock"
    )
    out = tmp_path / "out"
    paths = write_specs(files, out)
    assert sorted(p.name for p in paths) == ["environment.yml", "virtual-packages.yml"]
    assert sorted(os.listdir(out)) == ["environment.yml", "virtual-packages.yml"]  # no temporary left
    assert (out / "environment.yml").read_text() == files["environment.yml"]
    assert (out / "environment.yml").stat().st_mode & 0o777 == 0o644
    write_specs(files, out)  # envkit's own files are replaced without --force


def test_write_specs_keeps_foreign_files(tmp_path: Path) -> None:
    files = render_specs(plan("535.104.05", "sm_90", torch="2.5.1", cuda="12.1"), PT2, "uv")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'mine'\n")
    with pytest.raises(InputError, match="not written by envkit"):
        write_specs(files, tmp_path)
    assert "mine" in (tmp_path / "pyproject.toml").read_text()
    write_specs(files, tmp_path, force=True)
    assert GENERATED_MARK in (tmp_path / "pyproject.toml").read_text()


def test_write_specs_all_or_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.txt").write_text("# Generated by envkit, old\n")
    files = {"a.txt": "# Generated by envkit, new\n", "b.txt": "# Generated by envkit, new\n"}
    real_replace = os.replace

    def replace(src: str, dst: Any) -> None:
        if Path(dst).name == "b.txt":  # the second rename fails, after a.txt was replaced
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(InputError, match="cannot write the spec files: No space left on device"):
        write_specs(files, tmp_path)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["a.txt"]  # nothing new, no temporary left
    assert (tmp_path / "a.txt").read_text() == "# Generated by envkit, old\n"
    (tmp_path / "b.txt").mkdir()
    with pytest.raises(InputError, match=r"b\.txt is not a regular file"):
        write_specs(files, tmp_path, force=True)
    with pytest.raises(InputError, match="not a plain file name"):
        write_specs({"../x": ""}, tmp_path)


# a real installer ---------------------------------------------------------------------------------


@pytest.mark.slow  # the network: pip against download.pytorch.org, where this machine can reach it
@pytest.mark.host_tools  # this machine's network (the unit tests are offline otherwise)
def test_cpu_requirements_pass_pip_dry_run(tmp_path: Path) -> None:
    """The CPU requirements file against the real PyTorch index, where this machine can reach it."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        pytest.skip("the CPU plan here is for linux-x86_64")
    (result,) = probe(["https://download.pytorch.org/whl/cpu/torch/"], timeout=5.0)
    if not result.ok:
        pytest.skip(f"download.pytorch.org is not reachable from here ({result.error or result.status})")
    p = plan(None, cuda="cpu", python=python)
    (path,) = write_specs(render_specs(p, MINIMAL, "pip"), tmp_path)
    run = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--isolated", "-r", str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"torch-{p.torch}+cpu" in run.stdout


def test_windows_torch_2_5_xpu_specs_pin_torch_alone() -> None:
    # PyTorch 2.5's get_start_xpu, 'Platform Windows': no torchvision/torchaudio XPU wheels; the specs
    # pinned torchvision==0.20.1 and torchaudio==2.5.1 from an index that has none for Windows.
    from envkit.resolve.target import target_from_flags

    base = Target(platform="windows-x86_64", driver=None, gpus=(), python=Version("3.11"))
    target = target_from_flags(K, base=base, gpus=("Arc A770",), driver=None, platform="windows-x86_64")
    p = resolve(K, target, Request(parse_torch_spec("==2.5.1"), parse_cuda_request("auto"), Channel("pip")))
    specs = render_specs(p, PT2, "pip")
    lines = specs["requirements.txt"].splitlines()
    reqs = [Requirement(line) for line in lines if line and not line.startswith(("#", "-"))]
    assert [str(r) for r in reqs if r.name.startswith("torch")] == ["torch==2.5.1+xpu"]
    assert any("build them from source" in line for line in lines if line.startswith("#"))
    uv = tomllib.loads(render_specs(p, PT2, "uv")["pyproject.toml"])
    assert [d for d in uv["project"]["dependencies"] if d.startswith("torch")] == ["torch==2.5.1+xpu"]
