"""Each manifest kind edited for the H100 on driver 550 (torch 2.14.1+cu126 on pip, conda-forge's
2.13.0 cuda build on conda), read back by its own tool's parser, and edited again: byte for byte
the same."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest

from envkit.errors import InputError
from envkit.project import conda_env, pixi, poetry, requirements, uv

from .conftest import want_for

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CU126 = "https://download.pytorch.org/whl/cu126"

# What `uv init --app --name app --python 3.11` wrote (uv 0.13.9), then `uv add "numpy>=1.26"`.
UV_INIT = """\
[project]
name = "app"
version = "0.1.0"
description = "Add your description here"
readme = "README.md"
requires-python = ">=3.11"
dependencies = [
    "numpy>=1.26",
]
"""


def edited(kind: object, path: Path, text: str, want: object) -> str:
    """``kind.apply`` twice: the second pass must return its input byte for byte."""
    path.write_text(text, encoding="utf-8")
    once = kind.apply(path, text, want)  # type: ignore[attr-defined]
    assert kind.apply(path, once, want) == once  # type: ignore[attr-defined]
    path.write_text(once, encoding="utf-8")
    return once  # type: ignore[no-any-return]


def test_uv_gets_an_explicit_index_and_sources_gated_on_linux(tmp_path: Path) -> None:
    out = edited(uv, tmp_path / "pyproject.toml", UV_INIT, want_for(packages=("torch", "torchvision")))
    data = tomllib.loads(out)
    assert data["project"]["dependencies"] == ["numpy>=1.26", "torch==2.14.1", "torchvision==0.29.1"]
    assert data["tool"]["uv"]["index"] == [{"name": "pytorch-cu126", "url": CU126, "explicit": True}]
    source = [{"index": "pytorch-cu126", "marker": "sys_platform == 'linux'"}]
    assert data["tool"]["uv"]["sources"] == {"torch": source, "torchvision": source}
    assert out.startswith(UV_INIT.rstrip("]\n"))  # what was there is still there, as it was


def test_uv_cross_platform_cuda_on_linux_and_windows_pypi_on_macos(tmp_path: Path) -> None:
    want = want_for(("linux-x86_64", "windows-x86_64", "macos-arm64"))
    data = tomllib.loads(edited(uv, tmp_path / "pyproject.toml", UV_INIT, want))
    marker = "sys_platform == 'linux' or sys_platform == 'win32'"
    assert data["tool"]["uv"]["sources"]["torch"] == [{"index": "pytorch-cu126", "marker": marker}]


def test_uv_replaces_another_variant_and_keeps_comments(tmp_path: Path) -> None:
    text = UV_INIT.replace('"numpy>=1.26",', '"numpy>=1.26",  # arrays\n    "torch>=2.1",  # the model') + (
        '\n[tool.uv.sources]\ntorch = { index = "pytorch-cu118" }\n\n'
        '# the old build\n[[tool.uv.index]]\nname = "pytorch-cu118"\nurl = "https://download.pytorch.org/whl/cu118"\n'
        "explicit = true\n"
    )
    out = edited(uv, tmp_path / "pyproject.toml", text, want_for())
    data = tomllib.loads(out)
    assert "# arrays" in out and "# the model" in out
    assert [i["name"] for i in data["tool"]["uv"]["index"]] == ["pytorch-cu126"]
    assert data["project"]["dependencies"][1] == "torch==2.14.1"


def test_uv_extras_one_per_build_declared_conflicting(tmp_path: Path) -> None:
    from envkit.commands.add import plan_platforms
    from envkit.project.want import make_want
    from envkit.resolve.plan import PlanFlags
    from envkit.system import System

    flags = PlanFlags(driver="550.54.15", gpus=("H100",), python="3.11", platform="linux-x86_64")
    plans = plan_platforms(System(), flags, ("linux-x86_64",), cudas=("cpu", "auto"))
    want = make_want(plans[:1], ["torch"], command="", extras=[(p.variant, p) for p in plans])
    data = tomllib.loads(edited(uv, tmp_path / "pyproject.toml", UV_INIT, want))
    assert data["project"]["optional-dependencies"] == {"cpu": ["torch==2.14.1"], "cu126": ["torch==2.14.1"]}
    assert data["tool"]["uv"]["conflicts"] == [[{"extra": "cpu"}, {"extra": "cu126"}]]
    assert data["tool"]["uv"]["sources"]["torch"] == [
        {"index": "pytorch-cpu", "extra": "cpu"},
        {"index": "pytorch-cu126", "extra": "cu126"},
    ]


POETRY_1 = """\
[tool.poetry]
name = "app"
version = "0.1.0"
description = ""
authors = ["A <a@example.org>"]

