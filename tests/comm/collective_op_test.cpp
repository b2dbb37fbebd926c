// comm/collective_op.h: the op names metrics and `ringpilot bench comm` share, and
// nccl-tests' bus bandwidth factors.
#include <gtest/gtest.h>

#include "comm/collective_op.h"

namespace ringpilot::comm {
namespace {

TEST(CollectiveOp, FactorsMatchNcclTests) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kAllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kAllToAll, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kSendRecv, 8), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kAllReduce, 1), 0.0);
}

TEST(CollectiveOp, NamesRoundTrip) {
  for (const CollectiveOp op :
       {CollectiveOp::kAllReduce, CollectiveOp::kBroadcast, CollectiveOp::kAllGather,
        CollectiveOp::kBarrier, CollectiveOp::kReduceScatter, CollectiveOp::kAllToAll,
        CollectiveOp::kSendRecv}) {
    ASSERT_TRUE(ParseCollectiveOp(ToString(op)).has_value()) << ToString(op);
    EXPECT_EQ(*ParseCollectiveOp(ToString(op)), op);
  }
  EXPECT_STREQ(ToString(CollectiveOp::kReduceScatter), "reduce_scatter");
  EXPECT_FALSE(ParseCollectiveOp("all_reduce").has_value());
  EXPECT_FALSE(ParseCollectiveOp("").has_value());
}

}  // namespace
}  // namespace ringpilot::comm
