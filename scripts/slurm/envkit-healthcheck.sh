#!/usr/bin/env bash
# envkit-healthcheck.sh: a Slurm HealthCheckProgram that runs `envkit preflight` and drains or
# resumes this node by its verdict.
#
#   slurm.conf:  HealthCheckProgram=/usr/local/sbin/envkit-healthcheck.sh
#                HealthCheckInterval=300
#                HealthCheckNodeState=ANY,CYCLE
#
# slurmd runs it as root on every node and kills it after 60 s; Slurm itself does nothing with the
# result: "any action to be taken must be explicitly performed by the program" (slurm.conf(5)).
# The drain/resume rules are LBNL NHC's (node-mark-offline / node-mark-online), with "envkit:" for
# "NHC:" (mej/nhc:helpers/node-mark-offline and helpers/node-mark-online@9c4a38c0c9f4):
#
#   envkit exit   what this script does
#   0 healthy     RESUME the node only if envkit drained it (its reason starts with "envkit:").
#                 A drain by anyone else (an admin's note, NHC, Slurm's "Kill task failed") stays.
#   1 unhealthy   DRAIN with envkit's one-line reason, unless the node is already drained by
#                 someone else (their reason is kept, and logged) or by envkit for the same reason.
#   timeout       ENVKIT_ON_TIMEOUT (default drain): see "Error policy" below.
#   2, 70, other  ENVKIT_ON_ERROR (default ignore): see "Error policy" below.
#
# Error policy. envkit could not give a verdict; the two causes are treated differently, as NHC
# does (it exits 0 when its config is missing, but drains on its watchdog timeout, `die 142`):
#   - exit 2 (bad --expect file, bad arguments) or 70 (an envkit bug) is the same on every node:
#     one typo in /etc/envkit/node.toml would drain the whole cluster at once. Default: ignore,
#     log it at warning level, and leave the node's state as it is (never RESUME on no verdict).
#   - a timeout means envkit did not finish even though its own watchdog answers "unhealthy" 5 s
#     after its budget: the process is stuck in the kernel (a wedged GPU driver: the classic hung
#     nvidia-smi) or never started (a stalled filesystem). Default: drain, with a reason starting
#     "envkit:", so the next healthy run resumes the node by itself. If envkit lives on a shared
#     filesystem, a filesystem stall drains every node until then: set ENVKIT_ON_TIMEOUT=ignore
#     or install envkit on local disk.
#
# Exit status of this script (slurmd only logs it): 0 healthy, 1 unhealthy, 2 envkit gave no
# verdict, 3 this script could not read or update the node in Slurm.
#
# Configuration: environment variables, or the same names in ENVKIT_HEALTHCHECK_CONF
# (default /etc/envkit/healthcheck.conf, a bash file sourced if readable; slurm.conf passes no
# arguments to a HealthCheckProgram, so this file is where a site sets them). Values and defaults
# are documented in scripts/README.md.

set -u

# slurmd may run us with a bare environment; find coreutils and scontrol in the usual places.
if [ -z "${PATH:-}" ]; then
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  export PATH
fi

: "${ENVKIT_HEALTHCHECK_CONF:=/etc/envkit/healthcheck.conf}"
if [ -r "$ENVKIT_HEALTHCHECK_CONF" ]; then
  # shellcheck source=/dev/null
  . "$ENVKIT_HEALTHCHECK_CONF"
fi

: "${ENVKIT:=envkit}"            # the envkit executable (an absolute path is safest under slurmd)
: "${ENVKIT_ARGS:=}"             # extra arguments, split on blanks: --expect /etc/envkit/node.toml
: "${ENVKIT_TIMEOUT:=30}"        # envkit preflight --timeout (its own budget; its watchdog adds 5 s)
: "${ENVKIT_GRACE:=8}"           # our hard bound is TIMEOUT + GRACE: longer than envkit's watchdog
: "${ENVKIT_KILL_AFTER:=3}"      # then SIGKILL this many seconds after SIGTERM
: "${ENVKIT_ON_ERROR:=ignore}"   # exit 2, 70, anything unexpected: drain | ignore
: "${ENVKIT_ON_TIMEOUT:=drain}"  # no answer within TIMEOUT + GRACE: drain | ignore
: "${ENVKIT_REASON_MAX:=100}"    # the longest drain reason, in characters
: "${ENVKIT_REPORT:=}"           # if set, also keep the envkit.report/1 JSON in this file
: "${ENVKIT_METRICS:=}"          # if set, envkit also writes Prometheus metrics there (a *.prom file
                                 # in node_exporter's --collector.textfile.directory)
