"""verify.dist: all_reduce, all_gather and broadcast with exact expected values, then bus bandwidth.

Wrong values fail (stas00's torch-distributed-gpu-test prints the sum but never checks it; nccl-tests
counts "#wrong"). Bus bandwidth follows nccl-tests: busbw = algbw * 2(n-1)/n for all_reduce.

Two ways to run:
- Under a launcher (torchrun, srun: RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT, or SLURM_PROCID /
  SLURM_NTASKS): this process is one rank. Every rank writes its result to the job's TCPStore;
  rank 0 collects them and names every rank that failed or never reported.
- Alone: one process per visible GPU (NCCL), or 2 processes over gloo on a machine without GPUs,
  started with torch.multiprocessing (spawn); this process hosts the store and collects.

Config: {"timeout_s": float, "cpu_world": int, "sizes": [bytes], "iters": int}
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
import time
from typing import Any, Dict, List, Optional

from envkit_probe_util import error_text, import_torch, run

KEY_PREFIX = "envkit_verify"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def check_collectives(torch: Any, dist: Any, rank: int, world: int, device: Any) -> List[str]:
    """Exact-value checks; every wrong value is a problem."""
    problems = []
    expect = world * (world + 1) / 2  # exact in fp32 for any realistic world size
    for n in (1, 1024, 262144):
        t = torch.full((n,), float(rank + 1), device=device)
        dist.all_reduce(t)
        wrong = int((t != expect).sum().item())
        if wrong:
            problems.append(
                "all_reduce of %d elements: %d wrong (got %s, expected %s)" % (n, wrong, t[0].item(), expect)
            )
    mine = torch.full((1024,), float(rank), device=device)
    gathered = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(gathered, mine)
    for i, part in enumerate(gathered):
        if not bool((part == float(i)).all().item()):
            problems.append("all_gather: rank %d's part is wrong on rank %d" % (i, rank))
    reference = torch.arange(4096, dtype=torch.float32, device=device)
    t = reference.clone() if rank == 0 else torch.zeros(4096, device=device)
    dist.broadcast(t, 0)
    if not bool(torch.equal(t, reference)):
        problems.append("broadcast from rank 0 arrived wrong on rank %d" % rank)
    return problems


def bus_bandwidth(algbw: float, world: int) -> float:
    """nccl-tests' bus bandwidth of an all_reduce: what each link carried, comparable across world
    sizes (algbw * 2(n-1)/n). One rank moves nothing over any link."""
    return algbw * 2 * (world - 1) / world


def bandwidth(
    torch: Any, dist: Any, world: int, device: Any, sizes: List[int], iters: int
) -> List[Dict[str, Any]]:
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    results = []
    for size in sizes:
        t = torch.ones(size // 4, dtype=torch.float32, device=device)
        for _ in range(2):  # warm-up: connections, algorithm selection
            dist.all_reduce(t)
        sync()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        sync()
        seconds = (time.perf_counter() - start) / iters
        algbw = size / seconds / 1e9
        busbw = bus_bandwidth(algbw, world)
        results.append(
            {
                "bytes": size,
                "time_us": round(seconds * 1e6, 1),
                "algbw_gbs": round(algbw, 3),
                "busbw_gbs": round(busbw, 3),
            }
        )
    return results


def rank_main(rank: int, world: int, local_rank: int, config: Dict[str, Any], store: Any) -> Dict[str, Any]:
    """Run the checks as one rank and publish the result in the store (also when they fail)."""
    result: Dict[str, Any] = {"rank": rank, "host": socket.gethostname(), "ok": False}
    keys = None
    try:
        torch, import_s, _warnings = import_torch()
        import torch.distributed as dist

        keys = dist.PrefixStore(KEY_PREFIX, store)
        keys.set("joined/%d" % rank, "1")
        use_cuda = torch.cuda.is_available() and torch.cuda.device_count() > 0
        backend = "nccl" if use_cuda else "gloo"
        device = (
            torch.device("cuda", local_rank % max(1, torch.cuda.device_count()))
            if use_cuda
            else torch.device("cpu")
        )
        if use_cuda:
            torch.cuda.set_device(device)
        result.update({"backend": backend, "device": str(device), "import_s": import_s})
        timeout = datetime.timedelta(seconds=float(config.get("timeout_s", 60)))
        start = time.monotonic()
        dist.init_process_group(
            backend, store=dist.PrefixStore("pg", store), rank=rank, world_size=world, timeout=timeout
        )
        result["init_s"] = round(time.monotonic() - start, 3)
        if use_cuda:
            result["nccl"] = ".".join(str(p) for p in torch.cuda.nccl.version())
        problems = check_collectives(torch, dist, rank, world, device)
        default_sizes = [1 << 20, 16 << 20, 256 << 20] if use_cuda else [1 << 20, 8 << 20]
        sizes = [int(s) for s in config.get("sizes") or default_sizes]
        # One rank's all_reduce copies nothing: its "bandwidth" would be a meaningless big number.
        iters = int(config.get("iters", 5))
        result["bandwidth"] = bandwidth(torch, dist, world, device, sizes, iters) if world > 1 else []
        dist.barrier()
        dist.destroy_process_group()
        result["problems"] = problems
        result["ok"] = not problems
    except BaseException as exc:
        result["error"] = error_text(exc, 4)
    if keys is not None:
        with contextlib.suppress(Exception):  # the store may be gone: the aggregator then names this rank
            keys.set("result/%d" % rank, json.dumps(result))
    return result


def collect(
    store: Any, world: int, deadline: float, known: Optional[Dict[int, Dict[str, Any]]] = None
) -> Dict[int, Dict[str, Any]]:
    """Every rank's result that arrives before the deadline (one last look after it)."""
    import torch.distributed as dist

    keys = dist.PrefixStore(KEY_PREFIX, store)
    results: Dict[int, Dict[str, Any]] = dict(known or {})
    while True:
        for r in range(world):
            if r not in results and keys.check(["result/%d" % r]):
                results[r] = json.loads(keys.get("result/%d" % r))
        if len(results) == world or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    for r in range(world):
        if r not in results:
            joined = keys.check(["joined/%d" % r])
            results[r] = {
                "rank": r,
                "ok": False,
                "error": "joined but did not finish (hung or died)" if joined else "never joined",
            }
    return results


