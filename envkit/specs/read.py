"""Reading the spec files people already have: ``environment.yml`` and ``requirements.txt``.

Only what envkit.specs.check needs is kept: the torch packages and the CUDA selector packages with
their version ranges, the channels, and pip's index options. Conda's match specs are turned into
PEP 440 ranges where they can be (``=2.1`` is ``2.1.*``, ``==2.1.0`` exact, ``>=2,<3`` as is); a range
that cannot be (``2.1|2.2``) is kept as text with no range, and the checks that need it say so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Optional

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from envkit._files import parse_json, parse_toml, parse_yaml, read_text
from envkit.errors import InputError
from envkit.versions import spec_fits

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

__all__ = [
    "NOT_A_SPEC",
    "Pin",
    "SpecFile",
    "conda_range",
    "environment_spec",
    "parse_conda_spec",
    "parse_requirement",
    "pip_spec",
    "read_spec",
]

# pip's index options as a requirements file may write them: ``-i URL``, ``-iURL``, ``--index-url=URL``.
_OPTION_RE: Final = re.compile(
    r"^(-i|--index-url|--extra-index-url|-f|--find-links|-r|--requirement|-c|--constraint)"
    r"(?:=|\s+|(?<=-[if])(?=\S))(\S+)"
)
_TRAILING_OPTION_RE: Final = re.compile(r"\s+--?[A-Za-z]")
_COMMENT_RE: Final = re.compile(r"(^|\s)#.*$")
_NAME_RE: Final = re.compile(r"^([A-Za-z0-9_][A-Za-z0-9._-]*)\s*(.*)$")


@dataclass(frozen=True)
class Pin:
    """One package line: its name, the public version range it admits, and the local version
    (``cu121``) or conda build string and channel it names."""

    name: str  # lower case (pip: canonicalized)
    text: str  # the line as written
    spec: Optional[SpecifierSet]  # None: a range envkit cannot read
    local: Optional[str] = None  # pip: the +local part of an == pin
    build: Optional[str] = None  # conda: the build string
    channel: Optional[str] = None  # conda: ``pytorch::`` qualification


@dataclass(frozen=True)
class SpecFile:
    path: str
    kind: str  # "conda" | "pip"
    channels: tuple[str, ...] = ()
    conda: dict[str, Pin] = field(default_factory=dict)
    pip: dict[str, Pin] = field(default_factory=dict)
    index_url: Optional[str] = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # lines envkit did not follow
    manifest: str = ""  # "pixi" for a pixi.toml (envkit.specs.pixi); "" for the spec files
    system_cuda: Optional[str] = None  # pixi's [system-requirements] cuda, as written


def conda_range(text: str, *, fuzzy: bool) -> Optional[SpecifierSet]:
    """A conda version spec as a PEP 440 range: ``2.1`` (fuzzy, from ``=2.1``) -> ``==2.1.*``,
    ``2.1.0`` -> ``==2.1.0``, ``2.1.*`` -> ``==2.1.*``, ``>=2.1,<2.2`` as is; None for ``|`` and
    anything else conda allows that PEP 440 cannot say.

    >>> conda_range("2.1", fuzzy=True), conda_range(">=2,<3", fuzzy=False)
    (<SpecifierSet('==2.1.*')>, <SpecifierSet('<3,>=2')>)
    """
    terms = []
    for raw in text.split(","):
        term = raw.strip()
        if not term or "|" in term:
            return None
        if term == "*":
            continue
        if term[0] in "<>!=~":
            terms.append(term)
        elif term.endswith("*"):
            terms.append(f"=={term.rstrip('*').rstrip('.')}.*")
        else:
            terms.append(f"=={term}.*" if fuzzy else f"=={term}")
    try:
        spec = SpecifierSet(",".join(terms))
    except InvalidSpecifier:
        return None
    return spec if spec_fits(spec) else None


def parse_conda_spec(text: str) -> Optional[Pin]:
    """A conda dependency line (``pytorch::pytorch=2.1.0=*cuda*``, ``cudatoolkit 11.8``)."""
    channel = None
    rest = text.strip()
    if "::" in rest:
        channel, rest = rest.rsplit("::", 1)
    match = _NAME_RE.match(rest)
    if match is None:
        return None
    name, tail = match.group(1).lower(), match.group(2).strip()
    build = ""
    if tail.startswith("["):
        return Pin(name, text, None, channel=channel)
    if tail.startswith("=") and not tail.startswith("=="):
        version, _, build = tail[1:].partition("=")
        spec = conda_range(version, fuzzy=True)
    elif tail:  # ">=2.1,<2.2", "==2.1.0" or "2.1.0 build", exact unless it ends in "*"
        version, _, build = tail.partition(" ")
        spec = conda_range(version, fuzzy=False)
    else:
        spec = SpecifierSet()
    return Pin(name, text, spec, build=build.strip() or None, channel=channel)


def parse_requirement(text: str) -> Optional[Pin]:
    """A PEP 508 line; ``torch==2.1.0+cu121`` keeps ``cu121`` as its local part, and a wheel URL
    (``torch @ https://…/torch-2.1.0%2Bcu121-….whl``) is read as the pin of its file name."""
    try:
        req = Requirement(text)
    except InvalidRequirement:
        return None
    name = canonicalize_name(req.name)
    if req.url:
        filename = req.url.rsplit("/", 1)[-1].replace("%2B", "+").replace("%2b", "+")
        try:
            _, wheel_version, _, _ = parse_wheel_filename(filename)
        except (InvalidWheelFilename, ValueError):  # ValueError: a version too long for int()
            return Pin(name, text, None)
        return Pin(name, text, SpecifierSet(f"=={wheel_version.public}"), local=wheel_version.local)
    local = None
    terms = []
    for spec in req.specifier:
        version = spec.version
        if spec.operator in ("==", "===") and "+" in version:
            version, local = version.split("+", 1)
        terms.append(f"{'==' if spec.operator == '===' else spec.operator}{version}")
    try:
        pinned: Optional[SpecifierSet] = SpecifierSet(",".join(terms))
    except InvalidSpecifier:
        pinned = None
    return Pin(name, text, pinned if pinned is not None and spec_fits(pinned) else None, local=local)


def _pip_lines(lines: list[str]) -> dict[str, Any]:
    """requirements.txt lines (or an environment.yml ``pip:`` list) -> pins and index options."""
    pins: dict[str, Pin] = {}
    index: Optional[str] = None
    extra: list[str] = []
    links: list[str] = []
    notes: list[str] = []
    for raw in lines:
        line = _COMMENT_RE.sub("", raw).strip()
        if not line:
            continue
        option = _OPTION_RE.match(line)
        if option:
            flag, value = option.groups()
            if flag in ("-i", "--index-url"):
                index = value
            elif flag == "--extra-index-url":
                extra.append(value)
            elif flag in ("-f", "--find-links"):
                links.append(value)
            else:
                notes.append(f"{flag} {value}: not followed (check that file on its own)")
            continue
        if line.startswith("-"):
            notes.append(f"{line}: not read")
            continue
        pin = parse_requirement(_TRAILING_OPTION_RE.split(line, maxsplit=1)[0])
        if pin is None:
            notes.append(f"{line}: not a requirement envkit can read")
            continue
        pins[pin.name] = pin
    return {
        "pip": pins,
        "index_url": index,
        "extra_index_urls": tuple(extra),
        "find_links": tuple(links),
        "notes": tuple(notes),
    }


def _joined(text: str) -> list[str]:
    """Lines with pip's ``\\`` continuations joined."""
    return text.replace("\\\r\n", "").replace("\\\n", "").splitlines()


def _environment(text: str, path: str) -> SpecFile:
    data = parse_yaml(text, path)  # PyYAML's safe loader, without aliases (no "billion laughs")
    return environment_spec(data, path)


def pip_spec(path: str, lines: Sequence[str]) -> SpecFile:
    """A SpecFile of requirements lines (pip's options, pins) read from elsewhere: envkit.project
    reads a project's manifests and hands their torch lines here, to be judged as spec files are."""
    return SpecFile(path, "pip", **_pip_lines(list(lines)))


def environment_spec(data: Any, path: str) -> SpecFile:
    """A SpecFile of an environment.yml already loaded (PyYAML here; ruamel.yaml in envkit.project,
    whose round-trip loader keeps anchors as shared nodes rather than copies)."""
    if not isinstance(data, dict) or not isinstance(data.get("dependencies"), list):
        raise InputError(f"{path}: not a conda environment file (no 'dependencies' list)")
    channels = data.get("channels") or []
    if not isinstance(channels, list) or not all(isinstance(c, str) for c in channels):
        raise InputError(f"{path}: field 'channels': expected a list of channel names")
    conda: dict[str, Pin] = {}
    pip_lines: list[str] = []
    notes: list[str] = []
    for item in data["dependencies"]:
        if isinstance(item, dict) and isinstance(item.get("pip"), list):
            pip_lines += [str(p) for p in item["pip"]]
        elif isinstance(item, (str, int, float)):
            pin = parse_conda_spec(str(item))
            if pin is None:
                notes.append(f"{item}: not a conda spec envkit can read")
            else:
                conda[pin.name] = pin
        else:
            notes.append(f"{item!r}: not read")
    pip = _pip_lines(pip_lines)
    pip["notes"] = tuple(notes) + pip["notes"]
    return SpecFile(path, "conda", tuple(channels), conda, **pip)


# pip's requirements-file options (pip/_internal/req/req_file.py, SUPPORTED_OPTIONS and
# SUPPORTED_OPTIONS_REQ, pip 24): a line that starts with one of them is a requirements.txt line.
_PIP_FILE_OPTIONS: Final = frozenset(
    {
        "-i", "--index-url", "--extra-index-url", "--no-index", "-c", "--constraint", "-r", "--requirement",
        "-e", "--editable", "-f", "--find-links", "--no-binary", "--only-binary", "--prefer-binary",
        "--require-hashes", "--pre", "--trusted-host", "--use-feature", "--hash", "--config-settings",
        "--global-option",
    }
)  # fmt: skip
_OPTION_NAME_RE: Final = re.compile(r"^(-[A-Za-z]|--[A-Za-z][A-Za-z-]*)")
NOT_A_SPEC: Final = (
    "not an environment.yml, requirements.txt, Dockerfile, Apptainer definition, Compose file or "
    "Kubernetes manifest"
)


def _is_requirement_line(line: str) -> bool:
    """A PEP 508 requirement or one of pip's requirements-file options."""
    option = _OPTION_NAME_RE.match(line)
    if option:
        return option.group(1) in _PIP_FILE_OPTIONS
    return parse_requirement(_TRAILING_OPTION_RE.split(line, maxsplit=1)[0]) is not None


def _other_format(text: str, label: str) -> Optional[str]:
    """What a file given as a requirements.txt is instead: a JSON object or a TOML table (no real
    requirements.txt parses as either; a template's multi-line string may hold a line like
    ``PyTorch``, a PEP 508 name, so a requirement line alone does not tell them apart)."""
    try:
        if text.lstrip().startswith("{") and isinstance(parse_json(text, label), dict):
            return "it is a JSON object (an envkit report? `envkit doctor --from FILE` reads those)"
    except (InputError, ValueError):  # parse_json: ValueError when it is not JSON
        pass
    try:
        if parse_toml(text, label):
            return "it is a TOML table (an envkit template? `envkit spec FILE` renders one)"
    except InputError:
        pass
    return None


def read_spec(path: Path) -> SpecFile:
    """Read an ``environment.yml`` (by its .yml/.yaml suffix) or a ``requirements.txt`` (anything else
    with at least one requirement or pip option line); InputError (NOT_A_SPEC) for an empty file and
    for one with no requirement line, such as a JSON report or a TOML template."""
    text = read_text(str(path))
    lines = [_COMMENT_RE.sub("", raw).strip() for raw in _joined(text)]
    if not any(lines):
        raise InputError(f"{path}: {NOT_A_SPEC}", hint="the file is empty")
    if path.suffix.lower() in (".yml", ".yaml"):
        return _environment(text, str(path))
    other = _other_format(text, str(path))
    if other is not None or not any(_is_requirement_line(line) for line in lines if line):
        hint = other or "no line is a requirement (PEP 508) or a pip option (-r, --index-url, ...)"
        raise InputError(f"{path}: {NOT_A_SPEC}", hint=hint)
    return SpecFile(str(path), "pip", **_pip_lines(_joined(text)))
