"""The resolver's request records: PlanFlags is keyword-only, the closed sets are Enums whose JSON
is the plain string the README documents."""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest

from envkit.errors import InputError
from envkit.planning import make_request
from envkit.resolve.plan import Channel, CudaKind, PlanFlags, Route, parse_cuda_request


def test_plan_flags_take_keywords_only() -> None:
    """Nine like-typed fields: a positional call could swap --python and --platform unseen."""
    with pytest.raises(TypeError):
        PlanFlags("535.104.05")  # type: ignore[misc]
    flags = PlanFlags(python="3.11", platform="linux-aarch64", gpus=["sm_90"])
    assert (flags.python, flags.platform, flags.gpus) == ("3.11", "linux-aarch64", ("sm_90",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        flags.python = "3.12"  # type: ignore[misc]


def test_plan_flags_init_names_every_field_and_replace_works() -> None:
    params = inspect.signature(PlanFlags.__init__).parameters
    fields = [f.name for f in dataclasses.fields(PlanFlags)]
    assert list(params)[1:] == fields
    assert all(params[n].kind is inspect.Parameter.KEYWORD_ONLY for n in fields)
    default = PlanFlags()
    assert (default.cuda, default.channel, default.gpus, default.no_gpu) == ("auto", "pip", (), False)
    changed = dataclasses.replace(default, channel="conda", torch="2.5.*")
    assert changed == PlanFlags(channel="conda", torch="2.5.*") and hash(changed) == hash(
        PlanFlags(channel="conda", torch="2.5.*")
    )


def test_the_request_parses_the_flags_into_members() -> None:
    request = make_request(PlanFlags(cuda="12.1", channel="conda"))
    assert request.channel is Channel.CONDA
    assert request.cuda.kind is CudaKind.EXACT and request.cuda.variant == "cu121"
    assert str(request.cuda) == "cu121" and str(parse_cuda_request("auto")) == "auto"
    assert parse_cuda_request("12").kind is CudaKind.MAJOR and str(parse_cuda_request("12")) == "12"
    with pytest.raises(InputError, match="--channel 'brew': pip or conda"):
        make_request(PlanFlags(channel="brew"))


def test_enum_members_are_their_json_strings() -> None:
    assert (
        json.dumps([Channel.PIP, Route.PYTORCH_CHANNEL, CudaKind.AUTO])
        == '["pip", "pytorch-channel", "auto"]'
    )
    assert f"--channel {Channel.CONDA}" == "--channel conda"


def test_plain_strings_become_the_members_the_resolver_compares_with_is() -> None:
    from envkit.resolve.plan import Channel, CudaKind, CudaRequest, Request

    assert Request(channel="conda").channel is Channel.CONDA  # type: ignore[arg-type]
    assert CudaRequest("cpu").kind is CudaKind.CPU  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Request(channel="brew")  # type: ignore[arg-type]
