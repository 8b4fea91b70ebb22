"""The rattler backend's child process: ``python rattler_worker.py REQUEST.json``.

It solves the request with py-rattler and installs the answer into the prefix, printing progress
lines as it goes and, at the end, one JSON object between two marker lines (the request names the
marker): ``{"ok": true, "packages": [...], "solve_s": …, "install_s": …}``, or ``{"ok": false,
"error": {"kind": …, "message": …}}`` with exit status 1. The parent
(envkit.create.backends.rattler) runs it through envkit._proc, so a timeout, Ctrl-C or SIGTERM
stops it with its whole process group, and envkit's rollback removes the half-made prefix.

Error kinds: ``unreachable`` (a channel's host does not answer), ``channel`` (it answers, but is no
conda channel there, or refuses), ``missing`` (a package needs one that no channel has at all: a
mirror that carries part of a channel), ``unsolvable`` (rattler's solver found no answer: its own
text, which names the conflict), ``spec`` (a spec rattler cannot read), ``corrupt`` (a download that
does not match its checksum), ``disk`` (no space left), ``install`` (anything else while linking).

It imports only the standard library and rattler, and is run by path, like the probes: the
request is all it knows. With ``"mode": "lock"`` it only solves, for each of the request's
platforms, and answers the records (``envkit lock`` writes them as conda-lock's file). Channel
URLs that carry credentials come from ``ENVKIT_RATTLER_CHANNELS`` in its environment (the request
file holds them redacted); they never reach its argv or output.
"""

from __future__ import annotations

import os
import sys

# Run by path, this script's folder is sys.path[0]: its neighbours (pip.py, conda.py, uv.py) must
# not shadow the real packages of those names for anything imported below.
_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _HERE:
    del sys.path[0]

import asyncio  # noqa: E402
import base64  # noqa: E402
import datetime  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
import urllib.error  # noqa: E402
import urllib.parse  # noqa: E402
import urllib.request  # noqa: E402
from typing import Any, NoReturn, Optional  # noqa: E402

REACH_TIMEOUT_S = 10.0
# Per request while fetching repodata (the channel answered the probe already); a package
# download has no per-request limit, the parent's step timeout bounds the whole run.
REPODATA_TIMEOUT_S = 300