[tool.poetry.dependencies]
python = "^3.11"
numpy = "^1.26"  # arrays
torch = "^2.1"

[build-system]
requires = ["poetry-core"]
build-backend = "poetry.core.masonry.api"
"""

POETRY_2 = """\
[project]
name = "app"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["numpy>=1.26"]

[tool.poetry]
package-mode = false

[build-system]
requires = ["poetry-core>=2.0"]
build-backend = "poetry.core.masonry.api"
"""


def _poetry_reads(folder: Path) -> dict[str, tuple[str, str | None]]:
    """Poetry's own factory reads the project: each dependency's constraint and source."""
    factory = pytest.importorskip("poetry.core.factory")
    data = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))
    assert factory.Factory.validate(data, strict=False)["errors"] == []
    main = factory.Factory().create_poetry(folder).package.dependency_group("main")
    return {d.name: (str(d.constraint), d.source_name) for d in main.dependencies_for_locking}


@pytest.mark.parametrize("text", [POETRY_1, POETRY_2], ids=["poetry-1", "poetry-2-pep621"])
def test_poetry_gets_an_explicit_source(tmp_path: Path, text: str) -> None:
    out = edited(poetry, tmp_path / "pyproject.toml", text, want_for())
    data = tomllib.loads(out)
    assert data["tool"]["poetry"]["source"] == [
        {"name": "pytorch-cu126", "url": CU126, "priority": "explicit"}
    ]
    assert _poetry_reads(tmp_path)["torch"] == ("2.14.1", "pytorch-cu126")
    if text is POETRY_1:
        assert 'numpy = "^1.26"  # arrays' in out


def test_poetry_cross_platform_constraints_with_markers(tmp_path: Path) -> None:
    out = edited(poetry, tmp_path / "pyproject.toml", POETRY_1, want_for(("linux-x86_64", "macos-arm64")))
    torch = tomllib.loads(out)["tool"]["poetry"]["dependencies"]["torch"]
    assert torch == [
        {"version": "2.14.1", "markers": "sys_platform == 'linux'", "source": "pytorch-cu126"},
        {"version": "2.14.1", "markers": "sys_platform == 'darwin'", "source": "pypi"},
    ]
    _poetry_reads(tmp_path)


REQUIREMENTS = """\
# The training job's packages
numpy>=1.26  # arrays
torch==2.1.0+cu118  # the model
--extra-index-url https://download.pytorch.org/whl/cu118
einops
"""


def test_requirements_index_lines_and_local_pins(tmp_path: Path) -> None:
    out = edited(
        requirements, tmp_path / "requirements.txt", REQUIREMENTS, want_for(packages=("torch", "torchvision"))
    )
    assert out == textwrap.dedent(
        f"""\
        # The training job's packages
        --index-url {CU126}
        --extra-index-url https://pypi.org/simple
        numpy>=1.26  # arrays
        torch==2.14.1+cu126  # the model
        torchvision==0.29.1
        einops
        """
    )


def test_requirements_with_a_pypi_mirror_keep_it_and_add_the_torch_index(tmp_path: Path) -> None:
    text = "-i https://mirror.example.org/simple\ntorch\n"
    out = edited(requirements, tmp_path / "requirements.in", text, want_for())
    assert out == f"-i https://mirror.example.org/simple\n--extra-index-url {CU126}\ntorch==2.14.1+cu126\n"


def test_requirements_cross_platform_markers(tmp_path: Path) -> None:
    out = edited(
        requirements, tmp_path / "requirements.txt", "torch\n", want_for(("linux-x86_64", "macos-arm64"))
    )
    assert out.splitlines() == [
        f"--index-url {CU126}",
        "--extra-index-url https://pypi.org/simple",
        "torch==2.14.1+cu126 ; sys_platform == 'linux'",
        "torch==2.14.1 ; sys_platform == 'darwin'",
    ]


def test_a_hashed_requirements_file_is_a_lock_and_is_refused(tmp_path: Path) -> None:
    text = "torch==2.1.0 \\\n    --hash=sha256:" + "0" * 64 + "\n"
    with pytest.raises(InputError, match="--hash"):
        requirements.apply(tmp_path / "requirements.txt", text, want_for())


ENVIRONMENT = """\
# The training environment
name: train  # its name
channels: &channels
  - pytorch
  - nvidia
  - conda-forge
