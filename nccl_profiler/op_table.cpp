#include "nccl_profiler/op_table.h"

#include <cstring>

#include "comm/collective_op.h"

namespace ringpilot::nccl_profiler {
namespace {

struct OpName {
  const char* nccl;
  NcclOp op;
};
constexpr OpName kOpNames[] = {
    {"AllReduce", NcclOp::kAllReduce},
    {"Broadcast", NcclOp::kBroadcast},
    {"Reduce", NcclOp::kReduce},
    {"AllGather", NcclOp::kAllGather},
    {"ReduceScatter", NcclOp::kReduceScatter},
    {"AlltoAll", NcclOp::kAllToAll},
    {"Gather", NcclOp::kGather},
    {"Scatter", NcclOp::kScatter},
    {"Send", NcclOp::kSend},
    {"Recv", NcclOp::kRecv},
};

constexpr const char* kAlgoNames[] = {
    "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
constexpr const char* kAlgoLabels[kNumAlgos] = {
    "tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat", "none", "other"};
constexpr const char* kProtoNames[] = {"LL", "LL128", "SIMPLE"};
constexpr const char* kProtoLabels[kNumProtos] = {"ll", "ll128", "simple", "none", "other"};

struct TypeSize {
  const char* nccl;
  int bytes;
};
constexpr TypeSize kTypeSizes[] = {
    {"ncclFloat32", 4}, {"ncclBfloat16", 2}, {"ncclFloat16", 2},    {"ncclFloat64", 8},
    {"ncclInt32", 4},   {"ncclUint32", 4},   {"ncclInt64", 8},      {"ncclUint64", 8},
    {"ncclInt8", 1},    {"ncclUint8", 1},    {"ncclFloat8e4m3", 1}, {"ncclFloat8e5m2", 1},
};

}  // namespace

NcclOp ParseNcclOp(const char* func) {
  if (func == nullptr) return NcclOp::kOther;
  for (const OpName& n : kOpNames) {
    if (std::strcmp(func, n.nccl) == 0) return n.op;
  }
  return NcclOp::kOther;
}

const char* OpLabel(NcclOp op) {
  switch (op) {
    case NcclOp::kAllReduce:
      return comm::ToString(comm::CollectiveOp::kAllReduce);
    case NcclOp::kBroadcast:
      return comm::ToString(comm::CollectiveOp::kBroadcast);
    case NcclOp::kAllGather:
      return comm::ToString(comm::CollectiveOp::kAllGather);
    case NcclOp::kReduceScatter:
      return comm::ToString(comm::CollectiveOp::kReduceScatter);
    case NcclOp::kAllToAll:
      return comm::ToString(comm::CollectiveOp::kAllToAll);
    case NcclOp::kReduce:
      return "reduce";
    case NcclOp::kGather:
      return "gather";
    case NcclOp::kScatter:
      return "scatter";
    case NcclOp::kSend:
      return "send";
    case NcclOp::kRecv:
      return "recv";
    case NcclOp::kOther:
      return "other";
  }
  return "other";
}

bool IsPointToPoint(NcclOp op) { return op == NcclOp::kSend || op == NcclOp::kRecv; }

int64_t MessageBytes(NcclOp op, size_t count, int type_size, int nranks) {
  const int64_t bytes = static_cast<int64_t>(count) * type_size;
  switch (op) {
    case NcclOp::kAllGather:
    case NcclOp::kReduceScatter:
    case NcclOp::kAllToAll:
    case NcclOp::kGather:
    case NcclOp::kScatter:
      return bytes * (nranks > 0 ? nranks : 1);
    case NcclOp::kAllReduce:
    case NcclOp::kBroadcast:
    case NcclOp::kReduce:
    case NcclOp::kSend:
    case NcclOp::kRecv:
    case NcclOp::kOther:
      return bytes;
  }
  return bytes;
}

double BusBandwidthFactor(NcclOp op, int nranks) {
  if (nranks <= 0) return 0;
  switch (op) {
    case NcclOp::kAllReduce:
      return comm::BusBandwidthFactor(comm::CollectiveOp::kAllReduce, nranks);
    case NcclOp::kBroadcast:
    case NcclOp::kReduce:
      return comm::BusBandwidthFactor(comm::CollectiveOp::kBroadcast, nranks);
    case NcclOp::kAllGather:
    case NcclOp::kGather:
    case NcclOp::kScatter:
      return comm::BusBandwidthFactor(comm::CollectiveOp::kAllGather, nranks);
    case NcclOp::kReduceScatter:
      return comm::BusBandwidthFactor(comm::CollectiveOp::kReduceScatter, nranks);
    case NcclOp::kAllToAll:
      return comm::BusBandwidthFactor(comm::CollectiveOp::kAllToAll, nranks);
    case NcclOp::kSend:
    case NcclOp::kRecv:
      return comm::BusBandwidthFactor(comm::CollectiveOp::kSendRecv, nranks);
    case NcclOp::kOther:
      return 0;
  }
  return 0;
}

int ParseAlgo(const char* algo) {
  if (algo == nullptr) return kAlgoNone;
  for (int i = 0; i < static_cast<int>(sizeof kAlgoNames / sizeof kAlgoNames[0]); ++i) {
    if (std::strcmp(algo, kAlgoNames[i]) == 0) return i;
  }
  return kNumAlgos - 1;
}

const char* AlgoLabel(int algo) {
  return algo >= 0 && algo < kNumAlgos ? kAlgoLabels[algo] : "other";
}

int ParseProto(const char* proto) {
  if (proto == nullptr) return 3;
  for (int i = 0; i < static_cast<int>(sizeof kProtoNames / sizeof kProtoNames[0]); ++i) {
    if (std::strcmp(proto, kProtoNames[i]) == 0) return i;
  }
  return kNumProtos - 1;
}

const char* ProtoLabel(int proto) {
  return proto >= 0 && proto < kNumProtos ? kProtoLabels[proto] : "other";
}

int DataTypeSize(const char* datatype) {
  if (datatype == nullptr) return 0;
  for (const TypeSize& t : kTypeSizes) {
    if (std::strcmp(datatype, t.nccl) == 0) return t.bytes;
  }
  return 0;
}

}  // namespace ringpilot::nccl_profiler