: "${ENVKIT_LOGGER=logger}"      # syslog; empty (or not found) means stderr
: "${ENVKIT_DRY_RUN:=0}"         # 1: decide and log, but change nothing in Slurm (for trying it by hand)
: "${SCONTROL:=scontrol}"
: "${SCONTROL_TIMEOUT:=5}"       # per scontrol call: a hung slurmctld must not eat our 60 s

log() { # log PRIORITY MESSAGE: one line to syslog (tag "envkit"), else to stderr
  local priority=$1
  shift
  if [ -n "$ENVKIT_LOGGER" ] && command -v "$ENVKIT_LOGGER" >/dev/null 2>&1 &&
    timeout 2 "$ENVKIT_LOGGER" -t envkit -p "daemon.$priority" "$*" 2>/dev/null; then
    # Also show it to a person running the script by hand.
    if [ -t 2 ]; then printf 'envkit-healthcheck: %s\n' "$*" >&2; fi
  else
    printf 'envkit-healthcheck: %s\n' "$*" >&2
  fi
}

is_count() { case $1 in '' | *[!0-9]*) return 1 ;; *) return 0 ;; esac }

# A typo in the configuration falls back to the default, loudly, rather than failing the check.
for var in ENVKIT_TIMEOUT:30 ENVKIT_GRACE:8 ENVKIT_KILL_AFTER:3 ENVKIT_REASON_MAX:100 SCONTROL_TIMEOUT:5; do
  name=${var%%:*}
  if ! is_count "${!name}" || [ "${!name}" -eq 0 ]; then
    log warning "config: $name=${!name} is not a positive whole number of seconds; using ${var#*:}"
    printf -v "$name" '%s' "${var#*:}"
  fi
done
if [ "$ENVKIT_REASON_MAX" -lt 20 ]; then ENVKIT_REASON_MAX=20; fi
for name in ENVKIT_ON_ERROR ENVKIT_ON_TIMEOUT; do
  case ${!name} in
    drain | ignore) ;;
    *)
      log warning "config: $name=${!name} is neither drain nor ignore; using ignore"
      printf -v "$name" '%s' ignore
      ;;
  esac
done

budget=$((ENVKIT_TIMEOUT + ENVKIT_GRACE))
if [ $((budget + ENVKIT_KILL_AFTER + 2 * SCONTROL_TIMEOUT)) -ge 60 ]; then
  log warning "config: ENVKIT_TIMEOUT + ENVKIT_GRACE + ENVKIT_KILL_AFTER + 2 x SCONTROL_TIMEOUT" \
    "is 60 s or more: slurmd kills a HealthCheckProgram at 60 s, before it can drain"
fi

node=${SLURMD_NODENAME:-}
if [ -z "$node" ]; then node=$(hostname -s 2>/dev/null); fi
if [ -z "$node" ]; then
  log err "cannot tell this node's name: neither SLURMD_NODENAME nor hostname -s gave one"
  exit 3
fi

# --- run envkit, bounded --------------------------------------------------------------------------

# stderr goes to a file, not a pipe: a grandchild that outlives envkit would hold a pipe open and
# make us wait for it.
errfile=$(mktemp "${TMPDIR:-/tmp}/envkit-healthcheck.XXXXXX" 2>/dev/null) || errfile=
outfile=/dev/null
if [ -n "$ENVKIT_REPORT" ]; then outfile="$ENVKIT_REPORT.tmp.$$"; fi
cleanup() {
  if [ -n "$errfile" ]; then rm -f "$errfile"; fi
  if [ "$outfile" != /dev/null ]; then rm -f "$outfile"; fi
}
trap cleanup EXIT

read -r -a args <<<"$ENVKIT_ARGS"
if [ -n "$ENVKIT_REPORT" ]; then args+=(--json); fi
# envkit writes the metrics itself, whole or not at all (a temporary name, then a rename), after
# each verdict. A run that gives none (a timeout, exit 2 or 70) leaves the previous file: its
# envkit_run_timestamp_seconds goes stale, which the EnvkitStale alert watches.
if [ -n "$ENVKIT_METRICS" ]; then args+=(--metrics "$ENVKIT_METRICS"); fi

