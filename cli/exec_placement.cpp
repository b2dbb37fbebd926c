#include "cli/exec_placement.h"

#include <unistd.h>

#include <optional>
#include <stdexcept>

#include "base/files.h"
#include "base/run_variables.h"
#include "history/rank_files.h"
#include "topology/affinity.h"
#include "topology/node_topology.h"
#include "topology/plan.h"
#include "topology/probe.h"

namespace ringpilot::cli {
namespace {

int IntOf(const base::Environment& env, const char* name) {
  const std::string v = base::Lookup(env, name, "0");
  try {
    return std::stoi(v);
  } catch (const std::exception&) {
    return 0;  // ComputeTorchrunEnv checked the values it set; a user's odd one counts as 0
  }
}

}  // namespace

ExecPlacement PlaceExecRank(const base::Environment& env, const std::string& bind,
                            const std::string& device) {
  const std::optional<topology::BindPolicy> policy = topology::ParseBindPolicy(bind);
  if (!policy) {
    throw std::invalid_argument("--bind '" + bind + "': expected auto, numa, cores or none");
  }
  if (device != "auto" && device != "cuda" && device != "cpu") {
    throw std::invalid_argument("--device '" + device + "': expected auto, cuda or cpu");
  }
  ExecPlacement out;
  out.env = env;
  topology::NodeTopology node;
  const std::string snapshot = base::Lookup(env, "RINGPILOT_TOPOLOGY_SNAPSHOT", "");
  if (!snapshot.empty()) {
    try {
      node = topology::LoadSnapshot(snapshot);
    } catch (const topology::SnapshotError& e) {
      throw std::runtime_error(std::string("RINGPILOT_TOPOLOGY_SNAPSHOT: ") + e.what());
    }
  } else {
    node = topology::ProbeNode();  // never throws: a missing source is a warning
  }
  node.hostname = base::HostName();

  topology::PlanInput in;
  in.rank = IntOf(env, "RANK");
  in.local_rank = IntOf(env, "LOCAL_RANK");
  in.local_size = IntOf(env, "LOCAL_WORLD_SIZE");
  in.cuda = device == "cuda" || (device == "auto" && !node.gpus.empty());
  in.bind = *policy;
  in.allowed_cpus = topology::CurrentAffinity();
  for (const char* key :
       {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME"}) {
    const auto it = env.find(key);
    if (it != env.end()) in.env[key] = it->second;
  }
  topology::RankPlan plan = topology::PlanRank(node, in);
  for (const auto& [key, value] : plan.nccl_env) out.env.emplace(key, value);
  if (!plan.cpus.empty()) {
    try {
      topology::BindProcess(plan.cpus);
      out.bound_cpus = static_cast<int>(plan.cpus.size());
    } catch (const std::runtime_error& e) {
      plan.warnings.push_back(std::string(e.what()) + ": running unbound");
      plan.cpus.clear();
      plan.binding = "none (binding failed)";
    }
  }
  out.lines.push_back("ringpilot exec: placement (--bind " + topology::ToString(in.bind) +
                      "): " + topology::FormatPlanLine(plan));
  for (const std::string& w : plan.warnings) {
    out.lines.push_back("ringpilot exec: placement: warning: " + w);
  }
  out.lines.push_back("ringpilot exec: placement: affinity " +
                      topology::FormatCpuList(topology::CurrentAffinity()));

  const std::string run_dir = base::Lookup(env, base::kRunDirVar, "");
  if (in.local_rank == 0 && !run_dir.empty()) {
    const std::string path = history::TopologySnapshotPath(run_dir + "/logs", node.hostname);
    try {
      base::MakeDirs(run_dir + "/logs");
      base::WriteFileAtomically(path, topology::ToJson(node).dump(2) + "\n");
    } catch (const base::FileError& e) {
      out.lines.push_back(std::string("ringpilot exec: placement: warning: ") + e.what() +
                          " (diagnose will not know the expected bus bandwidth)");
    }
  }
  return out;
}

}  // namespace ringpilot::cli
