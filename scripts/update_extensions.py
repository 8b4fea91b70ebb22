#!/usr/bin/env python3
"""Refresh envkit/knowledge/extensions/*.toml from PyPI: each release's files (names, URLs, sha256),
its Requires-Dist on torch, its Requires-Python and its date; and report the releases PyPI has that the
files do not.

    python scripts/update_extensions.py                          # read PyPI, print the findings
    python scripts/update_extensions.py --write                  # ... and rewrite the files
    python scripts/update_extensions.py --save-dir DIR           # ... keeping what was read in DIR
    python scripts/update_extensions.py --from-dir tests/data/extensions/pypi   # saved copies, no network

What is read: PyPI's simple JSON API (``https://pypi.org/simple/NAME/`` with ``Accept:
application/vnd.pypi.simple.v1+json``, PEP 691: every file's name, URL, sha256, requires-python and
upload time), and one wheel's ``METADATA`` per release for its ``Requires-Dist`` on torch, read out of
the wheel with HTTP range requests (the zip's central directory, then that one member), as pip's
lazy-wheel reader does: a wheel is not downloaded whole.

What ``--write`` changes: in each ``[[release]]`` row of a project PyPI holds, ``file`` (the PyPI files
of that version), ``requires_torch`` and ``requires_python`` (from a wheel's metadata; an sdist-only
project's row keeps its own, read from its setup.py at the tag) and ``date`` (the first upload). The
rest of a row (its wheel sets: which torch, CUDA, Pythons and GPU architectures, read from each
project's release workflow at the tag, and their sources) is the maintainers' and is kept. New
releases are only reported: their wheel sets come from the project's sources, not from PyPI. Each file
is replaced atomically and validated with envkit's loader; if it does not load, the old file is back.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import struct
import sys
import tempfile
import urllib.error
import urllib.request
import zlib
from pathlib import Path
from typing import Any, Optional

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
EXTENSIONS = ROOT / "envkit" / "knowledge" / "extensions"
SIMPLE = "https://pypi.org/simple/{name}/"
TIMEOUT_S = 30.0


class UpdateError(Exception):
    pass


# --- Reading PyPI --------------------------------------------------------------------------------


def _get(url: str, *, headers: Optional[dict[str, str]] = None) -> bytes:
    request = urllib.request.Request(
        url, headers={"User-Agent": "envkit-update-extensions", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return bytes(response.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise UpdateError(f"cannot read {url}: {exc}; use --from-dir with saved copies") from None


def simple_json(name: str) -> dict[str, Any]:
    data = _get(SIMPLE.format(name=name), headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    return dict(json.loads(data))


def _range(url: str, first: int, last: Optional[int] = None) -> bytes:
    spec = f"bytes={first}-{'' if last is None else last}" if first >= 0 else f"bytes={first}"
    return _get(url, headers={"Range": spec})


def wheel_metadata(url: str) -> str:
    """A wheel's ``*.dist-info/METADATA``, read with range requests: the end of the zip (the end of
    central directory record and the directory), then that member alone (APPNOTE.TXT 4.3)."""
    tail = _range(url, -65536)
    end = tail.rfind(b"PK\x05\x06")
    if end < 0:
        raise UpdateError(f"{url}: no zip directory in its last 64 KiB")
    _sig, _d, _ds, _n, _total, size, offset, _c = struct.unpack("<IHHHHIIH", tail[end : end + 22])
    directory = _range(url, offset, offset + size - 1)
    at = 0
    while at < len(directory) and directory[at : at + 4] == b"PK\x01\x02":
        fields = struct.unpack("<IHHHHHHIIIHHHHHII", directory[at : at + 46])
        method, csize, name_len, extra_len, comment_len, local = (
            fields[4],
            fields[8],
            fields[10],
            fields[11],
            fields[12],
            fields[16],
        )
        name = directory[at + 46 : at + 46 + name_len].decode("utf-8", "replace")
        at += 46 + name_len + extra_len + comment_len
        if re.fullmatch(r"[^/]+\.dist-info/METADATA", name):
            head = _range(url, local, local + 29)
            skip = 30 + struct.unpack("<HH", head[26:30])[0] + struct.unpack("<HH", head[26:30])[1]
            raw = _range(url, local + skip, local + skip + csize - 1)
            data = zlib.decompress(raw, -15) if method == 8 else raw
            return data.decode("utf-8", "replace")
    raise UpdateError(f"{url}: no .dist-info/METADATA in the wheel")


_KEPT_HEADERS = ("metadata-version:", "name:", "version:", "requires-python:", "requires-dist:")


def metadata_headers(text: str) -> str:
    """The metadata's headers that say what the wheel needs (Name, Version, Requires-Python,
    Requires-Dist); the rest, and the long description after the first blank line, are left out."""
    head = text.split("\n\n", 1)[0]
    return "".join(f"{line}\n" for line in head.splitlines() if line.lower().startswith(_KEPT_HEADERS))


# --- What a release is on PyPI -------------------------------------------------------------------


def version_of(filename: str) -> Optional[Version]:
    try:
        if filename.endswith(".whl"):
            return Version(str(parse_wheel_filename(filename)[1]))
        return Version(str(parse_sdist_filename(filename)[1]))
    except (InvalidWheelFilename, InvalidSdistFilename, ValueError):
        return None


def torch_requirement(metadata: str) -> Optional[str]:
    """The specifier of the metadata's ``Requires-Dist: torch…`` (not an extra's); "" for a bare
    ``torch``; None when it names no torch."""
    for line in metadata.splitlines():
        if not line.lower().startswith("requires-dist:"):
            continue
        try:
            req = Requirement(line.split(":", 1)[1].strip())
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) != "torch":
            continue
        if req.marker is not None and "extra" in str(req.marker):
            continue
        return str(req.specifier)
    return None


def _x86_first(file: dict[str, Any]) -> tuple[bool, str]:
    """The linux-x86_64 wheel first: the release's Requires-Dist is taken from it."""
    name = str(file["filename"])
    return (not ("linux" in name and "x86_64" in name), name)


