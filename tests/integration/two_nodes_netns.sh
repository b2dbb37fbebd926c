#!/usr/bin/env bash
# Two "nodes" on one machine: network namespaces rp-n1-PID and rp-n2-PID joined by a
# bridge in the root namespace (bridge 10.213.0.254/24, nodes 10.213.0.1 and .2). mpirun
# reaches them through an rsh agent script that runs the remote command in the node's
# namespace under its own host name (`ip netns exec NS unshare --uts`). A 2-node x 2-rank
# resnet18-cifar job (sync_batchnorm) through `launch.backend: mpi` must reach the
# weights of the same job run locally with 4 ranks (relative difference of param_norm and
# param_abs_sum <= 1e-6), and its rank logs must name the two nodes.
#
# Needs root (CI runs as root). Everything created is removed on exit.
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/two_nodes_netns.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init two_nodes_netns

readonly TOL=1e-6 JOB_LIMIT_S=300 SUBNET=10.213.0.0/24 BRIDGE_IP=10.213.0.254
readonly NODE_IPS=(10.213.0.1 10.213.0.2)
readonly NS=("rp-n1-$$" "rp-n2-$$")
readonly BR="rpbr$$" VETH_HOST=("rpv1h$$" "rpv2h$$") VETH_NODE=("rpv1n$$" "rpv2n$$")

[[ $(id -u) -eq 0 ]] || rp_die "needs root to create network namespaces (run as root; CI does)"
for tool in ip unshare hostname; do
  command -v "$tool" >/dev/null || rp_die "'$tool' not found (iproute2, util-linux)"
done
# Leftovers of a killed earlier run of this test (rp-nK-PID, rpbrPID) are removed.
rp_netns_clean_stale 'rp-n[12]-*' rpbr

# --- namespaces, bridge, veth pairs (torn down on exit) ------------------------------------
rp_on_exit rp_netns_teardown

rp_netns_create
rp_row "network" "${NS[0]}=${NODE_IPS[0]}, ${NS[1]}=${NODE_IPS[1]}, bridge $BR=$BRIDGE_IP" PASS

# TCP from node 1 to node 2 and from the root namespace to node 1 (what mpirun and the
# ranks need). br_netfilter with a FORWARD DROP policy would break the first.
if rp_netns_tcp_probe "${NS[0]}" "${NS[1]}" "${NODE_IPS[1]}" && rp_netns_tcp_probe - "${NS[0]}" "${NODE_IPS[0]}"; then
  rp_row "tcp probe" "node1 -> node2 and root -> node1 connect" PASS
else
  nf=$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null || echo n/a)
  rp_die "no TCP between the namespaces (net.bridge.bridge-nf-call-iptables=$nf; a FORWARD DROP firewall policy blocks bridged traffic)"
fi

# --- rsh agent -----------------------------------------------------------------------------
agent=$RP_TMP/agent.sh
agent_log=$RP_TMP/agent.log
rp_netns_agent "$agent" "$agent_log"

# --- the jobs ------------------------------------------------------------------------------
common=$(
  cat <<'EOF'
model: {name: resnet18-cifar, sync_batchnorm: true}
data: {kind: synthetic, batch_per_rank: 2}
train: {steps: 5, optimizer: sgd, lr: 0.01, seed: 0, threads_per_rank: 1, log_every_s: 60}
comm: {bucket_mb: 1.3, first_bucket_mb: 0.3}
checkpoint: {every_steps: 0, keep: 1}
metrics: {enabled: false}
EOF
)
cat >"$RP_TMP/local.yaml" <<EOF
name: it-two-nodes
world: {nodes: 1, procs_per_node: 4, device: cpu}
launch: {backend: local, max_restarts: 0}
$common
EOF
cat >"$RP_TMP/nodes.yaml" <<EOF
name: it-two-nodes
world: {nodes: 2, procs_per_node: 2, device: cpu}
launch:
  backend: mpi
  max_restarts: 0
  hosts: ["${NODE_IPS[0]}:2", "${NODE_IPS[1]}:2"]
  mpirun_args: [--mca, plm_rsh_agent, "$agent", --mca, plm_rsh_no_tree_spawn, "1",
                --mca, oob_tcp_if_include, "$SUBNET", --mca, btl_tcp_if_include, "$SUBNET",
                --mca, btl, "self,vader,tcp"]
