# shellcheck shell=bash
# Shared helpers of the integration tests (tests/integration/*.sh source this file).
#
# Inputs (environment or defaults):
#   RINGPILOT_SOURCE_DIR  source tree (default: two levels above this file)
#   RINGPILOT_BUILD_DIR   build tree holding bin/ringpilot and bin/ringpilot-trainer
#                         (default: $RINGPILOT_SOURCE_DIR/build)
#   RINGPILOT_KEEP_TMP=1  keep the temp dir even when the test passes
#
# A test calls rp_init NAME first, records checks with rp_check / rp_row, and ends with
# rp_finish, which prints the result table last and exits 1 if any check failed. The
# temp dir is removed when the test passes and kept (its path printed) when it fails.

set -euo pipefail

RP_TEST=""
RP_TMP=""
RP_FAILS=0
RP_DONE=0
RP_START_S=0
RP_ROWS=()
RP_CLEANUPS=()
RP_BIN_STAMP=""
RP_JOB_PID=""

rp_log() { printf '[%s %s] %s\n' "$RP_TEST" "$(date +%H:%M:%S)" "$*" >&2; }

# Fatal setup problem: print it, print the table so far, exit 1.
rp_die() {
  printf 'FAIL: %s: %s\n' "$RP_TEST" "$*" >&2
  RP_ROWS+=("setup|$*|FAIL")
  RP_FAILS=$((RP_FAILS + 1))
  rp_finish
}

# rp_row CHECK DETAIL STATUS: one line of the result table (STATUS PASS, FAIL or INFO).
# With RP_QUIET_PASS=1, PASS rows are left out (a test that sums them up itself).
rp_row() {
  if [[ $3 == PASS && ${RP_QUIET_PASS:-0} == 1 ]]; then return 0; fi
  RP_ROWS+=("$1|$2|$3")
  if [[ $3 == FAIL ]]; then
    RP_FAILS=$((RP_FAILS + 1))
    printf 'FAIL: %s: %s: %s\n' "$RP_TEST" "$1" "$2" >&2
  fi
}

# rp_check CHECK DETAIL COMMAND...: PASS if COMMAND succeeds, else FAIL.
rp_check() {
  local name=$1 detail=$2
  shift 2
  if "$@"; then rp_row "$name" "$detail" PASS; else rp_row "$name" "$detail" FAIL; fi
}