# anchors and aliases survive the edit
x-mirrors: *channels
dependencies:
  - python=3.11
  - pytorch=2.1.0  # the model
  - pytorch-cuda=11.8
  - numpy>=1.26
  - pip
  - pip:
      - einops
"""


def test_environment_yml_conda_route_read_back_by_conda_lock(tmp_path: Path) -> None:
    path = tmp_path / "environment.yml"
    out = edited(conda_env, path, ENVIRONMENT, want_for(channel="conda"))
    assert "# The training environment" in out and "# its name" in out
    assert (
        "channels: &channels\n" in out
        and "# anchors and aliases survive the edit\nx-mirrors: *channels\n" in out
    )
    assert "pytorch=2.13.0=cuda129*" in out and "cuda-version=12.9" in out and "pytorch-cuda" not in out
    from tests.unit.specs.test_specs import conda_lock

    mapping = tmp_path / "mapping.json"  # a local PyPI -> conda name mapping (no download)
    mapping.write_text("{}", encoding="utf-8")
    env_yaml = conda_lock("conda_lock.src_parser.environment_yaml")
    spec = env_yaml.parse_environment_file(path, ["linux-64"], mapping_url=str(mapping))
    assert [c.url for c in spec.channels] == ["conda-forge"]
    deps = {d.name: d for d in spec.dependencies["linux-64"]}
    assert deps["pytorch"].version == "2.13.0" and deps["pytorch"].build == "cuda129*"
    assert "einops" in deps and "numpy" in deps


def test_environment_yml_pip_route_edits_the_pip_section(tmp_path: Path) -> None:
    out = edited(conda_env, tmp_path / "environment.yml", ENVIRONMENT, want_for())
    assert "pytorch=2.1.0" not in out and "pytorch-cuda" not in out  # a second torch, from conda
    assert f"      - --index-url {CU126}\n" in out and "      - torch==2.14.1+cu126\n" in out


PIXI = """\
[workspace]
name = "train"
channels = ["conda-forge"]
platforms = ["linux-64"]  # the cluster