# `timeout` puts envkit in its own process group and signals the whole group, so envkit's probe
# children die with it. It runs in the background because a process stuck in the kernel ignores
# even SIGKILL, and `timeout` would then wait for it forever: we stop waiting at our own deadline.
timeout --kill-after="$ENVKIT_KILL_AFTER" "$budget" \
  "$ENVKIT" preflight --timeout "$ENVKIT_TIMEOUT" ${args[@]+"${args[@]}"} \
  </dev/null >"$outfile" 2>"${errfile:-/dev/null}" &
pid=$!
deadline=$((SECONDS + budget + ENVKIT_KILL_AFTER + 2))
stuck=0
nap=0.01 # a quick envkit (exit 2 on a bad config) is not kept waiting a whole 0.1 s
while kill -0 "$pid" 2>/dev/null; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    stuck=1
    break
  fi
  sleep "$nap"
  case $nap in 0.01) nap=0.03 ;; *) nap=0.1 ;; esac
done
if [ "$stuck" -eq 1 ]; then
  rc=124
else
  wait "$pid"
  rc=$?
fi

if [ -n "$ENVKIT_REPORT" ] && { [ "$rc" -eq 0 ] || [ "$rc" -eq 1 ]; } && [ -s "$outfile" ]; then
  # Written whole or not at all: a reader never sees half a report.
  mv -f "$outfile" "$ENVKIT_REPORT" && outfile=/dev/null
fi

envkit_line() { # the last "envkit: ..." line envkit printed on stderr, else its last non-blank line
  local line=
  if [ -n "$errfile" ] && [ -s "$errfile" ]; then
    line=$(grep -a '^envkit: ' "$errfile" | tail -n 1)
    if [ -z "$line" ]; then line=$(grep -a -v '^[[:space:]]*$' "$errfile" | tail -n 1); fi
  fi
  printf '%s' "$line"
}

sanitize_reason() { # one printable ASCII line, no quotes, "envkit:" first, at most REASON_MAX chars
  local r=$1
  # Slurm stores bytes; a cut could split a UTF-8 character. So: ASCII only. The symbols envkit's
  # summaries use are spelled out; any other non-ASCII character becomes one "?".
  r=${r//…/...}
  r=${r//≥/>=}
  r=${r//≤/<=}
  r=${r//≠/!=}
  r=${r//→/->}
  r=${r//×/x}
  r=${r//—/-}
  r=${r//–/-}
  r=${r//·/-}
  r=${r//°/}
  r=$(printf '%s' "$r" | LC_ALL=C tr '[:cntrl:]' ' ' | LC_ALL=C tr -c '[:print:]' '\001' |
    LC_ALL=C tr -s '\001' | LC_ALL=C tr '\001' '?')
  # Quotes and backslashes break the scripts people paste reasons into; [..] would look like the
  # " [user@time]" that scontrol appends, and confuse the same-reason test below.
  r=${r//[\"\'\`\\]/}
  r=${r//\[/(}
  r=${r//\]/)}
  r=$(printf '%s' "$r" | tr -s ' ')
  r=${r#"${r%%[! ]*}"}
  r=${r%"${r##*[! ]}"}
  case $r in
    envkit:*) ;;
    *) r="envkit: ${r:-preflight: unhealthy (no reason given)}" ;;
  esac
  if [ "${#r}" -gt "$ENVKIT_REASON_MAX" ]; then
    r=${r:0:$((ENVKIT_REASON_MAX - 3))}
    r="${r% }..."
  fi
  printf '%s' "$r"
}

line=$(envkit_line)
case $rc in
  0) verdict=healthy ;;
  1) verdict=unhealthy ;;
  124 | 137)
    verdict=error
    policy=$ENVKIT_ON_TIMEOUT
    # envkit's watchdog may have printed its line before the process got stuck on the way out.
    case $line in
      envkit:*) what=${line#envkit: } ;;
      *) what="preflight: no answer within ${budget}s (timed out)" ;;
    esac
    if [ "$stuck" -eq 1 ]; then what="$what; survived SIGKILL (stuck in the kernel?)"; fi
    ;;
  *)
    verdict=error
    policy=$ENVKIT_ON_ERROR
    case $rc in
      2) what="preflight: could not check (exit 2)" ;;
      70) what="preflight: internal error (exit 70)" ;;
      126 | 127) what="preflight: cannot run $ENVKIT (exit $rc)" ;;
      *) what="preflight: unexpected exit $rc" ;;
    esac
    if [ -n "$line" ]; then what="$what: ${line#envkit: }"; fi
    ;;
esac

# --- read the node's state and reason -------------------------------------------------------------

state=
current=
show_ok=0
read_node() {
  local out
  out=$(timeout "$SCONTROL_TIMEOUT" "$SCONTROL" show node "$node" 2>/dev/null) || return 1
  case $out in *NodeName=*) ;; *) return 1 ;; esac
  # State= is one token (IDLE+DRAIN, DOWN*, MIXED+DRAIN); field-match it so NextState= is skipped.
  state=$(printf '%s\n' "$out" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^State=/) { print substr($i, 7); exit } }')
  # Reason= runs to the end of its line, spaces included, then scontrol appends " [user@time]".
  current=$(printf '%s\n' "$out" |
    awk '{ p = index($0, "Reason="); if (p == 1 || (p > 1 && substr($0, p - 1, 1) ~ /[ \t]/)) { print substr($0, p + 7); exit } }' |
    sed 's/ \[[^]@]*@[^]]*\].*$//')
  case $current in '(null)' | None) current= ;; esac
  return 0
}
if read_node; then show_ok=1; fi