class Failure(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.platform: Optional[str] = None  # the platform a lock's solve failed for


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _masked(url: str) -> str:
    """``url`` without its credentials, for messages (the parent redacts again)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    path = parts.path
    if path.startswith("/t/"):  # an anaconda.org token: /t/<token>/channel
        path = "/t/***/" + path[3:].partition("/")[2]
    return urllib.parse.urlunsplit(
        parts._replace(netloc=("***@" if "@" in parts.netloc else "") + host, path=path)
    )


def probe(url: str, timeout: float = REACH_TIMEOUT_S) -> None:
    """Fail fast (Failure) when a channel does not answer or is no conda channel, rather than
    let the downloader retry for minutes. Every channel has a noarch subdir (CEP 15 / conda's
    repodata layout), so ``noarch/repodata.json`` is what is asked for (its first byte)."""
    target = url.rstrip("/") + "/noarch/repodata.json"
    parts = urllib.parse.urlsplit(target)
    if parts.scheme == "file":
        path = urllib.request.url2pathname(parts.path)
        if not os.path.isfile(path):
            raise Failure("channel", f"{_masked(url)} is no conda channel: {path} does not exist")
        return
    if parts.scheme not in ("http", "https"):
        return  # s3://, oci://: rattler's own middleware handles them
    userinfo, at, host = parts.netloc.rpartition("@")
    headers = {"Range": "bytes=0-0", "User-Agent": "envkit"}
    if at:
        user, _, password = userinfo.partition(":")
        token = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
        headers["Authorization"] = "Basic " + base64.b64encode(token.encode()).decode()
    # http(s) only: the scheme was checked above.
    request = urllib.request.Request(urllib.parse.urlunsplit(parts._replace(netloc=host)), headers=headers)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            response.read(1)
    except urllib.error.HTTPError as exc:
        what = "refuses the request (credentials?)" if exc.code in (401, 403) else f"answers HTTP {exc.code}"
        raise Failure(
            "channel", f"{_masked(url)} {what} for noarch/repodata.json: is it a conda channel?"
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Failure(
            "unreachable", f"{_masked(url)} does not answer within {timeout:.0f} s ({reason})"
        ) from None


def _real_specs(specs: list[str], shown: list[str], real: list[str]) -> list[str]:
    """Specs whose channel qualifier is a redacted URL get the real one back."""
    by_shown = dict(zip(shown, real))
    out = []
    for spec in specs:
        channel, sep, rest = spec.partition("::")
        out.append(f"{by_shown[channel]}::{rest}" if sep and channel in by_shown else spec)
    return out


def _classify(exc: BaseException) -> Failure:
    text = str(exc).strip() or type(exc).__name__
    lowered = text.lower()
    if "no space left" in lowered or "os error 28" in lowered:
        return Failure("disk", text)
    if (
        "hash" in lowered and ("mismatch" in lowered or "does not match" in lowered)
    ) or "checksum" in lowered:
        return Failure("corrupt", text)
    return Failure("install", text)


def check_local_archives(records: list[Any]) -> None:
    """rattler checks a download against the sha256 in repodata.json, but extracts a file:// package
    where it lies without checking it: so does this, for the same guarantee from a local channel."""
    for r in records:
        parts = urllib.parse.urlsplit(str(r.url))
        expected = r.sha256
        if parts.scheme != "file" or not expected:
            continue
        path = urllib.request.url2pathname(parts.path)
        digest = hashlib.sha256()
        try:
            with open(path, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(chunk)
        except OSError as exc:
            raise Failure("channel", f"cannot read {path}: {exc.strerror or exc}") from None
        if digest.digest() != bytes(expected):
            raise Failure(
                "corrupt",
                f"{os.path.basename(path)}: sha256 {digest.hexdigest()} does not match "
                f"{bytes(expected).hex()} in the channel's repodata.json (hash mismatch)",
            )


def _history(prefix: str, cmd: str, records: list[Any], specs: list[str]) -> None:
    """An entry in conda-meta/history as conda writes one (conda/conda:conda/history.py@0f64223f,
    write_head / write_changes / write_specs), so that ``conda list --revisions`` and ``conda env
    export --from-history`` read what envkit asked for."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    lines = [f"==> {stamp} <==", f"# cmd: {cmd}"]
    for r in sorted(records, key=lambda r: r.name.normalized):
        lines.append(
            f"+{_masked(str(r.channel)).rstrip('/')}/{r.subdir}::{r.name.normalized}-{r.version}-{r.build!s}"
        )
    lines.append(f"# update specs: {specs!r}")
    with open(os.path.join(prefix, "conda-meta", "history"), "a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


# resolvo's words for a dependency without a candidate: "pytorch 2.13.0 would require\n   └─ filelock *,
# for which no candidates were found." Either no channel has the package, or the request's other
# pins rule out every candidate it has: only the channels can tell which.
_NO_CANDIDATE = re.compile(
    r"(?P<pkg>[A-Za-z0-9_.-]+) (?P<version>\S+) would require\s*\n[\s│├└─]*"
    r"(?P<dep>[A-Za-z0-9_.-]+)(?P<spec>[^,\n]*), for which no candidates were found"
)


async def _absent(gateway: Any, channels: list[str], platform: str, text: str) -> Optional[str]:
    """What the solver's failure means where a needed package is in none of the channels (a
    mirror that carries part of a channel); None where each one it names is there."""
    import rattler

    for need in _NO_CANDIDATE.finditer(text):
        dep = need["dep"].lower()
        if dep.startswith("__"):  # a virtual package: the target's, not the channels'
            continue
        found = await gateway.query(
            channels, [rattler.Subdir(platform), rattler.Subdir("noarch")], [dep], recursive=False
        )
        if not any(r.name.normalized == dep for records in found for r in records):
            where = ", ".join(_masked(c) for c in channels)
            return (
                f"{need['pkg']} {need['version']} needs {need['dep']}{need['spec'].rstrip()}, and no "
                f"channel has {need['dep']} ({where})"
            )
    return None


async def _solve(
    request: dict[str, Any], channels: list[str], platform: str, virtual_packages: list[list[str]]
) -> list[Any]:
    """rattler's answer for ``platform`` (and noarch); a Failure saying why when there is none."""
    import rattler

    specs = _real_specs(list(request["specs"]), list(request["channels"]), channels)
    try:
        matchspecs = [rattler.MatchSpec(s, strict=False) for s in specs]
    except Exception as exc:  # noqa: BLE001 (rattler's own error classes are not exported as a group)
        raise Failure("spec", str(exc)) from None
    virtual = [
        rattler.GenericVirtualPackage(
            rattler.PackageName(name), rattler.Version(version), rattler.BuildString(build or "0")
        )
        for name, version, *rest in virtual_packages
        for build in [rest[0] if rest else "0"]
    ]
    say(f"solving {len(specs)} specs against {len(channels)} channels for {platform}")
    gateway = rattler.Gateway(
        cache_dir=request["repodata_cache"], client=rattler.Client.default_client(timeout=REPODATA_TIMEOUT_S)
    )
    try:
        records: list[Any] = await rattler.solve(
            channels,
            matchspecs,
            gateway=gateway,
            platforms=[rattler.Subdir(platform), rattler.Subdir("noarch")],
            virtual_packages=virtual,
        )
    except Exception as exc:  # noqa: BLE001
        name = type(exc).__name__
        if name == "SolverError":
            absent = await _absent(gateway, channels, platform, str(exc))
            if absent:
                raise Failure("missing", absent) from None
            raise Failure("unsolvable", str(exc)) from None
        if name in ("InvalidMatchSpecError", "InvalidPackageNameError", "InvalidVersionSpecError"):
            raise Failure("spec", str(exc)) from None
        lowered = str(exc).lower()
        kind = "unreachable" if "connect" in lowered or "timed out" in lowered else "channel"
        raise Failure(kind, str(exc)) from None
    return records


def _bare(url: str) -> str:
    """``url`` without its credentials (a user:password, an anaconda.org /t/TOKEN/), for a lock file."""
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    path = parts.path
    if path.startswith("/t/"):
        path = "/" + path[3:].partition("/")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=host, path=path))


