"""The conda route of ``envkit create`` without a conda binary: which channel and backend a request
gets (never silently pip), what the rattler backend hands its worker (channels where .condarc says,
credentials only in the child's environment, the target's virtual packages), and how a failed solve
reads. The worker itself runs against real local channels in tests/e2e/test_conda_route.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envkit.commands.create import prepare
from envkit.create.backends import rattler as rattler_backend
from envkit.create.backends.conflict import explain_conflict
from envkit.create.backends.rattler import REQUEST_FILE, Rattler, read_result
from envkit.create.conda_meta import installed_packages
from envkit.create.prepare import CreateRequest
from envkit.errors import InputError
from envkit.mirrors.condarc import read_condarc
from envkit.resolve.plan import PlanFlags
from tests.unit.create.test_create import fake_tools

DATA = Path(__file__).parents[2] / "data" / "rattler"
A100_535 = PlanFlags(driver="535.104.05", gpus=("A100",), python="3.11", platform="linux-x86_64", cuda="12.1")
CPU = PlanFlags(torch="2.13.0", cuda="cpu", python="3.11", platform="linux-x86_64", no_gpu=True)


@pytest.fixture
def with_rattler(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rattler backend is here whether or not py-rattler is installed (dry runs start nothing)."""
    monkeypatch.setattr(Rattler, "locate", lambda self, system: "/usr/bin/python3")


@pytest.fixture
def without_rattler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Rattler, "locate", lambda self, system: None)


def request(tmp_path: Path, flags: PlanFlags = A100_535, **kw: object) -> CreateRequest:
    return CreateRequest(name="pt2", prefix=str(tmp_path / "envs" / "pt2"), flags=flags, **kw)  # type: ignore[arg-type]


def test_channel_conda_without_conda_is_the_rattler_backend(tmp_path: Path, with_rattler: None) -> None:
    install = prepare(fake_tools(tmp_path), request(tmp_path, channel="conda"))
    data = install.to_json()
    assert data["backend"] == "rattler"
    assert data["plan"]["channel"] == "conda" and data["plan"]["conda"]["route"] == "pytorch-channel"
    assert "channel: conda (--channel conda)" in data["notes"]
    assert "pytorch-cuda=12.1" in install.spec_files["environment.yml"]
    assert data["conda"]["virtual_packages"]["__cuda"] == "12.2"  # what driver 535 runs (Table 3)
    assert [Path(a).name for a in install.steps[0].argv[1:]] == ["rattler_worker.py", REQUEST_FILE]


def test_channel_conda_with_no_conda_installer_at_all_is_refused(
    tmp_path: Path, without_rattler: None
) -> None:
    with pytest.raises(InputError, match="no conda installer is here") as raised:
        prepare(fake_tools(tmp_path), request(tmp_path, channel="conda"))
    assert "torch-envkit[conda]" in raised.value.hint and "--channel auto" in raised.value.hint


def test_channel_auto_falls_back_to_pip_and_says_so(tmp_path: Path, without_rattler: None) -> None:
    install = prepare(fake_tools(tmp_path, "uv"), request(tmp_path, channel="auto"))
    assert install.plan.channel == "pip" and install.backend == "uv"
    assert any("--channel auto fell back to pip: no conda installer here" in n for n in install.notes)


def test_channel_auto_takes_conda_where_it_can(tmp_path: Path, with_rattler: None) -> None:
    system = fake_tools(tmp_path, "uv")
    install = prepare(system, request(tmp_path, channel="auto"))
    assert install.plan.channel == "conda" and install.backend == "rattler"
    # Where conda publishes no fitting build (the conda routes end sooner), auto falls back to pip.
    newest = PlanFlags(torch="2.14.*", cuda="cpu", python="3.11", platform="linux-x86_64", no_gpu=True)
    later = prepare(system, request(tmp_path, newest, channel="auto"))
    assert later.plan.channel == "pip"
    assert any("conda has no build that fits" in n for n in later.notes)


