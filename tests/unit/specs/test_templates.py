"""Templates: the built-in ones load, the format is documented, a user's is read by path, and every
mistake is an InputError that names the file and the field."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.requirements import Requirement

import envkit
from envkit.errors import EXIT_USAGE, InputError
from envkit.specs.template import builtin_dir, conda_match_spec_name, list_templates, load_template
from envkit.versions import Version

REPO_ENVS = Path(__file__).parents[3] / "envs"


def test_builtin_templates_load() -> None:
    names = {t.name for t in list_templates()}
    assert {"pt2", "pt2-minimal", "pt2-train"} <= names
    pt2 = load_template("pt2")
    assert pt2.builtin
    assert pt2.companions == ("torchvision", "torchaudio")
    assert pt2.torch is not None and pt2.torch.contains("2.5.1") and not pt2.torch.contains("1.13.1")
    assert pt2.python == Version("3.11")
    assert load_template("pt2-minimal").companions == ()
    train = load_template("pt2-train")
    assert {Requirement(p).name for p in train.packages} == {"lightning", "torchmetrics", "tensorboard"}
    assert train.conda_channels == ("conda-forge",)


def test_builtin_folder_ships_inside_the_package() -> None:
    # envkit/envs links to the repository's envs/, so that the wheel carries the templates.
    inside = Path(envkit.__file__).parent / "envs"
    assert inside.is_dir() and (inside / "pt2.toml").is_file()
    assert builtin_dir() == inside


def test_builtin_folder_falls_back_to_the_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "envkit").mkdir()
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "solo.toml").write_text('name = "solo"\ndescription = "x"\n')
    monkeypatch.setattr(envkit, "__file__", str(tmp_path / "envkit" / "__init__.py"))
    assert builtin_dir() == tmp_path / "envs"
    assert [t.name for t in list_templates()] == ["solo"]


def test_readme_documents_every_field() -> None:
    readme = (REPO_ENVS / "README.md").read_text(encoding="utf-8")
    from envkit.specs.template import _FIELDS

    for field in _FIELDS:
        assert re.search(rf"^{field} = ", readme, re.MULTILINE), field
    for template in list_templates():
        assert f"`{template.name}`" in readme


def test_user_template_by_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(
        'name = "research"\ndescription = "my stack"\ntorch = "2.5.*"\ncompanions = ["torchvision"]\n'
        'channel = "conda"\npackages = ["numpy>=1.26"]\nconda_packages = ["nccl>=2.18"]\n'
        "pip_packages = [\"flash-attn[dev]>=2 ; sys_platform == 'linux'\"]\n"
    )
    t = load_template(str(path))
    assert (t.name, t.builtin, t.channel) == ("research", False, "conda")
    assert t.torch is not None and t.torch.contains("2.5.1")
    assert t.packages == ("numpy>=1.26",)
    assert t.conda_packages == ("nccl>=2.18",)
    assert t.torch_packages == ("torch", "torchvision")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('name = "x"\ndescription = "d"\npython = "3"\n', "python"),
        ('name = "x"\ndescription = "d"\npython = 3.11\n', "python"),
        ('name = "x"\ndescription = "d"\ntorch = "two"\n', "torch"),
        ('name = "x"\ndescription = "d"\ncompanions = ["torchtext"]\n', "companions"),
        ('name = "x"\ndescription = "d"\ncompanions = ["torchvision", "torchvision"]\n', "companions"),
        ('name = "x"\ndescription = "d"\nchannel = "mamba"\n', "channel"),
        ('name = "x"\ndescription = "d"\npackages = ["torch>=2"]\n', "packages"),
        ('name = "x"\ndescription = "d"\npackages = ["numpy~=1.26"]\n', "packages"),
        ('name = "x"\ndescription = "d"\npackages = ["numpy[extra]"]\n', "packages"),
        ('name = "x"\ndescription = "d"\npip_packages = ["not a requirement!"]\n', "pip_packages"),
        ('name = "x"\ndescription = "d"\npip_packages = "numpy"\n', "pip_packages"),
        ('name = "x"\ndescription = "d"\nconda_packages = ["pytorch-cuda=12.1"]\n', "conda_packages"),
        ('name = "x"\ndescription = "d"\nconda_packages = ["nccl; rm -rf /"]\n', "conda_packages"),
        ('name = "x"\ndescription = "d"\nconda_channels = ["defaults"]\n', "conda_channels"),
        ('name = "has space"\ndescription = "d"\n', "name"),
        ('description = "d"\n', "name"),
        ('name = "x"\n', "description"),
        ('name = "x"\ndescription = "d"\npackges = ["numpy"]\n', "packges"),
    ],
)
def test_bad_template_names_file_and_field(tmp_path: Path, body: str, field: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(body)
    with pytest.raises(InputError) as info:
        load_template(str(path))
    assert str(path) in info.value.message
    assert repr(field) in info.value.message
    assert info.value.exit_code == EXIT_USAGE


def test_not_toml(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text('name = "x\n')
    with pytest.raises(InputError, match=r"broken\.toml: not valid TOML"):
        load_template(str(path))


def test_builtin_name_must_match_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "one.toml").write_text('name = "two"\ndescription = "d"\n')
    monkeypatch.setattr("envkit.specs.template.builtin_dir", lambda: tmp_path / "envs")
    with pytest.raises(InputError, match=r"one\.toml: field 'name'"):
        load_template("one")


def test_unknown_names_and_paths() -> None:
    with pytest.raises(InputError, match=r"no such template; the built-in ones are .*pt2-minimal"):
        load_template("pt3")
    with pytest.raises(InputError, match="no such template file"):
        load_template("./missing.toml")


# conda_packages are conda match specs, held to conda's own parser ---------------------------------

# The forms of conda's docs (https://docs.conda.io/projects/conda/en/latest/user-guide/concepts/pkg-specs.html)
# and the ones envkit writes itself.
CONDA_SPECS_OK = [
    "nccl",
    "nccl 2.18",
    "nccl 2.18.5 h6103f9b_0",
    "nccl==2.18.5",
    "nccl>=2.18,<3",
    "nccl=2.18.*",
    "nccl=2.18",
    "nccl 2.18|2.19",
    "nccl=2.18.5=h6103f9b_0",
    "conda-forge::nccl",
    "conda-forge::nccl>=2.18",
    "nccl>=2.18 cuda*",
    "nccl !=2.19.1",
    "nccl[version='>=2.18,<3']",
    'nccl[build="cuda*", version="2.18.*"]',
]
# What conda refuses, and conda's leniencies that hide a typo (conda reads `nccl 2 3 4` as version 2,
# build "3 4", and `nccl (2)` as plain nccl).
CONDA_SPECS_BAD = [
    "nccl >= = 2",
    "nccl>=",
    "nccl==",
    "nccl<<2",
    "nccl>==2",
    "nccl 2.18,",
    "nccl[bogus=1]",
    "nccl >= 2",
    "nccl 2 3 4",
    "nccl (2)",
    "nccl; rm -rf /",
    "::nccl",
]


def match_spec() -> Any:
    conda_lock = pytest.importorskip("conda_lock", reason="conda-lock (the test extra, Python >= 3.10)")
    assert conda_lock
    from conda_lock.interfaces.vendored_conda import MatchSpec

    return MatchSpec


@pytest.mark.parametrize("spec", CONDA_SPECS_OK)
def test_conda_match_specs_conda_reads(spec: str) -> None:
    assert conda_match_spec_name(spec) == "nccl"
    assert match_spec()(spec).name == "nccl"  # conda reads it, as the same package


@pytest.mark.parametrize("spec", CONDA_SPECS_BAD)
def test_conda_match_specs_refused(tmp_path: Path, spec: str) -> None:
    assert conda_match_spec_name(spec) is None
    path = tmp_path / "mine.toml"
    path.write_text(f'name = "x"\ndescription = "d"\nconda_packages = [{json.dumps(spec)}]\n')
    with pytest.raises(InputError) as info:
        load_template(str(path))
    assert str(path) in info.value.message and "'conda_packages'" in info.value.message
    assert repr(spec) in info.value.message


def test_conda_refuses_what_conda_refuses() -> None:
    refused = [s for s in CONDA_SPECS_BAD if s not in ("nccl >= 2", "nccl 2 3 4", "nccl (2)", "::nccl")]
    refused.remove("nccl; rm -rf /")
    for spec in refused:  # the oracle agrees these are not match specs at all
        with pytest.raises(Exception, match="Invalid"):
            match_spec()(spec)


_SPEC_CHARS = st.sampled_from(
    [
        *"nc l2.18*=<>!~,|[]'\"_-:+0a",
        "nccl",
        "version=",
        "build=",
        "build_number=",
        "subdir=",
        "conda-forge::",
    ]
)


@given(st.lists(_SPEC_CHARS, max_size=12).map("".join))
@settings(max_examples=300, deadline=None)
def test_every_spec_envkit_takes_conda_takes(text: str) -> None:
    name = conda_match_spec_name(text)
    if name is not None:
        assert match_spec()(text.strip()).name == name.lower(), text


def test_bad_conda_spec_is_exit_2_before_anything_is_written(tmp_path: Path) -> None:
    template = tmp_path / "mine.toml"
    template.write_text(
        'name = "mine"\ndescription = "d"\nchannel = "conda"\nconda_packages = ["nccl >= = 2"]\n'
    )
    out = tmp_path / "out"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "envkit",
            "spec",
            str(template),
            "--format",
            "conda",
            "--cuda",
            "cpu",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == EXIT_USAGE, run.stderr
    assert str(template) in run.stderr and "'conda_packages'" in run.stderr and "'nccl >= = 2'" in run.stderr
    assert "Traceback" not in run.stderr
    assert not out.exists()
