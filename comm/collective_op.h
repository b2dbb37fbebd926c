// The names of collectives, shared by the training communicators (metrics' `op` label)
// and `ringpilot bench comm`. Torch-free (target ringpilot::comm_ops) so that the
// benchmark program and the launcher side can use it without LibTorch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ringpilot::comm {

/// Every collective ringpilot names. The first four are the ones the training
/// communicators issue (kTrainingCollectiveOps), in this order: telemetry arrays are
/// indexed by the enum value.
enum class CollectiveOp {
  kAllReduce,
  kBroadcast,
  kAllGather,
  kBarrier,
  kReduceScatter,
  kAllToAll,
  kSendRecv,
};
/// CollectiveOp values below this are issued by the training communicators.
inline constexpr int kTrainingCollectiveOps = 4;

/// "allreduce", "broadcast", "allgather", "barrier", "reduce_scatter", "alltoall",
/// "sendrecv": the `op` label value and `ringpilot bench comm --ops` name.
const char* ToString(CollectiveOp op);

/// The op named `name` (ToString's spelling); nullopt for anything else.
std::optional<CollectiveOp> ParseCollectiveOp(const std::string& name);

/// nccl-tests' bus bandwidth factor (doc/PERFORMANCE.md; busbw = algbw * factor) for `op`
/// on `ranks` ranks: all-reduce 2(n-1)/n; all-gather, reduce-scatter and all-to-all
/// (n-1)/n; broadcast, send/recv and barrier 1. One rank moves nothing over a bus: 0 for
/// the n-dependent ops.
double BusBandwidthFactor(CollectiveOp op, int ranks);

/// The `size_bucket` label of a message of `bytes`: "lt64KiB", "64KiB-1MiB", "1MiB-4MiB",
/// "4MiB-16MiB", "16MiB-64MiB", "ge64MiB". Few and fixed, so label cardinality stays bounded
/// whatever the bucket sizes of a job; shared by the trainer and the NCCL profiler plugin.
const char* SizeBucket(int64_t bytes);
/// How many classes SizeBucket has, and the index of `bytes`' class (0 = "lt64KiB").
inline constexpr int kSizeBuckets = 6;
int SizeBucketIndex(int64_t bytes);
/// The label of class `index` (0..kSizeBuckets-1).
const char* SizeBucketName(int index);

}  // namespace ringpilot::comm
