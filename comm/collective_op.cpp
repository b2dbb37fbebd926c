#include "comm/collective_op.h"

namespace ringpilot::comm {

const char* ToString(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce:
      return "allreduce";
    case CollectiveOp::kBroadcast:
      return "broadcast";
    case CollectiveOp::kAllGather:
      return "allgather";
    case CollectiveOp::kBarrier:
      return "barrier";
    case CollectiveOp::kReduceScatter:
      return "reduce_scatter";
    case CollectiveOp::kAllToAll:
      return "alltoall";
    case CollectiveOp::kSendRecv:
      return "sendrecv";
  }
  return "unknown";
}

std::optional<CollectiveOp> ParseCollectiveOp(const std::string& name) {
  for (const CollectiveOp op :
       {CollectiveOp::kAllReduce, CollectiveOp::kBroadcast, CollectiveOp::kAllGather,
        CollectiveOp::kBarrier, CollectiveOp::kReduceScatter, CollectiveOp::kAllToAll,
        CollectiveOp::kSendRecv}) {
    if (name == ToString(op)) return op;
  }
  return std::nullopt;
}

double BusBandwidthFactor(CollectiveOp op, int ranks) {
  const double n = ranks;
  switch (op) {
    case CollectiveOp::kAllReduce:
      return 2.0 * (n - 1) / n;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll:
      return (n - 1) / n;
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kSendRecv:
    case CollectiveOp::kBarrier:
      return 1.0;
  }
  return 1.0;
}

int SizeBucketIndex(int64_t bytes) {
  if (bytes < (64 << 10)) return 0;
  if (bytes < (1 << 20)) return 1;
  if (bytes < (4 << 20)) return 2;
  if (bytes < (16 << 20)) return 3;
  if (bytes < (64 << 20)) return 4;
  return 5;
}

const char* SizeBucketName(int index) {
  static constexpr const char* kNames[kSizeBuckets] = {"lt64KiB",    "64KiB-1MiB",  "1MiB-4MiB",
                                                       "4MiB-16MiB", "16MiB-64MiB", "ge64MiB"};
  return index >= 0 && index < kSizeBuckets ? kNames[index] : "unknown";
}

const char* SizeBucket(int64_t bytes) { return SizeBucketName(SizeBucketIndex(bytes)); }

}  // namespace ringpilot::comm