def release_files(simple: dict[str, Any], version: Version) -> list[dict[str, Any]]:
    return [
        f for f in simple.get("files", []) if version_of(f["filename"]) == version and not f.get("yanked")
    ]


# --- The TOML files ------------------------------------------------------------------------------


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list) and all(not isinstance(v, dict) for v in value):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


# The arrays of tables of an extension file; any other list of tables is written inline.
_ARRAYS = ("wheels", "file")


def _table(lines: list[str], header: str, data: dict[str, Any]) -> None:
    lines.append(header)
    nested = {k: v for k, v in data.items() if isinstance(v, dict) and header.startswith("[project")}
    arrays = {k: v for k, v in data.items() if k in _ARRAYS and isinstance(v, list)}
    for key, value in data.items():
        if key in nested or key in arrays:
            continue
        lines.append(f"{_key(key)} = {_value(value)}")
    base = header.strip("[]")
    for key, value in nested.items():
        lines.append("")
        _table(lines, f"[{base}.{key}]", value)
    for key, items in arrays.items():
        for item in items:
            lines.append("")
            _table(lines, f"[[{base}.{key}]]", item)


def dump(data: dict[str, Any], preamble: str) -> str:
    """The extension file as TOML: the comment lines it started with, ``[project]``, then each
    ``[[release]]`` with its ``[[release.wheels]]`` and ``[[release.file]]``."""
    lines = [preamble.rstrip("\n")] if preamble.strip() else []
    for key in data:
        if key == "release":
            continue
        lines.append("")
        _table(lines, f"[{key}]", data[key])
    for release in data.get("release", []):
        lines.append("")
        _table(lines, "[[release]]", release)
    return "\n".join(lines).lstrip("\n") + "\n"


def preamble_of(text: str) -> str:
    out = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        out.append(line)
    return "\n".join(out)


# --- Refreshing ----------------------------------------------------------------------------------


class Source:
    """PyPI, live (optionally saving what it reads) or from a folder of saved copies."""

    def __init__(self, from_dir: Optional[Path], save_dir: Optional[Path]) -> None:
        self.from_dir, self.save_dir = from_dir, save_dir

    def _saved(self, rel: str) -> Optional[str]:
        if self.from_dir is None:
            return None
        path = self.from_dir / rel
        try:
            return path.read_text(encoding="utf-8")
        except OSError:
            raise UpdateError(f"{path}: not saved; read PyPI without --from-dir") from None

    def _keep(self, rel: str, text: str) -> None:
        if self.save_dir is not None:
            path = self.save_dir / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")

    def simple(self, name: str) -> dict[str, Any]:
        saved = self._saved(f"{name}.json")
        if saved is not None:
            return dict(json.loads(saved))
        return simple_json(name)

    def metadata(self, filename: str, url: str) -> str:
        rel = f"metadata/{filename}.METADATA"
        saved = self._saved(rel)
        if saved is not None:
            return saved
        text = metadata_headers(wheel_metadata(url))
        self._keep(rel, text)
        return text

    def keep_simple(self, name: str, simple: dict[str, Any], versions: set[Version]) -> None:
        """Save the project's page, trimmed to the files of the versions the table holds."""
        files = [f for f in simple.get("files", []) if version_of(f["filename"]) in versions]
        trimmed = {"meta": simple.get("meta"), "name": simple.get("name"), "files": files}
        self._keep(f"{name}.json", json.dumps(trimmed, indent=1, sort_keys=True) + "\n")


