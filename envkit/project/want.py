"""What a project's files must say to get the planned torch build on each of its platforms: the
resolver's plans grouped by where their wheels come from (an index per CUDA variant, or the
project's default index where PyPI's wheels are the build), each group with the PEP 508 marker
that selects its platforms.

The shape follows uv's own guide (astral-sh/uv:docs/guides/integration/pytorch.md@04317224be05,
"Using uv with PyTorch"): one explicit index per variant, sources gated on ``sys_platform`` (CUDA
builds on Linux and Windows, PyPI's default on macOS, where PyTorch publishes no CUDA builds), and
for a project that wants both builds, one optional extra per variant declared as conflicting.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Optional

from packaging.utils import canonicalize_name

from envkit.errors import InputError
from envkit.knowledge.mirrors import Layout, split_credentials
from envkit.mirrors.choose import pip_args
from envkit.redact import MASK
from envkit.resolve import Plan
from envkit.specs.conda import SUBDIRS
from envkit.specs.pip import file_url

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.mirrors.choose import Mirror
    from envkit.resolve.ext_pick import ExtensionPick

__all__ = ["COMPANIONS", "TORCH_PACKAGES", "Source", "Want", "make_want", "platform_marker"]

# The packages envkit pins together (one torch release's set); their pip names.
TORCH_PACKAGES: Final = ("torch", "torchvision", "torchaudio")
COMPANIONS: Final = TORCH_PACKAGES[1:]

# PEP 508 values of each envkit platform: sys_platform and platform_machine as CPython reports them
# (platform_machine is AMD64 on Windows, arm64 on macOS, aarch64 on Linux).
_OS: Final = {"linux": "linux", "windows": "win32", "macos": "darwin"}
_MACHINE: Final = {
    "linux-x86_64": "x86_64",
    "linux-aarch64": "aarch64",
    "windows-x86_64": "AMD64",
    "macos-arm64": "arm64",
    "macos-x86_64": "x86_64",
}


def _os_of(platform: str) -> str:
    return platform.split("-", 1)[0]


def platform_env(platform: str, python: Optional[str] = None) -> dict[str, str]:
    """The PEP 508 marker environment of ``platform`` (what packaging's Marker.evaluate takes)."""
    os_name = _os_of(platform)
    env = {
        "sys_platform": _OS.get(os_name, os_name),
        "platform_system": {"linux": "Linux", "windows": "Windows", "macos": "Darwin"}.get(os_name, ""),
        "os_name": "nt" if os_name == "windows" else "posix",
        "platform_machine": _MACHINE.get(platform, ""),
    }
    if python:
        env["python_version"] = python
        env["python_full_version"] = f"{python}.0"
    return env


def platform_marker(platforms: Sequence[str], among: Sequence[str]) -> str:
    """The marker that selects ``platforms`` among the project's platforms ``among``: by
    ``sys_platform`` where every platform of that OS is in the group, else with its machine too."""
    terms: list[str] = []
    for os_name in dict.fromkeys(_os_of(p) for p in platforms):
        mine = [p for p in platforms if _os_of(p) == os_name]
        others = [p for p in among if _os_of(p) == os_name and p not in mine]
        sys_platform = f"sys_platform == '{_OS.get(os_name, os_name)}'"
        if not others:
            terms.append(sys_platform)
            continue
        for p in mine:
            terms.append(f"({sys_platform} and platform_machine == '{_MACHINE.get(p, '')}')")
    return " or ".join(terms)


@dataclass(frozen=True)
class Source:
    """Where one group of the project's platforms gets the torch packages."""

    platforms: tuple[str, ...]
    plan: Plan  # the first platform's (the group shares its torch release and variant)
    index_name: Optional[str]  # the name the manifest gives the index; None: the default index
    index_url: Optional[str]  # None: the project's default index (PyPI's wheels are the build)
    flat: bool  # a flat listing (pip's --find-links, uv's format = "flat")
    marker: str  # selects these platforms among the project's ("" when they are all of them)
    login: bool = False  # the index (a --mirror given with user:token@) wants credentials

    @property
    def pip_url(self) -> Optional[str]:
        """index_url as a requirements file holds it: ``${ENVKIT_TORCH_INDEX_USERNAME}`` placeholders
        where it wants credentials (envkit.specs.pip.file_url), never the credentials."""
        return pip_url(self.index_url, "TORCH_INDEX") if self.login else self.index_url

    @property
    def variant(self) -> str:
        return self.plan.variant

    @property
    def local(self) -> bool:
        """Whether a pin may name the build (``==2.5.1+cu121``): wheels from a variant index carry
        the local version; PyPI's (macOS, or a release's default build) do not."""
        return self.index_url is not None and not self.plan.platform.startswith("macos")

    @property
    def subdirs(self) -> tuple[str, ...]:
        """The conda subdirs of the group's platforms (pixi's targets)."""
        return tuple(SUBDIRS[p] for p in self.platforms if p in SUBDIRS)


@dataclass(frozen=True)
class Want:
    """Everything a manifest must say: the packages and their versions, and the sources."""

    packages: tuple[str, ...]  # canonical pip names, torch first
    versions: dict[str, str]  # name -> public version ("2.14.1")
    sources: tuple[Source, ...]  # one per group of platforms, in the order the platforms were given
    platforms: tuple[str, ...]
    command: str  # the `envkit add …` that writes this
    pypi_index: Optional[str] = None  # a PyPI mirror the project should use instead of PyPI
    pypi_login: bool = False  # that mirror wants credentials
    # uv's optional-extras shape: (extra name, its source) per build the project wants side by side
    extras: tuple[tuple[str, Source], ...] = ()

    @property
    def torch(self) -> str:
        return self.versions["torch"]

    def extensions(self) -> list[tuple[ExtensionPick, Source]]:
        """The extensions (``--with``) each source's plan installs, with that source. A source build
        is not something a manifest can say (it needs --no-build-isolation and a toolkit): refused."""
        out = []
        for source in self.sources:
            for pick in source.plan.extensions:
                if pick.build is not None or pick.where in ("build", "sdist"):
                    raise InputError(
                        f"--with {pick.name}: {pick.name} {pick.version} has no wheel for torch "
                        f"{source.plan.candidate} on {', '.join(source.platforms)}; envkit add writes "
                        "no source builds into a manifest",
                        hint="choose a --torch or --cuda it has a wheel for (envkit resolve --with NAME "
                        "--explain), or build it with envkit create --allow-build",
                    )
                out.append((pick, source))
        return out

    def extension_names(self) -> list[str]:
        return list(dict.fromkeys(p.name for p, _ in self.extensions()))

    def pin(self, name: str, source: Source, *, local: bool = True) -> str:
        """``torch==2.14.1+cu126`` (``local`` and the source allows it), else ``name==version``:
        only torch carries the variant, as the plan's own requirements do (Plan.requirements)."""
        label = f"+{source.variant}" if local and source.local and name == "torch" else ""
        return f"{name}=={self.versions[name]}{label}"

    def indexed(self) -> tuple[Source, ...]:
        """The sources that name an index (each listed once, by name)."""
        seen: dict[str, Source] = {}
        for s in (*self.sources, *(s for _, s in self.extras)):
            if s.index_name is not None and s.index_name not in seen:
                seen[s.index_name] = s
        return tuple(seen.values())

    @property
    def pypi_pip_url(self) -> Optional[str]:
        """pypi_index as a requirements file holds it (placeholders for its credentials)."""
        return pip_url(self.pypi_index, "PYPI_INDEX") if self.pypi_login else self.pypi_index

    def credentials(self, kind: str) -> list[str]:
        """What a manifest of ``kind`` needs said about the indexes that want credentials: where its
        installer reads them (they are never written into the file)."""
        hosts = [(s.index_name or "", s.index_url or "") for s in self.indexed() if s.login]
        if self.pypi_login and self.pypi_index:
            hosts.append(("pypi-mirror", self.pypi_index))
        out = []
        for name, url in hosts:
            env = re.sub(r"[^A-Z0-9]", "_", name.upper())
            if kind == "uv":  # uv docs, "Index authentication": UV_INDEX_<NAME>_USERNAME
                where = f"set UV_INDEX_{env}_USERNAME and UV_INDEX_{env}_PASSWORD"
            elif kind == "poetry":  # Poetry docs, "Configuring credentials"
                where = f"set POETRY_HTTP_BASIC_{env}_USERNAME and POETRY_HTTP_BASIC_{env}_PASSWORD"
            elif kind == "pixi":  # pixi docs, "Authentication": keyring or netrc for PyPI indexes
                where = f"give pixi its login in ~/.netrc (machine {urllib.parse.urlsplit(url).hostname})"
            else:  # pip expands ${VAR} in requirements files (pip docs, "Using environment variables")
                role = "PYPI_INDEX" if name == "pypi-mirror" else "TORCH_INDEX"
                where = f"set ENVKIT_{role}_USERNAME and ENVKIT_{role}_PASSWORD"
            out.append(f"{url} wants a login, which is not written into the file: {where}")
        return out

    def describe(self) -> str:
        builds = "; ".join(f"{s.variant} on {', '.join(s.platforms)}" for s in self.sources)
        return f"torch {self.torch} ({builds})"


def pip_url(url: Optional[str], role: str) -> Optional[str]:
    """A bare URL with ``${ENVKIT_<ROLE>_USERNAME}:${ENVKIT_<ROLE>_PASSWORD}@`` in it."""
    if url is None:
        return None
    return file_url(url.replace("://", f"://{MASK}@", 1), role, [])


def _source_of(plan: Plan, mirror: Optional[Mirror]) -> tuple[Optional[str], Optional[str], bool, bool]:
    """(index name, URL, flat, login) of a plan's torch wheels, from the mirror when one is given.
    The URL never holds credentials (a mirror's ``***@`` is taken out: login says it had them)."""
    if plan.index_url is None:
        return None, None, False, False
    if mirror is None:
        return f"pytorch-{plan.variant}", plan.index_url, False, False
    option, shown = pip_args(mirror, plan.variant)
    url, _ = split_credentials(shown)
    name = f"{mirror.name if mirror.name != 'url' else 'torch'}-{plan.variant}"
    return name, url, option == "--find-links" or mirror.layout is Layout.FLAT, url != shown


def make_want(
    plans: Sequence[Plan],
    packages: Sequence[str],
    *,
    command: str,
    torch_mirror: Optional[Mirror] = None,
    pypi_mirror: Optional[Mirror] = None,
    extras: Sequence[tuple[str, Plan]] = (),
) -> Want:
    """The Want of one plan per platform (all of one torch release: the caller resolves them so)."""
    if not plans:
        raise InputError("no platform to plan for")
    releases = {str(p.torch) for p in plans} | {str(p.torch) for _, p in extras}
    if len(releases) > 1:  # the caller re-resolves for one release; this is its bug otherwise
        raise InputError(f"the platforms' plans are for different torch releases: {', '.join(releases)}")
    names = [canonicalize_name(n) for n in packages]
    ordered = tuple(dict.fromkeys(["torch", *(n for n in TORCH_PACKAGES if n in names)]))
    first = plans[0]
    versions = {
        "torch": str(first.torch),
        "torchvision": str(first.torchvision),
        "torchaudio": str(first.torchaudio),
    }
    platforms = tuple(p.platform for p in plans)
    groups: dict[tuple[Optional[str], str], list[Plan]] = {}
    for plan in plans:
        url = _source_of(plan, torch_mirror)[1]
        groups.setdefault((url, plan.variant), []).append(plan)
    sources = []
    for (url, _variant), members in groups.items():
        name, url, flat, login = _source_of(members[0], torch_mirror)
        group = tuple(m.platform for m in members)
        marker = "" if len(groups) == 1 and not url else platform_marker(group, platforms)
        sources.append(Source(group, members[0], name, url, flat, marker, login))
    made_extras = []
    for extra, plan in extras:
        name, url, flat, login = _source_of(plan, torch_mirror)
        made_extras.append((extra, Source((plan.platform,), plan, name, url, flat, "", login)))
    pypi = split_credentials(pypi_mirror.url)[0] if pypi_mirror is not None else None
    return Want(
        packages=ordered,
        versions=versions,
        sources=tuple(sources),
        platforms=platforms,
        command=command,
        pypi_index=pypi,
        pypi_login=pypi_mirror is not None and pypi != pypi_mirror.url,
        extras=tuple(made_extras),
    )