@pytest.mark.parametrize(
    ("backend", "channel", "message"),
    [
        ("uv", "conda", "--backend uv installs pip packages: drop --channel conda"),
        ("rattler", "pip", "--backend rattler installs conda packages: drop --channel pip"),
        ("auto", "mamba", "--channel 'mamba': one of pip, conda, auto"),
    ],
)
def test_contradictions_are_refused(
    tmp_path: Path, with_rattler: None, backend: str, channel: str, message: str
) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        prepare(fake_tools(tmp_path, "uv"), request(tmp_path, backend=backend, channel=channel))


def test_the_worker_gets_channels_where_condarc_puts_them(tmp_path: Path, with_rattler: None) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".condarc").write_text(
        "channel_alias: https://mirror.example.org/conda\n"
        "custom_channels:\n  pytorch: https://me:s3cret@private.example.org/cloud\n"
        "  nvidia: https://conda.example.org/t/tok-3n/cloud\n"
        "default_channels:\n  - https://mirror.example.org/pkgs/main\n",
        encoding="utf-8",
    )
    system = fake_tools(tmp_path)
    install = prepare(system, request(tmp_path, channel="conda"))
    step = install.steps[0]
    sent = json.loads(install.spec_files[REQUEST_FILE])
    assert sent["channels"] == [
        "https://***@private.example.org/cloud/pytorch",
        "https://conda.example.org/t/***/cloud/nvidia",  # an anaconda.org-style token, too
        "https://mirror.example.org/pkgs/main",
    ]
    # pytorch::pytorch is pointed at the pytorch channel's URL (redacted; the worker puts it back).
    assert "https://***@private.example.org/cloud/pytorch::pytorch=2.5.1=*cuda*" in sent["specs"]
    # The credentials reach the worker only through its environment.
    assert dict(step.env) == {
        "ENVKIT_RATTLER_CHANNELS": json.dumps(
            [
                "https://me:s3cret@private.example.org/cloud/pytorch",
                "https://conda.example.org/t/tok-3n/cloud/nvidia",
                "https://mirror.example.org/pkgs/main",
            ]
        )
    }
    shown = step.shown() + json.dumps(install.to_json()) + "".join(install.spec_files.values())
    assert "s3cret" not in shown and "tok-3n" not in shown
    assert sent["virtual_packages"][-1] == ["__cuda", "12.2"]
    assert {name for name, *_ in sent["virtual_packages"]} >= {"__unix", "__archspec", "__cuda"}


def test_conda_override_cuda_is_honoured(tmp_path: Path, with_rattler: None) -> None:
    system = fake_tools(tmp_path)
    system.env["CONDA_OVERRIDE_CUDA"] = "11.8"  # type: ignore[index]
    install = prepare(system, request(tmp_path, channel="conda"))
    assert install.conda is not None and install.conda["virtual_packages"]["__cuda"] == "11.8"
    assert "CONDA_OVERRIDE_CUDA" in install.conda["virtual_cuda"]


def test_condarc_files_are_read_in_condas_order(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".conda").mkdir(parents=True)
    (home / ".conda" / ".condarc").write_text("channel_alias: https://first.example.org\n", encoding="utf-8")
    (home / ".condarc").write_text("channel_alias: https://second.example.org\n", encoding="utf-8")
    rc = tmp_path / "given.yml"
    rc.write_text("custom_channels: {nvidia: 'https://nv.example.org'}\n", encoding="utf-8")
    config = read_condarc({"HOME": str(home), "CONDARC": str(rc)})
    assert config.channel_urls("pytorch") == ("https://second.example.org/pytorch",)
    assert config.channel_urls("nvidia") == ("https://nv.example.org/nvidia",)
    assert config.channel_urls("defaults") == (
        "https://repo.anaconda.com/pkgs/main",
        "https://repo.anaconda.com/pkgs/r",
    )
    assert config.files == (home / ".conda" / ".condarc", home / ".condarc", rc)
    (home / ".condarc").write_text("channel_alias: [not, a, url]\n", encoding="utf-8")
    with pytest.raises(InputError, match="channel_alias must be a URL"):
        read_condarc({"HOME": str(home)})


