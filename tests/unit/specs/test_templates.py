"""Templates: the built-in ones load, the format is documented, a user's is read by path, and every
mistake is an InputError that names the file and the field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import envkit
from envkit.errors import EXIT_USAGE, InputError
from envkit.specs.template import builtin_dir, list_templates, load_template
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