def aggregate(results: Dict[int, Dict[str, Any]], world: int, launcher: str) -> Dict[str, Any]:
    def blame(r: int) -> int:  # a rank that never showed up explains the others' timeouts
        error = str(results[r].get("error") or "")
        return 0 if "never joined" in error else 1 if "did not finish" in error else 2

    failed = sorted((r for r in results if not results[r].get("ok")), key=lambda r: (blame(r), r))
    zero = results.get(0, {})
    bw = zero.get("bandwidth") or []
    metrics: Dict[str, Any] = {
        "world_size": world,
        "launcher": launcher,
        "backend": zero.get("backend"),
        "nccl": zero.get("nccl"),
        "init_s": zero.get("init_s"),
        "bandwidth": bw,
        "busbw_max_gbs": max((b["busbw_gbs"] for b in bw), default=None),
        "ranks": [
            {k: results[r].get(k) for k in ("rank", "host", "ok", "error", "problems")}
            for r in sorted(results)
        ],
    }
    if failed:
        lines = []
        for r in failed:
            info = results[r]
            what = info.get("error") or "; ".join(info.get("problems") or []) or "failed"
            lines.append("rank %d (%s): %s" % (r, info.get("host", "?"), what))
        wrong = any(results[r].get("problems") for r in failed)
        return {
            "status": "fail",
            "summary": "%d of %d ranks failed: %s" % (len(failed), world, lines[0]),
            "detail": "\n".join(lines),
            "failure_class": "wrong_values" if wrong else "dist",
            "metrics": metrics,
        }
    if world == 1:
        best = " (bus bandwidth needs 2 or more ranks)"
    else:
        best = ("; best busbw %.2f GB/s" % metrics["busbw_max_gbs"]) if bw else ""
    return {
        "status": "pass",
        "summary": "%d rank%s over %s: all_reduce, all_gather and broadcast exact%s"
        % (world, "" if world == 1 else "s", zero.get("backend"), best),
        "metrics": metrics,
    }


