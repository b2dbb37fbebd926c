// NodeTopology: what one node has (NUMA nodes and CPUs, GPUs and the links between them,
// NICs and each GPU's PCIe path to each NIC), and its JSON form, the topology snapshot
// that `ringpilot topo --json` writes and `ringpilot topo --from` reads.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringpilot::topology {

/// PCIe path class between two PCI devices, as `nvidia-smi topo -m` defines them, best
/// (shortest) first.
enum class LinkClass {
  kPix,      ///< at most a single PCIe bridge (one switch)
  kPxb,      ///< multiple PCIe bridges, not through the host bridge
  kPhb,      ///< through a PCIe host bridge (the CPU)
  kNode,     ///< between host bridges within one NUMA node
  kSys,      ///< across NUMA nodes (the SMP interconnect: QPI/UPI/xGMI)
  kUnknown,  ///< not determined (a device missing from the PCI tree)
};

std::string ToString(LinkClass c);
/// "PIX", "PXB", "PHB", "NODE", "SYS" (or "unknown"); nullopt for anything else.
std::optional<LinkClass> ParseLinkClass(const std::string& s);

enum class NicKind { kInfiniBand, kRoce, kEthernet };
std::string ToString(NicKind k);  ///< "IB", "RoCE", "Ethernet"
std::optional<NicKind> ParseNicKind(const std::string& s);

struct NumaNode {
  int id = 0;
  std::vector<int> cpus;  ///< OS CPU numbers, ascending
  std::uint64_t memory_bytes = 0;
};

struct ComputeCapability {
  int major = 0;
  int minor = 0;
};

struct Gpu {
  int index = 0;  ///< NVML index (all GPUs of the node, whatever CUDA_VISIBLE_DEVICES says)
  std::string name;
  std::string uuid;
  std::string pci_bus_id;  ///< "0000:18:00.0": 4-digit domain, lower case; "" if not recorded
  ComputeCapability compute_capability;
  std::uint64_t memory_bytes = 0;
  int numa_node = -1;  ///< -1: unknown
  /// Path class from this GPU to each NIC, by NIC name.
  std::map<std::string, LinkClass> nic_paths;
};

/// The connection between two GPUs: NVLink when nvlink_count > 0, else PCIe.
struct GpuLink {
  int gpu_a = 0;  ///< GPU index, gpu_a < gpu_b
  int gpu_b = 0;
  int nvlink_count = 0;
  double nvlink_bytes_per_second_per_link = 0;  ///< one direction
  LinkClass pcie_path = LinkClass::kUnknown;    ///< meaningful when nvlink_count == 0
  /// The links end at NVSwitches: nvlink_count is what each GPU has into the switch
  /// fabric, shared by all its peers at once (a ring still gets all of it per hop).
  bool via_nvswitch = false;

  double NvlinkBytesPerSecond() const { return nvlink_count * nvlink_bytes_per_second_per_link; }
  bool IsNvlink() const { return nvlink_count > 0; }
  /// "NV18", or the PCIe class ("PIX", ..., "SYS").
  std::string Label() const;
};

struct Nic {
  std::string name;  ///< RDMA device ("mlx5_0") or network interface ("eth0")
  NicKind kind = NicKind::kEthernet;
  std::string netdev;      ///< network interface of an RDMA port, when known ("ib0"); may be ""
  std::string port_state;  ///< IB: "ACTIVE", "DOWN", ...; Ethernet: operstate "up", "down", ...
  double rate_bytes_per_second = 0;  ///< 0: unknown
  std::string pci_bus_id;            ///< "" for a device with no PCI function
  int numa_node = -1;
  /// Path class from this NIC to each other NIC, by NIC name.
  std::map<std::string, LinkClass> nic_paths;

  /// The port carries traffic: IB/RoCE state ACTIVE, Ethernet operstate up (or unknown).
  bool IsUp() const;
};

struct NodeTopology {
  static constexpr int kFormatVersion = 1;

  std::string hostname;
  std::string source;  ///< how the snapshot was made ("probe", or a note for hand-written ones)
  std::vector<NumaNode> numa_nodes;
  std::vector<Gpu> gpus;
  std::vector<GpuLink> gpu_links;
  std::vector<Nic> nics;
  std::vector<std::string> warnings;  ///< what a probe could not see

  const Gpu* FindGpu(int index) const;
  const Nic* FindNic(const std::string& name) const;
  const NumaNode* FindNuma(int id) const;
  /// The link between two GPUs (either order); nullptr when not recorded.
  const GpuLink* FindLink(int gpu_a, int gpu_b) const;
  std::vector<int> AllCpus() const;  ///< every CPU of every NUMA node, ascending
};

/// A snapshot that cannot be read: what() is one line, "FILE: FIELD: problem".
class SnapshotError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The snapshot document (keys in a fixed, readable order).
nlohmann::ordered_json ToJson(const NodeTopology& topo);
/// Throws SnapshotError("FIELD: problem") for a document that is not a valid snapshot.
NodeTopology FromJson(const nlohmann::json& doc);
/// Reads a snapshot file; throws SnapshotError("PATH: FIELD: problem").
NodeTopology LoadSnapshot(const std::string& path);

/// "0-3,8,10-11" <-> {0,1,2,3,8,10,11} (the Linux cpulist format). ParseCpuList throws
/// std::invalid_argument on malformed text.
std::string FormatCpuList(const std::vector<int>& cpus);
std::vector<int> ParseCpuList(const std::string& text);

/// "00000000:18:00.0" / "0000:18:00.0" / "18:00.0" -> "0000:18:00.0"; "" when malformed.
std::string NormalizePciBusId(const std::string& bus_id);

}  // namespace ringpilot::topology
