"""torch.extensions on a Jetson: an extension whose Requires-Dist pins torch exactly and whose pin is
the torch installed, on a Jetson before Thor, came with PyPI's torch: ``pip install vllm`` resolves
its ``torch==X`` from PyPI, an SBSA build whose GPU code does not run on a Tegra GPU, in place of
NVIDIA's JetPack torch (envkit.resolve.jetson, jetson_ext). The fix puts the JetPack torch back and
sends the extension through ``envkit resolve --with`` (a source build against it, or a
dusty-nv/jetson-containers image).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from envkit.facts import Distribution, Facts
    from envkit.knowledge.extensions import ExtRelease
    from envkit.knowledge.vendors import JetPack
    from envkit.resolve.ext_wheels import TorchBuild

__all__ = ["jetson_fix", "replaced_jetpack_torch"]


def _jetpack(facts: Facts) -> Optional[tuple[JetPack, str]]:
    """The JetPack of a Jetson before Thor the facts describe, with its GPUs' names."""
    from envkit.knowledge import load_knowledge
    from envkit.resolve.jetson import is_jetson_target, jetpack_of
    from envkit.resolve.target import jetson_gpus, target_from_facts
    from envkit.versions import ComputeCapability

    k = load_knowledge()
    target = target_from_facts(facts, k)
    if not is_jetson_target(k, target):
        return None
    gpus = jetson_gpus(k, target)
    if gpus and all(g.cc >= ComputeCapability(11, 0) for g in gpus):
        return None  # Thor runs the SBSA cu130 wheels
    jp = jetpack_of(k, target)
    if jp is None or not jp.torch:
        return None
    return jp, ", ".join(g.label for g in gpus) or "this Jetson"


def _exact_pin(dist: Distribution, release: Optional[ExtRelease]) -> Optional[str]:
    from packaging.requirements import InvalidRequirement, Requirement

    spec = release.requires_torch if release is not None else None
    pins = [s for s in dist.requires_torch if s.strip()]
    if pins:
        try:
            spec = Requirement(pins[0].split(";")[0]).specifier
        except InvalidRequirement:
            return None
    if spec is None:
        return None
    exact = [s.version for s in spec if s.operator in ("==", "===")]
    return exact[0] if exact else None


def replaced_jetpack_torch(
    facts: Facts, dist: Distribution, release: Optional[ExtRelease], build: TorchBuild
) -> Optional[str]:
    """The finding where ``dist`` brought PyPI's torch onto a Jetson; None otherwise."""
    pin = _exact_pin(dist, release)
    if pin is None or pin != str(build.torch):
        return None
    found = _jetpack(facts)
    if found is None:
        return None
    jp, gpus = found
    if build.torch in jp.torch:
        return None  # the JetPack's own torch release: nothing says PyPI's replaced it
    ours = ", ".join(str(t) for t in jp.torch)
    return (
        f"{dist.name} {dist.version} requires torch=={pin} (its Requires-Dist), and torch {build.torch} is "
        f"installed: PyPI's build, which pip put in place of NVIDIA's JetPack {jp.jetpack} torch "
        f"({ours}); PyPI's aarch64 torch is an SBSA build whose GPU code does not run on {gpus}"
    )


def jetson_fix(facts: Facts, name: str, pip: str) -> Optional[str]:
    """Put the JetPack torch back, then ask envkit how ``name`` comes with it."""
    found = _jetpack(facts)
    if found is None:
        return None
    jp, _gpus = found
    where = f"--index-url {jp.index}" if jp.index else (jp.wheel or "")
    torch = f"torch=={jp.torch[0]}" if jp.index else ""
    return (
        f"{pip} uninstall -y {name} && {pip} install --force-reinstall {torch} {where}".replace("  ", " ")
        + f"; then `envkit resolve --with {name}` on this Jetson says how {name} comes with the JetPack "
        "torch (a source build with --allow-build, or a dusty-nv/jetson-containers image)"
    )
