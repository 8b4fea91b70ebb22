#!/usr/bin/env bash
# Run on a machine with an NVIDIA GPU: compares nvidia-smi with `envkit doctor --deep --json` and
# prints where they disagree (driver version, GPU count, names, memory, compute capability), the
# doctor report, an NVML recording for tests/data/nvml/, `envkit resolve` for this machine, then
# `envkit verify` with every check (device, compile, amp, dist, perf) and its metrics, and
# `envkit preflight --verify device` with its time. Each timed step prints its wall time next to its
# target (issue #13, on one H200): doctor --deep <= 5 s, verify --checks device,compile,amp,dist
# <= 20 s (twice: envkit compiles into a fresh inductor cache each run, so both runs are cold; the
# probe's own cold / warm compile times are printed beside them), preflight --verify device,dist
# <= 10 s (Slurm kills a HealthCheckProgram at 60 s; preflight's default budget is 30 s).
#
#   bash scripts/gpu_check.sh [OUT_DIR]
#
# envkit need not be installed: run from a checkout with PYTHONPATH=$PWD, the interpreter that holds
# torch as PYTHON (default python3). Nothing here needs bc or jq.
set -uo pipefail
out=${1:-${OUT:-gpu-check-out}}
mkdir -p "$out"
py=${PYTHON:-python3}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
# target LABEL START LIMIT_S: "LABEL: 12.34 s (target <= 20 s) ok|MISSED", also kept in targets.txt
target() {
  local took; took=$(since "$2")
  awk -v l="$1" -v t="$took" -v m="$3" 'BEGIN { printf "TARGET %-44s %7.2f s (target <= %s s) %s\n", l, t, m, (t <= m ? "ok" : "MISSED") }' \
    | tee -a "$out/targets.txt"
}
: > "$out/targets.txt"

echo "== nvidia-smi"
nvidia-smi
nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv,noheader,nounits \
  | tee "$out/nvidia-smi-query.csv"

echo "== envkit doctor --deep --json"
start=$(now)
"$py" -m envkit doctor --deep --json --python "$py" > "$out/doctor.json"
rc=$?
echo "exit code $rc"
target "doctor --deep" "$start" 5
"$py" -m envkit doctor --from "$out/doctor.json" || true

echo "== NVML recording"
"$py" scripts/record_nvml.py > "$out/nvml.json" && echo "written $out/nvml.json"

echo "== where nvidia-smi and envkit disagree"
"$py" - "$out/nvidia-smi-query.csv" "$out/doctor.json" <<'PY'
import csv, json, sys
rows = [r for r in csv.reader(open(sys.argv[1]), skipinitialspace=True) if r]
report = json.load(open(sys.argv[2]))
facts = report["facts"]
gpus = facts["gpus"]
problems = []
if len(rows) != len(gpus):
    problems.append(f"GPU count: nvidia-smi {len(rows)}, envkit {len(gpus)}")
for row, gpu in zip(rows, gpus):
    index, name, driver, memory, cc = row
    if driver != facts["driver"]["version"]:
        problems.append(f"GPU {index} driver: nvidia-smi {driver}, envkit {facts['driver']['version']}")
    if name != gpu["name"]:
        problems.append(f"GPU {index} name: nvidia-smi {name!r}, envkit {gpu['name']!r}")
    if int(memory) != gpu["memory_total_mib"]:
        problems.append(f"GPU {index} memory MiB: nvidia-smi {memory}, envkit {gpu['memory_total_mib']}")
    if cc != gpu["compute_capability"]:
        problems.append(f"GPU {index} compute capability: nvidia-smi {cc}, envkit {gpu['compute_capability']}")
deep = facts["torch"].get("deep") or {}
print("\n".join(problems) if problems else f"no disagreement ({len(gpus)} GPUs)")
print("torch deep probe:", json.dumps({k: deep.get(k) for k in ("ok", "version", "cuda_available", "device_count", "arch_list", "nccl", "bf16_supported")}))
PY

echo "== envkit resolve (this machine)"
"$py" -m envkit resolve --explain || true
"$py" -m envkit resolve --json > "$out/resolve.json"

for run in 1 2; do
  echo "== envkit verify --checks device,compile,amp,dist --json (run $run, fresh inductor cache)"
  start=$(now)
  "$py" -m envkit verify --checks device,compile,amp,dist --json --python "$py" > "$out/verify-$run.json"
  echo "exit code $?"
  target "verify device,compile,amp,dist (run $run)" "$start" 20
  "$py" - "$out/verify-$run.json" <<'PY'
import json, sys
for check in json.load(open(sys.argv[1]))["checks"]:
    print(f"  {check['id']:16s} {check['status']:5s} {check['summary'][:100]}")
    if check["id"] == "verify.compile":
        for d in (check.get("metrics") or {}).get("devices", []):
            print(f"    compile on {d.get('device')}: cold {d.get('cold_compile_s')} s, warm {d.get('warm_compile_s')} s")
PY
done

echo "== envkit preflight --verify device,dist"
start=$(now)
"$py" -m envkit preflight --verify device,dist --json --python "$py" > "$out/preflight-device-dist.json"
echo "exit code $?"
target "preflight --verify device,dist" "$start" 10

echo "== envkit verify --checks device,compile,amp,dist,perf --json"
start=$(now)
"$py" -m envkit verify --checks device,compile,amp,dist,perf --json --python "$py" > "$out/verify.json"
echo "exit code $?, $(since "$start") s (no target: perf runs alone after the others)"
"$py" - "$out/verify.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
for check in report["checks"]:
    print(f"{check['id']:16s} {check['status']:5s} {check['summary']}")
    metrics = check.get("metrics") or {}
    if check["id"] == "verify.perf":
        for d in metrics.get("devices", []):
            print("   ", {k: d.get(k) for k in ("name", "bf16_tflops", "bf16_of_peak", "fp16_tflops", "tf32_tflops", "d2d_gbs", "d2d_of_peak")})
    elif check["id"] == "verify.compile":
        for d in metrics.get("devices", []):
            print("   ", {k: d.get(k) for k in ("device", "cold_compile_s", "warm_compile_s", "speedup")})
    elif check["id"] == "verify.dist":
        print("   ", {k: metrics.get(k) for k in ("world_size", "backend", "nccl", "busbw_max_gbs")})
    if check["status"] in ("fail", "warn"):
        print("    detail:", check.get("detail", "")[:400])
PY

echo "== envkit preflight --verify device"
start=$(now)
"$py" -m envkit preflight --verify device --json --python "$py" > "$out/preflight.json"
echo "exit code $?, $(since "$start") s"

echo "== the targets"
cat "$out/targets.txt"
