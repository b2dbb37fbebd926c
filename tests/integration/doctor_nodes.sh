#!/usr/bin/env bash
# `ringpilot doctor` across two "nodes": network namespaces rp-d1-PID and rp-d2-PID joined by
# a bridge (bridge 10.215.0.254/24, nodes 10.215.0.1 and .2), reached by mpirun through an
# rsh agent that runs the remote command in the node's namespace under its own host name
# (the technique of two_nodes_netns.sh, on its own subnet). Checks:
#   - `doctor --hosts` (agent through OMPI_MCA_* variables): one JSON report per node, both
#     host names present, the cross-node checks PASS, exit 0 when no check FAILs;
#   - `doctor --job` (agent from the job's launch.mpirun_args) with a 16 MiB /dev/shm on node
#     2 only, node 1 reporting 3 s later: exit 1, dev_shm FAIL on node 2 and not on node 1;
#     the Prometheus file names both.
# Needs root; no trainer (the doctor only). Everything created is removed on exit.
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/doctor_nodes.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# rp_init without the trainer check: only `ringpilot` and mpirun run here.
RP_TEST=doctor_nodes
# shellcheck disable=SC2034  # read by rp_finish (lib.sh)
RP_START_S=$SECONDS
trap rp_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
RINGPILOT_SOURCE_DIR=${RINGPILOT_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
RINGPILOT_BUILD_DIR=${RINGPILOT_BUILD_DIR:-$RINGPILOT_SOURCE_DIR/build}
RINGPILOT=$RINGPILOT_BUILD_DIR/bin/ringpilot
RP_TMP=$(mktemp -d "${TMPDIR:-/tmp}/ringpilot-it-$RP_TEST.XXXXXX")
[[ -x $RINGPILOT ]] || rp_die "$RINGPILOT missing: build the 'ringpilot' target"
readonly LIMIT_S=120 SUBNET=10.215.0.0/24 BRIDGE_IP=10.215.0.254
readonly NODE_IPS=(10.215.0.1 10.215.0.2)
readonly NS=("rp-d1-$$" "rp-d2-$$")
readonly BR="rpdbr$$" VETH_HOST=("rpd1h$$" "rpd2h$$") VETH_NODE=("rpd1n$$" "rpd2n$$")

[[ $(id -u) -eq 0 ]] || rp_die "needs root to create network namespaces (run as root; CI does)"
for tool in ip unshare hostname mpirun python3 timeout; do
  command -v "$tool" >/dev/null || rp_die "'$tool' not found"
done
rp_netns_clean_stale 'rp-d[12]-*' rpdbr

rp_on_exit rp_netns_teardown

rp_netns_create

# rsh agent: agent.sh HOST COMMAND... in HOST's namespace under HOST's node name; with
# $RP_TMP/small-shm present, node 2 also gets a private 16 MiB /dev/shm.
agent=$RP_TMP/agent.sh
cat >"$agent" <<EOF
#!/bin/sh
host=\$1
shift
small=
case \$host in
  ${NODE_IPS[0]}) ns=${NS[0]} ;;
  ${NODE_IPS[1]}) ns=${NS[1]}; [ -e '$RP_TMP/small-shm' ] && small=1 ;;
  *) echo "agent.sh: unknown host '\$host'" >&2; exit 255 ;;
esac
exec ip netns exec "\$ns" unshare --uts --mount sh -c 'mount --make-rprivate / && if [ -n "\$2" ]; then mount -t tmpfs -o size=16m tmpfs /dev/shm; fi && hostname "\$1" && shift 2 && exec sh -c "\$*"' agent "\$ns" "\$small" "\$@"
EOF
chmod +x "$agent"
rp_row "network" "${NS[0]}=${NODE_IPS[0]}, ${NS[1]}=${NODE_IPS[1]}, bridge $BR" PASS

# field FILE EXPR: a Python expression over the JSON document `d` ("error" if unreadable).
field() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    print(eval(sys.argv[2]))
except Exception as e:
    print("error: %s" % e)
EOF
}
node_of() { echo "${NS[$1]} (${NODE_IPS[$1]})"; }

# --- 1: --hosts, healthy nodes -------------------------------------------------------------
out=$RP_TMP/hosts.json
rc=0
t0=$SECONDS
OMPI_MCA_plm_rsh_agent=$agent OMPI_MCA_plm_rsh_no_tree_spawn=1 \
  OMPI_MCA_oob_tcp_if_include=$SUBNET OMPI_MCA_btl_tcp_if_include=$SUBNET \
  timeout -k 10 "$LIMIT_S" "$RINGPILOT" doctor --hosts "${NODE_IPS[0]}:2,${NODE_IPS[1]}:2" \
  --device cpu --json >"$out" 2>"$RP_TMP/hosts.err" || rc=$?
