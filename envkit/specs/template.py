"""Environment templates: what an environment is for (``envs/*.toml``), not which build it gets.

A template names the torch range, the companions, a default Python and the extra packages; the
resolver picks the build for the machine and envkit.specs.render renders the two into spec files. The format
is documented in ``envs/README.md``. A template is checked as it loads: an error names the file and
the field, and unknown keys are errors, so that a typo cannot silently drop a package.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Optional

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

import envkit
from envkit._files import parse_toml, read_text
from envkit.errors import InputError, check_path, check_text
from envkit.resolve import parse_torch_spec
from envkit.resolve.extensions import parse_extensions
from envkit.versions import Version

__all__ = [
    "COMPANIONS",
    "Template",
    "builtin_dir",
    "conda_match_spec_name",
    "list_templates",
    "load_template",
]

COMPANIONS: Final = ("torchvision", "torchaudio")
_FIELDS: Final = (
    "name",
    "description",
    "python",
    "torch",
    "companions",
    "channel",
    "packages",
    "conda_packages",
    "pip_packages",
    "conda_channels",
    "base",
    "extensions",
)
# The base images a template may ask of --format docker/apptainer (envkit.knowledge.containers.ImageKind).
BASES: Final = ("cuda-runtime", "pytorch", "ngc")
_NAME_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# A conda match spec, in the forms conda's docs give
# (https://docs.conda.io/projects/conda/en/latest/user-guide/concepts/pkg-specs.html): ``name``,
# ``name version``, ``name version build``, ``name=1.2``, ``name==1.2=build``, ``name>=1.2,<2``,
# ``name 1.2|1.4``, ``name=1.2.*``, ``channel::name``, ``name[version='>=1.2', build=...]``. This is a
# subset of what conda's parser (conda/models/match_spec.py, _parse_spec_str) takes: every spec it
# admits conda reads as written (tests/unit/specs/test_templates.py holds it to conda's own MatchSpec),
# and conda's leniencies (``nccl 2 3 4``, ``nccl (x)``, ``>= 2``) are refused rather than guessed at.
# conda's VersionOrder: an optional integer epoch, segments of letters and digits split by . or _
# (conda reads _ as .; an empty segment is an error), an optional +local part.
_C_VERSION: Final = r"(?:\d+!)?[A-Za-z0-9]+(?:[._][A-Za-z0-9]+)*(?:\+[A-Za-z0-9]+(?:[._][A-Za-z0-9]+)*)?"
_C_TERM: Final = (
    rf"(?:(?:==|!=|=)?{_C_VERSION}(?:\.?\*)?|(?:<=|>=|<|>|~=){_C_VERSION}|\*)"  # * only where = means it
)
_C_CONSTRAINT: Final = rf"{_C_TERM}(?:[,|]{_C_TERM})*"
_C_BUILD: Final = r"[A-Za-z0-9_.*+]+"  # conda's build part: no - = , | < > ~
_CONDA_MATCH_RE: Final = re.compile(
    r"^(?:[A-Za-z0-9][A-Za-z0-9._/-]*::)?"  # channel (and subdir): conda-forge::, pytorch/linux-64::
    r"(?P<name>[A-Za-z0-9_][A-Za-z0-9._-]*)"
    r"(?:"
    rf"\s*(?:=|==)(?:{_C_VERSION}|\*)(?:\.?\*)?={_C_BUILD}"  # name=1.2=build, name==1.2=build
    rf"|\s*(?=[=<>!~]){_C_CONSTRAINT}(?:\s+{_C_BUILD})?"  # name>=1.2,<2 [build]
    rf"|\s+{_C_CONSTRAINT}(?:\s+{_C_BUILD})?"  # name 1.2 [build]
    r"|\[(?P<brackets>[^\[\]]*)\]"  # name[key=value, ...]
    r")?$"
)
# One key=value of a bracket part, the value bare or quoted (quoted, it may hold a comma).
_BRACKET_RE: Final = re.compile(
    r"""\s*(version|build|build_number|channel|subdir)=(?:'([^']+)'|"([^"]+)"|([^'",\s]+))\s*(?:,|$)"""
)
_BRACKET_VALUE: Final = {
    "version": re.compile(rf"^{_C_CONSTRAINT}$"),
    "build": re.compile(rf"^{_C_BUILD}$"),
    "build_number": re.compile(r"^(?:[<>]=?|==|!=)?\d+$"),
    "channel": re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$"),
    "subdir": re.compile(r"^[a-z0-9]+-[a-z0-9_]+$|^noarch$"),
}
# Names the plan pins itself: a template that lists them could swap the torch build behind the plan.
_MANAGED: Final = frozenset(
    {
        "torch",
        "torchvision",
        "torchaudio",
        "pytorch",
        "pytorch-gpu",
        "pytorch-cpu",
        "pytorch-cuda",
        "pytorch-mutex",
        "cpuonly",
        "cudatoolkit",
        "cuda-version",
    }
)
# Operators that mean the same to pip (PEP 440) and conda (match specs), for ``packages``.
_SHARED_OPERATORS: Final = frozenset({"==", "!=", "<", "<=", ">", ">="})


