#!/usr/bin/env python3
"""Compare envkit/knowledge/releases.toml with the PyTorch wheel index and RELEASE.md, and refresh it.

    python scripts/update_knowledge.py                        # read the live pages, print the findings
    python scripts/update_knowledge.py --write                # ... and rewrite the release rows
    python scripts/update_knowledge.py --from-dir tests/data/pytorch-index   # saved copies, no network
    python scripts/update_knowledge.py --extensions [--write]   # the extension tables (update_extensions.py)

What is read: the PEP 503 page of the ``torch`` project on download.pytorch.org (every wheel file name:
version, local label = wheel variant, CPython tag, platform tag) and the "Release Compatibility Matrix"
table of pytorch/pytorch's RELEASE.md (Python range, stable/experimental CUDA, ROCm per torch minor).

What ``--write`` changes: for releases already in releases.toml, the ``[release.variants]`` lines and the
``python = [...]`` line, as a text edit that keeps every comment, source and other field; each touched row's
``source`` gets ``; wheel index read <date>``. New releases are only reported: their torchvision, torchaudio
and triton cannot be read from the index. The file is replaced atomically and validated with envkit's
loader; if it does not load, the old file is put back.

How files map to releases.toml (see ``parse_wheel_index``):

- the local label is the variant (``+cu121`` -> cu121, ``+rocm6.2`` -> rocm6.2, ``+cpu`` -> cpu);
- a file without a label is the PyPI build: on macOS (arm64 and x86_64) that is cpu; on linux-x86_64 it
  is the release's ``pypi_default``; on linux-aarch64 (the release's ``pypi_default_aarch64``: cpu up to
  2.10, a CUDA build from 2.11) and Windows (cpu) it counts only when the platform has no labelled file at
  all for that release (otherwise it duplicates one of them);
- ``python`` is the CPython minors with a wheel on every platform the index has for the release, leaving
  out the platforms with their own ``[release.python_platform]`` line (releases.toml leaves out minors
  that only one platform has), free-threaded ``cp313t`` builds excluded; a ``python_platform`` line is
  compared with that platform's files (reported, never rewritten);
- the PyPI defaults (``pypi_default`` on linux-x86_64, ``pypi_default_aarch64`` on linux-aarch64) are kept
  by ``--write``: those builds are on PyPI whatever download.pytorch.org lists;
- dev/nightly and pre-release versions are skipped unless ``--include-dev``.

A page for one variant only (``--index-url https://download.pytorch.org/whl/cu124/torch/``) speaks only for
the variants it holds: variants it never mentions are neither reported missing nor removed.
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import os
import re
import shutil
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Optional

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from envkit.knowledge import PLATFORMS, is_variant, variant_cuda
from envkit.mirrors.simple_index import linked_files

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from envkit.knowledge import Release

ROOT: Final = Path(__file__).resolve().parents[1]
DEFAULT_INDEX_URL: Final = "https://download.pytorch.org/whl/torch/"
DEFAULT_RELEASE_MD_URL: Final = "https://raw.githubusercontent.com/pytorch/pytorch/main/RELEASE.md"
TIMEOUT_S: Final = 10.0
# The pseudo-variant of a wheel without a local label: the build that PyPI also serves.
PYPI: Final = "pypi"
_PLATFORM_TAGS: Final = (
    (re.compile(r"^(many)?linux(1|2010|2014|_\d+_\d+)?_x86_64$"), "linux-x86_64"),
    (re.compile(r"^(many)?linux(2014|_\d+_\d+)?_aarch64$"), "linux-aarch64"),
    (re.compile(r"^win_amd64$"), "windows-x86_64"),
    (re.compile(r"^macosx_\d+_\d+_arm64$"), "macos-arm64"),
    # Intel Macs: macosx_*_x86_64 wheels up to 2.2.2, none from 2.3.0 (https://pypi.org/simple/torch/).
    (re.compile(r"^macosx_\d+_\d+_x86_64$"), "macos-x86_64"),
)
_MACOS: Final = ("macos-arm64", "macos-x86_64")
_SOURCE_NOTE_RE: Final = re.compile(r"; wheel index read \d{4}-\d{2}-\d{2}")


class UpdateError(Exception):
    """A problem the command reports in one line (exit 2): unreachable page, missing saved copy."""


# --- The wheel index ------------------------------------------------------------------------------


@dataclass(frozen=True)
class WheelIndex:
    """What a PEP 503 page says about torch: release -> platform -> variant -> CPython minors.

    Minors are "3.10"; free-threaded builds are kept as "3.13t" (they count for the variant, not for
    the release's ``python``). ``notes`` says what was skipped and why.
    """

    releases: dict[Version, dict[str, dict[str, frozenset[str]]]]
    notes: tuple[str, ...] = ()

    def variants(self, torch: Version, platform: str) -> set[str]:
        """Variants with a file for ``platform`` (may include the ``PYPI`` pseudo-variant)."""
        return set(self.releases.get(torch, {}).get(platform, {}))

    def platforms(self, torch: Version) -> list[str]:
        return [p for p in PLATFORMS if p in self.releases.get(torch, {})]

    def python(self, torch: Version, *, besides: Iterable[str] = ()) -> list[str]:
        """CPython minors with a (not free-threaded) wheel on every platform the index has for ``torch``
        (but those in ``besides``: the platforms releases.toml gives their own range)."""
        skip = set(besides)
        per_platform = [
            set(self.python_on(torch, platform)) for platform in self.platforms(torch) if platform not in skip
        ]
        if not per_platform:
            return []
        return sorted(set.intersection(*per_platform), key=_minor_key)

    def python_on(self, torch: Version, platform: str) -> list[str]:
        """CPython minors with a (not free-threaded) wheel for ``platform``."""
        variants = self.releases.get(torch, {}).get(platform, {})
        return sorted(
            {m for pythons in variants.values() for m in pythons if not m.endswith("t")}, key=_minor_key
        )

    def partial_python(self, torch: Version, *, besides: Iterable[str] = ()) -> list[str]:
        """Minors that some platforms have and others lack (not free-threaded)."""
        skip = set(besides)
        every = set(self.python(torch, besides=skip))
        some = {m for p in self.platforms(torch) if p not in skip for m in self.python_on(torch, p)}
        return sorted(some - every, key=_minor_key)

    def covered_variants(self) -> set[str]:
        """Every labelled variant the page(s) hold for any release: the variants the index speaks for."""
        return {
            v
            for platforms in self.releases.values()
            for variants in platforms.values()
            for v in variants
            if v != PYPI
        }

    def covered_platforms(self) -> set[str]:
        return {p for platforms in self.releases.values() for p in platforms}


def platform_of(tag: str) -> Optional[str]:
    """envkit's platform for a wheel platform tag: manylinux_2_28_aarch64 -> linux-aarch64.

    >>> platform_of("manylinux1_x86_64"), platform_of("win_amd64"), platform_of("macosx_10_9_x86_64")
    ('linux-x86_64', 'windows-x86_64', 'macos-x86_64')
    >>> platform_of("linux_s390x") is None
    True
    """
    for pattern, platform in _PLATFORM_TAGS:
        if pattern.match(tag):
            return platform
    return None


def python_minor(interpreter: str, abi: str) -> Optional[str]:
    """cp310 -> "3.10"; a free-threaded ABI (cp313t) -> "3.13t"; not CPython -> None.

    >>> python_minor("cp39", "cp39"), python_minor("cp313", "cp313t"), python_minor("py3", "none")
    ('3.9', '3.13t', None)
    """
    match = re.fullmatch(r"cp(\d)(\d+)", interpreter)
    if not match:
        return None
    minor = f"{match.group(1)}.{match.group(2)}"
    return minor + "t" if re.fullmatch(r"cp\d+t", abi) else minor


def _minor_key(minor: str) -> tuple[int, int, str]:
    major, _, rest = minor.partition(".")
    digits = rest.rstrip("t")
    return (int(major), int(digits) if digits.isdigit() else 0, rest[len(digits) :])


def parse_wheel_index(html: str, *, include_dev: bool = False) -> WheelIndex:
    """Read a PEP 503 project page (https://download.pytorch.org/whl/torch/ or a variant's page).

    >>> page = '<a href="/whl/cu121/torch-2.5.1%2Bcu121-cp311-cp311-linux_x86_64.whl#sha256=0">x</a>'
    >>> parse_wheel_index(page).releases
    {<Version('2.5.1')>: {'linux-x86_64': {'cu121': frozenset({'3.11'})}}}
    """
    found: dict[Version, dict[str, dict[str, set[str]]]] = {}
    skipped: Counter[str] = Counter()
    for name in linked_files(html):
        if not name.endswith(".whl"):
            continue
        try:
            project, version, _build, tags = parse_wheel_filename(name)
        except (InvalidWheelFilename, InvalidVersion):
            skipped["not a valid wheel file name"] += 1
            continue
        if project != "torch":
            skipped[f"project {project}"] += 1
            continue
        if (version.is_devrelease or version.is_prerelease) and not include_dev:
            skipped["dev/nightly or pre-release versions"] += 1
            continue
        platforms = {p for p in (platform_of(t.platform) for t in tags) if p is not None}
        if not platforms:
            skipped[f"platform {'.'.join(sorted({t.platform for t in tags}))}"] += 1
            continue
        pythons = {m for m in (python_minor(t.interpreter, t.abi) for t in tags) if m is not None}
        if not pythons:
            skipped["not a CPython wheel"] += 1
            continue
        label = version.local
        if label is not None and not is_variant(label):
            skipped[f"local label +{label}"] += 1
            continue
        torch = Version(version.public)
        for platform in platforms:
            variant = label or ("cpu" if platform in _MACOS else PYPI)
            found.setdefault(torch, {}).setdefault(platform, {}).setdefault(variant, set()).update(pythons)
    notes = tuple(f"skipped {n} file(s): {reason}" for reason, n in sorted(skipped.items()))
    return WheelIndex(_freeze(found), notes)


def _freeze(
    found: dict[Version, dict[str, dict[str, set[str]]]],
) -> dict[Version, dict[str, dict[str, frozenset[str]]]]:
    return {
        torch: {
            platform: {
                v: frozenset(found[torch][platform][v])
                for v in sorted(found[torch][platform], key=variant_key)
            }
            for platform in PLATFORMS
            if platform in found[torch]
        }
        for torch in sorted(found)
    }


def merge_indexes(indexes: Iterable[WheelIndex]) -> WheelIndex:
    """One index from several pages (``--index-url`` given more than once)."""
    found: dict[Version, dict[str, dict[str, set[str]]]] = {}
    notes: list[str] = []
    for index in indexes:
        notes.extend(index.notes)
        for torch, platforms in index.releases.items():
            for platform, variants in platforms.items():
                for variant, pythons in variants.items():
                    found.setdefault(torch, {}).setdefault(platform, {}).setdefault(variant, set()).update(
                        pythons
                    )
    return WheelIndex(_freeze(found), tuple(notes))


def variant_key(variant: str) -> tuple[int, tuple[int, ...], str]:
    """Order of variants in releases.toml: cpu, cuXYZ ascending, rocm ascending, xpu, the rest."""
    if variant == "cpu":
        return (0, (), "")
    cuda = variant_cuda(variant)  # cu92 (two digits: CUDA 9.x) sorts before cu100
    if cuda is not None:
        return (1, cuda.release, "")
    if re.fullmatch(r"rocm\d+(\.\d+)*", variant):
        return (2, tuple(int(p) for p in variant[4:].split(".")), "")
    if variant == "xpu":
        return (3, (), "")
    return (4, (), variant)


def index_variants(
    index: WheelIndex, torch: Version, platform: str, pypi_default: str, pypi_default_aarch64: str = "cpu"
) -> set[str]:
    """The releases.toml variants the index shows for one release and platform (PYPI resolved)."""
    variants = index.variants(torch, platform)
    labelled = variants - {PYPI}
    if PYPI in variants:
        if platform == "linux-x86_64":
            labelled.add(pypi_default)
        elif not labelled:
            labelled.add(pypi_default_aarch64 if platform == "linux-aarch64" else "cpu")
    return labelled


def pypi_defaults(pypi_default: str, pypi_default_aarch64: str) -> dict[str, str]:
    """The build plain ``pip install torch`` gets, per platform where it is a release's own field."""
    return {"linux-x86_64": pypi_default, "linux-aarch64": pypi_default_aarch64}


# --- RELEASE.md --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MatrixRow:
    """One row of RELEASE.md's Release Compatibility Matrix (a torch minor)."""

    torch: str  # "2.5"
    python: str  # the cell as written: ">=3.9, <=3.12, (3.13 experimental)"
    python_min: Optional[str]
    python_max: Optional[str]
    stable_cuda: tuple[str, ...]  # ("11.8", "12.1", "12.4")
    experimental_cuda: tuple[str, ...]
    rocm: Optional[str]  # "6.2.4"


@dataclass(frozen=True)
class ReleaseMatrix:
    rows: tuple[MatrixRow, ...] = ()
    notes: tuple[str, ...] = field(default=())

    def row(self, minor: str) -> Optional[MatrixRow]:
        return next((r for r in self.rows if r.torch == minor), None)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _column_roles(header: list[str]) -> dict[str, int]:
    roles: dict[str, int] = {}
    for i, name in enumerate(c.lower() for c in header):
        if "pytorch" in name or name in ("torch", "version"):
            role = "torch"
        elif "python" in name:
            role = "python"
        elif "rocm" in name:
            role = "rocm"
        elif "cuda" in name and "experimental" in name:
            role = "experimental"
        elif "cuda" in name:
            role = "stable"
        else:
            continue
        roles.setdefault(role, i)
    return roles


def parse_release_matrix(markdown: str) -> ReleaseMatrix:
    """The "Release Compatibility Matrix" table of pytorch/pytorch's RELEASE.md.

    Columns are found by their header names (the table gained C++ and ROCm columns over time); lines in
    the table that are not rows of it (a merge-conflict marker, a row with no torch minor) are skipped
    with a note.

    >>> head = "| PyTorch version | Python | Stable CUDA |\\n| --- | --- | --- |\\n"
    >>> parse_release_matrix(head + "| 2.1 | >=3.8, <=3.11 | CUDA 11.8 |").rows[0].stable_cuda
    ('11.8',)
    """
    lines = markdown.splitlines()
    start = next(
        (
            i
            for i, line in enumerate(lines)
            if re.match(r"^#+\s*Release Compatibility Matrix", line.strip(), re.I)
        ),
        0,
    )
    header_at = next(
        (
            i
            for i in range(start, len(lines))
            if lines[i].lstrip().startswith("|")
            and "torch" in lines[i].lower()
            and "version" in lines[i].lower()
        ),
        None,
    )
    if header_at is None:
        return ReleaseMatrix((), ("RELEASE.md: no Release Compatibility Matrix table found",))
    header = _cells(lines[header_at])
    roles = _column_roles(header)
    notes: list[str] = []
    if "stable" not in roles and "experimental" not in roles:
        notes.append(f"RELEASE.md line {header_at + 1}: no CUDA column in {header}")
    rows: list[MatrixRow] = []
    for i in range(header_at + 1, len(lines)):
        line = lines[i].strip()
        if not line or line.startswith("#"):
            break
        if not line.startswith("|"):
            notes.append(f"RELEASE.md line {i + 1}: skipped, not a table row: {line[:60]!r}")
            continue
        cells = _cells(line)
        if all(re.fullmatch(r":?-{3,}:?", c) for c in cells):
            continue
        torch = cells[roles["torch"]] if roles.get("torch", 0) < len(cells) else ""
        if not re.fullmatch(r"\d+\.\d+", torch):
            notes.append(f"RELEASE.md line {i + 1}: skipped, no torch minor in {cells[:1]}")
            continue
        if len(cells) != len(header):
            notes.append(f"RELEASE.md line {i + 1}: {len(cells)} cells under a {len(header)}-column header")
        if any(r.torch == torch for r in rows):
            notes.append(f"RELEASE.md line {i + 1}: skipped, torch {torch} listed twice")
            continue

        def cell(role: str, cells: list[str] = cells) -> str:
            index = roles.get(role)
            return cells[index] if index is not None and index < len(cells) else ""

        python = cell("python")
        low = re.search(r">=\s*(\d+\.\d+)", python)
        high = re.search(r"<=\s*\(?\s*(\d+\.\d+)", python)
        rocm = re.search(r"ROCm\s+(\d+(?:\.\d+)+)", cell("rocm"), re.I)
        rows.append(
            MatrixRow(
                torch=torch,
                python=python,
                python_min=low.group(1) if low else None,
                python_max=high.group(1) if high else None,
                stable_cuda=tuple(re.findall(r"CUDA\s+(\d+\.\d+)", cell("stable"), re.I)),
                experimental_cuda=tuple(re.findall(r"CUDA\s+(\d+\.\d+)", cell("experimental"), re.I)),
                rocm=rocm.group(1) if rocm else None,
            )
        )
    return ReleaseMatrix(tuple(rows), tuple(notes))


# --- Comparing ----------------------------------------------------------------------------------------


def _minors(release: Release) -> list[str]:
    return _minors_of(release.python)


def _minors_of(versions: Iterable[Version]) -> list[str]:
    return [f"{v.major}.{v.minor}" for v in versions]


def _list(items: Iterable[str]) -> str:
    return ", ".join(items) or "none"


def diff_releases(
    knowledge_releases: Sequence[Release], index: WheelIndex, matrix: Optional[ReleaseMatrix] = None
) -> list[str]:
    """Human-readable differences between releases.toml and the index (and RELEASE.md's matrix)."""
    findings: list[str] = []
    known = {r.torch: r for r in knowledge_releases}
    oldest = min(known) if known else None
    covered = index.covered_variants()
    covered_platforms = index.covered_platforms()

    older = [t for t in index.releases if t not in known and oldest is not None and t < oldest]
    for torch in index.releases:
        if torch in known or torch in older:
            continue
        summary = "; ".join(
            f"{p}: {_list(sorted(index.variants(torch, p), key=variant_key))}" for p in index.platforms(torch)
        )
        findings.append(
            f"torch {torch}: on the wheel index ({summary}; python {_list(index.python(torch))}), not in "
            "releases.toml; add it by hand (its torchvision/torchaudio/triton are not on the index)"
        )
    if older:
        findings.append(
            f"{len(older)} release(s) on the wheel index are older than {oldest}, envkit's oldest, and are "
            f"not compared: {_list(str(t) for t in older)}"
        )

    absent: list[str] = []
    for release in sorted(knowledge_releases, key=lambda r: r.torch):
        torch = release.torch
        if torch not in index.releases:
            absent.append(str(torch))
            continue
        for platform in PLATFORMS:
            listed = set(release.variants.get(platform, ()))
            if platform not in index.releases[torch]:
                if listed and platform in covered_platforms:
                    findings.append(
                        f"torch {torch} {platform}: no file on the wheel index for this platform "
                        f"(releases.toml lists {_list(sorted(listed, key=variant_key))})"
                    )
                continue
            shown = index_variants(index, torch, platform, release.pypi_default, release.pypi_default_aarch64)
            new = sorted(shown - listed, key=variant_key)
            gone = sorted((listed & covered) - shown, key=variant_key)
            default = pypi_defaults(release.pypi_default, release.pypi_default_aarch64).get(platform)
            if new:
                findings.append(
                    f"torch {torch} {platform}: on the wheel index, not in releases.toml: {_list(new)}"
                )
            if gone:
                kept = f" ({default} is the PyPI default: --write keeps it)" if default in gone else ""
                findings.append(
                    f"torch {torch} {platform}: in releases.toml, no file on the wheel index: "
                    f"{_list(gone)}{kept}"
                )
        own = set(release.python_platform)
        on_index = index.python(torch, besides=own)
        if on_index and on_index != _minors(release):
            partial = index.partial_python(torch, besides=own)
            shared = [p for p in index.platforms(torch) if p not in own]
            findings.append(
                f"torch {torch}: python in releases.toml is {_list(_minors(release))}; the wheel index has "
                f"{_list(on_index)} on every platform it lists ({_list(shared)})"
                + (f", and {_list(partial)} on some only" if partial else "")
            )
        for platform in index.platforms(torch):
            if platform in own:
                listed_python = _minors_of(release.python_platform[platform])
                found = index.python_on(torch, platform)
                if found != listed_python:
                    findings.append(
                        f"torch {torch} {platform}: python_platform in releases.toml is "
                        f"{_list(listed_python)}; the wheel index has {_list(found)}"
                    )
    if absent and index.releases:
        findings.append(
            f"{len(absent)} release(s) in releases.toml have no file on the wheel index: {_list(absent)}"
        )

    if matrix is not None:
        findings.extend(_matrix_findings(knowledge_releases, matrix))
    return findings


def _matrix_findings(knowledge_releases: Sequence[Release], matrix: ReleaseMatrix) -> list[str]:
    findings: list[str] = []
    newest = max(((r.torch.major, r.torch.minor) for r in knowledge_releases), default=(0, 0))
    for row in matrix.rows:
        major, minor = (int(p) for p in row.torch.split("."))
        releases = sorted(
            (r for r in knowledge_releases if (r.torch.major, r.torch.minor) == (major, minor)),
            key=lambda r: r.torch,
        )
        if not releases:
            if (major, minor) > newest:
                findings.append(
                    f"RELEASE.md lists torch {row.torch}; releases.toml has no {row.torch}.x release"
                )
            continue
        wanted = [(c, "stable") for c in row.stable_cuda] + [
            (c, "experimental") for c in row.experimental_cuda
        ]
        for cuda, kind in wanted:
            variant = "cu" + cuda.replace(".", "")
            lacking = [str(r.torch) for r in releases if not any(variant in v for v in r.variants.values())]
            if lacking:
                findings.append(
                    f"RELEASE.md: torch {row.torch} lists CUDA {cuda} ({kind}); releases.toml has no "
                    f"{variant} variant for {_list(lacking)}"
                )
        if row.rocm:
            rocm = f"rocm{row.rocm}"
            lacking = [
                str(r.torch)
                for r in releases
                if not any(v == rocm or v.startswith(rocm + ".") for vs in r.variants.values() for v in vs)
            ]
            if lacking:
                findings.append(
                    f"RELEASE.md: torch {row.torch} lists ROCm {row.rocm}; releases.toml has no {rocm} "
                    f"variant for {_list(lacking)}"
                )
    return findings


# --- Rewriting releases.toml --------------------------------------------------------------------------

_PLATFORM_LINE_RE: Final = re.compile(r"^(?P<key>[A-Za-z0-9_-]+)\s*=\s*\[[^\]]*\]\s*(#.*)?$")
_PYTHON_LINE_RE: Final = re.compile(r"^python\s*=\s*\[[^\]]*\]\s*(#.*)?$")
_SOURCE_LINE_RE: Final = re.compile(r'^(?P<head>source\s*=\s*")(?P<text>.*)(?P<tail>"\s*)$')


def _toml_list(items: Iterable[str]) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


def _ending(line: str) -> str:
    return line[len(line.rstrip("\r\n")) :] or "\n"


def apply_updates_report(
    toml_text: str, index: WheelIndex, *, today: Optional[str] = None
) -> tuple[str, list[str]]:
    """``apply_updates`` and a line per release it changed."""
    today = today or datetime.date.today().isoformat()
    data = tomllib.loads(toml_text)
    rows = data.get("release", [])
    lines = toml_text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == "[[release]]"]
    if len(starts) != len(rows):
        raise UpdateError(f"releases.toml: {len(starts)} [[release]] lines but {len(rows)} release tables")
    covered = index.covered_variants()
    changes: list[str] = []
    # Work from the last block up so that inserted lines do not move the blocks still to do.
    for n in reversed(range(len(starts))):
        row = rows[n]
        torch = Version(str(row["torch"]))
        if torch not in index.releases:
            continue
        begin, end = starts[n], starts[n + 1] if n + 1 < len(starts) else len(lines)
        block = lines[begin:end]
        changed: list[str] = []
        variants_row: dict[str, list[str]] = row.get("variants", {})
        header = next((i for i, line in enumerate(block) if line.strip() == "[release.variants]"), None)
        if header is not None:
            table_end = next(
                (i for i in range(header + 1, len(block)) if block[i].lstrip().startswith("[")), len(block)
            )
            at = {
                m.group("key"): i
                for i in range(header + 1, table_end)
                if (m := _PLATFORM_LINE_RE.match(block[i].strip()))
            }
            last = max(at.values(), default=header)
            inserts: list[str] = []
            defaults = pypi_defaults(str(row["pypi_default"]), str(row.get("pypi_default_aarch64", "cpu")))
            for platform in index.platforms(torch):
                old = [str(v) for v in variants_row.get(platform, [])]
                keep = {v for v in old if v not in covered}
                if platform in defaults:
                    keep.add(defaults[platform])
                shown = index_variants(
                    index, torch, platform, defaults["linux-x86_64"], defaults["linux-aarch64"]
                )
                new = sorted(keep | shown, key=variant_key)
                if set(new) == set(old):
                    continue
                changed.append(f"{platform} {_list(old)} -> {_list(new)}")
                text = f"{platform} = {_toml_list(new)}"
                if platform in at:
                    block[at[platform]] = text + _ending(block[at[platform]])
                else:
                    inserts.append(text + "\n")
            block[last + 1 : last + 1] = inserts
        # python: only when the index has every platform the release lists (else it undercounts).
        # Platforms with their own [release.python_platform] line do not count for it.
        own = set(row.get("python_platform", {}))
        listed_platforms = set(variants_row) - own
        if listed_platforms and listed_platforms <= set(index.platforms(torch)):
            new_python = index.python(torch, besides=own)
            old_python = [str(v) for v in row.get("python", [])]
            if new_python and new_python != old_python:
                at_python = next(
                    (i for i, line in enumerate(block) if _PYTHON_LINE_RE.match(line.strip())), None
                )
                if at_python is not None:
                    block[at_python] = f"python = {_toml_list(new_python)}" + _ending(block[at_python])
                    changed.append(f"python {_list(old_python)} -> {_list(new_python)}")
        if not changed:
            continue
        for i, line in enumerate(block):
            m = _SOURCE_LINE_RE.match(line.rstrip("\r\n"))
            if m:
                text = _SOURCE_NOTE_RE.sub("", m.group("text")) + f"; wheel index read {today}"
                block[i] = m.group("head") + text + m.group("tail") + _ending(line)
                break
        lines[begin:end] = block
        changes.append(f"torch {torch}: " + "; ".join(changed))
    return "".join(lines), list(reversed(changes))


def apply_updates(toml_text: str, index: WheelIndex, *, today: Optional[str] = None) -> str:
    """releases.toml with the variants and python lines of known releases rewritten from the index.

    A text edit: comments, sources and other fields stay as they are. Releases not in the file are not
    added. Variants the index never mentions (for any release) are kept, and linux-x86_64 keeps the
    release's ``pypi_default`` (that build is on PyPI whatever download.pytorch.org lists).
    """
    return apply_updates_report(toml_text, index, today=today)[0]


# --- Fetching and writing -----------------------------------------------------------------------------


def fetch(url: str, timeout: float = TIMEOUT_S) -> str:
    """The page at ``url``; any failure is an UpdateError with one line that names the URL."""
    result: dict[str, object] = {}

    def get() -> None:
        try:
            request = urllib.request.Request(url, headers={"User-Agent": "envkit-update-knowledge"})
            with urllib.request.urlopen(request, timeout=timeout) as response:
                charset = response.headers.get_content_charset() or "utf-8"
                result["text"] = response.read().decode(charset, errors="replace")
        except urllib.error.HTTPError as exc:
            result["error"] = f"HTTP {exc.code} {exc.reason}"
        except urllib.error.URLError as exc:
            result["error"] = str(exc.reason)
        except (OSError, ValueError, http.client.HTTPException) as exc:
            result["error"] = str(exc) or type(exc).__name__

    # A thread, so that a name lookup that hangs (urlopen's timeout does not cover it) cannot hold us.
    worker = threading.Thread(target=get, daemon=True)
    worker.start()
    worker.join(timeout + 2)
    if "text" in result:
        return str(result["text"])
    reason = result.get("error", f"no answer within {timeout + 2:.0f} s")
    raise UpdateError(f"cannot reach {url}: {reason}; use --from-dir with saved copies")


def _read_saved(folder: Path, name: str) -> str:
    path = folder / name
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UpdateError(f"cannot read {path}: {exc.strerror or exc}") from None


def _replace_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        shutil.copymode(path, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_validated(path: Path, text: str) -> None:
    """Replace ``path`` (releases.toml) with ``text``, then load the knowledge base; on failure put the
    old file back and raise UpdateError."""
    import envkit.knowledge as kb

    old = path.read_text(encoding="utf-8")
    _replace_atomically(path, text)
    kb.load_knowledge.cache_clear()
    try:
        kb.load_knowledge()
    except kb.KnowledgeError as exc:
        _replace_atomically(path, old)
        raise UpdateError(f"the rewritten {path.name} does not load ({exc}); the old file is back") from None
    finally:
        kb.load_knowledge.cache_clear()


def main(argv: Optional[list[str]] = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if "--extensions" in args_in:
        # The extension tables (flash-attn, xformers, vllm, …) have their own refresher.
        args_in.remove("--extensions")
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import update_extensions

        return int(update_extensions.main(args_in))
    parser = argparse.ArgumentParser(
        description="Compare releases.toml with the PyTorch wheel index and RELEASE.md; --write updates it."
    )
    parser.add_argument(
        "--index-url",
        action="append",
        metavar="URL",
        help=f"a PEP 503 page of torch wheels (repeatable; default {DEFAULT_INDEX_URL})",
    )
    parser.add_argument(
        "--release-md", metavar="URL", default=DEFAULT_RELEASE_MD_URL, help="RELEASE.md to read"
    )
    parser.add_argument(
        "--from-dir",
        metavar="DIR",
        type=Path,
        help="read saved copies instead: DIR/torch.html and DIR/RELEASE.md",
    )
    parser.add_argument(
        "--write", action="store_true", help="rewrite releases.toml (atomically, then validated)"
    )
    parser.add_argument(
        "--include-dev", action="store_true", help="also read dev/nightly and pre-release wheels"
    )
    parser.add_argument(
        "--knowledge-dir",
        metavar="DIR",
        type=Path,
        help="the knowledge folder to use (default: envkit's own)",
    )
    args = parser.parse_args(argv)

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import envkit.knowledge as kb

    try:
        if args.from_dir is not None:
            pages = [_read_saved(args.from_dir, "torch.html")]
            release_md = _read_saved(args.from_dir, "RELEASE.md")
        else:
            pages = [fetch(url) for url in args.index_url or [DEFAULT_INDEX_URL]]
            release_md = fetch(args.release_md)
    except UpdateError as exc:
        print(f"update_knowledge: {exc}", file=sys.stderr)
        return 2

    index = merge_indexes(parse_wheel_index(page, include_dev=args.include_dev) for page in pages)
    matrix = parse_release_matrix(release_md)
    if args.knowledge_dir is not None:
        # The loader reads its tables from envkit.knowledge._table.DATA_DIR (re-exported by the package).
        import envkit.knowledge._table as table

        table.DATA_DIR = kb.DATA_DIR = args.knowledge_dir  # type: ignore[misc]
    kb.load_knowledge.cache_clear()
    try:
        knowledge = kb.load_knowledge()
    except kb.KnowledgeError as exc:
        print(f"update_knowledge: the knowledge base does not load: {exc}", file=sys.stderr)
        return 2

    for note in index.notes + matrix.notes:
        print(f"note: {note}")
    findings = diff_releases(knowledge.releases, index, matrix)
    print(
        f"{len(index.releases)} torch release(s) on the wheel index, {len(matrix.rows)} row(s) in "
        f"RELEASE.md's matrix, {len(knowledge.releases)} in releases.toml: {len(findings)} finding(s)"
    )
    for finding in findings:
        print(f"- {finding}")
    if not args.write:
        return 0

    path = kb.DATA_DIR / "releases.toml"
    try:
        text, changes = apply_updates_report(path.read_text(encoding="utf-8"), index)
        if not changes:
            print(f"{path}: nothing to change")
            return 0
        write_validated(path, text)
    except UpdateError as exc:
        print(f"update_knowledge: {exc}", file=sys.stderr)
        return 1
    print(f"{path}: rewrote {len(changes)} release(s)")
    for change in changes:
        print(f"  {change}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
