// NCCL's names for operations, algorithms, protocols and data types (the strings its
// profiler descriptors carry: ncclFuncToString, ncclAlgoToString, ncclProtoToString,
// ncclDatatypeToString) mapped to small indices, label values and nccl-tests' bus bandwidth
// factors. Pure functions, no allocation: called on NCCL's threads.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringpilot::nccl_profiler {

/// NCCL operations. Metric arrays are indexed by the value.
enum class NcclOp : uint8_t {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kGather,
  kScatter,
  kSend,
  kRecv,
  kOther,  ///< any name NCCL adds later (its label is "other")
};
inline constexpr int kNumOps = 11;

/// NCCL's function name ("AllReduce", "Send", ...; case-sensitive) -> NcclOp; kOther for
/// unknown names and null.
NcclOp ParseNcclOp(const char* func);
/// The `op` label: the trainer's spelling where the trainer has the op (comm::ToString:
/// "allreduce", "broadcast", "allgather", "reduce_scatter", "alltoall"), else "reduce",
/// "gather", "scatter", "send", "recv", "other".
const char* OpLabel(NcclOp op);
/// True for send and recv (point-to-point; they have their own sequence numbers).
bool IsPointToPoint(NcclOp op);

/// nccl-tests' "size" of an operation on `nranks` ranks whose descriptor says `count`
/// elements of `type_size` bytes: NCCL reports the per-rank count of all-gather, gather,
/// scatter, all-to-all (per peer) and reduce-scatter (output), nccl-tests counts the whole
/// buffer, so those are multiplied by nranks; the others are count * type_size.
int64_t MessageBytes(NcclOp op, size_t count, int type_size, int nranks);
/// Bus bandwidth = algorithm bandwidth (MessageBytes / time) * this factor: nccl-tests'
/// factors through comm::BusBandwidthFactor (reduce as broadcast: 1; gather and scatter as
/// all-gather: (n-1)/n; send and recv as sendrecv: 1); 0 for kOther.
double BusBandwidthFactor(NcclOp op, int nranks);

/// Algorithms NCCL names, then kAlgoNone (point-to-point ops carry none) and kAlgoOther.
inline constexpr int kNumAlgos = 9;
inline constexpr int kAlgoNone = 7;
/// "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT" -> 0..6;
/// null -> kAlgoNone; anything else -> kAlgoOther (8).
int ParseAlgo(const char* algo);
/// The `algo` label: NCCL's name in lower case ("ring", "nvls_tree"), "none", "other".
const char* AlgoLabel(int algo);

/// "LL", "LL128", "SIMPLE" -> 0..2; null -> 3 ("none"); else 4 ("other").
inline constexpr int kNumProtos = 5;
int ParseProto(const char* proto);
/// The `proto` label: "ll", "ll128", "simple", "none", "other".
const char* ProtoLabel(int proto);

/// Bytes per element of NCCL's data type name ("ncclFloat32" -> 4, "ncclBfloat16" -> 2);
/// 0 for a name it does not know (NCCL writes "Unknown" for ncclUint8), so that such an
/// operation counts with 0 bytes rather than a guessed size.
int DataTypeSize(const char* datatype);

}  // namespace ringpilot::nccl_profiler
