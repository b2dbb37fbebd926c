#include "trainer/startup/bootstrap.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#include "base/environment.h"
#include "comm/status.h"
#include "topology/affinity.h"
#include "topology/bandwidth.h"
#include "topology/cluster.h"
#include "topology/probe.h"

namespace ringpilot::trainer::startup {
namespace {

constexpr std::size_t kMaxTableRows = 64;

std::map<std::string, std::string> PlanEnvironment() {
  std::map<std::string, std::string> env;
  for (const char* key :
       {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME"}) {
    if (const char* v = std::getenv(key)) env[key] = v;
  }
  return env;
}

// GPUs a CUDA rank could use: the CUDA_VISIBLE_DEVICES entries naming GPUs of the node,
// else every GPU NVML reports.
int VisibleGpus(const topology::NodeTopology& node, const std::map<std::string, std::string>& env) {
  if (!env.count("CUDA_VISIBLE_DEVICES")) return static_cast<int>(node.gpus.size());
  std::set<int> seen;
  for (int lr = 0; lr < static_cast<int>(node.gpus.size()) + 1; ++lr) {
    topology::PlanInput in;
    in.local_rank = lr;
    in.cuda = true;
    in.env = env;
    const int g = topology::PlanRank(node, in).gpu_index;
    if (g >= 0) seen.insert(g);
  }
  return static_cast<int>(seen.size());
}

// This node's report, made by local rank 0.
topology::NodeReport MakeNodeReport(int local_size, telemetry::RankLog& log) {
  topology::NodeReport report;
  report.ranks = local_size;
  const char* snapshot = std::getenv("RINGPILOT_TOPOLOGY_SNAPSHOT");
  if (snapshot && *snapshot) {
    try {
      report.topology = topology::LoadSnapshot(snapshot);
    } catch (const topology::SnapshotError& e) {
      throw std::runtime_error(std::string("RINGPILOT_TOPOLOGY_SNAPSHOT: ") + e.what());
    }
  } else {
    // In this process: the probe never throws (a missing source is a warning in the
    // report), and it runs before CUDA and NCCL start.
    report.topology = topology::ProbeNode();
  }
  report.topology.hostname = base::HostName();
  report.visible_gpus = VisibleGpus(report.topology, PlanEnvironment());
  report.pci_gpus = topology::CountPciGpus();
  return report;
}

void BroadcastString(std::string* s, int root, MPI_Comm comm) {
  unsigned long long n = s->size();
  MPI_CHECK(MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, root, comm));
  s->resize(n);
  if (n > static_cast<unsigned long long>(std::numeric_limits<int>::max())) {
    throw std::runtime_error("node report too large to broadcast: " + std::to_string(n));
  }
  if (n) MPI_CHECK(MPI_Bcast(s->data(), static_cast<int>(n), MPI_CHAR, root, comm));
}

// Every rank's string at rank 0 (others get an empty vector).
std::vector<std::string> GatherStrings(const std::string& mine, int rank, int world) {
  const int n = static_cast<int>(mine.size());
  std::vector<int> counts(rank == 0 ? world : 0);
  MPI_CHECK(MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
  std::vector<int> displs(counts.size());
  long long total = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    displs[i] = static_cast<int>(total);
    total += counts[i];
  }
  if (total > std::numeric_limits<int>::max()) {
    throw std::runtime_error("gathered placement data too large: " + std::to_string(total));
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  MPI_CHECK(MPI_Gatherv(mine.data(), n, MPI_CHAR, all.data(), counts.data(), displs.data(),
                        MPI_CHAR, 0, MPI_COMM_WORLD));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    out.push_back(
        all.substr(static_cast<std::size_t>(displs[i]), static_cast<std::size_t>(counts[i])));
  }
  return out;
}

bool UsesCuda(config::Device device, int visible_gpus) {
  switch (device) {
    case config::Device::kCpu:
      return false;
    case config::Device::kCuda:
      return true;
    case config::Device::kAuto:
      break;
  }
#ifdef RINGPILOT_WITH_CUDA
  return visible_gpus > 0;
#else
  (void)visible_gpus;
  return false;
#endif
}

}  // namespace

RankPlacement PlaceRank(const PlacementOptions& options, int rank, int world, int local_rank,
                        int local_size, telemetry::RankLog& log) {
  MPI_Comm local;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local));
  std::string report_json;
  if (local_rank == 0) report_json = topology::ToJson(MakeNodeReport(local_size, log)).dump();
  BroadcastString(&report_json, 0, local);
  MPI_Comm_free(&local);
  const topology::NodeReport report =
      topology::NodeReportFromJson(nlohmann::json::parse(report_json));
  const std::map<std::string, std::string> env = PlanEnvironment();
  const bool cuda = UsesCuda(options.device, report.visible_gpus);

  // Cluster view and expected bandwidth at rank 0.
  RankPlacement out;
  const std::vector<std::string> reports =
      GatherStrings(local_rank == 0 ? report_json : std::string(), rank, world);
  if (rank == 0) {
    std::vector<topology::NodeReport> nodes;
    for (const std::string& r : reports) {
      if (!r.empty()) nodes.push_back(topology::NodeReportFromJson(nlohmann::json::parse(r)));
    }
    const topology::ClusterSummary summary = topology::SummarizeCluster(nodes);
    for (const std::string& line : summary.lines) log.Detail(line);
    for (const std::string& w : summary.warnings) log.Warn(w);
    // The slowest node sets the job's figure.
    bool first = true;
    for (const topology::NodeReport& n : nodes) {
      const topology::JobBusBandwidth bw = topology::ExpectedJobBusBandwidth(
          n.topology, cuda, n.ranks, static_cast<int>(nodes.size()));
      if (first || bw.bytes_per_second < out.expected_bus_bytes_per_second) {
        out.expected_bus_bytes_per_second = bw.bytes_per_second;
        out.expected_source = n.topology.hostname + ": " + bw.source;
        first = false;
      }
    }
    char gbs[32];
    std::snprintf(gbs, sizeof gbs, "%.1f GB/s", out.expected_bus_bytes_per_second / 1e9);
    log.Detail("expected bus bandwidth: " +
               (out.expected_bus_bytes_per_second > 0 ? std::string(gbs) : std::string("-")) +
               " (" + out.expected_source + ")");
  }
  MPI_CHECK(MPI_Bcast(&out.expected_bus_bytes_per_second, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));

  // This rank's plan, applied.
  topology::PlanInput in;
  in.rank = rank;
  in.local_rank = local_rank;
  in.local_size = local_size;
  in.cuda = cuda;
  in.bind = options.bind;
  in.allowed_cpus = topology::CurrentAffinity();
  in.env = env;
  out.plan = topology::PlanRank(report.topology, in);
  for (const auto& [key, value] : out.plan.nccl_env) ::setenv(key.c_str(), value.c_str(), 0);
  if (!out.plan.cpus.empty()) {
    try {
      topology::BindProcess(out.plan.cpus);
    } catch (const std::runtime_error& e) {
      out.plan.warnings.push_back(std::string(e.what()) + ": running unbound");
      out.plan.cpus.clear();
      out.plan.binding = "none (binding failed)";
    }
  }
  const std::string line = topology::FormatPlanLine(out.plan);
  log.Detail("placement: " + line);
  for (const std::string& w : out.plan.warnings) log.Warn("placement: " + w);
  log.Detail("placement: affinity " + topology::FormatCpuList(topology::CurrentAffinity()) +
             " (pid " + std::to_string(::getpid()) + ")");

  // The table of all ranks at rank 0.
  const std::vector<std::string> lines = GatherStrings(line, rank, world);
  if (rank == 0) {
    log.Detail("placement plan (placement.bind " + topology::ToString(in.bind) + "):");
    for (std::size_t i = 0; i < lines.size() && i < kMaxTableRows; ++i) {
      log.Detail("  " + lines[i]);
    }
    if (lines.size() > kMaxTableRows) {
      log.Detail("  ... " + std::to_string(lines.size() - kMaxTableRows) +
                 " more ranks: see logs/rank-N.log");
    }
  }
  return out;
}

}  // namespace ringpilot::trainer::startup
