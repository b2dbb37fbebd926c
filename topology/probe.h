// Probes that fill a NodeTopology from the machine: hwloc (NUMA nodes, CPUs, memory, the
// PCI tree for path classes), sysfs (InfiniBand/RoCE ports, Ethernet interfaces) and NVML
// (GPUs, NVLinks), the latter loaded at run time so that a machine without the NVIDIA
// driver still runs. A probe that fails adds a line to NodeTopology::warnings and the
// rest of the view stands; no probe aborts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topology/node_topology.h"

namespace ringpilot::topology {

struct ProbeOptions {
  std::string sysfs_root = "/sys";  ///< tests point this at a fake tree
  bool use_nvml = true;
  std::string nvml_library = "libnvidia-ml.so.1";
};

/// Probes this node: never throws for a missing or failing source (see warnings).
NodeTopology ProbeNode(const ProbeOptions& options = {});

// ---- pieces, exposed for tests --------------------------------------------------------

/// One ancestor of a PCI device in the PCI tree, from the device upwards.
enum class HopKind { kPciBridge, kHostBridge, kOther };
struct PciHop {
  std::uintptr_t id = 0;  ///< identity of the tree object (equal ids: the same object)
  HopKind kind = HopKind::kOther;
};

/// Path class between two PCI devices given their ancestor chains (nearest first).
/// Common ancestor a PCI bridge with at most one bridge (a switch's downstream port)
/// below it on either side: PIX; a PCI bridge further up: PXB; a host bridge: PHB;
/// above the host bridges: NODE when both devices are on the same NUMA node, else SYS.
LinkClass ClassifyPciPath(const std::vector<PciHop>& a, const std::vector<PciHop>& b,
                          bool same_numa);

/// RDMA ports under SYSFS/class/infiniband and physical network interfaces under
/// SYSFS/class/net (virtual ones, and the netdevs of RDMA ports, skipped). NUMA node from
/// SYSFS/bus/pci/devices/<bus id>/numa_node (-1 when unknown).
std::vector<Nic> ProbeNics(const std::string& sysfs_root, std::vector<std::string>* warnings);

/// "400 Gb/sec (4X NDR)" -> 5e10 bytes/s; 0 when unreadable.
double ParseIbRate(const std::string& text);

/// A GPU as NVML reports it, with the PCI bus ids at the far end of its active NVLinks.
struct NvmlGpu {
  Gpu gpu;
  std::vector<std::string> nvlink_remote_bus_ids;
};

/// GPUs from NVML (dlopen'ed LIBRARY). Empty, with a warning, when the library or the
/// driver is missing.
std::vector<NvmlGpu> ProbeNvml(const std::string& library, const std::string& sysfs_root,
                               std::vector<std::string>* warnings);

/// NVLink connections between GPUs from their links' remote ends: links whose remote is
/// the other GPU count directly; links to a device that is not a GPU (an NVSwitch) join
/// every pair of switch-attached GPUs with min(switch links of each). Pairs without
/// NVLink are not returned.
std::vector<GpuLink> NvlinkConnections(const std::vector<NvmlGpu>& gpus);

/// Per-link, per-direction NVLink bandwidth by GPU generation (docs/topology.md).
double NvlinkBytesPerSecondPerLink(const ComputeCapability& cc);

}  // namespace ringpilot::topology
