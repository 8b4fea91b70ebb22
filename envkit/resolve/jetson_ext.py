"""``--with`` on the Jetson route: each extension either fits NVIDIA's JetPack torch or says why not.

PyPI's linux-aarch64 wheels of the compiled extensions (vllm, xformers, …) are built against PyPI's
torch, an SBSA build, and most pin it in Requires-Dist (vllm.toml, xformers.toml): ``pip install
vllm`` on a Jetson installs that torch over NVIDIA's, and its code does not run on a Tegra GPU
(jetson.py). envkit knows no wheel of them built for a JetPack torch, so the route takes an
extension only where nothing of PyPI's torch comes with it: a source build against the JetPack torch
(``--allow-build``) or a JIT package (DeepSpeed compiles its ops against the torch it finds).
Where one does not fit, the route answers exit 3 with one paragraph: the extension, why, and the
ways out (a source build; dusty-nv/jetson-containers, whose packages/llm/vllm,
packages/attention/xformers and packages/attention/flash-attention build them for JetPack).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Optional

from envkit.knowledge.extensions import load_extensions

if TYPE_CHECKING:
    from envkit.errors import WayOut
    from envkit.knowledge.extensions import Extension, ExtRelease
    from envkit.knowledge.vendors import JetPack
    from envkit.resolve.ext_pick import ExtensionPick, ExtensionRequest
    from envkit.resolve.ext_wheels import TorchBuild
    from envkit.resolve.target import Target

__all__ = ["failure_text", "jetson_picks", "ways_out"]

CONTAINERS: Final = "dusty-nv/jetson-containers"


def _aarch64_wheels(release: ExtRelease) -> bool:
    return any("linux-aarch64" in w.platforms for w in release.wheels if w.where == "pypi")


def _source_build(
    ext: Extension, request: ExtensionRequest, build: TorchBuild, target: Target
) -> Optional[ExtensionPick]:
    """A source build of the newest release in range whose Requires-Dist takes the JetPack torch."""
    from envkit.resolve.extensions import _build_pick, _in_range

    if ext.build is None or not ext.build.builds_for(build.variant):
        return None
    for release in _in_range(ext, request.spec):
        if release.requires_torch is None or release.requires_torch.contains(build.torch, prereleases=True):
            return _build_pick(ext, release, build, target.gpus)
    return None


def _why(ext: Extension, request: ExtensionRequest, build: TorchBuild, jp: JetPack) -> str:
    from envkit.resolve.extensions import _in_range

    release = _in_range(ext, request.spec)[0]
    ours = f"NVIDIA's JetPack {jp.jetpack} torch {build.torch}"
    if _aarch64_wheels(release) and release.requires_torch is not None:
        return (
            f"{ext.name} {release.version}'s linux-aarch64 wheels on PyPI are built against PyPI's "
            f"torch and require torch{release.requires_torch}: pip would install PyPI's torch (an SBSA "
            f"build whose GPU code does not run on a Jetson) over {ours}"
        )
    if _aarch64_wheels(release):
        return (
            f"{ext.name} {release.version}'s linux-aarch64 wheels on PyPI are built for PyPI's SBSA "
            f"torch builds; envkit knows no {ext.name} wheel built for {ours}"
        )
    pinned = f" (it requires torch{release.requires_torch})" if release.requires_torch else ""
    return f"{ext.name} {release.version} has no linux-aarch64 wheel for {ours}{pinned}"


def _ways(ext: Extension) -> str:
    return f"a {CONTAINERS} image, which builds {ext.name} against JetPack's torch, or leave {ext.name} out"


def jetson_picks(
    jp: JetPack,
    torch_build: TorchBuild,
    target: Target,
    requests: tuple[ExtensionRequest, ...],
    *,
    allow_build: bool,
) -> tuple[tuple[ExtensionPick, ...], list[tuple[str, str, str]]]:
    """(the picks, the failures as (name, why, ways out)) of ``requests`` for the JetPack torch."""
    from envkit.resolve.extensions import _pick

    picks = []
    failures = []
    for request in requests:
        ext = load_extensions()[request.name]
        pick: Optional[ExtensionPick] = None
        if ext.kind == "jit":
            found, _reason = _pick(request, torch_build, target.gpus, False)
            pick = found if found is not None and found.where in ("sdist", "pypi") else None
        if pick is None and allow_build:
            pick = _source_build(ext, request, torch_build, target)
        if pick is not None:
            picks.append(pick)
        else:
            failures.append((ext.name, _why(ext, request, torch_build, jp), _ways(ext)))
    return tuple(picks), failures


def failure_text(target_label: str, failures: list[tuple[str, str, str]], build_way: str) -> str:
    """One paragraph: each extension that does not fit, why, and the ways out (``build_way``: what
    --allow-build would give, or "")."""
    names = ", ".join(n for n, _w, _x in failures)
    whys = ". ".join(why for _n, why, _x in failures)
    ways = [build_way] if build_way else []
    ways.append(f"a {CONTAINERS} image, which builds {names} against JetPack's torch")
    ways.append(f"or leave {names} out")
    return f"no build of {names} fits the JetPack torch on {target_label}: {whys}. Try {', '.join(ways)}."


def ways_out(failures: list[tuple[str, str, str]], build_way: str) -> tuple[WayOut, ...]:
    from envkit.errors import WayOut

    ways = [WayOut("extension", build_way, value="--allow-build")] if build_way else []
    return (*ways, *(WayOut("extension", f"{name}: {w}") for name, _why, w in failures))
