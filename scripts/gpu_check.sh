#!/usr/bin/env bash
# Run on a machine with an NVIDIA GPU: compares nvidia-smi with `envkit doctor --deep --json` and
# prints where they disagree (driver version, GPU count, names, memory, compute capability), the
# doctor report, an NVML recording for tests/data/nvml/, `envkit resolve` for this machine, then
# `envkit verify` with every check (device, compile, amp, dist, perf) and its metrics, and
# `envkit preflight --verify device` with its time.
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

echo "== nvidia-smi"
nvidia-smi
nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv,noheader,nounits \
  | tee "$out/nvidia-smi-query.csv"

echo "== envkit doctor --deep --json"
start=$(now)
"$py" -m envkit doctor --deep --json --python "$py" > "$out/doctor.json"
rc=$?
echo "exit code $rc, $(since "$start") s"
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

echo "== envkit verify --checks device,compile,amp,dist,perf --json"
start=$(now)
"$py" -m envkit verify --checks device,compile,amp,dist,perf --json --python "$py" > "$out/verify.json"
echo "exit code $?, $(since "$start") s"
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
