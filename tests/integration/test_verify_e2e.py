"""End to end on this machine's real CPU torch: the whole verify, a compile failure provoked for
real, and multi-node runs through torchrun's own launcher (c10d rendezvous over 127.0.0.1, gloo).

Marked slow (a cold torch.compile takes 10-30 s here); CI runs them in their own job."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envkit.report import Status
from envkit.system import System
from envkit.verify import verify

pytestmark = pytest.mark.slow
TORCHRUN = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or shutil.which("torchrun")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tagged_processes(tag: str) -> list[int]:
    """PIDs whose environment carries ``tag``: what a test started and may have left behind."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"ENVKIT_TEST_TAG={tag}".encode() in environ:
            found.append(int(entry.name))
    return found


def test_full_cpu_verify() -> None:
    report = verify(System(), python=sys.executable, checks=("device", "compile", "amp", "dist"), timeout=500)
    results = {c.id: c for c in report.checks}
    assert {cid: r.status for cid, r in results.items()} == dict.fromkeys(
        ("verify.device", "verify.compile", "verify.amp", "verify.dist"), Status.PASS
    ), {cid: (r.summary, r.detail[:300]) for cid, r in results.items()}
    compiled = results["verify.compile"].metrics["devices"][0]
    assert compiled["cold_compile_s"] > compiled["warm_compile_s"] > 0
    assert compiled["speedup"] > 0
    dist = results["verify.dist"].metrics
    assert dist["world_size"] == 2 and dist["backend"] == "gloo"
    assert dist["bandwidth"][0]["busbw_gbs"] > 0
    amp = results["verify.amp"].metrics["runs"][0]
    assert amp["dtype"] == "bfloat16" and amp["last_loss"] < amp["first_loss"]


def test_compile_without_a_compiler_is_classified(tmp_path: Path) -> None:
    # A PATH without gcc/g++/cc: inductor's CPU code generation cannot compile its C++ kernels.
    env = {"PATH": str(tmp_path), "HOME": os.environ.get("HOME", "/root")}
    report = verify(System(env=env), python=sys.executable, checks=("compile",), timeout=300)
    (result,) = report.checks
    assert result.status is Status.FAIL
    assert result.metrics["failure_class"] == "no_compiler"
    assert result.summary == "torch.compile fails on cpu: no compiler"
    assert "build-essential" in result.fix


def torchrun_verify_dist(tag: str, *launcher: str) -> list[str]:
    """One of two torchrun "nodes" on 127.0.0.1 (c10d rendezvous) running ``envkit verify --checks dist``."""
    return [
        str(TORCHRUN),
        *("--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d"),
        *("--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--rdzv-id", f"envkit-{tag}", "--max-restarts", "0"),
        *launcher,
        *("-m", "envkit", "verify", "--checks", "dist", "--json", "--python", sys.executable),
    ]


@pytest.mark.skipif(TORCHRUN is None, reason="torchrun comes with torch")
def test_two_nodes_through_torchrun() -> None:
    tag = secrets.token_hex(6)
    env = {**os.environ, "ENVKIT_TEST_TAG": tag}
    argv = [*torchrun_verify_dist(tag), "--timeout", "120"]
    nodes = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    outputs = [node.communicate(timeout=180) for node in nodes]
    assert [n.returncode for n in nodes] == [0, 0], [err[-800:] for _out, err in outputs]
    reports = [json.loads(out) for out, _err in outputs]
    by_rank = {r["checks"][0]["metrics"].get("rank", 0): r["checks"][0] for r in reports}
    aggregate = by_rank[0]
    assert aggregate["status"] == "pass"
    assert aggregate["metrics"]["world_size"] == 2
    assert aggregate["metrics"]["launcher"] == "torchrun"
    assert [r["ok"] for r in aggregate["metrics"]["ranks"]] == [True, True]
    assert tagged_processes(tag) == []


@pytest.mark.skipif(TORCHRUN is None, reason="torchrun comes with torch")
def test_a_node_that_never_joins_torchrun_fails_cleanly() -> None:
    tag = secrets.token_hex(6)
    env = {**os.environ, "ENVKIT_TEST_TAG": tag}
    argv = torchrun_verify_dist(tag, "--rdzv-conf", "join_timeout=5,last_call_timeout=1")
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0
    assert time.monotonic() - start < 60
    assert "RendezvousTimeoutError" in proc.stderr
    assert tagged_processes(tag) == []


def test_a_rank_that_never_joins_is_named_within_the_timeout() -> None:
    # A launcher started rank 0 of 2 (RANK / WORLD_SIZE / MASTER_ADDR set) and rank 1 never came.
    tag = secrets.token_hex(6)
    env = {
        **os.environ,
        "RANK": "0",
        "WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "ENVKIT_TEST_TAG": tag,
    }
    start = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "envkit",
            "verify",
            "--checks",
            "dist",
            "--json",
            "--python",
            sys.executable,
            "--timeout",
            "30",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
    )
    elapsed = time.monotonic() - start
    assert proc.returncode == 1
    assert elapsed < 35
    (check,) = json.loads(proc.stdout)["checks"]
    assert check["status"] == "fail"
    assert "rank 1 (?): never joined" in check["summary"]
    assert tagged_processes(tag) == []
