"""What a plan says of extensions: what ``--with`` asks for (ExtensionRequest), and the release of
each one the plan installs with its exact wheel or source build (ExtensionPick, BuildPlan).

Records only: envkit.resolve.extensions picks them (the resolver's ``extension`` rule), and
envkit.resolve.plan carries them in Request and Plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from packaging.specifiers import SpecifierSet

from envkit.versions import Version

__all__ = ["BuildPlan", "ExtensionPick", "ExtensionRequest"]


@dataclass(frozen=True)
class ExtensionRequest:
    """One ``--with`` value: a known extension and the releases asked for (empty: any)."""

    name: str
    spec: SpecifierSet = field(default_factory=SpecifierSet)
    text: str = ""

    def __str__(self) -> str:
        return self.text or f"{self.name}{self.spec}"


@dataclass(frozen=True)
class BuildPlan:
    """A source build the plan asks for (``--allow-build``), and what it needs."""

    nvcc: str
    arch_env: Optional[str]
    arch_list: str  # "8.0;9.0": the target's GPUs
    compiler: str
    time: str
    requires: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    config_settings: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class ExtensionPick:
    """The release of one extension the plan installs, and the exact wheel (or the build)."""

    name: str
    version: Version
    requirement: str  # what pip is given
    where: str  # pypi | url | find-links | index | build | sdist
    file: Optional[str] = None
    url: Optional[str] = None
    sha256: Optional[str] = None
    index: Optional[str] = None  # the find-links page or index pip needs for it
    no_build_isolation: bool = False
    build: Optional[BuildPlan] = None
    gpu_code: tuple[str, ...] = ()
    kind: str = ""
    notes: tuple[str, ...] = ()
    source: str = ""

    def plan_notes(self, built_against: str = "") -> list[str]:
        """What the plan says of this pick: the source build and what it needs, or the release's
        notes. ``built_against``: what the build is compiled against (" against the JetPack torch")."""
        b = self.build
        if b is None:
            return [f"{self.name}: {n}" for n in self.notes]
        needs = f"{b.nvcc}, {b.arch_env or 'TORCH_CUDA_ARCH_LIST'}={b.arch_list}, {b.compiler}; {b.time}"
        return [f"{self.name} {self.version} is built from source{built_against}: {needs}"]

    def to_json(self) -> dict[str, Any]:
        build = self.build
        return {
            "name": self.name,
            "version": str(self.version),
            "requirement": self.requirement,
            "where": self.where,
            "file": self.file,
            "url": self.url,
            "sha256": self.sha256,
            "index": self.index,
            "no_build_isolation": self.no_build_isolation,
            "gpu_code": list(self.gpu_code),
            "kind": self.kind,
            "build": None
            if build is None
            else {
                "nvcc": build.nvcc,
                "arch_env": build.arch_env,
                "arch_list": build.arch_list,
                "compiler": build.compiler,
                "time": build.time,
                "requires": list(build.requires),
                "env": dict(build.env),
                "source": build.source,
            },
            "notes": list(self.notes),
            "source": self.source,
        }
