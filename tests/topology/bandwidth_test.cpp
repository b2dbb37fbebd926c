#include "topology/bandwidth.h"

#include <gtest/gtest.h>

#include "tests/topology/fixtures.h"

namespace ringpilot::topology {
namespace {

using testing::Fixture;

TEST(ExpectedBusBandwidth, EightGpusOnNvSwitch) {
  const BusBandwidth bw = ExpectedAllReduceBusBandwidth(Fixture("dgx-h100.json"), 8, 1);
  EXPECT_DOUBLE_EQ(bw.intra_node_bytes_per_second, 18 * 26.5625e9);
  EXPECT_DOUBLE_EQ(bw.inter_node_bytes_per_second, 0);
  EXPECT_DOUBLE_EQ(bw.expected_bytes_per_second, 478.125e9);
  EXPECT_EQ(bw.bottleneck.rfind("NV18 GPU", 0), 0u) << bw.bottleneck;
}

TEST(ExpectedBusBandwidth, TwoDgxNodesAreLimitedByTheirNics) {
  // Each GPU's rings cross nodes on its own 400 Gb/s NIC: 8 x 50 GB/s = 400 GB/s per node,
  // below NVLink's 478 GB/s.
  const BusBandwidth bw = ExpectedAllReduceBusBandwidth(Fixture("dgx-h100.json"), 8, 2);
  EXPECT_DOUBLE_EQ(bw.intra_node_bytes_per_second, 478.125e9);
  EXPECT_DOUBLE_EQ(bw.inter_node_bytes_per_second, 400e9);
  EXPECT_DOUBLE_EQ(bw.expected_bytes_per_second, 400e9);
  EXPECT_EQ(bw.bottleneck, "network 400.0 GB/s per node");
  // Two GPUs per node use two NICs.
  EXPECT_DOUBLE_EQ(
      ExpectedAllReduceBusBandwidth(Fixture("dgx-h100.json"), 2, 4).inter_node_bytes_per_second,
      100e9);
  // One GPU per node: only the network applies, one NIC.
  const BusBandwidth one = ExpectedAllReduceBusBandwidth(Fixture("dgx-h100.json"), 1, 2);
  EXPECT_DOUBLE_EQ(one.intra_node_bytes_per_second, 0);
  EXPECT_DOUBLE_EQ(one.expected_bytes_per_second, 50e9);
}

TEST(ExpectedBusBandwidth, NicsDownAreNotUsed) {
  NodeTopology node = Fixture("dgx-h100.json");
  node.nics[3].port_state = "DOWN";
  // GPU 3's rings move to the next nearest NIC that is up, which another GPU already uses.
  EXPECT_DOUBLE_EQ(RingNetworkBytesPerSecond(node, 8), 350e9);
}

TEST(ExpectedJobBusBandwidth, SameModelForGpuAndCpuJobs) {
  const NodeTopology dgx = Fixture("dgx-h100.json");
  const JobBusBandwidth nv = ExpectedJobBusBandwidth(dgx, true, 8, 1);
  EXPECT_DOUBLE_EQ(nv.bytes_per_second, 478.125e9);
  EXPECT_EQ(nv.source.rfind("NV18 GPU", 0), 0u) << nv.source;
  EXPECT_DOUBLE_EQ(ExpectedJobBusBandwidth(dgx, true, 8, 2).bytes_per_second, 400e9);
  const JobBusBandwidth too_many = ExpectedJobBusBandwidth(dgx, true, 9, 1);
  EXPECT_DOUBLE_EQ(too_many.bytes_per_second, 0);
  EXPECT_EQ(too_many.source.rfind("no topology model: ", 0), 0u) << too_many.source;
  const NodeTopology cpu = Fixture("cpu-only.json");
  const JobBusBandwidth net = ExpectedJobBusBandwidth(cpu, false, 2, 2);
  EXPECT_DOUBLE_EQ(net.bytes_per_second, 25e9 / 8);
  EXPECT_EQ(net.source, "node network 3.1 GB/s");
  const JobBusBandwidth local = ExpectedJobBusBandwidth(cpu, false, 2, 1);
  EXPECT_DOUBLE_EQ(local.bytes_per_second, 0);
  EXPECT_EQ(local.source, "no model for CPU ranks on one node");
}

TEST(ExpectedBusBandwidth, PciePairVersusCrossSocketRing) {
  const NodeTopology node = Fixture("pcie-4gpu-2socket.json");
  const BusBandwidth pair = ExpectedAllReduceBusBandwidth(node, 2, 1);
  EXPECT_DOUBLE_EQ(pair.expected_bytes_per_second, PcieBytesPerSecond(LinkClass::kPix));
  EXPECT_EQ(pair.bottleneck, "PIX GPU0-GPU1");
  const BusBandwidth four = ExpectedAllReduceBusBandwidth(node, 4, 1);
  EXPECT_DOUBLE_EQ(four.expected_bytes_per_second, PcieBytesPerSecond(LinkClass::kSys));
  EXPECT_EQ(four.bottleneck, "SYS GPU1-GPU2");
  EXPECT_LT(four.expected_bytes_per_second, pair.expected_bytes_per_second);
  // Two nodes of 4: the GPUs use both 200 Gb/s NICs, 50 GB/s per node > SYS 10 GB/s.
  const BusBandwidth two = ExpectedAllReduceBusBandwidth(node, 4, 2);
  EXPECT_DOUBLE_EQ(two.inter_node_bytes_per_second, 50e9);
  EXPECT_EQ(two.bottleneck, "SYS GPU1-GPU2");
  EXPECT_DOUBLE_EQ(two.expected_bytes_per_second, 10e9);
}

TEST(ExpectedBusBandwidth, PcieClassTableIsOrdered) {
  EXPECT_GT(PcieBytesPerSecond(LinkClass::kPix), PcieBytesPerSecond(LinkClass::kPxb));
  EXPECT_GT(PcieBytesPerSecond(LinkClass::kPxb), PcieBytesPerSecond(LinkClass::kPhb));
  EXPECT_GT(PcieBytesPerSecond(LinkClass::kPhb), PcieBytesPerSecond(LinkClass::kNode));
  EXPECT_GT(PcieBytesPerSecond(LinkClass::kNode), PcieBytesPerSecond(LinkClass::kSys));
  EXPECT_DOUBLE_EQ(PcieBytesPerSecond(LinkClass::kUnknown), 0);
}

TEST(ExpectedBusBandwidth, H200PairAndSingleGpu) {
  const NodeTopology node = Fixture("h200x2.json");
  EXPECT_DOUBLE_EQ(ExpectedAllReduceBusBandwidth(node, 2, 1).expected_bytes_per_second, 478.125e9);
  const BusBandwidth single = ExpectedAllReduceBusBandwidth(node, 1, 1);
  EXPECT_DOUBLE_EQ(single.expected_bytes_per_second, 0);
  EXPECT_EQ(single.bottleneck, "one GPU: no communication");
  // No NIC at all: nothing crosses nodes.
  EXPECT_DOUBLE_EQ(ExpectedAllReduceBusBandwidth(node, 2, 2).expected_bytes_per_second, 0);
}

TEST(ExpectedBusBandwidth, CapturedH200PairIsNv18) {
  const NodeTopology node = Fixture("h200x2-captured.json");
  const BusBandwidth bw = ExpectedAllReduceBusBandwidth(node, 2, 1);
  EXPECT_DOUBLE_EQ(bw.expected_bytes_per_second, 478.125e9);
  EXPECT_EQ(bw.bottleneck, "NV18 GPU0-GPU1");
}

TEST(ExpectedBusBandwidth, CapturedH200QuadRingIsNv18) {
  const NodeTopology node = Fixture("h200x4-captured.json");
  for (int ranks : {2, 3, 4}) {
    const BusBandwidth bw = ExpectedAllReduceBusBandwidth(node, ranks, 1);
    EXPECT_DOUBLE_EQ(bw.expected_bytes_per_second, 478.125e9) << ranks;
    EXPECT_EQ(bw.bottleneck.rfind("NV18 GPU", 0), 0u) << bw.bottleneck;
  }
}

TEST(ExpectedBusBandwidth, RejectsImpossibleJobs) {
  const NodeTopology node = Fixture("pcie-4gpu-2socket.json");
  EXPECT_THROW(ExpectedAllReduceBusBandwidth(node, 5, 1), std::invalid_argument);
  EXPECT_THROW(ExpectedAllReduceBusBandwidth(node, 0, 1), std::invalid_argument);
  EXPECT_THROW(ExpectedAllReduceBusBandwidth(node, 2, 0), std::invalid_argument);
  EXPECT_THROW(ExpectedAllReduceBusBandwidth(Fixture("cpu-only.json"), 1, 2),
               std::invalid_argument);
}

TEST(NodeNetworkBandwidth, PrefersRdmaPortsThatAreUp) {
  NodeTopology node = Fixture("cpu-only.json");
  EXPECT_DOUBLE_EQ(NodeNetworkBytesPerSecond(node), 25e9 / 8);
  Nic ib;
  ib.name = "mlx5_0";
  ib.kind = NicKind::kInfiniBand;
  ib.port_state = "ACTIVE";
  ib.rate_bytes_per_second = 25e9;
  node.nics.push_back(ib);
  EXPECT_DOUBLE_EQ(NodeNetworkBytesPerSecond(node), 25e9);  // the Ethernet port is not counted
  node.nics.back().port_state = "DOWN";
  EXPECT_DOUBLE_EQ(NodeNetworkBytesPerSecond(node), 25e9 / 8);
}

}  // namespace
}  // namespace ringpilot::topology