@dataclass(frozen=True)
class Template:
    """One environment template (the fields are described in envs/README.md)."""

    name: str
    description: str
    python: Optional[Version] = None  # major.minor
    torch: Optional[SpecifierSet] = None
    companions: tuple[str, ...] = ()
    channel: Optional[str] = None  # "pip" | "conda"
    packages: tuple[str, ...] = ()  # same name on PyPI and conda-forge
    conda_packages: tuple[str, ...] = ()
    pip_packages: tuple[str, ...] = ()
    conda_channels: tuple[str, ...] = ()
    base: Optional[str] = None  # --format docker/apptainer: "cuda-runtime" | "pytorch" | "ngc"
    extensions: tuple[str, ...] = ()  # flash-attn, "vllm>=0.6": resolved with torch (--with)
    source: str = ""  # the file it was read from
    builtin: bool = False  # shipped with envkit (named, not given by path)

    @property
    def torch_packages(self) -> tuple[str, ...]:
        """``("torch", *companions)``: the names the plan pins."""
        return ("torch", *self.companions)


def builtin_dir() -> Path:
    """The built-in templates: ``envkit/envs`` in an installed wheel (a link to the repository's
    ``envs/`` in a checkout), else ``envs/`` beside the package."""
    package = Path(envkit.__file__).parent
    inside = package / "envs"
    return inside if inside.is_dir() else package.parent / "envs"