def refresh(path: Path, source: Source, today: str) -> tuple[str, list[str]]:
    """(the file's new text, the findings) for one extension file."""
    text = path.read_text(encoding="utf-8")
    data = tomllib.loads(text)
    project = data["project"]
    findings: list[str] = []
    if project.get("pypi") in ("none", "other"):
        return text, findings
    name = project["name"]
    simple = source.simple(name)
    on_pypi = {v for f in simple.get("files", []) if (v := version_of(f["filename"])) is not None}
    held = {Version(r["version"]) for r in data.get("release", [])}
    newer = sorted(v for v in on_pypi - held if not v.is_prerelease and not v.is_devrelease and v > max(held))
    if newer:
        findings.append(f"{name}: on PyPI, not in the table: {', '.join(map(str, newer))}")
    for release in data.get("release", []):
        version = Version(release["version"])
        files = release_files(simple, version)
        if not files:
            findings.append(f"{name} {version}: no files on PyPI")
            continue
        release["file"] = [
            {"name": f["filename"], "url": f["url"], "sha256": f["hashes"]["sha256"]}
            for f in sorted(files, key=lambda f: f["filename"])
            if f["filename"].endswith((".whl", ".tar.gz", ".zip"))
        ]
        release["date"] = min(f["upload-time"] for f in files)[:10]
        pythons = {f.get("requires-python") for f in files if f.get("requires-python")}
        if len(pythons) == 1:
            release["requires_python"] = pythons.pop()
        wheels = sorted((f for f in files if f["filename"].endswith(".whl")), key=_x86_first)
        specs = {w["filename"]: torch_requirement(source.metadata(w["filename"], w["url"])) for w in wheels}
        if wheels:
            spec = specs[wheels[0]["filename"]]
            # A wheel whose own Requires-Dist differs (vllm 0.34.0: aarch64 pins torch 2.14.0, x86_64
            # 2.13.0) says so in its file row.
            for entry in release["file"]:
                own = specs.get(entry["name"], spec)
                if own != spec:
                    entry["requires_torch"] = own if own is not None else ""
            if spec is None:
                release.pop("requires_torch", None)
            elif release.get("requires_torch") != spec:
                if "requires_torch" in release:
                    findings.append(
                        f"{name} {version}: Requires-Dist torch {release['requires_torch']!r} -> {spec!r}"
                    )
                release["requires_torch"] = spec
        if "PyPI" not in release.get("source", ""):
            release["source"] = f"{release['source']}; PyPI files and metadata read {today}".lstrip("; ")
    source.keep_simple(name, simple, held)
    return dump(data, preamble_of(text)), findings


def _write_validated(path: Path, new: str) -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from envkit.knowledge import extensions as ext

    old = path.read_text(encoding="utf-8")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(new)
    os.replace(tmp, path)
    ext.load_extensions.cache_clear()
    try:
        ext.load_extensions()
    except Exception as exc:  # noqa: BLE001 -- any failure to load puts the old file back
        path.write_text(old, encoding="utf-8")
        raise UpdateError(f"the rewritten {path.name} does not load ({exc}); the old file is back") from None
    finally:
        ext.load_extensions.cache_clear()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Refresh envkit's extension tables from PyPI.")
    parser.add_argument("--from-dir", type=Path, metavar="DIR", help="read saved copies instead of PyPI")
    parser.add_argument("--save-dir", type=Path, metavar="DIR", help="keep what was read here")
    parser.add_argument("--write", action="store_true", help="rewrite the tables (validated)")
    parser.add_argument("--only", action="append", metavar="NAME", help="only this project (repeatable)")
    parser.add_argument("--dir", type=Path, default=EXTENSIONS, metavar="DIR", help="the tables' folder")
    args = parser.parse_args(argv)
    source = Source(args.from_dir, args.save_dir)
    today = datetime.date.today().isoformat()
    paths = sorted(p for p in args.dir.glob("*.toml") if not p.name.startswith("_"))
    if args.only:
        paths = [p for p in paths if p.stem in {canonicalize_name(n) for n in args.only}]
    changed = 0
    for path in paths:
        try:
            text, findings = refresh(path, source, today)
        except UpdateError as exc:
            print(f"update_extensions: {exc}", file=sys.stderr)
            return 2
        for finding in findings:
            print(f"- {finding}")
        if text != path.read_text(encoding="utf-8"):
            changed += 1
            print(f"{path.name}: {'rewritten' if args.write else 'would change (--write)'}")
            if args.write:
                try:
                    _write_validated(path, text)
                except UpdateError as exc:
                    print(f"update_extensions: {exc}", file=sys.stderr)
                    return 1
    print(f"{len(paths)} table(s) read, {changed} changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