out_of_service() { # is the node drained, draining, down or failed (whoever did it)?
  local token tokens
  IFS=+ read -r -a tokens <<<"$state"
  for token in ${tokens[@]+"${tokens[@]}"}; do
    token=${token%%[![:upper:]_]*} # DOWN* (not responding), IDLE~ (powered down): drop the flag
    case $token in DRAIN | DRAINED | DRAINING | DOWN | FAIL | FAILING) return 0 ;; esac
  done
  return 1
}

ours() { case $current in envkit:*) return 0 ;; *) return 1 ;; esac }

update() { # update State=... [Reason=...]: scontrol, bounded
  if [ "$ENVKIT_DRY_RUN" = 1 ]; then
    log info "node=$node dry run, not running: $SCONTROL update NodeName=$node $*"
    return 0
  fi
  timeout "$SCONTROL_TIMEOUT" "$SCONTROL" update NodeName="$node" "$@"
}

drain() { # drain REASON WHY: drain unless someone else's drain or the same reason is in place
  local reason=$1 why=$2
  if [ "$show_ok" -eq 1 ] && out_of_service; then
    if ! ours; then
      log notice "node=$node $why action=none: already $state by someone else, reason kept:" \
        "${current:-(none)}; envkit would say: $reason"
      return 0
    fi
    if [ "$current" = "$reason" ]; then
      log info "node=$node $why action=none: already drained by envkit for this reason: $reason"
      return 0
    fi
  fi
  if [ "$show_ok" -eq 0 ]; then
    # Better to overwrite a note we could not read than to leave a broken node taking jobs.
    log warning "node=$node could not read its state with $SCONTROL show node; draining anyway"
  fi
  # DRAIN, not DOWN: running jobs finish; no new job starts here.
  if update State=DRAIN Reason="$reason"; then
    log warning "node=$node $why action=drain reason=$reason"
    return 0
  fi
  log err "node=$node $why action=drain FAILED ($SCONTROL update State=DRAIN): reason=$reason"
  return 3
}

case $verdict in
  healthy)
    if [ "$show_ok" -eq 0 ]; then
      log err "node=$node healthy action=none: could not read its state with $SCONTROL show node"
      exit 3
    fi
    if out_of_service && ours; then
      if update State=RESUME; then
        log notice "node=$node healthy action=resume: was $state by envkit: $current"
        exit 0
      fi
      log err "node=$node healthy action=resume FAILED ($SCONTROL update State=RESUME)"
      exit 3
    fi
    if out_of_service; then
      log info "node=$node healthy action=none: $state by someone else, left alone: ${current:-(none)}"
    else
      log info "node=$node healthy action=none"
    fi
    exit 0
    ;;
  unhealthy)
    drain "$(sanitize_reason "$line")" unhealthy || exit 3
    exit 1
    ;;
  error)
    if [ "$policy" = drain ]; then
      drain "$(sanitize_reason "envkit: $what")" "no-verdict policy=drain" || exit 3
    else
      # No verdict, so no RESUME either: a node envkit drained stays drained.
      log warning "node=$node no-verdict policy=ignore action=none ($state): $what"
    fi
    exit 2
    ;;
esac