class _Reader:
    """The fields of one template file, read with errors that name the file and the field."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data

    def fail(self, field: str, expected: str) -> InputError:
        value = self.data.get(field, "<missing>")
        return InputError(
            f"{self.path}: field {field!r}: expected {expected}, got {value!r}",
            hint="the template format is described in envs/README.md",
        )

    def text(self, field: str, *, required: bool = False) -> Optional[str]:
        value = self.data.get(field)
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.fail(field, "a non-empty string")
        return self._plain(field, value.strip())

    def strings(self, field: str) -> tuple[str, ...]:
        value = self.data.get(field, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise self.fail(field, "a list of strings")
        return tuple(self._plain(field, v.strip()) for v in value)

    def _plain(self, field: str, value: str) -> str:
        # Every field reaches a spec file or a command line: a newline inside a requirement's
        # marker string ('foo; python_version == "3<newline>--extra-index-url http://…"') wrote
        # an index line of its own into requirements.txt.
        return check_text(value, f"{self.path}: field {field!r}:")


def _python(r: _Reader) -> Optional[Version]:
    text = r.text("python")
    if text is None:
        return None
    if not re.fullmatch(r"3\.\d+", text):
        raise r.fail("python", 'a Python 3 minor version like "3.11"')
    return Version(text)


def _torch(r: _Reader) -> Optional[SpecifierSet]:
    text = r.text("torch")
    if text is None:
        return None
    try:
        return parse_torch_spec(text)
    except InputError:
        raise r.fail("torch", 'a version specifier like ">=2.1" or "2.5.*"') from None


def _requirement(r: _Reader, field: str, item: str) -> Requirement:
    try:
        req = Requirement(item)
    except InvalidRequirement as exc:
        raise r.fail(field, f"PEP 508 requirements ({item!r}: {exc})") from None
    # packaging reads backslash escapes in a marker's quoted string: 'python_version == "3\n…"'
    # with a backslash and an n comes back from str(req) with a newline in it.
    check_text(str(req), f"{r.path}: field {field!r}:")
    if canonicalize_name(req.name) in _MANAGED:
        raise r.fail(field, f"no {req.name}: the resolved plan pins torch and its companions")
    return req


def _packages(r: _Reader) -> tuple[str, ...]:
    """``packages``: requirements conda reads the same way (no extras, markers, URLs or ``~=``)."""
    out = []
    for item in r.strings("packages"):
        req = _requirement(r, "packages", item)
        odd = [s.operator for s in req.specifier if s.operator not in _SHARED_OPERATORS]
        if req.extras or req.marker or req.url or odd:
            raise r.fail(
                "packages",
                f"requirements that pip and conda read alike ({item!r}): no extras, markers, URLs or "
                f"{', '.join(odd) or '~= / ==='}; put it in pip_packages instead",
            )
        out.append(f"{req.name}{req.specifier}")
    return tuple(out)


def conda_match_spec_name(text: str) -> Optional[str]:
    """The package name of a conda match spec (``conda-forge::nccl>=2.18`` -> ``nccl``), or None when
    ``text`` is not one in the forms of conda's docs (``nccl >= = 2``).

    >>> conda_match_spec_name("conda-forge::nccl>=2.18,<3"), conda_match_spec_name("nccl >= = 2")
    ('nccl', None)
    """
    match = _CONDA_MATCH_RE.match(text.strip())
    if match is None:
        return None
    brackets = match.group("brackets")
    if brackets is not None:
        seen: set[str] = set()
        at = 0
        while at < len(brackets):
            pair = _BRACKET_RE.match(brackets, at)
            if pair is None or pair.end() == at:
                return None
            key, value = pair.group(1), pair.group(2) or pair.group(3) or pair.group(4)
            if key in seen or not _BRACKET_VALUE[key].match(value):
                return None
            seen.add(key)
            at = pair.end()
        if not seen or brackets.rstrip().endswith(","):
            return None
    return match.group("name")


def _conda_packages(r: _Reader) -> tuple[str, ...]:
    out = []
    for item in r.strings("conda_packages"):
        name = conda_match_spec_name(item)
        if name is None:
            raise r.fail(
                "conda_packages",
                f"conda match specs like 'nccl', 'nccl>=2.18,<3', 'nccl=2.18.*' or 'conda-forge::nccl' "
                f"({item!r} is not one)",
            )
        if name.lower() in _MANAGED:
            raise r.fail("conda_packages", f"no {name}: the resolved plan pins the torch build")
        out.append(item)
    return tuple(out)


def _template(path: Path, data: dict[str, Any], *, builtin: bool) -> Template:
    r = _Reader(path, data)
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise InputError(
            f"{path}: unknown field {unknown[0]!r}; a template has {', '.join(_FIELDS)}",
            hint="the template format is described in envs/README.md",
        )
    name = r.text("name", required=True)
    assert name is not None
    if not _NAME_RE.match(name):
        raise r.fail("name", "letters, digits, '.', '_' and '-'")
    if builtin and name != path.stem:
        raise r.fail("name", f"{path.stem!r}, the file's name")
    companions = r.strings("companions")
    if any(c not in COMPANIONS for c in companions) or len(set(companions)) != len(companions):
        raise r.fail("companions", f"a list of distinct names among {', '.join(COMPANIONS)}")
    channel = r.text("channel")
    if channel is not None and channel not in ("pip", "conda"):
        raise r.fail("channel", '"pip" or "conda"')
    pip_packages = tuple(str(_requirement(r, "pip_packages", p)) for p in r.strings("pip_packages"))
    channels = r.strings("conda_channels")
    if any(c in ("defaults", "nodefaults") for c in channels):
        raise r.fail("conda_channels", "channel names other than defaults/nodefaults (envkit adds those)")
    base = r.text("base")
    if base is not None and base not in BASES:
        raise r.fail("base", " or ".join(f'"{b}"' for b in BASES))
    description = r.text("description", required=True)
    assert description is not None
    extensions = r.strings("extensions")
    try:
        parse_extensions(extensions, option="extensions:")
    except InputError as exc:
        raise r.fail(
            "extensions", f"extensions envkit knows, with ranges that hold a release ({exc.message})"
        ) from None
    return Template(
        name=name,
        description=description,
        python=_python(r),
        torch=_torch(r),
        companions=companions,
        channel=channel,
        packages=_packages(r),
        conda_packages=_conda_packages(r),
        pip_packages=pip_packages,
        conda_channels=channels,
        base=base,
        extensions=extensions,
        source=str(path),
        builtin=builtin,
    )


def _read(path: Path, *, builtin: bool) -> Template:
    data = parse_toml(read_text(str(path)), str(path))
    return _template(path, data, builtin=builtin)


def _looks_like_path(text: str) -> bool:
    return "/" in text or "\\" in text or text.endswith(".toml") or text.startswith(".")


def load_template(name_or_path: str) -> Template:
    """A built-in template by name (``pt2``), or a user's template by path (``./my-env.toml``)."""
    check_path(name_or_path, "template")  # a name past NAME_MAX made is_file() raise ENAMETOOLONG
    if _looks_like_path(name_or_path):
        path = Path(name_or_path).expanduser()
        if not path.is_file():
            raise InputError(f"{name_or_path}: no such template file")
        return _read(path, builtin=False)
    path = builtin_dir() / f"{name_or_path}.toml"
    if not _NAME_RE.match(name_or_path) or not path.is_file():
        names = ", ".join(t.name for t in list_templates())
        raise InputError(
            f"{name_or_path!r}: no such template; the built-in ones are {names}",
            hint="give a path (./my-env.toml) for a template of your own",
        )
    return _read(path, builtin=True)


def list_templates() -> list[Template]:
    """The built-in templates, by name."""
    return [_read(p, builtin=True) for p in sorted(builtin_dir().glob("*.toml"))]
