#!/usr/bin/env bash
# envkit-prolog.sh: a Slurm Prolog that runs `envkit preflight --verify device` before each job
# on this node, so a job never starts on GPUs that cannot run a CUDA kernel.
#
#   slurm.conf:  Prolog=/usr/local/sbin/envkit-prolog.sh
#
# What Slurm does with the exit status (slurm.conf(5), prolog_epilog guide):
#   0          the job starts.
#   non-zero   Slurm DRAINS this node and REQUEUES the job, which is HELD unless slurm.conf has
#              SchedulerParameters=nohold_on_prolog_fail. The drain reason is Slurm's own (not
#              "envkit: ..."), so envkit-healthcheck.sh will not resume the node: an admin does,
#              after reading this script's line in syslog (tag "envkit") or slurmd's log.
#
# Budget. The Prolog runs on the job's critical path: the job (or its first step) waits for it,
# and Slurm's daemons give up on an RPC after MessageTimeout (default 10 s). So the default budget
# is well under that: envkit gets ENVKIT_TIMEOUT=5 s and this script stops it at 5 + 2 s, then
# SIGKILL 1 s later. Raise them only with MessageTimeout (and PrologEpilogTimeout, if set).
# A longer GPU check (DCGM level 2, NCCL) belongs in the HealthCheckProgram or an Epilog.
#
# Exit mapping (the error policy is envkit-healthcheck.sh's; see scripts/README.md):
#   envkit 0 -> 0; 1 -> 1 (drain + requeue), its reason printed on stderr and sent to syslog;
#   timeout -> ENVKIT_ON_TIMEOUT (default drain: exit 1); 2, 70, other -> ENVKIT_ON_ERROR (default
#   ignore: exit 0, the job runs; draining every node for a typo in the expectations file would
#   requeue and hold every job in the cluster).
#
# Slurm runs Prologs without a search path ("for security reasons, these programs do not have a
# search path set"), so ENVKIT is best an absolute path; a sane PATH is set below for coreutils.

set -u

if [ -z "${PATH:-}" ]; then
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  export PATH
fi

: "${ENVKIT_PROLOG_CONF:=/etc/envkit/prolog.conf}"
if [ -r "$ENVKIT_PROLOG_CONF" ]; then
  # shellcheck source=/dev/null
  . "$ENVKIT_PROLOG_CONF"
fi

: "${ENVKIT:=envkit}"
: "${ENVKIT_ARGS:=}"             # e.g. --expect /etc/envkit/node.toml --python /opt/torch/bin/python
: "${ENVKIT_VERIFY:=device}"     # verify checks to run: device is seconds; compile/dist take longer
: "${ENVKIT_TIMEOUT:=5}"
: "${ENVKIT_GRACE:=2}"
: "${ENVKIT_KILL_AFTER:=1}"
: "${ENVKIT_ON_ERROR:=ignore}"
: "${ENVKIT_ON_TIMEOUT:=drain}"
: "${ENVKIT_JOB_GPUS_ONLY:=1}"   # check only the job's GPUs (SLURM_JOB_GPUS), not its neighbours'
: "${ENVKIT_LOGGER=logger}"

log() { # log PRIORITY MESSAGE: syslog (tag "envkit") when possible, and always stderr
  local priority=$1
  shift
  if [ -n "$ENVKIT_LOGGER" ] && command -v "$ENVKIT_LOGGER" >/dev/null 2>&1; then
    timeout 2 "$ENVKIT_LOGGER" -t envkit -p "daemon.$priority" "$*" 2>/dev/null || true
  fi
  printf '%s\n' "$*" >&2
}

job="job=${SLURM_JOB_ID:-?} node=${SLURMD_NODENAME:-$(hostname -s 2>/dev/null)}"

if [ "$ENVKIT_JOB_GPUS_ONLY" = 1 ] && [ -n "${SLURM_JOB_GPUS:-}" ]; then
  # On a shared node the other GPUs belong to running jobs: leave them alone. SLURM_JOB_GPUS
  # holds Slurm's GPU indices (NVML order, which is PCI bus order, with AutoDetect=nvml), while
  # CUDA numbers the fastest GPU first unless CUDA_DEVICE_ORDER says otherwise.
  export CUDA_DEVICE_ORDER=PCI_BUS_ID
  export CUDA_VISIBLE_DEVICES="$SLURM_JOB_GPUS"
fi

read -r -a args <<<"$ENVKIT_ARGS"
errfile=$(mktemp "${TMPDIR:-/tmp}/envkit-prolog.XXXXXX" 2>/dev/null) || errfile=
trap 'if [ -n "$errfile" ]; then rm -f "$errfile"; fi' EXIT

# `timeout` signals envkit's whole process group, so its probe children die with it.
timeout --kill-after="$ENVKIT_KILL_AFTER" "$((ENVKIT_TIMEOUT + ENVKIT_GRACE))" \
  "$ENVKIT" preflight --timeout "$ENVKIT_TIMEOUT" --verify "$ENVKIT_VERIFY" ${args[@]+"${args[@]}"} \
  </dev/null >/dev/null 2>"${errfile:-/dev/null}"
rc=$?

line=
if [ -n "$errfile" ] && [ -s "$errfile" ]; then
  line=$(grep -a '^envkit: ' "$errfile" | tail -n 1)
  if [ -z "$line" ]; then line=$(grep -a -v '^[[:space:]]*$' "$errfile" | tail -n 1); fi
fi

case $rc in
  0) exit 0 ;;
  1)
    log warning "$job prolog: unhealthy: ${line:-envkit: preflight: unhealthy (no reason given)}"
    exit 1
    ;;
  124 | 137)
    policy=$ENVKIT_ON_TIMEOUT
    what="envkit: preflight: no answer within $((ENVKIT_TIMEOUT + ENVKIT_GRACE))s (timed out)"
    ;;
  *)
    policy=$ENVKIT_ON_ERROR
    what="envkit: preflight: no verdict (exit $rc)${line:+: ${line#envkit: }}"
    ;;
esac

if [ "$policy" = drain ]; then
  log warning "$job prolog: policy=drain: $what"
  exit 1
fi
log warning "$job prolog: policy=ignore, the job runs: $what"
exit 0
