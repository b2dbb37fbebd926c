#include "topology/probe.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace ringpilot::topology {
namespace {
namespace fs = std::filesystem;

// Ancestor chains of a little PCI tree:
//   package0 - hostbridge0 - switchUp0 - {down0 - gpuA, down1 - gpuB, down2 - nic0}
//                          - rootport  - switchUp1 - down3 - switchUp2 - down4 - gpuC
//            - hostbridge1 - down5 - gpuD
//   package1 - hostbridge2 - down6 - gpuE
constexpr HopKind P = HopKind::kPciBridge;
constexpr HopKind H = HopKind::kHostBridge;
constexpr HopKind O = HopKind::kOther;
enum : std::uintptr_t {
  kPkg0 = 1,
  kPkg1,
  kHb0,
  kHb1,
  kHb2,
  kUp0,
  kRoot,
  kUp1,
  kUp2,
  kDown0,
  kDown1,
  kDown2,
  kDown3,
  kDown4,
  kDown5,
  kDown6,
  kMachine
};
const std::vector<PciHop> gpuA = {{kDown0, P}, {kUp0, P}, {kHb0, H}, {kPkg0, O}, {kMachine, O}};
const std::vector<PciHop> gpuB = {{kDown1, P}, {kUp0, P}, {kHb0, H}, {kPkg0, O}, {kMachine, O}};
const std::vector<PciHop> nic0 = {{kDown2, P}, {kUp0, P}, {kHb0, H}, {kPkg0, O}, {kMachine, O}};
const std::vector<PciHop> gpuC = {{kDown4, P}, {kUp2, P}, {kDown3, P}, {kUp1, P},
                                  {kRoot, P},  {kHb0, H}, {kPkg0, O},  {kMachine, O}};
const std::vector<PciHop> gpuD = {{kDown5, P}, {kHb1, H}, {kPkg0, O}, {kMachine, O}};
const std::vector<PciHop> gpuE = {{kDown6, P}, {kHb2, H}, {kPkg1, O}, {kMachine, O}};
const std::vector<PciHop> gpuF = {{kDown4, P}, {kUp2, P}, {kDown3, P}, {kUp1, P},
                                  {kRoot, P},  {kHb0, H}, {kPkg0, O},  {kMachine, O}};

TEST(ClassifyPciPath, FollowsNvidiaSmiClasses) {
  EXPECT_EQ(ClassifyPciPath(gpuA, gpuB, true), LinkClass::kPix);  // one switch
  EXPECT_EQ(ClassifyPciPath(gpuA, nic0, true), LinkClass::kPix);
  EXPECT_EQ(ClassifyPciPath(gpuC, gpuF, true), LinkClass::kPix);  // same downstream port
  EXPECT_EQ(ClassifyPciPath(gpuA, gpuC, true), LinkClass::kPhb);  // meet at the host bridge
  EXPECT_EQ(ClassifyPciPath(gpuD, gpuA, true), LinkClass::kNode);
  EXPECT_EQ(ClassifyPciPath(gpuE, gpuA, false), LinkClass::kSys);
  EXPECT_EQ(ClassifyPciPath({}, gpuA, false), LinkClass::kSys);
  // Cascaded switches: meet at a bridge two or more levels up: PXB.
  const std::vector<PciHop> deep1 = {{100, P}, {101, P}, {102, P}, {kUp1, P}, {kHb0, H}};
  const std::vector<PciHop> deep2 = {{200, P}, {201, P}, {202, P}, {kUp1, P}, {kHb0, H}};
  EXPECT_EQ(ClassifyPciPath(deep1, deep2, true), LinkClass::kPxb);
}

TEST(ParseIbRate, ReadsSysfsRates) {
  EXPECT_DOUBLE_EQ(ParseIbRate("400 Gb/sec (4X NDR)"), 50e9);
  EXPECT_DOUBLE_EQ(ParseIbRate("200 Gb/sec (4X HDR)"), 25e9);
  EXPECT_DOUBLE_EQ(ParseIbRate("2.5 Gb/sec (1X SDR)"), 2.5e9 / 8);
  EXPECT_DOUBLE_EQ(ParseIbRate(""), 0);
  EXPECT_DOUBLE_EQ(ParseIbRate("fast"), 0);
}

class FakeSysfs {
 public:
  FakeSysfs() {
    char pattern[] = "/tmp/ringpilot-sysfs-XXXXXX";
    root_ = ::mkdtemp(pattern) ? pattern : "";
  }
  ~FakeSysfs() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  void Write(const std::string& rel, const std::string& text) {
    const fs::path p = fs::path(root_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  }
  void Dir(const std::string& rel) { fs::create_directories(fs::path(root_) / rel); }
  void Link(const std::string& rel, const std::string& target) {
    const fs::path p = fs::path(root_) / rel;
    fs::create_directories(p.parent_path());
    fs::create_directory_symlink(fs::path(root_) / target, p);
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

TEST(ProbeNics, ReadsRdmaPortsAndPhysicalInterfaces) {
  FakeSysfs sys;
  const std::string mlx = "devices/pci0000:17/0000:17:01.0/0000:18:00.0";
  sys.Write(mlx + "/infiniband/mlx5_0/ports/1/state", "4: ACTIVE");
  sys.Write(mlx + "/infiniband/mlx5_0/ports/1/rate", "400 Gb/sec (4X NDR)");
  sys.Write(mlx + "/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand");
  sys.Dir(mlx + "/net/ibp24s0");
  sys.Link("class/infiniband/mlx5_0", mlx + "/infiniband/mlx5_0");
  sys.Link(mlx + "/infiniband/mlx5_0/device", mlx);
  sys.Write("bus/pci/devices/0000:18:00.0/numa_node", "1");
  const std::string roce = "devices/pci0000:30/0000:31:00.1";
  sys.Write(roce + "/infiniband/mlx5_1/ports/1/state", "1: DOWN");
  sys.Write(roce + "/infiniband/mlx5_1/ports/1/rate", "100 Gb/sec (4X EDR)");
  sys.Write(roce + "/infiniband/mlx5_1/ports/1/link_layer", "Ethernet");
  sys.Write(roce + "/net/ens1f1/operstate", "down");
  sys.Link("class/infiniband/mlx5_1", roce + "/infiniband/mlx5_1");
  sys.Link(roce + "/infiniband/mlx5_1/device", roce);
  sys.Link("class/net/ens1f1", roce + "/net/ens1f1");  // the RoCE netdev: not listed twice
  const std::string eth = "devices/pci0000:00/0000:00:03.0/virtio2";
  sys.Write(eth + "/net/eth0/operstate", "up");
  sys.Write(eth + "/net/eth0/speed", "25000");
  sys.Link(eth + "/net/eth0/device", eth);
  sys.Link("class/net/eth0", eth + "/net/eth0");
  sys.Write("devices/virtual/net/lo/operstate", "unknown");
  sys.Link("class/net/lo", "devices/virtual/net/lo");
  sys.Write("devices/virtual/net/docker0/operstate", "up");
  sys.Link("class/net/docker0", "devices/virtual/net/docker0");

  std::vector<std::string> warnings;
  const std::vector<Nic> nics = ProbeNics(sys.root(), &warnings);
  ASSERT_EQ(nics.size(), 3u);
  EXPECT_EQ(nics[0].name, "mlx5_0");
  EXPECT_EQ(nics[0].kind, NicKind::kInfiniBand);
  EXPECT_EQ(nics[0].port_state, "ACTIVE");
  EXPECT_TRUE(nics[0].IsUp());
  EXPECT_DOUBLE_EQ(nics[0].rate_bytes_per_second, 50e9);
  EXPECT_EQ(nics[0].pci_bus_id, "0000:18:00.0");
  EXPECT_EQ(nics[0].numa_node, 1);
  EXPECT_EQ(nics[0].netdev, "ibp24s0");
  EXPECT_EQ(nics[1].name, "mlx5_1");
  EXPECT_EQ(nics[1].kind, NicKind::kRoce);
  EXPECT_FALSE(nics[1].IsUp());
  EXPECT_EQ(nics[1].netdev, "ens1f1");
  EXPECT_EQ(nics[1].numa_node, -1);
  EXPECT_EQ(nics[2].name, "eth0");
  EXPECT_EQ(nics[2].kind, NicKind::kEthernet);
  EXPECT_DOUBLE_EQ(nics[2].rate_bytes_per_second, 25e9 / 8);
  EXPECT_EQ(nics[2].pci_bus_id, "0000:00:03.0");
  EXPECT_TRUE(warnings.empty()) << warnings.front();
}

TEST(ProbeNics, MissingSysfsDegradesWithAWarning) {
  std::vector<std::string> warnings;
  EXPECT_TRUE(ProbeNics("/nonexistent-sysfs", &warnings).empty());
  EXPECT_FALSE(warnings.empty());
}

NvmlGpu MakeGpu(int index, const std::string& bus, std::vector<std::string> remotes) {
  NvmlGpu g;
  g.gpu.index = index;
  g.gpu.pci_bus_id = bus;
  g.gpu.compute_capability = {9, 0};
  g.nvlink_remote_bus_ids = std::move(remotes);
  return g;
}

TEST(NvlinkConnections, CountsDirectAndSwitchedLinks) {
  // Direct: 4 links 0<->1, none to GPU 2.
  std::vector<NvmlGpu> direct = {
      MakeGpu(0, "0000:18:00.0", std::vector<std::string>(4, "0000:2a:00.0")),
      MakeGpu(1, "0000:2a:00.0", std::vector<std::string>(4, "0000:18:00.0")),
      MakeGpu(2, "0000:3a:00.0", {})};
  std::vector<GpuLink> links = NvlinkConnections(direct);
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0].Label(), "NV4");
  EXPECT_FALSE(links[0].via_nvswitch);
  EXPECT_DOUBLE_EQ(links[0].nvlink_bytes_per_second_per_link, 26.5625e9);
  // NVSwitch: every link's remote end is a switch, 18 per GPU: NV18 between every pair.
  std::vector<NvmlGpu> switched;
  for (int i = 0; i < 4; ++i) {
    std::vector<std::string> remotes;
    for (int l = 0; l < 18; ++l) remotes.push_back("0000:0" + std::to_string(5 + l % 4) + ":00.0");
    switched.push_back(MakeGpu(i, "0000:" + std::to_string(18 + i) + ":00.0", remotes));
  }
  links = NvlinkConnections(switched);
  ASSERT_EQ(links.size(), 6u);
  for (const GpuLink& l : links) {
    EXPECT_EQ(l.Label(), "NV18");
    EXPECT_TRUE(l.via_nvswitch);
  }
}

TEST(NvlinkBandwidth, ByGeneration) {
  EXPECT_DOUBLE_EQ(NvlinkBytesPerSecondPerLink({9, 0}), 26.5625e9);
  EXPECT_DOUBLE_EQ(NvlinkBytesPerSecondPerLink({8, 0}), 25e9);
  EXPECT_DOUBLE_EQ(NvlinkBytesPerSecondPerLink({10, 0}), 50e9);
}

TEST(ProbeNvml, ReadsGpusAndNvSwitchLinksThroughDlopen) {
  FakeSysfs sys;
  sys.Write("bus/pci/devices/0000:18:00.0/numa_node", "0");
  sys.Write("bus/pci/devices/0000:2a:00.0/numa_node", "1");
  std::vector<std::string> warnings;
  const std::vector<NvmlGpu> gpus = ProbeNvml(RINGPILOT_FAKE_NVML, sys.root(), &warnings);
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].gpu.name, "NVIDIA H200");
  EXPECT_EQ(gpus[1].gpu.uuid, "GPU-fake-1");
  EXPECT_EQ(gpus[0].gpu.pci_bus_id, "0000:18:00.0");
  EXPECT_EQ(gpus[1].gpu.pci_bus_id, "0000:2a:00.0");
  EXPECT_EQ(gpus[1].gpu.compute_capability.major, 9);
  EXPECT_EQ(gpus[0].gpu.memory_bytes, 143771ull << 20);
  EXPECT_EQ(gpus[0].gpu.numa_node, 0);
  EXPECT_EQ(gpus[1].gpu.numa_node, 1);
  EXPECT_EQ(gpus[0].nvlink_remote_bus_ids.size(), 18u);
  const std::vector<GpuLink> links = NvlinkConnections(gpus);
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0].Label(), "NV18");
  EXPECT_TRUE(links[0].via_nvswitch);
  EXPECT_DOUBLE_EQ(links[0].NvlinkBytesPerSecond(), 478.125e9);
}

