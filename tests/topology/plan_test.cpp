#include "topology/plan.h"

#include <gtest/gtest.h>

#include "tests/topology/fixtures.h"

namespace ringpilot::topology {
namespace {

using testing::Fixture;

PlanInput Gpu(int local_rank, int local_size) {
  PlanInput in;
  in.rank = 8 + local_rank;
  in.local_rank = local_rank;
  in.local_size = local_size;
  in.cuda = true;
  return in;
}

PlanInput Cpu(int local_rank, int local_size) {
  PlanInput in = Gpu(local_rank, local_size);
  in.cuda = false;
  return in;
}

TEST(PlanRank, DgxRankUsesItsGpuItsPixNicAndItsNumaNode) {
  const NodeTopology node = Fixture("dgx-h100.json");
  for (int lr = 0; lr < 8; ++lr) {
    const RankPlan p = PlanRank(node, Gpu(lr, 8));
    EXPECT_EQ(p.gpu_index, lr);
    EXPECT_EQ(p.nic, "mlx5_" + std::to_string(lr));
    EXPECT_EQ(p.nccl_env.at("NCCL_IB_HCA"), "=mlx5_" + std::to_string(lr));
    EXPECT_EQ(p.nccl_env.at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
    EXPECT_EQ(p.nccl_env.count("NCCL_SOCKET_IFNAME"), 0u);
    EXPECT_EQ(FormatCpuList(p.cpus), lr < 4 ? "0-55,112-167" : "56-111,168-223");
    EXPECT_EQ(p.binding, lr < 4 ? "numa 0" : "numa 1");
    EXPECT_EQ(p.gpu_uuid, node.FindGpu(lr)->uuid);
    EXPECT_EQ(p.pci_bus_id, node.FindGpu(lr)->pci_bus_id);
    EXPECT_TRUE(p.warnings.empty()) << p.warnings.front();
  }
  EXPECT_EQ(FormatPlanLine(PlanRank(node, Gpu(5, 8))),
            "rank 13 node " + node.hostname + " local 5 gpu 5 (" + node.FindGpu(5)->pci_bus_id +
                ") nic mlx5_5 cpus 56-111,168-223 (numa 1) env CUDA_DEVICE_ORDER=PCI_BUS_ID "
                "NCCL_IB_HCA==mlx5_5");
}

TEST(PlanRank, CoresPolicySplitsTheNumaNodeAmongItsGpusRanks) {
  const NodeTopology node = Fixture("dgx-h100.json");
  PlanInput in = Gpu(1, 8);
  in.bind = BindPolicy::kCores;
  // GPUs 0-3 share NUMA node 0 (0-55,112-167): 4 slices of 14 cores + their siblings.
  RankPlan p = PlanRank(node, in);
  EXPECT_EQ(FormatCpuList(p.cpus), "14-27,126-139");
  EXPECT_EQ(p.binding, "cores 2/4 of numa 0");
  in.local_rank = 7;
  p = PlanRank(node, in);
  EXPECT_EQ(FormatCpuList(p.cpus), "98-111,210-223");
}

TEST(PlanRank, PcieServerGpusGetTheNicAndCpusOfTheirSocket) {
  const NodeTopology node = Fixture("pcie-4gpu-2socket.json");
  const char* nics[] = {"mlx5_0", "mlx5_0", "mlx5_1", "mlx5_1"};
  const char* cpus[] = {"0-31,64-95", "0-31,64-95", "32-63,96-127", "32-63,96-127"};
  for (int lr = 0; lr < 4; ++lr) {
    const RankPlan p = PlanRank(node, Gpu(lr, 4));
    EXPECT_EQ(p.gpu_index, lr);
    EXPECT_EQ(p.nic, nics[lr]);
    EXPECT_EQ(p.nccl_env.at("NCCL_IB_HCA"), std::string("=") + nics[lr]);
    EXPECT_EQ(FormatCpuList(p.cpus), cpus[lr]);
  }
}

TEST(PlanRank, UserEnvironmentIsNotOverridden) {
  const NodeTopology node = Fixture("dgx-h100.json");
  PlanInput in = Gpu(2, 8);
  in.env = {{"NCCL_IB_HCA", "mlx5_7"}, {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}};
  const RankPlan p = PlanRank(node, in);
  EXPECT_EQ(p.nic, "mlx5_2");
  EXPECT_TRUE(p.nccl_env.empty());
  in.env = {{"CUDA_DEVICE_ORDER", "FASTEST_FIRST"}};
  const RankPlan fastest = PlanRank(node, in);
  ASSERT_EQ(fastest.warnings.size(), 1u);
  EXPECT_NE(fastest.warnings[0].find("FASTEST_FIRST"), std::string::npos);
}

TEST(PlanRank, CudaVisibleDevicesPicksTheGpu) {
  const NodeTopology node = Fixture("dgx-h100.json");
  PlanInput in = Gpu(1, 2);
  in.env = {{"CUDA_VISIBLE_DEVICES", "6,7"}};
  RankPlan p = PlanRank(node, in);
  EXPECT_EQ(p.gpu_index, 7);
  EXPECT_EQ(p.nic, "mlx5_7");
  in.env = {{"CUDA_VISIBLE_DEVICES", node.FindGpu(4)->uuid + ",3"}};
  in.local_rank = 0;
  EXPECT_EQ(PlanRank(node, in).gpu_index, 4);
  in.env = {{"CUDA_VISIBLE_DEVICES", ""}};
  p = PlanRank(node, in);
  EXPECT_EQ(p.gpu_index, -1);
  EXPECT_TRUE(p.nic.empty());
  ASSERT_FALSE(p.warnings.empty());
  EXPECT_NE(p.warnings[0].find("CUDA_VISIBLE_DEVICES"), std::string::npos);
}

TEST(PlanRank, EthernetOnlyNodeUsesSocketIfname) {
  NodeTopology node = Fixture("pcie-4gpu-2socket.json");
  for (Nic& n : node.nics) n.kind = NicKind::kEthernet, n.port_state = "up";
  const RankPlan p = PlanRank(node, Gpu(3, 4));
  EXPECT_EQ(p.nic, "mlx5_1");
  EXPECT_EQ(p.nccl_env.at("NCCL_SOCKET_IFNAME"), "=mlx5_1");
  EXPECT_EQ(p.nccl_env.count("NCCL_IB_HCA"), 0u);
}

TEST(PlanRank, RdmaPreferredOverACloserEthernetPort) {
  NodeTopology node = Fixture("pcie-4gpu-2socket.json");
  Nic eth;
  eth.name = "eno1";
  eth.port_state = "up";
  eth.rate_bytes_per_second = 1.25e9;
  eth.numa_node = 0;
  node.nics.push_back(eth);
  node.gpus[0].nic_paths["eno1"] = LinkClass::kPix;
  EXPECT_EQ(PlanRank(node, Gpu(0, 4)).nic, "mlx5_0");
  // With every RDMA port down, NCCL falls back to sockets: the Ethernet port.
  for (Nic& n : node.nics) {
    if (n.kind != NicKind::kEthernet) n.port_state = "DOWN";
  }
  const RankPlan p = PlanRank(node, Gpu(0, 4));
  EXPECT_EQ(p.nic, "eno1");
  EXPECT_EQ(p.nccl_env.at("NCCL_SOCKET_IFNAME"), "=eno1");
}

TEST(PlanRank, CpuOnlyRanksSplitTheNode) {
  const NodeTopology node = Fixture("cpu-only.json");  // numa 0: 0-15,32-47; 1: 16-31,48-63
  // Two ranks: a NUMA node each.
  RankPlan p = PlanRank(node, Cpu(1, 2));
  EXPECT_EQ(p.gpu_index, -1);
  EXPECT_TRUE(p.nic.empty());
  EXPECT_TRUE(p.nccl_env.empty());
  EXPECT_EQ(FormatCpuList(p.cpus), "16-31,48-63");
  EXPECT_EQ(p.binding, "numa 1");
  // Four ranks: two per NUMA node, each with half of its cores and their siblings.
  p = PlanRank(node, Cpu(2, 4));
  EXPECT_EQ(FormatCpuList(p.cpus), "16-23,48-55");
  EXPECT_EQ(p.binding, "cores 1/2 of numa 1");
  // One rank: the whole node.
  p = PlanRank(node, Cpu(0, 1));
  EXPECT_EQ(FormatCpuList(p.cpus), "0-63");
  EXPECT_EQ(p.binding, "numa 0+numa 1");
  // numa policy: ranks share their NUMA node.
  PlanInput in = Cpu(3, 4);
  in.bind = BindPolicy::kNuma;
  EXPECT_EQ(FormatCpuList(PlanRank(node, in).cpus), "16-31,48-63");
  in.bind = BindPolicy::kNone;
  p = PlanRank(node, in);
  EXPECT_TRUE(p.cpus.empty());
  EXPECT_EQ(p.binding, "none (placement.bind)");
}

TEST(PlanRank, TwoCoresOneNumaNodeTwoRanksGetACoreEach) {
  NodeTopology node;
  node.hostname = "small";
  node.numa_nodes.push_back({0, {0, 1}, 0});
  EXPECT_EQ(FormatCpuList(PlanRank(node, Cpu(0, 2)).cpus), "0");
  EXPECT_EQ(FormatCpuList(PlanRank(node, Cpu(1, 2)).cpus), "1");
  EXPECT_EQ(PlanRank(node, Cpu(1, 2)).binding, "cores 2/2 of numa 0");
  // Three ranks on two cores: not bound, with a warning.
  const RankPlan p = PlanRank(node, Cpu(2, 3));
  EXPECT_TRUE(p.cpus.empty());
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("fewer CPUs than ranks"), std::string::npos);
}

TEST(PlanRank, StaysWithinTheAllowedCpus) {
  const NodeTopology node = Fixture("cpu-only.json");
  PlanInput in = Cpu(1, 2);
  in.allowed_cpus = {4, 5, 6, 7, 20, 21};  // a cgroup cpuset
  EXPECT_EQ(FormatCpuList(PlanRank(node, in).cpus), "20-21");
  in.allowed_cpus = {4, 5, 6, 7};  // NUMA node 0 only: both ranks split it
  EXPECT_EQ(FormatCpuList(PlanRank(node, in).cpus), "6-7");
  // A GPU whose NUMA node is outside the cpuset: bound to what is allowed, with a warning.
  const NodeTopology dgx = Fixture("dgx-h100.json");
  PlanInput g = Gpu(6, 8);
  g.allowed_cpus = {0, 1, 2, 3};
  const RankPlan p = PlanRank(dgx, g);
  EXPECT_EQ(FormatCpuList(p.cpus), "0-3");
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("outside the process's affinity"), std::string::npos);
  g.allowed_cpus = {9000};
  const RankPlan none = PlanRank(dgx, g);
  EXPECT_TRUE(none.cpus.empty());
  EXPECT_EQ(none.binding, "none (no usable CPU)");
}

TEST(PlanRank, H200PairSharesNumaZeroAndHasNoNic) {
  const NodeTopology node = Fixture("h200x2.json");
  const RankPlan p = PlanRank(node, Gpu(1, 2));
  EXPECT_EQ(p.gpu_index, 1);
  EXPECT_TRUE(p.nic.empty());
  EXPECT_EQ(p.nccl_env.count("NCCL_IB_HCA"), 0u);
  EXPECT_EQ(FormatCpuList(p.cpus), "0-31");
  // Three ranks on two GPUs wrap around, with a warning.
  const RankPlan wrap = PlanRank(node, Gpu(2, 3));
  EXPECT_EQ(wrap.gpu_index, 0);
  ASSERT_FALSE(wrap.warnings.empty());
  EXPECT_NE(wrap.warnings[0].find("share 2 GPU(s)"), std::string::npos);
}

// Captured with `ringpilot topo --json` on nvidia-h200-x2 (real NVML, hwloc, sysfs).
TEST(PlanRank, CapturedH200x2) {
  const NodeTopology node = Fixture("h200x2-captured.json");
  ASSERT_EQ(node.gpus.size(), 2u);
  ASSERT_NE(node.FindLink(0, 1), nullptr);
  EXPECT_EQ(node.FindLink(0, 1)->Label(), "NV18");
  EXPECT_EQ(node.FindLink(0, 1)->NvlinkBytesPerSecond(), 478.125e9);
  for (int lr = 0; lr < 2; ++lr) {
    const RankPlan p = PlanRank(node, Gpu(lr, 2));
    EXPECT_EQ(p.gpu_index, lr);
    EXPECT_EQ(p.pci_bus_id, node.FindGpu(lr)->pci_bus_id);
    EXPECT_FALSE(p.pci_bus_id.empty());
    EXPECT_EQ(node.FindGpu(lr)->numa_node, 0);
    EXPECT_EQ(FormatCpuList(p.cpus), "0-31");
    EXPECT_EQ(p.binding, "numa 0");
    // Its only NIC is Ethernet: NCCL's socket transport is pinned to it.
    EXPECT_EQ(p.nic, "eth0");
    EXPECT_EQ(p.nccl_env.at("NCCL_SOCKET_IFNAME"), "=eth0");
    EXPECT_TRUE(p.warnings.empty()) << p.warnings.front();
  }
}

// Captured with `ringpilot topo --json` on nvidia-h200-x4: four GPUs on NVSwitch (every
// pair NV18, as nvidia-smi topo -m shows), one NUMA node, Ethernet only.
TEST(PlanRank, CapturedH200x4) {
  const NodeTopology node = Fixture("h200x4-captured.json");
  ASSERT_EQ(node.gpus.size(), 4u);
  EXPECT_EQ(node.gpu_links.size(), 6u);
  for (const GpuLink& l : node.gpu_links) EXPECT_EQ(l.Label(), "NV18");
  for (int lr = 0; lr < 4; ++lr) {
    const RankPlan p = PlanRank(node, Gpu(lr, 4));
    EXPECT_EQ(p.gpu_index, lr);
    EXPECT_EQ(p.pci_bus_id, node.FindGpu(lr)->pci_bus_id);
    EXPECT_EQ(FormatCpuList(p.cpus), "0-63");
    EXPECT_EQ(p.nic, "eth0");
    EXPECT_TRUE(p.warnings.empty()) << p.warnings.front();
  }
}

// Captured with `ringpilot topo --json` on nvidia-h100-x1: one GPU, no GPU-GPU link.
TEST(PlanRank, CapturedH100x1) {
  const NodeTopology node = Fixture("h100x1-captured.json");
  ASSERT_EQ(node.gpus.size(), 1u);
  EXPECT_TRUE(node.gpu_links.empty());
  EXPECT_EQ(node.FindGpu(0)->name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(node.FindGpu(0)->numa_node, 0);
  const RankPlan p = PlanRank(node, Gpu(0, 1));
  EXPECT_EQ(p.gpu_index, 0);
  EXPECT_EQ(FormatCpuList(p.cpus), "0-15");
  EXPECT_EQ(p.nic, "eth0");
}

TEST(PlanRank, CudaRankWithoutGpusFallsBackToCpuPolicy) {
  const RankPlan p = PlanRank(Fixture("cpu-only.json"), Gpu(0, 2));
  EXPECT_EQ(p.gpu_index, -1);
  EXPECT_EQ(FormatCpuList(p.cpus), "0-15,32-47");
  ASSERT_FALSE(p.warnings.empty());
  EXPECT_NE(p.warnings[0].find("no GPU"), std::string::npos);
}

TEST(SplitCpus, KeepsSiblingRunsTogetherAndFallsBack) {
  auto s = SplitCpus(ParseCpuList("0-55,112-167"), 2);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(FormatCpuList(s[0]), "0-27,112-139");
  EXPECT_EQ(FormatCpuList(s[1]), "28-55,140-167");
  s = SplitCpus({0, 2, 4, 6}, 2);  // runs of one: cut the list
  EXPECT_EQ(FormatCpuList(s[0]), "0,2");
  EXPECT_EQ(FormatCpuList(s[1]), "4,6");
  s = SplitCpus(ParseCpuList("0-4"), 2);
  EXPECT_EQ(FormatCpuList(s[0]), "0-1");
  EXPECT_EQ(FormatCpuList(s[1]), "2-4");
  EXPECT_TRUE(SplitCpus({0}, 2).empty());
  EXPECT_TRUE(SplitCpus({0, 1}, 0).empty());
}

TEST(BindPolicy, RoundTripsNames) {
  for (const char* n : {"auto", "numa", "cores", "none"}) {
    ASSERT_TRUE(ParseBindPolicy(n)) << n;
    EXPECT_EQ(ToString(*ParseBindPolicy(n)), n);
  }
  EXPECT_FALSE(ParseBindPolicy("socket"));
}

}  // namespace
}  // namespace ringpilot::topology
