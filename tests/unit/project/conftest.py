"""Shared pieces of the project-manifest tests: a Want for the H100 on driver 550 of the issue's
closing note, made by the real resolver from flags (nothing detected)."""

from __future__ import annotations

from collections.abc import Sequence

from envkit.commands.add import plan_platforms
from envkit.knowledge.mirrors import MirrorKind
from envkit.project.want import Want, make_want
from envkit.resolve.plan import PlanFlags
from envkit.specs.render import spec_mirrors
from envkit.system import System

H100 = ("--gpu", "H100", "--driver", "550.54.15", "--python", "3.11")


def want_for(
    platforms: Sequence[str] = ("linux-x86_64",),
    packages: Sequence[str] = ("torch",),
    *,
    channel: str = "pip",
    cuda: str = "auto",
    torch: str | None = None,
    mirrors: Sequence[str] = (),
) -> Want:
    flags = PlanFlags(
        driver="550.54.15", gpus=("H100",), python="3.11", channel=channel, cuda=cuda, torch=torch
    )
    plans = plan_platforms(System(), flags, platforms)
    by_kind = {m.kind: m for m in spec_mirrors(list(mirrors), plans[0].variant)} if mirrors else {}
    return make_want(
        plans,
        packages,
        command="envkit add torch",
        torch_mirror=by_kind.get(MirrorKind.TORCH_WHEELS),
        pypi_mirror=by_kind.get(MirrorKind.PYPI),
    )
