"""Shared pieces of the project-manifest tests: a Want for the H100 on driver 550 of the issue's
closing note, made by the real resolver from flags (nothing detected)."""

from __future__ import annotations

from collections.abc import Sequence

from envkit.commands.add import plan_platforms
from envkit.project.want import Want, make_want
from envkit.resolve.plan import PlanFlags
from envkit.system import System

H100 = ("--gpu", "H100", "--driver", "550.54.15", "--python", "3.11")


def want_for(
    platforms: Sequence[str] = ("linux-x86_64",),
    packages: Sequence[str] = ("torch",),
    *,
    channel: str = "pip",
    cuda: str = "auto",
    torch: str | None = None,
) -> Want:
    flags = PlanFlags(
        driver="550.54.15", gpus=("H100",), python="3.11", channel=channel, cuda=cuda, torch=torch
    )
    plans = plan_platforms(System(), flags, platforms)
    return make_want(plans, packages, command="envkit add torch")
