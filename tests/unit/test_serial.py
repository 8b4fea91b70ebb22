"""Facts and reports survive JSON both ways; bad input names the field."""

from __future__ import annotations

import dataclasses
import json
from typing import Literal, Optional

import pytest

from envkit._serial import StrEnum, from_jsonable, to_jsonable
from envkit.errors import InputError
from envkit.facts import (
    CondaPackage,
    DeepTorchFacts,
    DeviceInfo,
    Distribution,
    DriverFacts,
    EnvKind,
    Facts,
    GpuFacts,
    HostFacts,
    NetInterface,
    PythonFacts,
    SharedLib,
    ToolkitFacts,
    TorchFacts,
    facts_from_json,
    facts_to_json,
)
from envkit.versions import ComputeCapability, NvVersion, Version


def full_facts() -> Facts:
    return Facts(
        host=HostFacts(
            hostname="node1",
            nvidia_pci_devices=("0000:07:00.0",),
            nvidia_module_loaded=True,
            shm_bytes=64 * 1024 * 1024,
            interfaces=(NetInterface("eth0", True),),
            env={"NCCL_SOCKET_IFNAME": "eth0"},
            cuda_libs=(SharedLib("/opt/cudnn/libcudnn.so.8", "cudnn", Version("8.9.2"), "LD_LIBRARY_PATH"),),
        ),
        driver=DriverFacts(version=NvVersion("535.104.05"), cuda_version=Version("12.2"), source="nvml"),
        gpus=(
            GpuFacts(
                index=0,
                name="NVIDIA H100 80GB HBM3",
                compute_capability=ComputeCapability(9, 0),
                clock_events=("gpu_idle",),
                power_w=70.5,
                unsupported=("retired_pages",),
                cuda_index=0,
            ),
        ),
        toolkits=(
            ToolkitFacts(nvcc="/usr/local/cuda/bin/nvcc", version=Version("12.4.131"), sources=("PATH",)),
        ),
        python=PythonFacts(
            executable="/usr/bin/python3", selected_by="PATH", version=Version("3.11.7"), kind=EnvKind.VENV
        ),
        torch=TorchFacts(
            version=Version("2.5.1+cu121"),
            cuda=Version("12.1"),
            distributions=(Distribution("torch", Version("2.5.1+cu121"), "/site"),),
            conda_packages=(CondaPackage("pytorch", Version("2.1.0"), "py3.10_cuda12.1_0", "pytorch"),),
            deep=DeepTorchFacts(
                ok=True,
                devices=(DeviceInfo("H100", ComputeCapability(9, 0)),),
                nccl=Version("2.21.5"),
            ),
        ),
        notes=("a note",),
    )


def test_round_trip_is_lossless() -> None:
    facts = full_facts()
    data = json.loads(json.dumps(facts_to_json(facts)))
    assert data["driver"]["version"] == "535.104.05"  # NVIDIA's spelling survives
    assert data["gpus"][0]["compute_capability"] == "9.0"
    assert data["python"]["kind"] == "venv"  # an Enum is its value in JSON
    back = facts_from_json(data)
    assert back == facts
    assert back.python is not None and back.python.kind is EnvKind.VENV
    assert str(back.driver.version) == "535.104.05"


def test_distribution_names_are_normalized_wherever_they_come_from() -> None:
    """collect_env pastes and old reports spell wheels as their files do (nvidia_cudnn_cu12)."""
    assert Distribution("NVIDIA_cuDNN.cu12", None).name == "nvidia-cudnn-cu12"
    data = facts_to_json(Facts(torch=TorchFacts(distributions=(Distribution("torch", None),))))
    data["torch"]["distributions"][0]["name"] = "nvidia_nccl_cu12"
    data["torch"]["distributions"][0]["version"] = "2.21.5"
    loaded = facts_from_json(data)
    nccl = loaded.torch.wheel_lib("nccl")
    assert nccl is not None and nccl.name == "nvidia-nccl-cu12"
    assert loaded.torch.nccl_version() == Version("2.21.5")


