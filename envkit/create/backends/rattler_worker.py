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
file holds them redacted); they never reach its argv or output. A ``user:password@`` login is
taken out of the URL and sent as an Authorization header to that channel's host and path, so that
the URLs rattler sees, and writes into conda-meta/*.json and its caches, carry none; an
anaconda.org token (``/t/TOKEN/``) stays in the URL rattler fetches from and is taken out of the
environment's conda-meta records after the install.
"""

from __future__ import annotations

import os
import sys

# Run by path, this script's folder is sys.path[0]: its neighbours (pip.py, conda.py, uv.py) must
# not shadow the real packages of those names for anything imported below; it goes last, where
# only envkit_rattler_channels, the one neighbour this script imports, is found in it.
_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _HERE:
    sys.path.append(sys.path.pop(0))

import asyncio  # noqa: E402
import datetime  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
import urllib.parse  # noqa: E402
import urllib.request  # noqa: E402
from typing import Any, NoReturn, Optional  # noqa: E402

if __package__:  # imported as envkit.create.backends.rattler_worker: pytest's --doctest-modules
    from envkit.create.backends.envkit_rattler_channels import (
        Failure,
        Login,
        bare,
        login_headers,
        masked,
        probe,
        split_logins,
    )
else:  # run by path (envkit.create.backends.rattler): its neighbour, by name
    from envkit_rattler_channels import (  # type: ignore[no-redef]
        Failure,
        Login,
        bare,
        login_headers,
        masked,
        probe,
        split_logins,
    )

# Per request while fetching repodata (the channel answered the probe already); a package
# download has no per-request limit, the parent's step timeout bounds the whole run.
REPODATA_TIMEOUT_S = 300


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def client(logins: list[Login], timeout: Optional[int] = None) -> Any:
    """rattler's default client (retries, its own stored logins, OCI, GCS, S3), and the channels'."""
    import rattler
    from rattler.networking import middleware as m

    middlewares: list[Any] = [
        m.RetryMiddleware(3),
        m.AddHeadersMiddleware(lambda host, path: login_headers(logins, host, path)),
        m.AuthenticationMiddleware(),
        m.OciMiddleware(),
        m.GCSMiddleware(),
        m.S3Middleware(),
    ]
    return rattler.Client(middlewares, timeout=timeout)


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


def _scrub_records(prefix: str) -> None:
    """conda-meta/*.json without an anaconda.org token in ``url`` or ``channel`` (rattler writes
    the URL it fetched from; a user:password login never reaches it, see split_logins)."""
    meta = os.path.join(prefix, "conda-meta")
    for name in sorted(os.listdir(meta)):
        path = os.path.join(meta, name)
        if not name.endswith(".json"):
            continue
        with open(path, encoding="utf-8") as fh:
            record = json.load(fh)
        clean = {k: bare(v) for k in ("url", "channel") if isinstance(v := record.get(k), str)}
        if all(record.get(k) == v for k, v in clean.items()):
            continue
        record.update(clean)
        with open(path + ".envkit", "w", encoding="utf-8") as fh:
            json.dump(record, fh, indent=2)
        os.replace(path + ".envkit", path)


def _history(prefix: str, cmd: str, records: list[Any], specs: list[str]) -> None:
    """An entry in conda-meta/history as conda writes one (conda/conda:conda/history.py@0f64223f,
    write_head / write_changes / write_specs), so that ``conda list --revisions`` and ``conda env
    export --from-history`` read what envkit asked for."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    lines = [f"==> {stamp} <==", f"# cmd: {cmd}"]
    for r in sorted(records, key=lambda r: r.name.normalized):
        lines.append(
            f"+{bare(str(r.channel)).rstrip('/')}/{r.subdir}::{r.name.normalized}-{r.version}-{r.build!s}"
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
            where = ", ".join(masked(c) for c in channels)
            return (
                f"{need['pkg']} {need['version']} needs {need['dep']}{need['spec'].rstrip()}, and no "
                f"channel has {need['dep']} ({where})"
            )
    return None


async def _solve(
    request: dict[str, Any],
    channels: list[str],
    logins: list[Login],
    platform: str,
    virtual_packages: list[list[str]],
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
    gateway = rattler.Gateway(cache_dir=request["repodata_cache"], client=client(logins, REPODATA_TIMEOUT_S))
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


async def _lock(request: dict[str, Any], channels: list[str], logins: list[Login]) -> dict[str, Any]:
    """Solve for each platform of the request (``envkit lock``); nothing is installed."""
    for url in channels:
        probe(url, logins)
    solved: dict[str, list[dict[str, Any]]] = {}
    for platform in request["platforms"]:
        try:
            records = await _solve(request, channels, logins, platform, request["virtual_packages"][platform])
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
                "channel": bare(str(r.channel)),
                "url": bare(str(r.url)),
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

    channels, logins = split_logins(channels)
    if request.get("mode") == "lock":
        return await _lock(request, channels, logins)
    for url in channels:
        probe(url, logins)
    start = time.monotonic()
    records = await _solve(request, channels, logins, request["platform"], request["virtual_packages"])
    solved = time.monotonic() - start
    say(f"solved: {len(records)} packages in {solved:.2f} s")
    for r in records:
        say(f"  {r.name.normalized} {r.version} {r.build!s} ({masked(str(r.channel))})")
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
            client=client(logins),
        )
        _scrub_records(request["prefix"])
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
            "channel": masked(str(r.channel)),
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
