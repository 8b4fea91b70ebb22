"""spec --format pixi: the pixi.toml of a plan (read back with tomllib, TOML's own parser), and
spec --check pixi.toml: the same checks as an environment.yml, plus spec.system_requirements."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import pytest

from envkit.knowledge import load_knowledge
from envkit.report import Status
from envkit.resolve import Request, resolve
from envkit.resolve.target import Target, target_from_flags
from envkit.specs.check import check_spec
from envkit.specs.render import render_specs
from envkit.specs.template import load_template

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

K = load_knowledge()


def plan(
    driver: Optional[str], *gpus: str, channel: str = "conda", cuda: str = "auto", torch: Optional[str] = None
) -> Any:
    from envkit.resolve import parse_cuda_request, parse_torch_spec

    target = target_from_flags(
        K,
        base=Target(platform="linux-x86_64"),
        driver=driver,
        gpus=gpus,
        no_gpu=not driver,
        platform="linux-x86_64",
        python="3.11",
    )
    request = Request(
        torch=parse_torch_spec(torch) if torch else None, cuda=parse_cuda_request(cuda), channel=channel
    )
    return resolve(K, target, request)


def rendered(p: Any, template: str = "pt2") -> tuple[str, dict[str, Any]]:
    text = render_specs(p, load_template(template), "pixi", knowledge=K)["pixi.toml"]
    return text, tomllib.loads(text)


def test_the_conda_forge_route() -> None:
    _text, data = rendered(plan("535.104.05", "A100"))
    assert data["workspace"] == {"name": "pt2", "channels": ["conda-forge"], "platforms": ["linux-64"]}
    # pixi solves with it as the machines' __cuda: without it, no CUDA build (pixi's PyTorch guide).
    assert data["system-requirements"] == {"cuda": "12"}
    deps = data["dependencies"]
    assert deps["python"] == "3.11.*"
    assert deps["pytorch"] == {"version": "2.13.0.*", "build": "cuda129*"}
    assert deps["cuda-version"] == "12.9.*"
    assert deps["torchvision"] == deps["torchaudio"] == "*"
    assert "pypi-dependencies" not in data


def test_the_pytorch_channel_route_keeps_torch_on_its_channel() -> None:
    _text, data = rendered(plan("535.104.05", "A100", cuda="12.1"), "pt2-train")
    assert data["workspace"]["channels"] == [
        "pytorch",
        "nvidia",
        "https://repo.anaconda.com/pkgs/main",
        "conda-forge",
    ]
    deps = data["dependencies"]
    assert deps["pytorch"] == {"version": "2.5.1.*", "channel": "pytorch"}
    assert deps["pytorch-cuda"] == "12.1.*"
    assert deps["lightning"] == ">=2.2"  # pt2-train's packages, from conda


def test_the_pip_route_takes_torch_from_its_index() -> None:
    _text, data = rendered(plan("535.104.05", "A100", channel="pip"))
    assert data["dependencies"] == {"python": "3.11.*"}
    assert "system-requirements" not in data  # pip's wheels carry their own CUDA
    assert data["pypi-dependencies"]["torch"] == {
        "version": "==2.14.1",
        "index": "https://download.pytorch.org/whl/cu126",
    }


@pytest.mark.parametrize("channel", ["conda", "pip"])
def test_what_envkit_writes_its_own_check_accepts(tmp_path: Path, channel: str) -> None:
    p = plan("535.104.05", "A100", channel=channel)
    path = tmp_path / "pixi.toml"
    path.write_text(rendered(p)[0], encoding="utf-8")
    results = {r.id: r for r in check_spec(path, K, p.target)}
    assert not [r for r in results.values() if r.status in (Status.FAIL, Status.WARN)], results
    # pip's wheels: nothing for [system-requirements] to choose, so nothing to judge.
    expected = Status.PASS if channel == "conda" else Status.SKIP
    assert results["spec.system_requirements"].status is expected


PIXI = """\
[workspace]
name = "train"
channels = ["conda-forge"]
platforms = ["linux-64"]
{system}
[dependencies]
python = "3.11.*"
pytorch = {{ version = "2.13.0.*", build = "cuda129*" }}
cuda-version = "12.9.*"
"""


@pytest.mark.parametrize(
    ("system", "status", "said"),
    [
        ("", Status.FAIL, "no [system-requirements] cuda: pixi solves without __cuda"),
        ('[system-requirements]\ncuda = "11"\n', Status.FAIL, "is below CUDA 12"),
        ('[system-requirements]\ncuda = "12.4"\n', Status.FAIL, "pixi refuses this machine"),
        ('[system-requirements]\ncuda = "12"\n', Status.PASS, "lets pixi pick the CUDA build"),
    ],
)
def test_system_requirements(tmp_path: Path, system: str, status: Status, said: str) -> None:
    path = tmp_path / "pixi.toml"
    path.write_text(PIXI.format(system=system), encoding="utf-8")
    result = next(
        r
        for r in check_spec(path, K, plan("535.104.05", "A100").target)
        if r.id == "spec.system_requirements"
    )
    assert result.status is status and said in result.summary, result
    if status is Status.FAIL:
        assert 'cuda = "12"' in result.fix


def test_a_target_table_applies_on_its_platform(tmp_path: Path) -> None:
    """[target.linux-64.dependencies] over [dependencies], as pixi merges them."""
    path = tmp_path / "pixi.toml"
    text = PIXI.format(system='[system-requirements]\ncuda = "12"\n').replace(
        'pytorch = { version = "2.13.0.*", build = "cuda129*" }', 'pytorch = "*"'
    )
    text += '\n[target.linux-64.dependencies]\npytorch = { version = "2.13.0.*", build = "cuda129*" }\n'
    path.write_text(text, encoding="utf-8")
    results = {r.id: r for r in check_spec(path, K, plan("535.104.05", "A100").target)}
    assert results["spec.system_requirements"].status is Status.PASS


def test_pypi_options_name_the_index_torch_comes_from(tmp_path: Path) -> None:
    """[pypi-options] index-url replaces PyPI for every PyPI dependency without an index of its
    own: torch==2.5.1 from the cu118 index is the cu118 build, which a 470 driver runs."""
    path = tmp_path / "pixi.toml"
    head = '[workspace]\nname = "x"\nchannels = ["conda-forge"]\nplatforms = ["linux-64"]\n'
    options = '[pypi-options]\nindex-url = "https://download.pytorch.org/whl/cu118"\n'
    path.write_text(f'{head}{options}[pypi-dependencies]\ntorch = "==2.5.1"\n', encoding="utf-8")
    results = {r.id: r for r in check_spec(path, K, plan("470.57.02", "A100").target)}
    assert results["spec.driver"].status is Status.PASS, results["spec.driver"]
    assert "CUDA 11.8" in results["spec.driver"].summary


def test_not_a_pixi_manifest(tmp_path: Path) -> None:
    from envkit.errors import InputError

    path = tmp_path / "pixi.toml"
    path.write_text("[tool.other]\nx = 1\n", encoding="utf-8")
    with pytest.raises(InputError, match="no \\[workspace\\]"):
        check_spec(path, K, plan(None).target)