async def _lock(request: dict[str, Any], channels: list[str]) -> dict[str, Any]:
    """Solve for each platform of the request (``envkit lock``); nothing is installed."""
    for url in channels:
        probe(url)
    solved: dict[str, list[dict[str, Any]]] = {}
    for platform in request["platforms"]:
        try:
            records = await _solve(request, channels, platform, request["virtual_packages"][platform])
        except Failure as failure:
            failure.platform = platform
            raise
        say(f"solved {platform}: {len(records)} packages")
        solved[platform] = [
            {
                "name": r.name.normalized,
                "version": str(r.version),
                "build": str(r.build),
                "subdir": r.subdir,
                "channel": _bare(str(r.channel)),
                "url": _bare(str(r.url)),
                "md5": bytes(r.md5).hex() if r.md5 else None,
                "sha256": bytes(r.sha256).hex() if r.sha256 else None,
                "depends": list(r.depends),
            }
            for r in records
        ]
    return {"ok": True, "solved": solved}


async def _run(request: dict[str, Any], channels: list[str]) -> dict[str, Any]:
    import rattler
    from rattler.package_cache import ValidationMode

    if request.get("mode") == "lock":
        return await _lock(request, channels)
    for url in channels:
        probe(url)
    start = time.monotonic()
    records = await _solve(request, channels, request["platform"], request["virtual_packages"])
    solved = time.monotonic() - start
    say(f"solved: {len(records)} packages in {solved:.2f} s")
    for r in records:
        say(f"  {r.name.normalized} {r.version} {r.build!s} ({_masked(str(r.channel))})")
    check_local_archives(records)
    cache = rattler.PackageCache.new_layered(
        [request["package_cache"]], validation_mode=ValidationMode.full()
    )
    start = time.monotonic()
    try:
        await rattler.install(
            records,
            request["prefix"],
            package_cache=cache,
            show_progress=False,
            execute_link_scripts=False,
            client=rattler.Client.default_client(),
        )
        _history(request["prefix"], request["history"]["cmd"], records, list(request["history"]["specs"]))
    except Exception as exc:  # noqa: BLE001
        raise _classify(exc) from None
    installed = time.monotonic() - start
    say(f"installed into {request['prefix']} in {installed:.2f} s")
    packages = [
        {
            "name": r.name.normalized,
            "version": str(r.version),
            "build": str(r.build),
            "channel": _masked(str(r.channel)),
            "subdir": r.subdir,
        }
        for r in records
    ]
    return {"ok": True, "packages": packages, "solve_s": round(solved, 4), "install_s": round(installed, 4)}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: rattler_worker.py REQUEST.json\n")
        return 2
    with open(argv[1], encoding="utf-8") as fh:
        request = json.load(fh)
    marker = str(request.get("marker") or "ENVKIT-RATTLER-RESULT")
    real: Optional[str] = os.environ.get("ENVKIT_RATTLER_CHANNELS")
    channels = json.loads(real) if real else list(request["channels"])
    try:
        result = asyncio.run(_run(request, channels))
        code = 0
    except Failure as failure:
        result = {
            "ok": False,
            "error": {"kind": failure.kind, "message": str(failure), "platform": failure.platform},
        }
        code = 1
    except ImportError as exc:
        result = {
            "ok": False,
            "error": {"kind": "install", "message": f"py-rattler is not importable: {exc}"},
        }
        code = 1
    return _answer(marker, result, code)


def _answer(marker: str, data: dict[str, Any], code: int) -> NoReturn:
    sys.stdout.write(f"{marker}\n{json.dumps(data)}\n{marker}\n")
    sys.stdout.flush()
    sys.stderr.flush()
    # Out at once, without the interpreter's finalization: py-rattler's runtime threads are still
    # alive then, and tearing them down crashed the process now and again (SIGSEGV after a finished
    # install, 2 runs in ~30 here), which would undo a complete environment.
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