rp_log "doctor --hosts -> exit $rc ($((SECONDS - t0)) s)"
nodes=$(field "$out" "','.join(sorted(d['nodes']))")
want="$(node_of 0),$(node_of 1)"
if [[ $nodes == "$want" ]]; then
  rp_row "--hosts: both nodes" "$nodes" PASS
else
  rp_row "--hosts: both nodes" "got '$nodes', want '$want'" FAIL
  rp_tail "$RP_TMP/hosts.err"
fi
fails=$(field "$out" "sum(c['status'] == 'FAIL' for c in d['checks'])")
want_rc=$([[ $fails == 0 ]] && echo 0 || echo 1)
if [[ $rc == "$want_rc" ]]; then
  rp_row "--hosts: exit status" "exit $rc with $fails FAIL checks" PASS
else
  rp_row "--hosts: exit status" "exit $rc with $fails FAIL checks (want $want_rc)" FAIL
fi
cross=$(field "$out" "' '.join(c['name'] + '=' + c['status'] for c in d['checks'] if c['node'] == '*' and c['name'] in ('nodes_reported', 'same_mpi', 'same_gpu_count'))")
if [[ $cross == "nodes_reported=PASS same_mpi=PASS same_gpu_count=PASS" ]]; then
  rp_row "--hosts: cross-node checks" "$cross" PASS
else
  rp_row "--hosts: cross-node checks" "$cross" FAIL
fi

# --- 2: --job, node 2 with a 16 MiB /dev/shm --------------------------------------------------
cat >"$RP_TMP/job.yaml" <<EOF
name: it-doctor-nodes
world: {nodes: 2, procs_per_node: 1, device: cpu}
launch:
  backend: mpi
  hosts: ["${NODE_IPS[0]}:1", "${NODE_IPS[1]}:1"]
  mpirun_args: [--mca, plm_rsh_agent, "$agent", --mca, plm_rsh_no_tree_spawn, "1",
                --mca, oob_tcp_if_include, "$SUBNET", --mca, btl_tcp_if_include, "$SUBNET"]
model: {name: resnet18-cifar}
EOF
touch "$RP_TMP/small-shm"
# Node 1 reports last: its mpi check (the nested `mpirun -np 2 true`) takes 3 s more, so
# node 2, whose FAIL is found at once, has exited long before. A node exiting non-zero made
# mpirun abort the job and lose node 1's report (one CI run did so by chance).
slow_mpirun=$RP_TMP/slow-node1-mpirun.sh
cat >"$slow_mpirun" <<'EOF'
#!/bin/bash
if [[ $(hostname) == rp-d1-* && " $* " == *" -np 2 true "* ]]; then sleep 3; fi
exec mpirun "$@"
EOF
chmod +x "$slow_mpirun"
out=$RP_TMP/job.json
rc=0
t0=$SECONDS
RINGPILOT_MPIRUN=$slow_mpirun timeout -k 10 "$LIMIT_S" "$RINGPILOT" doctor --job "$RP_TMP/job.yaml" --json \
  --prometheus "$RP_TMP/doctor.prom" >"$out" 2>"$RP_TMP/job.err" || rc=$?
rp_log "doctor --job -> exit $rc ($((SECONDS - t0)) s)"
shm=$(field "$out" "' '.join(c['node'].split()[0] + '=' + c['status'] for c in d['checks'] if c['name'] == 'dev_shm')")
want="${NS[0]}=PASS ${NS[1]}=FAIL"
if [[ $rc == 1 && $shm == "$want" ]]; then
  rp_row "--job: small /dev/shm on node 2" "exit 1; dev_shm $shm" PASS
else
  rp_row "--job: small /dev/shm on node 2" "exit $rc; dev_shm '$shm' (want exit 1; $want)" FAIL
  rp_tail "$RP_TMP/job.err"
fi
if grep -q "node=\"${NS[1]} (${NODE_IPS[1]})\",check=\"dev_shm\",status=\"FAIL\"} 1" "$RP_TMP/doctor.prom" &&
  grep -q "node=\"${NS[0]} (${NODE_IPS[0]})\",check=\"dev_shm\",status=\"PASS\"} 1" "$RP_TMP/doctor.prom"; then
  rp_row "--prometheus" "dev_shm per node with node labels" PASS
else
  rp_row "--prometheus" "node-labelled dev_shm series missing in $RP_TMP/doctor.prom" FAIL
fi
if command -v promtool >/dev/null; then
  if promtool check metrics <"$RP_TMP/doctor.prom" >"$RP_TMP/promtool.out" 2>&1; then
    rp_row "promtool check metrics" "ok" PASS
  else
    rp_row "promtool check metrics" "$(head -c 200 "$RP_TMP/promtool.out")" FAIL
  fi
fi

rp_finish