TEST(ProbeNvml, MissingLibraryMeansNoGpusAndAWarning) {
  std::vector<std::string> warnings;
  EXPECT_TRUE(ProbeNvml("libringpilot-no-such-nvml.so.1", "/sys", &warnings).empty());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].rfind("NVML: cannot load libringpilot-no-such-nvml.so.1", 0), 0u);
}

TEST(ProbeNode, WithNvmlGpusFillsLinksAndNicPaths) {
  ProbeOptions options;
  options.nvml_library = RINGPILOT_FAKE_NVML;
  const NodeTopology t = ProbeNode(options);
  ASSERT_EQ(t.gpus.size(), 2u);
  ASSERT_EQ(t.gpu_links.size(), 1u);
  EXPECT_EQ(t.gpu_links[0].Label(), "NV18");
  // The fake GPUs are not in this machine's PCI tree: their paths are unknown, with warnings.
  EXPECT_EQ(t.gpu_links[0].pcie_path, LinkClass::kUnknown);
  for (const Gpu& g : t.gpus) EXPECT_EQ(g.nic_paths.size(), t.nics.size());
}

TEST(ProbeNode, ThisMachineReportsCpusAndNumaWithoutAborting) {
  ProbeOptions options;
  options.nvml_library = "libringpilot-no-such-nvml.so.1";
  const NodeTopology t = ProbeNode(options);
  ASSERT_FALSE(t.numa_nodes.empty());
  // hwloc reports the CPUs this process may use (a cgroup cpuset can hide some).
  EXPECT_GE(t.AllCpus().size(), 1u);
  EXPECT_LE(t.AllCpus().size(), static_cast<std::size_t>(::sysconf(_SC_NPROCESSORS_ONLN)));
  EXPECT_GT(t.numa_nodes.front().memory_bytes, 0u);
  EXPECT_TRUE(t.gpus.empty());
  EXPECT_FALSE(t.hostname.empty());
  bool nvml_warning = false;
  for (const std::string& w : t.warnings) nvml_warning |= w.rfind("NVML: cannot load", 0) == 0;
  EXPECT_TRUE(nvml_warning);
  for (const Nic& n : t.nics) {
    EXPECT_NE(n.name, "lo");
    EXPECT_NE(n.name.rfind("veth", 0), 0u) << n.name;
  }
}

}  // namespace
}  // namespace ringpilot::topology