def test_unknown_fields_are_ignored_and_missing_ones_default() -> None:
    data = facts_to_json(Facts())
    data["driver"]["added_by_a_newer_envkit"] = 1
    del data["toolkits"]
    assert facts_from_json(data) == Facts()


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (lambda d: d["gpus"][0].update(index="zero"), "facts.gpus[0].index: expected int"),
        (
            lambda d: d["driver"].update(version=535),
            "facts.driver.version: expected a version string",
        ),
        (
            lambda d: d["driver"].update(version="not.a.version!"),
            "facts.driver.version: expected a version",
        ),
        (lambda d: d["gpus"][0].update(compute_capability="ninety"), "compute capability"),
        (lambda d: d.update(gpus={}), "facts.gpus: expected a list"),
        (lambda d: d["host"].update(env=[]), "facts.host.env: expected an object"),
        (lambda d: d["gpus"][0].pop("index"), "missing field 'index'"),
        (lambda d: d["gpus"][0].update(power_w="70 W"), "expected a number"),
        (
            lambda d: d["python"].update(kind="docker"),
            "facts.python.kind: expected one of venv, conda, system",
        ),
        (lambda d: d["python"].update(kind=1), "facts.python.kind: expected one of"),
    ],
)
def test_bad_values_name_their_field(patch, message: str) -> None:  # type: ignore[no-untyped-def]
    data = facts_to_json(full_facts())
    patch(data)
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        facts_from_json(data)


class _Colour(StrEnum):
    RED = "red"


@dataclasses.dataclass(frozen=True)
class _Paint:
    colour: _Colour
    finish: Literal["matt", "gloss"] = "matt"
    base: Optional[_Colour] = None


def test_str_enums_read_and_write_as_their_values() -> None:
    """A closed set is an Enum in the records and its plain value everywhere a person or a file sees it."""
    assert str(_Colour.RED) == f"{_Colour.RED}" == "red" and f"{_Colour.RED:>4}" == " red"
    assert (
        json.dumps(to_jsonable(_Paint(_Colour.RED, "gloss")))
        == '{"colour": "red", "finish": "gloss", "base": null}'
    )
    assert from_jsonable(_Paint, {"colour": "red", "finish": "gloss"}) == _Paint(_Colour.RED, "gloss")
    assert from_jsonable(_Paint, {"colour": "red"}).colour is _Colour.RED


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"colour": "blue"}, "_Paint.colour: expected one of red"),
        ({"colour": "red", "finish": "satin"}, "_Paint.finish: expected one of matt, gloss"),
        ({"colour": "red", "finish": 1}, "_Paint.finish: expected one of matt, gloss"),
        ({"colour": "red", "base": "blue"}, "_Paint.base: expected one of red"),
    ],
)
def test_values_outside_a_closed_set_name_their_field(data: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        from_jsonable(_Paint, data)


def test_a_recorded_report_reads_back_with_only_summary_cause_added() -> None:
    """envkit.report/1 only grows: a report saved before summary.cause existed reads back with every
    published field as it was, and `cause` beside them (null here: nothing warns or fails)."""
    from pathlib import Path

    from envkit.report import report_from_json

    path = Path(__file__).parents[1] / "data" / "reports" / "h200-580-torch2.11-cu130.json"
    saved = json.loads(path.read_text())
    again = report_from_json(saved, str(path)).to_json()
    assert again["checks"] == saved["checks"]
    assert _grown_from(again["facts"], saved["facts"])  # facts may have gained fields, never lost one
    assert set(again["summary"]) - set(saved["summary"]) == {"cause"}
    assert {k: again["summary"][k] for k in saved["summary"]} == saved["summary"]
    assert again["summary"]["cause"] is None


def _grown_from(new: object, old: object) -> bool:
    """``new`` holds every field of ``old`` with the same value (and maybe more fields)."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and _grown_from(new[k], v) for k, v in old.items())
    if isinstance(old, list):
        return isinstance(new, list) and len(new) == len(old) and all(map(_grown_from, new, old))
    return new == old