CUDA_WHY = "__cuda=11.8: the newest CUDA driver 520.61.05 runs (NVIDIA's Table 3)."


def test_a_cuda_below_the_packages_need_names_both_and_the_driver_that_would_do() -> None:
    text = (DATA / "cuda-too-old.txt").read_text(encoding="utf-8")
    summary, hint = explain_conflict(text, {"__cuda": "11.8", "__glibc": "2.36"}, CUDA_WHY)
    assert summary == (
        "the conda solve has no answer: pytorch-cuda 12.1 needs __cuda >=12.1, and the target has __cuda=11.8"
    )
    assert hint.startswith("it needs a driver ≥ 530.30.02;")  # CUDA 12.1's own driver (Table 3)
    assert "--cuda 11.8" in hint and "CONDA_OVERRIDE_CUDA=12.1" in hint
    summary, hint = explain_conflict(text, {"__glibc": "2.36"}, "No __cuda: the target has no NVIDIA driver.")
    assert summary.endswith("and the target has no __cuda")
    assert "--cuda cpu" in hint


def test_a_virtual_package_constraint_reads_the_same() -> None:
    text = (DATA / "forge-cuda-major.txt").read_text(encoding="utf-8")
    summary, _hint = explain_conflict(text, {"__cuda": "12.2"}, CUDA_WHY)
    assert summary == (
        "the conda solve has no answer: cuda-version 13.0 needs __cuda >=13, and the target has __cuda=12.2"
    )


def test_a_package_no_channel_has_and_a_plain_conflict() -> None:
    summary, hint = explain_conflict((DATA / "missing.txt").read_text(encoding="utf-8"), {}, "")
    assert summary == "the conda solve has no answer: no channel has pytorch ==2.12.1 cpu*"
    assert ".condarc" in hint
    summary, _hint = explain_conflict((DATA / "conflict.txt").read_text(encoding="utf-8"), {}, "")
    assert "pytorch 2.13.0 would require; cuda-version >=12.9,<13" in summary
    assert "\n" not in summary


def test_the_workers_answer_and_what_a_failure_means(tmp_path: Path) -> None:
    answer = {"ok": False, "error": {"kind": "unsolvable", "message": (DATA / "missing.txt").read_text()}}
    out = f"solving …\nENVKIT-RATTLER-RESULT\n{json.dumps(answer)}\nENVKIT-RATTLER-RESULT\n"
    assert read_result(out) == answer
    assert read_result("killed before it said anything") is None

    class Result:
        stdout = out

        def describe(self) -> str:
            return "exited with 1"

    error = rattler_backend.explain(Result(), virtual={}, cuda_why="")  # type: ignore[arg-type]
    assert error is not None and error.exit_code == 3
    Result.stdout = out.replace("unsolvable", "disk").replace(
        answer["error"]["message"], "No space left on device (os error 28)"
    )  # type: ignore[index]
    error = rattler_backend.explain(Result(), virtual={}, cuda_why="")  # type: ignore[arg-type]
    assert error is not None and error.exit_code == 4 and "free space" in error.hint


def test_installed_packages_come_from_conda_meta(tmp_path: Path) -> None:
    meta = tmp_path / "conda-meta"
    meta.mkdir()
    (meta / "history").write_text("", encoding="utf-8")
    (meta / "pytorch-2.5.1-py3_0.json").write_text(
        json.dumps(
            {
                "name": "pytorch",
                "version": "2.5.1",
                "build": "py3_0",
                "channel": "https://u:p@h.example/pytorch/",
            }
        ),
        encoding="utf-8",
    )
    (meta / "broken.json").write_text("{", encoding="utf-8")
    assert [p.to_json() for p in installed_packages(tmp_path)] == [
        {"name": "pytorch", "version": "2.5.1", "build": "py3_0", "channel": "https://***@h.example/pytorch"}
    ]
    assert installed_packages(tmp_path / "nowhere") == ()
