#include "topology/plan.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <set>

#include "topology/placement.h"

namespace ringpilot::topology {
namespace {

const char* const kPolicyNames[] = {"auto", "numa", "cores", "none"};

std::string Get(const std::map<std::string, std::string>& env, const std::string& key) {
  const auto it = env.find(key);
  return it == env.end() ? std::string() : it->second;
}

bool Has(const std::map<std::string, std::string>& env, const std::string& key) {
  return env.count(key) > 0;
}

std::vector<int> Intersect(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::string Trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool AllDigits(const std::string& s) {
  return !s.empty() && s.size() < 9 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The NVML index of the GPU local rank `local_rank` drives, or -1 (with a warning).
int ResolveGpu(const NodeTopology& node, const std::map<std::string, std::string>& env,
               int local_rank, std::vector<std::string>* warnings) {
  if (node.gpus.empty()) {
    if (warnings) warnings->push_back("no GPU in the node's topology: GPU, NIC and CPUs unplanned");
    return -1;
  }
  if (!Has(env, "CUDA_VISIBLE_DEVICES")) {
    std::vector<int> indices;
    for (const Gpu& g : node.gpus) indices.push_back(g.index);
    std::sort(indices.begin(), indices.end());
    return indices[static_cast<std::size_t>(local_rank) % indices.size()];
  }
  // CUDA reads the list up to the first entry it cannot parse.
  std::vector<std::string> entries;
  const std::string cvd = Get(env, "CUDA_VISIBLE_DEVICES");
  std::size_t start = 0;
  while (start <= cvd.size()) {
    const std::size_t comma = cvd.find(',', start);
    const std::string e =
        Trim(cvd.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (e.empty() || (!AllDigits(e) && e.rfind("GPU-", 0) != 0)) break;
    entries.push_back(e);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (entries.empty()) {
    if (warnings) {
      warnings->push_back("CUDA_VISIBLE_DEVICES='" + cvd + "' makes no GPU visible (or uses MIG " +
                          "ids): GPU not planned");
    }
    return -1;
  }
  const std::string& e = entries[static_cast<std::size_t>(local_rank) % entries.size()];
  if (AllDigits(e)) {
    const int index = std::stoi(e);
    if (node.FindGpu(index)) return index;
    if (warnings) warnings->push_back("CUDA_VISIBLE_DEVICES names GPU " + e + ", not on this node");
    return -1;
  }
  const Gpu* match = nullptr;
  int matches = 0;
  for (const Gpu& g : node.gpus) {
    if (!g.uuid.empty() && g.uuid.rfind(e, 0) == 0) {
      match = &g;
      ++matches;
    }
  }
  if (matches == 1) return match->index;
  if (warnings) {
    warnings->push_back("CUDA_VISIBLE_DEVICES entry " + e +
                        (matches ? " matches several GPUs" : " matches no GPU UUID") +
                        ": GPU not planned");
  }
  return -1;
}

// Binds to cpus[i] of the ranks that share `group` (the local ranks `members`), or to the
// whole group, per policy.
void ChooseWithinGroup(const std::vector<int>& group, const std::string& what,
                       const std::vector<int>& members, int local_rank, bool split,
                       RankPlan* plan) {
  if (!split) {
    plan->cpus = group;
    plan->binding = what;
    return;
  }
  const int m = static_cast<int>(members.size());
  const int pos =
      static_cast<int>(std::find(members.begin(), members.end(), local_rank) - members.begin());
  const auto parts = SplitCpus(group, m);
  if (parts.empty()) {
    plan->warnings.push_back(std::to_string(m) + " ranks share " + std::to_string(group.size()) +
                             " CPU(s) of " + what + " (" + FormatCpuList(group) +
                             "): fewer CPUs than ranks, not binding");
    plan->binding = "none (fewer CPUs than ranks)";
    return;
  }
  plan->cpus = parts[static_cast<std::size_t>(pos)];
  plan->binding =
      m == 1 ? what : "cores " + std::to_string(pos + 1) + "/" + std::to_string(m) + " of " + what;
}

void PlanCpuRank(const NodeTopology& node, const PlanInput& in, const std::vector<int>& usable,
                 bool split, RankPlan* plan) {
  struct Group {
    std::string what;
    std::vector<int> cpus;
  };
  std::vector<Group> groups;
  for (const NumaNode& n : node.numa_nodes) {
    std::vector<int> c = Intersect(n.cpus, usable);
    if (!c.empty()) groups.push_back({"numa " + std::to_string(n.id), std::move(c)});
  }
  std::sort(groups.begin(), groups.end(),
            [](const Group& a, const Group& b) { return a.cpus.front() < b.cpus.front(); });
  if (groups.empty()) groups.push_back({"the allowed CPUs", usable});
  const long k = static_cast<long>(groups.size());
  const long ls = std::max(1, in.local_size);
  const long lr = std::clamp<long>(in.local_rank, 0, ls - 1);
  if (ls <= k) {
    // Whole NUMA nodes per rank: [lr*k/ls, (lr+1)*k/ls).
    std::string what;
    for (long g = lr * k / ls; g < (lr + 1) * k / ls; ++g) {
      plan->cpus.insert(plan->cpus.end(), groups[g].cpus.begin(), groups[g].cpus.end());
      what += (what.empty() ? "" : "+") + groups[g].what;
    }
    std::sort(plan->cpus.begin(), plan->cpus.end());
    plan->binding = what;
    return;
  }
  // More ranks than NUMA nodes: rank j goes to node j*k/ls.
  const long mine = lr * k / ls;
  std::vector<int> members;
  for (long j = 0; j < ls; ++j) {
    if (j * k / ls == mine) members.push_back(static_cast<int>(j));
  }
  ChooseWithinGroup(groups[mine].cpus, groups[mine].what, members, static_cast<int>(lr), split,
                    plan);
}

}  // namespace

std::string ToString(BindPolicy p) { return kPolicyNames[static_cast<int>(p)]; }

std::optional<BindPolicy> ParseBindPolicy(const std::string& s) {
  for (int i = 0; i < 4; ++i) {
    if (s == kPolicyNames[i]) return static_cast<BindPolicy>(i);
  }
  return std::nullopt;
}

std::vector<std::vector<int>> SplitCpus(const std::vector<int>& cpus, int chunks) {
  if (chunks < 1 || cpus.size() < static_cast<std::size_t>(chunks)) return {};
  std::vector<std::vector<int>> runs;
  for (std::size_t i = 0; i < cpus.size(); ++i) {
    if (i == 0 || cpus[i] != cpus[i - 1] + 1) runs.emplace_back();
    runs.back().push_back(cpus[i]);
  }
  const std::size_t m = static_cast<std::size_t>(chunks);
  const bool per_run = std::all_of(runs.begin(), runs.end(),
                                   [m](const std::vector<int>& r) { return r.size() >= m; });
  if (!per_run) runs = {cpus};
  std::vector<std::vector<int>> out(m);
  for (const auto& run : runs) {
    for (std::size_t i = 0; i < m; ++i) {
      const std::size_t b = i * run.size() / m, e = (i + 1) * run.size() / m;
      out[i].insert(out[i].end(), run.begin() + static_cast<long>(b),
                    run.begin() + static_cast<long>(e));
    }
  }
  for (auto& c : out) std::sort(c.begin(), c.end());
  return out;
}

RankPlan PlanRank(const NodeTopology& node, const PlanInput& in) {
  RankPlan plan;
  plan.rank = in.rank;
  plan.local_rank = in.local_rank;
  plan.node = node.hostname;

  // GPU and NIC.
  if (in.cuda) {
    plan.gpu_index = ResolveGpu(node, in.env, in.local_rank, &plan.warnings);
    if (const Gpu* gpu = node.FindGpu(plan.gpu_index)) {
      plan.gpu_uuid = gpu->uuid;
      plan.pci_bus_id = gpu->pci_bus_id;
      if (in.local_size > static_cast<int>(node.gpus.size())) {
        plan.warnings.push_back(std::to_string(in.local_size) + " ranks share " +
                                std::to_string(node.gpus.size()) + " GPU(s) on " + node.hostname);
      }
    }
    if (!Has(in.env, "CUDA_DEVICE_ORDER")) {
      plan.nccl_env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
    } else if (Get(in.env, "CUDA_DEVICE_ORDER") != "PCI_BUS_ID") {
      plan.warnings.push_back("CUDA_DEVICE_ORDER=" + Get(in.env, "CUDA_DEVICE_ORDER") +
                              ": CUDA device numbers may not follow the PCI (NVML) order the "
                              "plan assumes");
    }
    if (plan.gpu_index >= 0) {
      if (const auto name = NcclNic(node, plan.gpu_index)) {
        const Nic* nic = node.FindNic(*name);
        plan.nic = *name;
        const std::string key =
            nic->kind == NicKind::kEthernet ? "NCCL_SOCKET_IFNAME" : "NCCL_IB_HCA";
        if (!Has(in.env, key)) plan.nccl_env[key] = "=" + *name;
      } else if (!node.nics.empty()) {
        plan.warnings.push_back("no NIC of " + node.hostname +
                                " is up: NCCL's network choice left alone");
      }
    }
  }

  // CPUs.
  std::vector<int> all = node.AllCpus();
  std::vector<int> allowed = in.allowed_cpus;
  std::sort(allowed.begin(), allowed.end());
  allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());
  std::vector<int> usable = allowed.empty() ? all : all.empty() ? allowed : Intersect(all, allowed);
  if (in.bind == BindPolicy::kNone) {
    plan.binding = "none (placement.bind)";
    return plan;
  }
  if (usable.empty()) {
    plan.warnings.push_back("none of the node's CPUs (" + FormatCpuList(all) +
                            ") is in the process's affinity (" + FormatCpuList(allowed) +
                            "): not binding");
    plan.binding = "none (no usable CPU)";
    return plan;
  }
  const bool gpu_rank = in.cuda && plan.gpu_index >= 0;
  const BindPolicy policy = in.bind != BindPolicy::kAuto ? in.bind
                            : gpu_rank                   ? BindPolicy::kNuma
                                                         : BindPolicy::kCores;
  const bool split = policy == BindPolicy::kCores;
  if (!gpu_rank) {
    PlanCpuRank(node, in, usable, split, &plan);
    return plan;
  }
  // GPU ranks: the CPUs of the GPU's NUMA node, shared by the local ranks whose GPU has
  // the same CPU set.
  auto group_of = [&](int gpu_index, std::string* what) {
    std::vector<int> g = Intersect(GpuCpuSet(node, gpu_index), usable);
    const Gpu* gpu = node.FindGpu(gpu_index);
    if (what) {
      *what = gpu && gpu->numa_node >= 0 ? "numa " + std::to_string(gpu->numa_node) : "all CPUs";
    }
    if (g.empty()) {
      if (what) *what = "the allowed CPUs";
      return usable;
    }
    return g;
  };
  std::string what;
  const std::vector<int> group = group_of(plan.gpu_index, &what);
  if (what == "the allowed CPUs") {
    plan.warnings.push_back("the CPUs near GPU " + std::to_string(plan.gpu_index) +
                            " are outside the process's affinity " + FormatCpuList(usable) +
                            ": binding to the allowed CPUs");
  }
  std::vector<int> members;
  for (int j = 0; j < std::max(1, in.local_size); ++j) {
    const int g = j == in.local_rank ? plan.gpu_index : ResolveGpu(node, in.env, j, nullptr);
    if (g >= 0 && group_of(g, nullptr) == group) members.push_back(j);
  }
  ChooseWithinGroup(group, what, members, in.local_rank, split, &plan);
  return plan;
}

std::string FormatPlanLine(const RankPlan& p) {
  std::string line = "rank " + std::to_string(p.rank) + " node " + p.node + " local " +
                     std::to_string(p.local_rank) + " gpu ";
  if (p.gpu_index < 0) {
    line += "-";
  } else {
    line += std::to_string(p.gpu_index);
    if (!p.pci_bus_id.empty()) line += " (" + p.pci_bus_id + ")";
  }
  line += " nic " + (p.nic.empty() ? std::string("-") : p.nic);
  line += " cpus " + (p.cpus.empty() ? std::string("-") : FormatCpuList(p.cpus)) + " (" +
          p.binding + ")";
  std::string env;
  for (const auto& [k, v] : p.nccl_env) env += " " + k + "=" + v;
  if (!env.empty()) line += " env" + env;
  return line;
}

}  // namespace ringpilot::topology
