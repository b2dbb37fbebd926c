// The placement plan of one rank: which GPU it drives, which NIC NCCL should use for it,
// and which CPUs it binds to. A pure function of the node's topology, the rank's place on
// the node, the device, the CPUs the process may use and the user's environment; the
// trainer applies it (trainer/startup/bootstrap.h). The policy is in docs/topology.md.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "topology/node_topology.h"

namespace ringpilot::topology {

/// CPU binding policy (job key `placement.bind`).
enum class BindPolicy {
  kAuto,   ///< `numa` for GPU ranks, `cores` for CPU ranks
  kNuma,   ///< the whole NUMA node (of the GPU; CPU ranks: NUMA nodes spread over ranks)
  kCores,  ///< as numa, then the node's CPUs split evenly among the ranks sharing it
  kNone,   ///< leave the affinity as the process got it
};
std::string ToString(BindPolicy p);  ///< "auto", "numa", "cores", "none"
std::optional<BindPolicy> ParseBindPolicy(const std::string& s);

struct PlanInput {
  int rank = 0;
  int local_rank = 0;
  int local_size = 1;
  bool cuda = false;  ///< the rank drives a GPU (NCCL); false: a CPU rank (MPI)
  BindPolicy bind = BindPolicy::kAuto;
  /// CPUs the process may run on (sched_getaffinity: cgroup cpuset, taskset); empty means
  /// every CPU of the topology.
  std::vector<int> allowed_cpus;
  /// The rank's environment; read: CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, NCCL_IB_HCA,
  /// NCCL_SOCKET_IFNAME (a variable the user set is never overridden).
  std::map<std::string, std::string> env;
};

struct RankPlan {
  int rank = 0;
  int local_rank = 0;
  std::string node;    ///< hostname of the topology
  int gpu_index = -1;  ///< NVML index; -1: no GPU (CPU rank, or none found)
  std::string gpu_uuid;
  std::string pci_bus_id;
  std::string nic;  ///< NIC chosen for NCCL; "" when none (CPU rank, no NIC)
  /// Variables to set in the rank's environment before CUDA and NCCL start
  /// (NCCL_IB_HCA=`=mlx5_0`, NCCL_SOCKET_IFNAME=`=eth0`, CUDA_DEVICE_ORDER=PCI_BUS_ID).
  std::map<std::string, std::string> nccl_env;
  std::vector<int> cpus;  ///< CPUs to bind to, ascending; empty: do not bind
  std::string binding;    ///< how cpus were chosen, e.g. "numa 0", "cores 2/4 of numa 1"
  std::vector<std::string> warnings;
};

/// The plan of input.rank. GPU: with CUDA_VISIBLE_DEVICES unset, the local rank's GPU in
/// NVML (PCI bus) order, wrapping when there are more ranks than GPUs; with it set, the
/// entry at the local rank (an index, or a `GPU-` UUID prefix). NIC: NearestNic of the GPU
/// (CPU ranks: none). CPUs: see BindPolicy, always within allowed_cpus; a rank that would
/// get no CPU, or fewer CPUs than ranks sharing them under `cores`, is not bound (warning).
/// Never throws.
RankPlan PlanRank(const NodeTopology& node, const PlanInput& input);

/// `chunks` near-equal parts of `cpus` (ascending): each maximal run of consecutive CPU
/// numbers is split into `chunks` parts and part i of every run goes to chunk i, so that
/// "0-55,112-167" in 2 gives "0-27,112-139" and "28-55,140-167" (hyperthread siblings stay
/// together on the usual numbering); when a run is shorter than `chunks`, the list as a
/// whole is cut into consecutive parts. Empty when cpus.size() < chunks or chunks < 1.
std::vector<std::vector<int>> SplitCpus(const std::vector<int>& cpus, int chunks);

/// One line: "rank 3 node n1 local 3 gpu 3 (0000:9b:00.0) nic mlx5_3 cpus 56-111 (numa 1)
/// env NCCL_IB_HCA==mlx5_3".
std::string FormatPlanLine(const RankPlan& plan);

}  // namespace ringpilot::topology