def launched_env() -> Optional[Dict[str, Any]]:
    """The rank layout a launcher gave this process, or None when it runs alone."""
    env = os.environ
    if "RANK" in env and "WORLD_SIZE" in env:
        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
        local = int(env.get("LOCAL_RANK", "0"))
        launcher = "torchrun" if "TORCHELASTIC_RUN_ID" in env else "env"
    elif "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        rank, world = int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"])
        local = int(env.get("SLURM_LOCALID", "0"))
        launcher = "srun"
    else:
        return None
    if "MASTER_ADDR" not in env:
        raise RuntimeError(
            "%s sets the ranks but MASTER_ADDR is not set: export MASTER_ADDR and MASTER_PORT" % launcher
        )
    return {
        "rank": rank,
        "world": world,
        "local": local,
        "launcher": launcher,
        "addr": env["MASTER_ADDR"],
        "port": int(env.get("MASTER_PORT", "29500")),
    }


def run_launched(layout: Dict[str, Any], config: Dict[str, Any]) -> Dict[str, Any]:
    import torch.distributed as dist

    timeout = float(config.get("timeout_s", 60))
    # torchrun's agent already serves the job's store on MASTER_PORT; otherwise rank 0 serves it.
    agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    try:
        store = dist.TCPStore(
            layout["addr"],
            layout["port"],
            None,
            layout["rank"] == 0 and not agent_store,
            datetime.timedelta(seconds=timeout),
            wait_for_workers=False,
        )
    except Exception as exc:
        return {
            "status": "fail",
            "summary": "rank %d cannot reach the store at %s:%d"
            % (layout["rank"], layout["addr"], layout["port"]),
            "detail": error_text(exc, 3),
            "failure_class": "rendezvous",
        }
    deadline = time.monotonic() + timeout
    # Ranks give up on each other (init, collectives) well before the deadline, so rank 0 still
    # has time to say which ranks never showed up.
    rank_config = dict(config, timeout_s=max(2.0, timeout * 0.6))
    mine = rank_main(layout["rank"], layout["world"], layout["local"], rank_config, store)
    if layout["rank"] != 0:
        status = "pass" if mine["ok"] else "fail"
        what = mine.get("error") or "; ".join(mine.get("problems") or [])
        return {
            "status": status,
            "summary": "rank %d of %d: %s" % (layout["rank"], layout["world"], "ok" if mine["ok"] else what),
            "metrics": {
                "rank": layout["rank"],
                "world_size": layout["world"],
                "bandwidth": mine.get("bandwidth"),
            },
        }
    return aggregate(
        collect(store, layout["world"], deadline, {0: mine}), layout["world"], layout["launcher"]
    )


def spawned_rank(index: int, world: int, port: int, config: Dict[str, Any]) -> None:
    import torch.distributed as dist

    store = dist.TCPStore(
        "127.0.0.1", port, None, False, datetime.timedelta(seconds=float(config.get("timeout_s", 60)))
    )
    rank_main(index, world, index, config, store)


def run_alone(config: Dict[str, Any]) -> Dict[str, Any]:
    torch, _import_s, _warnings = import_torch()
    import torch.distributed as dist
    import torch.multiprocessing as mp

    if not dist.is_available():
        return {
            "status": "fail",
            "summary": "torch %s is built without torch.distributed" % torch.__version__,
        }
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    world = gpus if gpus else int(config.get("cpu_world", 2))
    timeout = float(config.get("timeout_s", 60))
    port = free_port()
    store = dist.TCPStore(
        "127.0.0.1", port, None, True, datetime.timedelta(seconds=timeout), wait_for_workers=False
    )
    deadline = time.monotonic() + timeout
    config = dict(config, timeout_s=max(2.0, timeout * 0.6))
    context = mp.start_processes(
        spawned_rank, args=(world, port, config), nprocs=world, join=False, start_method="spawn"
    )
    try:
        results = collect(store, world, deadline)
    finally:
        for process in context.processes:
            process.join(timeout=max(0.0, min(5.0, deadline - time.monotonic())))
            if process.is_alive():
                process.kill()
    return aggregate(results, world, "spawn")


def main(config: Dict[str, Any]) -> Dict[str, Any]:
    layout = launched_env()
    if layout is not None:
        return run_launched(layout, config)
    return run_alone(config)


if __name__ == "__main__":
    run(main)