rp_cleanup() {
  local rc=$? i
  # A job still running (the test was interrupted): SIGTERM reaches `ringpilot run`
  # through timeout, and ringpilot stops mpirun and the ranks.
  if [[ -n $RP_JOB_PID ]] && kill -0 "$RP_JOB_PID" 2>/dev/null; then
    kill -TERM "$RP_JOB_PID" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do
      kill -0 "$RP_JOB_PID" 2>/dev/null || break
      sleep 0.2
    done
    kill -KILL "$RP_JOB_PID" 2>/dev/null || true
  fi
  # Registered cleanups run last-registered first; each one's failure is only reported.
  for ((i = ${#RP_CLEANUPS[@]} - 1; i >= 0; i--)); do
    eval "${RP_CLEANUPS[i]}" || rp_log "cleanup '${RP_CLEANUPS[i]}' failed"
  done
  RP_CLEANUPS=()
  if [[ -n $RP_TMP && -d $RP_TMP ]]; then
    if [[ $rc -eq 0 && $RP_FAILS -eq 0 && $RP_DONE -eq 1 && ${RINGPILOT_KEEP_TMP:-0} != 1 ]]; then
      rm -rf "$RP_TMP"
    else
      printf '%s: work directory kept for inspection: %s\n' "$RP_TEST" "$RP_TMP" >&2
    fi
  fi
  exit "$rc"
}

# rp_on_exit COMMAND: run COMMAND (a string for eval) when the script exits.
rp_on_exit() { RP_CLEANUPS+=("$1"); }

rp_init() {
  RP_TEST=$1
  RP_START_S=$SECONDS
  trap rp_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  local here
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  RINGPILOT_SOURCE_DIR=${RINGPILOT_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
  RINGPILOT_BUILD_DIR=${RINGPILOT_BUILD_DIR:-$RINGPILOT_SOURCE_DIR/build}
  RINGPILOT=$RINGPILOT_BUILD_DIR/bin/ringpilot
  RINGPILOT_TRAINER_BIN=$RINGPILOT_BUILD_DIR/bin/ringpilot-trainer
  export RINGPILOT_SOURCE_DIR RINGPILOT_BUILD_DIR
  [[ -x $RINGPILOT ]] || rp_die "$RINGPILOT missing: build the 'ringpilot' target (or set RINGPILOT_BUILD_DIR)"
  [[ -x $RINGPILOT_TRAINER_BIN ]] ||
    rp_die "$RINGPILOT_TRAINER_BIN missing: build the 'ringpilot-trainer' target (LibTorch build)"
  local tool
  for tool in mpirun python3 timeout; do
    command -v "$tool" >/dev/null || rp_die "'$tool' not found on PATH"
  done
  RP_BIN_STAMP=$(stat -c '%Y' "$RINGPILOT" "$RINGPILOT_TRAINER_BIN" | tr '\n' ' ')
  RP_TMP=$(mktemp -d "${TMPDIR:-/tmp}/ringpilot-it-$RP_TEST.XXXXXX")
  rp_log "work directory $RP_TMP; binaries from $RINGPILOT_BUILD_DIR"
}

# rp_run LIMIT_S OUT RUN_DIR JOB [--set K=V ...]: `ringpilot run` under `timeout`, output
# to OUT. Sets RP_RC to the exit status (124: timed out). Never fails by itself.
rp_run() {
  local limit=$1 out=$2 run_dir=$3 job=$4
  shift 4
  local t0=$SECONDS
  RP_RC=0
  # In the background and waited for, so that a signal to the test runs its cleanup now
  # (which stops the job) rather than after the job.
  timeout -k 20 "$limit" "$RINGPILOT" run "$job" --run-dir "$run_dir" "$@" >"$out" 2>&1 &
  RP_JOB_PID=$!
  wait "$RP_JOB_PID" || RP_RC=$?
  RP_JOB_PID=""
  rp_log "ringpilot run $(basename "$run_dir") $* -> exit $RP_RC ($((SECONDS - t0)) s)"
  if [[ $RP_RC -eq 124 || $RP_RC -eq 137 ]]; then
    rp_log "TIMED OUT after ${limit} s: $(basename "$run_dir")"
  fi
  return 0
}

# rp_tail FILE [N]: last lines of FILE on stderr (diagnostics of a failed job).
rp_tail() {
  local n=${2:-25}
  printf -- '---- last %d lines of %s ----\n' "$n" "$1" >&2
  tail -n "$n" "$1" >&2 || true
  printf -- '----\n' >&2
}

# rp_expect_ok NAME OUT RUN_DIR: row for a job that must exit 0 and write summary.json.
rp_expect_ok() {
  local name=$1 out=$2 run_dir=$3
  if [[ $RP_RC -eq 0 && -s $run_dir/summary.json ]]; then
    rp_row "$name" "exit 0, summary.json written" PASS
    return 0
  fi
  local why="exit $RP_RC"
  [[ $RP_RC -eq 124 || $RP_RC -eq 137 ]] && why="timed out (exit $RP_RC)"
  [[ -s $run_dir/summary.json ]] || why+=", no summary.json"
  rp_row "$name" "$why (see $out)" FAIL
  rp_tail "$out"
  return 1
}

# rp_json FILE KEY: the value of a top-level key (JSON null -> "null", missing -> "missing").
rp_json() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
try:
    with open(sys.argv[1]) as f:
        d = json.load(f)
except Exception as e:
    print("unreadable")
    sys.exit(0)
v = d.get(sys.argv[2], "missing") if isinstance(d, dict) else "missing"
print("null" if v is None else v)
EOF
}

# rp_finite X: X is a finite number.
rp_finite() {
  python3 -c 'import math,sys
try: v = float(sys.argv[1])
except ValueError: sys.exit(1)
sys.exit(0 if math.isfinite(v) else 1)' "$1"
}

# rp_reldiff A B: |A-B| / max(|A|,|B|) printed with 3 digits ("nan" if not numbers).
rp_reldiff() {
  python3 -c 'import math,sys
try:
    a, b = float(sys.argv[1]), float(sys.argv[2])
except ValueError:
    print("nan"); sys.exit(0)
if not (math.isfinite(a) and math.isfinite(b)): print("nan"); sys.exit(0)
d = abs(a - b); m = max(abs(a), abs(b))
print("%.3g" % (0.0 if d == 0 else d / m))' "$1" "$2"
}

# rp_le X LIMIT: X <= LIMIT (X "nan" is never).
rp_le() {
  python3 -c 'import math,sys
x = float(sys.argv[1]); sys.exit(0 if math.isfinite(x) and x <= float(sys.argv[2]) else 1)' "$1" "$2"
}

# rp_free_ports N: print a base port P such that P..P+N-1 are free on 127.0.0.1.
rp_free_ports() {
  python3 - "$1" <<'EOF'
import random, socket, sys
n = int(sys.argv[1])
# Below the kernel's ephemeral range: a port in it can be taken between this check and
# the exporter's listen by any outgoing connection (mpirun's own, for one).
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
top = min(low, 32768) - n
for _ in range(500):
    base = random.randint(20000, top)
    socks = []
    try:
        for p in range(base, base + n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", p))
            socks.append(s)
    except OSError:
        continue
    finally:
        for s in socks:
            s.close()
    print(base)
    sys.exit(0)
sys.exit("no free port range found")
EOF
}

# rp_finish: print the table (last) and exit 1 if any check failed.
rp_finish() {
  RP_DONE=1
  local total=$((SECONDS - RP_START_S)) row c d s w1=5 w2=6
  for row in "${RP_ROWS[@]}"; do
    IFS='|' read -r c d s <<<"$row"
    if ((${#c} > w1)); then w1=${#c}; fi
    if ((${#d} > w2)); then w2=${#d}; fi
  done
  if [[ -n $RP_BIN_STAMP &&
    $(stat -c '%Y' "$RINGPILOT" "$RINGPILOT_TRAINER_BIN" | tr '\n' ' ') != "$RP_BIN_STAMP" ]]; then
    RP_ROWS+=("binaries|ringpilot or ringpilot-trainer was rebuilt while the test ran|WARN")
  fi
  printf '\n== %s: results (%d s) ==\n' "$RP_TEST" "$total"
  printf "%-${w1}s  %-${w2}s  %s\n" check detail result
  for row in "${RP_ROWS[@]}"; do
    IFS='|' read -r c d s <<<"$row"
    printf "%-${w1}s  %-${w2}s  %s\n" "$c" "$d" "$s"
  done
  if ((RP_FAILS > 0)); then
    printf '%s: FAILED (%d failing check(s), %d s)\n' "$RP_TEST" "$RP_FAILS" "$total"
    exit 1
  fi
  printf '%s: PASSED (%d s)\n' "$RP_TEST" "$total"
  exit 0
}

# ---- "nodes" as network namespaces ----------------------------------------------------------
# Tests that need two hosts run each "node" in a network namespace joined to the root
# namespace by a bridge. The caller defines (readonly) SUBNET (a /24, e.g. 10.213.0.0/24),
# BRIDGE_IP, NODE_IPS, NS (namespace names ending in -$$), BR (bridge name ending in $$),
# VETH_HOST and VETH_NODE, then calls, in this order:
#   rp_netns_clean_stale NS_GLOB BR_PREFIX   leftovers of killed earlier runs of this test
#                                            (their PID suffix no longer runs) are removed;
#                                            anything else on SUBNET is an error
#   rp_netns_create                          namespaces, bridge and veth pairs, up
#   rp_netns_teardown                        from the test's EXIT cleanup: kills what still
#                                            runs inside the namespaces, removes everything
# and for mpirun between them rp_netns_tcp_probe and rp_netns_agent (below).
rp_netns_clean_stale() {
  local ns_glob=$1 br_prefix=$2 f pid p link net
  for f in /var/run/netns/$ns_glob; do
    [[ -e $f ]] || continue
    pid=${f##*-}
    if [[ $pid =~ ^[0-9]+$ ]] && ! kill -0 "$pid" 2>/dev/null; then
      rp_log "removing stale namespace ${f##*/} of an earlier run"
      for p in $(ip netns pids "${f##*/}" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
      ip netns del "${f##*/}" || true
    fi
  done
  for link in $(ip -o link show type bridge | awk -F': ' '{print $2}' |
    grep -E "^${br_prefix}[0-9]+\$" || true); do
    if ! kill -0 "${link#"$br_prefix"}" 2>/dev/null; then
      rp_log "removing stale bridge $link of an earlier run"
      ip link del "$link" || true
    fi
  done
  net=${SUBNET%.0/24}
  if ip -4 -o addr show | grep -qF " ${net}."; then
    rp_die "$SUBNET is already configured on this host ($(ip -4 -o addr show | grep -F " ${net}." |
      awk '{print $2}' | tr '\n' ' ')): a leftover of an interrupted run? Remove it first"
  fi
}

rp_netns_create() {
  local err i
  if ! err=$(ip netns add "${NS[0]}" 2>&1); then
    rp_die "'ip netns add ${NS[0]}' is not permitted here ($err): this test needs root with CAP_SYS_ADMIN and CAP_NET_ADMIN (CI runs it as root)"
  fi
  for ((i = 1; i < ${#NS[@]}; i++)); do ip netns add "${NS[i]}"; done
  ip link add name "$BR" type bridge
  ip addr add "$BRIDGE_IP/24" dev "$BR"
  ip link set "$BR" up
  for ((i = 0; i < ${#NS[@]}; i++)); do
    ip link add "${VETH_HOST[i]}" type veth peer name "${VETH_NODE[i]}"
    ip link set "${VETH_HOST[i]}" master "$BR"
    ip link set "${VETH_HOST[i]}" up
    ip link set "${VETH_NODE[i]}" netns "${NS[i]}"
    ip -n "${NS[i]}" addr add "${NODE_IPS[i]}/24" dev "${VETH_NODE[i]}"
    ip -n "${NS[i]}" link set "${VETH_NODE[i]}" up
    ip -n "${NS[i]}" link set lo up
  done
}

rp_netns_teardown() {
  local ns pid veth
  for ns in "${NS[@]}"; do
    if [[ -e /var/run/netns/$ns ]]; then
      # Processes of the test still inside the namespace (a hung rank, a daemon) go first.
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
      ip netns del "$ns" || rp_log "could not delete netns $ns"
    fi
  done
  if ip link show "$BR" >/dev/null 2>&1; then ip link del "$BR" || rp_log "could not delete $BR"; fi
  for veth in "${VETH_HOST[@]}"; do
    if ip link show "$veth" >/dev/null 2>&1; then ip link del "$veth" || true; fi
  done
}

# rp_netns_agent FILE LOG: writes mpirun's rsh agent to FILE: `FILE HOST COMMAND...` runs
# COMMAND (words a remote shell would interpret, as ssh does) in the namespace of HOST (one
# of NODE_IPS) under that namespace's name as host name (`ip netns exec NS unshare --uts`),
# and appends "HOST NS" to LOG. mpirun takes it with `--mca plm_rsh_agent FILE --mca
# plm_rsh_no_tree_spawn 1`.
rp_netns_agent() {
  local file=$1 log=$2 i cases=""
  for ((i = 0; i < ${#NS[@]}; i++)); do
    cases+="  ${NODE_IPS[i]}) ns=${NS[i]} ;;"$'\n'
  done
  cat >"$file" <<EOF
#!/bin/sh
# mpirun's rsh agent: agent.sh HOST COMMAND... runs COMMAND in HOST's network namespace.
host=\$1
shift
case \$host in
$cases  *) echo "agent.sh: unknown host '\$host'" >&2; exit 255 ;;
esac
echo "\$host \$ns" >>'$log'
exec ip netns exec "\$ns" unshare --uts sh -c 'hostname "\$1" && shift && exec sh -c "\$*"' agent "\$ns" "\$@"
EOF
  chmod +x "$file"
}

# rp_netns_tcp_probe FROM_NS|- TO_NS IP: a TCP connection from FROM_NS (- = the root
# namespace) to a listener on IP in TO_NS works (what mpirun and the ranks need; a bridge
# behind br_netfilter with a FORWARD DROP policy breaks it). Needs RP_TMP.
rp_netns_tcp_probe() {
  local from=$1 to=$2 ip=$3 lpid rc=0 probe=$RP_TMP/tcp_probe.py
  if [[ ! -f $probe ]]; then
    cat >"$probe" <<'EOF'
import socket, sys, time
mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "listen":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port)); s.listen(1); s.settimeout(10)
    c, _ = s.accept(); c.sendall(b"ok"); c.close()
else:
    for _ in range(50):
        try:
            c = socket.create_connection((host, port), timeout=2); break
        except OSError:
            time.sleep(0.1)
    else:
        sys.exit("cannot connect to %s:%d" % (host, port))
    sys.exit(0 if c.recv(2) == b"ok" else 1)
EOF
  fi
  ip netns exec "$to" python3 "$probe" listen "$ip" 45123 &
  lpid=$!
  if [[ $from == - ]]; then
    timeout 15 python3 "$probe" connect "$ip" 45123 || rc=$?
  else
    timeout 15 ip netns exec "$from" python3 "$probe" connect "$ip" 45123 || rc=$?
  fi
  wait "$lpid" || rc=$?
  return "$rc"
}