$common
EOF

nodes=$RP_TMP/nodes
rp_run "$JOB_LIMIT_S" "$nodes.out" "$nodes" "$RP_TMP/nodes.yaml"
nodes_ok=1
rp_expect_ok "2 nodes x 2 ranks (mpi)" "$nodes.out" "$nodes" || nodes_ok=0
local_run=$RP_TMP/local
rp_run "$JOB_LIMIT_S" "$local_run.out" "$local_run" "$RP_TMP/local.yaml"
local_ok=1
rp_expect_ok "1 node x 4 ranks (local)" "$local_run.out" "$local_run" || local_ok=0

# mpirun went through the agent, once per node.
if [[ -s $agent_log ]] && grep -q "${NS[0]}" "$agent_log" && grep -q "${NS[1]}" "$agent_log"; then
  rp_row "rsh agent" "launched on ${NS[0]} and ${NS[1]}" PASS
else
  rp_row "rsh agent" "not used for both nodes ($(tr '\n' ';' <"$agent_log" 2>/dev/null))" FAIL
fi

# Ranks 0,1 on node 1 and 2,3 on node 2 (ppr:2:node), and each rank's log names its node.
names=""
log_problems=""
for r in 0 1 2 3; do
  want=${NS[r / 2]}
  other=${NS[1 - r / 2]}
  f=$nodes/logs/rank-$r.log
  # The start line "rank R/N on HOST" (rank 0's cluster view names every node).
  self_line=$(grep -m1 " rank $r/[0-9]* on " "$f" 2>/dev/null || true)
  if [[ ! -e $f ]]; then
    log_problems+=" $r:no-log"
  elif [[ ! -s $f ]]; then
    log_problems+=" $r:empty"
  elif grep -qw -- "$other" <<<"$self_line"; then
    log_problems+=" $r:names-$other"
  elif grep -qw -- "$want" <<<"$self_line"; then
    names+=" $r:$want"
  else
    log_problems+=" $r:no-node-name"
  fi
done
if [[ -z $log_problems ]]; then
  rp_row "node names" "rank logs name two nodes:$names" PASS
else
  rp_row "node names" "rank logs (want 0,1 on ${NS[0]}; 2,3 on ${NS[1]}):$log_problems" FAIL
fi

if ((nodes_ok && local_ok)); then
  ws=$(rp_json "$nodes/summary.json" world_size)
  if [[ $ws == 4 ]]; then rp_row "world size" "4 ranks" PASS; else rp_row "world size" "$ws, want 4" FAIL; fi
  n1=$(rp_json "$nodes/summary.json" param_norm)
  n2=$(rp_json "$local_run/summary.json" param_norm)
  a1=$(rp_json "$nodes/summary.json" param_abs_sum)
  a2=$(rp_json "$local_run/summary.json" param_abs_sum)
  if rp_finite "$n1" && rp_finite "$n2" && rp_finite "$a1" && rp_finite "$a2"; then
    dn=$(rp_reldiff "$n1" "$n2")
    da=$(rp_reldiff "$a1" "$a2")
    if rp_le "$dn" "$TOL" && rp_le "$da" "$TOL"; then
      rp_row "2x2 vs 1x4 weights" "rel diff norm $dn, abs_sum $da (<= $TOL)" PASS
    else
      rp_row "2x2 vs 1x4 weights" "rel diff norm $dn, abs_sum $da (want <= $TOL)" FAIL
    fi
  else
    rp_row "2x2 vs 1x4 weights" "not finite: norms $n1, $n2; abs sums $a1, $a2" FAIL
  fi
fi

rp_finish
