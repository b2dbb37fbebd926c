// NCCL INFO log parsing: transports per peer from channel lines in NCCL 2.2x's format.
#include "metrics/nccl_log.h"

#include <gtest/gtest.h>

#include <sstream>

namespace ringpilot::metrics {
namespace {

TEST(NcclLog, ClassifiesTransports) {
  EXPECT_EQ(ClassifyNcclTransport("P2P/CUMEM/read"), "P2P");
  EXPECT_EQ(ClassifyNcclTransport("P2P/IPC"), "P2P");
  EXPECT_EQ(ClassifyNcclTransport("SHM/direct/direct"), "SHM");
  EXPECT_EQ(ClassifyNcclTransport("NET/IB/0/GDRDMA"), "NET_IB");
  EXPECT_EQ(ClassifyNcclTransport("NET/IBext_v8/2"), "NET_IB");
  EXPECT_EQ(ClassifyNcclTransport("NET/Socket/0"), "NET_Socket");
  EXPECT_EQ(ClassifyNcclTransport("NET/AWS Libfabric/0"), "NET_AWS_Libfabric");
  EXPECT_EQ(ClassifyNcclTransport("COLLNET/0"), "COLLNET");
  EXPECT_EQ(ClassifyNcclTransport("ring"), "");
}

TEST(NcclLog, ParsesChannelLines) {
  int from = -1, to = -1;
  std::string t;
  EXPECT_TRUE(ParseNcclChannelLine(
      "gpu-a:4015539:4015652 [0] NCCL INFO Channel 07/0 : 0[0] -> 2[0] [receive] via "
      "NET/IB/3/GDRDMA",
      &from, &to, &t));
  EXPECT_EQ(from, 0);
  EXPECT_EQ(to, 2);
  EXPECT_EQ(t, "NET_IB");
  EXPECT_TRUE(ParseNcclChannelLine(
      "gpu-a:5666:5808 [3] NCCL INFO Channel 07/0 : 3[3] -> 4[4] via P2P/CUMEM/read", &from, &to,
      &t));
  EXPECT_EQ(t, "P2P");
  EXPECT_FALSE(
      ParseNcclChannelLine("gpu-a:1:2 [0] NCCL INFO Channel 00/24 :    0   1", &from, &to, &t));
  EXPECT_FALSE(ParseNcclChannelLine(
      "gpu-a:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>", &from, &to,
      &t));
  EXPECT_FALSE(ParseNcclChannelLine("", &from, &to, &t));
}

TEST(NcclLog, PeerTransportsOfOneRank) {
  std::istringstream log(
      "node-a:100:200 [1] NCCL INFO NCCL_DEBUG_FILE set by environment to /run/x.log\n"
      "node-a:100:200 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM/read\n"
      "node-a:100:200 [1] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via P2P/CUMEM/read\n"
      "node-a:100:200 [1] NCCL INFO Channel 00/0 : 3[1] -> 1[1] [receive] via NET/IB/0/GDRDMA\n"
      "node-a:100:200 [1] NCCL INFO Channel 00/0 : 1[1] -> 3[1] [send] via NET/Socket/0\n"
      "node-a:100:200 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] via SHM/direct/direct\n"
      "node-a:100:201 [0] NCCL INFO Channel 00/0 : 0[0] -> 2[0] via P2P/CUMEM\n"
      "node-a:100:200 [1] NCCL INFO Connected all rings, use ring PXN 0 GDR 1\n");
  const auto peers = NcclPeerTransports(log, 1);
  using Set = std::set<std::string>;
  EXPECT_EQ(peers, (std::map<int, Set>{
                       {0, Set{"P2P"}}, {2, Set{"SHM"}}, {3, Set{"NET_IB", "NET_Socket"}}}));
}

}  // namespace
}  // namespace ringpilot::metrics
