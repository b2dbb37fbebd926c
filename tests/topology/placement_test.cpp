#include "topology/placement.h"

#include <gtest/gtest.h>

#include "tests/topology/fixtures.h"

namespace ringpilot::topology {
namespace {

using testing::Fixture;

TEST(NearestNic, DgxGpuUsesItsPixNic) {
  const NodeTopology node = Fixture("dgx-h100.json");
  for (int g = 0; g < 8; ++g) {
    EXPECT_EQ(NearestNic(node, g).value_or(""), "mlx5_" + std::to_string(g));
  }
}

TEST(NearestNic, PcieServerUsesTheNicOfItsSocket) {
  const NodeTopology node = Fixture("pcie-4gpu-2socket.json");
  EXPECT_EQ(NearestNic(node, 0).value_or(""), "mlx5_0");
  EXPECT_EQ(NearestNic(node, 1).value_or(""), "mlx5_0");
  EXPECT_EQ(NearestNic(node, 2).value_or(""), "mlx5_1");
  EXPECT_EQ(NearestNic(node, 3).value_or(""), "mlx5_1");
}

TEST(NearestNic, TiesBrokenByNumaThenDownPortsLast) {
  NodeTopology node = Fixture("pcie-4gpu-2socket.json");
  // Both NICs SYS from GPU 0: the one on GPU 0's NUMA node wins.
  Gpu& gpu0 = node.gpus[0];
  gpu0.nic_paths["mlx5_0"] = LinkClass::kSys;
  gpu0.nic_paths["mlx5_1"] = LinkClass::kSys;
  EXPECT_EQ(NearestNic(node, 0).value_or(""), "mlx5_0");
  node.nics[0].numa_node = 1;
  node.nics[1].numa_node = 0;
  EXPECT_EQ(NearestNic(node, 0).value_or(""), "mlx5_1");
  // A closer port that is down loses to one that is up.
  gpu0.nic_paths["mlx5_0"] = LinkClass::kPix;
  node.nics[0].port_state = "DOWN";
  EXPECT_EQ(NearestNic(node, 0).value_or(""), "mlx5_1");
}

TEST(NearestNic, NoneWithoutNicsOrGpu) {
  EXPECT_FALSE(NearestNic(Fixture("h200x2.json"), 0));
  EXPECT_FALSE(NearestNic(Fixture("cpu-only.json"), 0));
  EXPECT_FALSE(NearestNic(Fixture("dgx-h100.json"), 8));
}

TEST(GpuCpuSet, IsTheGpusNumaNode) {
  const NodeTopology dgx = Fixture("dgx-h100.json");
  EXPECT_EQ(FormatCpuList(GpuCpuSet(dgx, 0)), "0-55,112-167");
  EXPECT_EQ(FormatCpuList(GpuCpuSet(dgx, 7)), "56-111,168-223");
  const NodeTopology pcie = Fixture("pcie-4gpu-2socket.json");
  EXPECT_EQ(FormatCpuList(GpuCpuSet(pcie, 1)), "0-31,64-95");
  EXPECT_EQ(FormatCpuList(GpuCpuSet(pcie, 2)), "32-63,96-127");
  const NodeTopology h200 = Fixture("h200x2.json");
  EXPECT_EQ(FormatCpuList(GpuCpuSet(h200, 1)), "0-31");
  EXPECT_TRUE(GpuCpuSet(h200, 5).empty());
}

TEST(GpuCpuSet, UnknownNumaMeansEveryCpu) {
  NodeTopology node = Fixture("pcie-4gpu-2socket.json");
  node.gpus[0].numa_node = -1;
  EXPECT_EQ(FormatCpuList(GpuCpuSet(node, 0)), "0-127");
}

}  // namespace
}  // namespace ringpilot::topology
