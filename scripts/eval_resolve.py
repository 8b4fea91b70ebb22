"""Measure the resolver on target machines whose right answer is known from primary sources.

Reads tests/data/resolve/targets.toml (or the file given), runs the real CLI
``python -m envkit resolve ... --json`` once per target and compares the plan's torch+variant with
the target's ``expect`` ("2.15.0+cu130" or "no build"), and for a target with ``with`` (extensions,
passed as --with) the release of each extension the plan picks with ``extensions``
({"flash-attn" = "2.8.3.post1"}; " (build)" for a source build). Prints each miss, then the closing line
``resolver right N/M``. Exit 0 always when the file is valid (the figure is the result); 2 when it is not.

    python scripts/eval_resolve.py [TARGETS.toml] [--only ID]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from collections.abc import Iterator

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "tests" / "data" / "resolve" / "targets.toml"
CHANNEL_PAGES = ROOT / "tests" / "data" / "pytorch-channels"
PLATFORMS = ("linux-x86_64", "linux-aarch64", "windows-x86_64", "macos-arm64", "macos-x86_64")
REQUIRED = ("id", "platform", "python", "expect", "why", "sources")
NO_BUILD = "no build"
NO_BUILD_EXIT = 3  # envkit's exit status for "no torch build fits" (errors.NoBuildError)


class TargetsError(Exception):
    pass


def load_targets(path: Path) -> list[dict[str, Any]]:
    """The targets of ``path``, validated: required fields, known platform, an expect that is a
    build (torch+variant) or "no build", at least one source, unique ids."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TargetsError(f"{path}: cannot be read: {exc}") from None
    targets = data.get("target")
    if not isinstance(targets, list) or not targets:
        raise TargetsError(f"{path}: no [[target]] tables")
    seen: set[str] = set()
    for i, t in enumerate(targets, 1):
        where = f"{path.name}: [[target]] #{i}"
        if not isinstance(t, dict):
            raise TargetsError(f"{where}: not a table")
        missing = [k for k in REQUIRED if not t.get(k)]
        if missing:
            raise TargetsError(f"{where}: missing {', '.join(missing)}")
        if t["id"] in seen:
            raise TargetsError(f"{where}: duplicate id {t['id']!r}")
        seen.add(t["id"])
        if t["platform"] not in PLATFORMS:
            raise TargetsError(f"{where} ({t['id']}): platform {t['platform']!r} not one of {PLATFORMS}")
        expect = t["expect"]
        if expect != NO_BUILD and (expect.count("+") != 1 or not all(expect.split("+"))):
            raise TargetsError(f"{where} ({t['id']}): expect must be 'TORCH+VARIANT' or 'no build'")
        if not isinstance(t["sources"], list) or not all(isinstance(s, str) and s for s in t["sources"]):
            raise TargetsError(f"{where} ({t['id']}): sources must be a list of citations")
        if not isinstance(t.get("gpus", []), list):
            raise TargetsError(f"{where} ({t['id']}): gpus must be a list")
        ext = t.get("extensions", {})
        if not isinstance(ext, dict) or not all(isinstance(v, str) for v in ext.values()):
            raise TargetsError(f"{where} ({t['id']}): extensions must map names to expected versions")
    return targets


def command(t: dict[str, Any]) -> list[str]:
    cmd = [sys.executable, "-m", "envkit", "resolve", "--json", "--platform", t["platform"]]
    cmd += ["--python", t["python"]]
    if t.get("driver"):
        cmd += ["--driver", t["driver"]]
    for gpu in t.get("gpus", []):
        cmd += ["--gpu", gpu]
    if not t.get("driver") and not t.get("gpus"):
        cmd.append("--no-gpu")
    for flag in ("cuda", "torch", "channel"):
        if t.get(flag):
            cmd += [f"--{flag}", t[flag]]
    for spec in t.get("with", []):
        cmd += ["--with", spec]
    if t.get("nightly"):
        cmd.append("--nightly")
    if t.get("allow_build"):
        cmd.append("--allow-build")
    return cmd


def answer(t: dict[str, Any], env: Optional[dict[str, str]] = None) -> str:
    """What envkit says for the target: "TORCH+VARIANT", "no build", or "error: ..."."""
    proc = subprocess.run(command(t), capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    if proc.returncode == NO_BUILD_EXIT:
        return NO_BUILD
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return f"error (exit {proc.returncode}): {last}"
    plan = json.loads(proc.stdout)
    got = f"{plan['torch']}+{plan['variant']}"
    if t.get("index") and plan.get("index_url") != t["index"]:
        return f"{got} from {plan.get('index_url')}"
    wanted = t.get("extensions", {})
    picks = {p["name"]: p["version"] + (" (build)" if p["build"] else "") for p in plan.get("extensions", [])}
    if wanted and picks != wanted:
        return f"{got} with {', '.join(f'{n} {v}' for n, v in sorted(picks.items()))}"
    return got


@contextlib.contextmanager
def _channel_pages(needed: bool) -> Iterator[Optional[dict[str, str]]]:
    """The nightly targets read tests/data/pytorch-channels, served on 127.0.0.1 as a copy of
    download.pytorch.org/whl (ENVKIT_PYTORCH_INDEX): the live channel changes every day."""
    if not needed:
        yield None
        return

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(http.server.ThreadingHTTPServer):
        request_queue_size = 64

    server = Server(("127.0.0.1", 0), functools.partial(Quiet, directory=str(CHANNEL_PAGES)))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield {**os.environ, "ENVKIT_PYTORCH_INDEX": f"http://127.0.0.1:{server.server_address[1]}/whl"}
    finally:
        server.shutdown()
        server.server_close()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("targets", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--only", help="run one target (its id)")
    args = ap.parse_args(argv)
    try:
        targets = load_targets(args.targets)
    except TargetsError as exc:
        print(f"eval_resolve: {exc}", file=sys.stderr)
        return 2
    if args.only:
        targets = [t for t in targets if t["id"] == args.only]
    right = 0
    with _channel_pages(any(t.get("nightly") for t in targets)) as env:
        results = [(t, answer(t, env)) for t in targets]
    for t, got in results:
        if got == t["expect"]:
            right += 1
        else:
            print(f"MISS {t['id']}: expected {t['expect']}, envkit said {got} ({t['why']})")
            print(f"     {' '.join(command(t)[1:])}")
    print(f"resolver right {right}/{len(targets)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