[dependencies]
python = "3.11.*"
numpy = ">=1.26"
"""


def test_pixi_conda_route(tmp_path: Path) -> None:
    data = tomllib.loads(edited(pixi, tmp_path / "pixi.toml", PIXI, want_for(channel="conda")))
    assert data["dependencies"]["pytorch"] == {"version": "2.13.0.*", "build": "cuda129*"}
    assert data["dependencies"]["cuda-version"] == "12.9.*"
    assert data["system-requirements"] == {"cuda": "12"}


def test_pixi_pip_route_cross_platform(tmp_path: Path) -> None:
    want = want_for(("linux-x86_64", "macos-arm64"))
    out = edited(pixi, tmp_path / "pixi.toml", PIXI, want)
    data = tomllib.loads(out)
    assert data["pypi-dependencies"]["torch"] == {"version": "==2.14.1", "index": CU126}
    assert data["target"]["osx-arm64"]["pypi-dependencies"]["torch"] == "==2.14.1"
    assert data["workspace"]["platforms"] == ["linux-64", "osx-arm64"] and "# the cluster" in out


@pytest.mark.parametrize(
    ("kind", "name", "text"),
    [
        (uv, "pyproject.toml", "[project\nname = 1"),
        (pixi, "pixi.toml", "[workspace]\nname = = 2\n"),
        (conda_env, "environment.yml", "dependencies: [a, b\n"),
    ],
)
def test_a_manifest_that_does_not_parse_is_an_input_error(
    tmp_path: Path, kind: object, name: str, text: str
) -> None:
    with pytest.raises(InputError, match=name):
        kind.apply(tmp_path / name, text, want_for())  # type: ignore[attr-defined]


def test_with_an_extension_its_wheel_goes_beside_torch(tmp_path: Path) -> None:
    """--with flash-attn (issue 23's resolver): torch 2.8.0, the newest with a flash-attn wheel for
    cu12 on Linux, and that wheel's URL; macOS (no wheel) gets torch alone, the marker says so."""
    from envkit.commands.add import plan_platforms
    from envkit.project.want import make_want
    from envkit.resolve.plan import PlanFlags
    from envkit.system import System

    flags = PlanFlags(driver="550.54.15", gpus=("H100",), python="3.11", extensions=("flash-attn",))
    plans = plan_platforms(System(), flags, ("linux-x86_64", "macos-arm64"))
    want = make_want(plans, ["torch"], command="")
    out = edited(requirements, tmp_path / "requirements.txt", "numpy\ntorch\n", want)
    wheel = "flash_attn-2.8.3.post1+cu12torch2.8cxx11abiTRUE-cp311-cp311-linux_x86_64.whl"
    assert "torch==2.8.0+cu126 ; sys_platform == 'linux'\ntorch==2.8.0 ; sys_platform == 'darwin'\n" in out
    assert (
        f"flash-attn @ https://github.com/Dao-AILab/flash-attention/releases/download/v2.8.3.post1/{wheel} ; sys_platform == 'linux'\n"
        in out
    )
    data = tomllib.loads(edited(uv, tmp_path / "pyproject.toml", UV_INIT, want))
    assert "flash-attn==2.8.3.post1; sys_platform == 'linux'" in data["project"]["dependencies"]
    assert data["tool"]["uv"]["sources"]["flash-attn"][0]["url"].endswith(wheel)


def test_pixi_conda_route_cross_platform_targets(tmp_path: Path) -> None:
    text = PIXI.replace('platforms = ["linux-64"]  # the cluster', 'platforms = ["linux-64", "osx-arm64"]')
    out = edited(
        pixi, tmp_path / "pixi.toml", text, want_for(("linux-x86_64", "macos-arm64"), channel="conda")
    )
    data = tomllib.loads(out)
    assert data["dependencies"]["pytorch"] == {"version": "2.13.0.*", "build": "cuda129*"}
    assert data["target"]["osx-arm64"]["dependencies"]["pytorch"] == {"version": "2.13.0.*", "build": "cpu*"}
    assert "\n\n\n" not in out  # one blank line between tables, as pixi writes them


def test_a_requirements_file_with_its_own_extra_index_keeps_pypi(tmp_path: Path) -> None:
    """The file's own --extra-index-url (an internal index) is not PyPI: once the torch index is the
    --index-url, PyPI must come back as an extra index, or numpy has nowhere to come from (pip's
    --dry-run: 'No matching distribution found for numpy'). An asked PyPI mirror is written too."""
    text = "--extra-index-url https://pkgs.example.org/simple  # ours\nnumpy\ntorch>=2.4\n"
    out = edited(requirements, tmp_path / "requirements.txt", text, want_for())
    assert f"--index-url {CU126}\n" in out and "--extra-index-url https://pypi.org/simple\n" in out
    assert "--extra-index-url https://pkgs.example.org/simple  # ours\n" in out
    mirror = "http://127.0.0.1:9/simple"
    out = edited(requirements, tmp_path / "requirements.txt", text, want_for(mirrors=(f"pypi={mirror}",)))
    assert f"--extra-index-url {mirror}\n" in out and "pypi.org" not in out
    tuna = "--extra-index-url https://pypi.tuna.tsinghua.edu.cn/simple\nnumpy\ntorch\n"
    out = edited(requirements, tmp_path / "requirements.txt", tuna, want_for())
    assert "pypi.org" not in out  # a PyPI mirror of envkit's table is PyPI already


def test_the_torch_lines_own_marker_and_extras_are_kept(tmp_path: Path) -> None:
    """``torch[opt-einsum]>=2.4 ; platform_system != "Darwin"`` said: torch with that extra, and not
    on macOS; the pin keeps both (it was ``torch==2.14.1+cu126``: macOS then asked for a CUDA build
    that does not exist there, and the extra's packages were gone)."""
    line = 'torch[opt-einsum]>=2.4 ; platform_system != "Darwin"  # the model'
    out = edited(requirements, tmp_path / "requirements.txt", f"numpy\n{line}\n", want_for())
    assert 'torch[opt-einsum]==2.14.1+cu126 ; platform_system != "Darwin"  # the model\n' in out
    pyproject = UV_INIT.replace('"numpy>=1.26",', '"numpy>=1.26",\n    "torch[opt-einsum]>=2.4",')
    data = tomllib.loads(edited(uv, tmp_path / "pyproject.toml", pyproject, want_for()))
    assert data["project"]["dependencies"][1] == "torch[opt-einsum]==2.14.1"
    # several platforms: envkit's markers choose each build; the extra stays on every line
    want = want_for(("linux-x86_64", "macos-arm64"))
    out = edited(requirements, tmp_path / "requirements.txt", f"numpy\n{line}\n", want)
    assert "torch[opt-einsum]==2.14.1+cu126 ; sys_platform == 'linux'  # the model\n" in out
    assert "torch[opt-einsum]==2.14.1 ; sys_platform == 'darwin'\n" in out


LOGIN_MIRRORS = ("torch-wheels=http://me:t0ken@127.0.0.1:9/whl", "pypi=http://me:t0ken@127.0.0.1:9/simple")


@pytest.mark.parametrize(
    ("kind", "name", "text", "written", "note"),
    [
        (
            requirements,
            "requirements.txt",
            "numpy\ntorch\n",
            (
                "--index-url http://${ENVKIT_TORCH_INDEX_USERNAME}:${ENVKIT_TORCH_INDEX_PASSWORD}@127.0.0.1:9/whl/cu126\n",
                "--extra-index-url http://${ENVKIT_PYPI_INDEX_USERNAME}:${ENVKIT_PYPI_INDEX_PASSWORD}@127.0.0.1:9/simple\n",
            ),
            "ENVKIT_TORCH_INDEX_USERNAME",
        ),
        (
            uv,
            "pyproject.toml",
            UV_INIT,
            (
                'url = "http://127.0.0.1:9/whl/cu126"\nexplicit = true\n',
                'name = "pypi-mirror"\nurl = "http://127.0.0.1:9/simple"\ndefault = true\n',
            ),
            "UV_INDEX_TORCH_CU126_USERNAME",
        ),
        (
            poetry,
            "pyproject.toml",
            POETRY_1,
            ('url = "http://127.0.0.1:9/whl/cu126"\npriority = "explicit"\n', 'priority = "primary"\n'),
            "POETRY_HTTP_BASIC_TORCH_CU126_USERNAME",
        ),
        (
            pixi,
            "pixi.toml",
            PIXI + '\n[pypi-dependencies]\ntorch = "*"\n',
            (
                'index = "http://127.0.0.1:9/whl/cu126"}',
                '[pypi-options]\nindex-url = "http://127.0.0.1:9/simple"\n',
            ),
            "machine 127.0.0.1",
        ),
    ],
)
def test_a_mirror_with_a_login_writes_neither_the_login_nor_a_masked_url(
    tmp_path: Path, kind: object, name: str, text: str, written: tuple[str, ...], note: str
) -> None:
    """--mirror with user:token@: the file got 'http://***@127.0.0.1/whl/cu126' (a user named ***,
    in every kind), and a PyPI mirror was left out of uv, Poetry and pixi manifests. Now a requirements
    file holds pip's ${VAR} placeholders, a TOML manifest the bare URL, and a note says where each
    installer reads the login."""
    want = want_for(mirrors=LOGIN_MIRRORS)
    out = edited(kind, tmp_path / name, text, want)
    assert "***" not in out and "t0ken" not in out
    for line in written:
        assert line in out, (line, out)
    assert any(note in n for n in want.credentials(kind.KIND))  # type: ignore[attr-defined]


def test_a_table_the_edit_adds_is_set_off_by_a_blank_line(tmp_path: Path) -> None:
    """A new [[tool.uv.index]] after one at the end of the file, [project.optional-dependencies]
    before [build-system], [tool.uv] before the next table: each came right under the line before
    it. Tables the file had side by side stay so."""
    text = UV_INIT + (
        '\n[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
        "[tool.hatch.build]\nonly-packages = true\n"  # the user's own: no blank line, kept
        '\n[[tool.uv.index]]\nname = "internal"\nurl = "https://pkgs.example.org/simple"\n'
    )
    out = edited(uv, tmp_path / "pyproject.toml", text, want_for())
    assert 'url = "https://pkgs.example.org/simple"\n\n[[tool.uv.index]]\nname = "pytorch-cu126"' in out
    assert 'build-backend = "hatchling.build"\n[tool.hatch.build]\n' in out
    from envkit.commands.add import plan_platforms
    from envkit.project.want import make_want
    from envkit.resolve.plan import PlanFlags
    from envkit.system import System

    flags = PlanFlags(driver="550.54.15", gpus=("H100",), python="3.11", platform="linux-x86_64")
    plans = plan_platforms(System(), flags, ("linux-x86_64",), cudas=("cpu", "auto"))
    want = make_want(plans[:1], ["torch"], command="", extras=[(p.variant, p) for p in plans])
    out = edited(uv, tmp_path / "pyproject.toml", out, want)
    lines = out.splitlines()
    for i, line in enumerate(lines[1:], 1):
        if line.startswith("[") and line != "[tool.hatch.build]":
            assert lines[i - 1] == "", (line, out)


@pytest.mark.parametrize(
    ("kind", "name", "text", "channel"),
    [
        (uv, "pyproject.toml", UV_INIT, "pip"),
        (pixi, "pixi.toml", PIXI, "conda"),
        (
            conda_env,
            "environment.yml",
            "name: x\ndependencies:\n  - python=3.11\n  - pytorch  # model\n",
            "conda",
        ),
    ],
)
def test_windows_line_breaks_and_no_final_one_are_kept(
    tmp_path: Path, kind: object, name: str, text: str, channel: str
) -> None:
    """A CRLF file without a final line break: tomlkit wrote the lines it added with LF and a blank
    line at the end; ruamel turned the whole environment.yml into LF, keeping a stray CR in the
    comment of the line it edited. Now every line ends as the file's did, the last with nothing."""
    crlf = text.rstrip("\n").replace("\n", "\r\n")
    path = tmp_path / name
    path.write_bytes(crlf.encode())
    out = kind.apply(path, crlf, want_for(channel=channel))  # type: ignore[attr-defined]
    assert out != crlf and not out.endswith(("\n", "\r"))
    assert "\n" not in out.replace("\r\n", "") and "\r" not in out.replace("\r\n", "")
    assert kind.apply(path, out, want_for(channel=channel)) == out  # type: ignore[attr-defined]


def test_a_pip_section_comment_stays_on_its_line(tmp_path: Path) -> None:
    """ruamel keeps a comment by the item's place in the list: the torch line's '# pinned' moved to
    the --extra-index-url line the edit put in its place. Items are matched by what they are (the
    requirement's name, the option), so the comment stays with torch."""
    text = (
        "name: x\ndependencies:\n  - pip\n  - pip:\n"
        "      - --extra-index-url https://download.pytorch.org/whl/cu118\n"
        "      - torch==2.1.0+cu118   # pinned\n      - einops   # rearrange\n"
    )
    out = edited(conda_env, tmp_path / "environment.yml", text, want_for())
    assert re.search(r"\n      - torch==2\.14\.1\+cu126 +# pinned\n", out) and "einops   # rearrange\n" in out
    assert "pypi.org/simple\n" in out  # the PyPI line carries no comment


def test_from_several_platforms_to_one_the_platform_markers_go(tmp_path: Path) -> None:
    """envkit's own per-platform lines are not the project's condition: after Linux + macOS, an add
    for Linux alone kept 'sys_platform == 'linux'' on the one torch line (macOS then had no torch)."""
    path = tmp_path / "requirements.txt"
    both = edited(requirements, path, "numpy\ntorch  # model\n", want_for(("linux-x86_64", "macos-arm64")))
    out = edited(requirements, path, both, want_for())
    assert "torch==2.14.1+cu126  # model\n" in out and "sys_platform" not in out
    one = edited(requirements, path, "numpy\ntorch ; sys_platform == 'linux'\n", want_for(("macos-arm64",)))
    assert re.search(r"\ntorch==[\d.]+\n", one) and "sys_platform" not in one  # envkit's form: its own
