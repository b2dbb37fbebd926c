// The symbols NCCL looks up in libringpilot-nccl-profiler.so: ncclProfiler_v5 (NCCL 2.28),
// _v4 (2.26, 2.27), _v3 (2.25) and _v2 (2.23, 2.24). Each translates its version's
// descriptors into CommStats calls. Nothing here throws into NCCL or returns an error
// after init: a failure inside the plugin leaves NCCL's operation untouched.
#include <exception>
#include <string>

#include "nccl_profiler/comm_stats.h"
#include "nccl_profiler/op_table.h"
#include "nccl_profiler/profiler.h"
#include "nccl_profiler/profiler_abi.h"

#define RINGPILOT_EXPORT __attribute__((visibility("default")))

namespace ringpilot::nccl_profiler {
namespace {

using abi::Result;

constexpr const char kName[] = "ringpilot";

// The handles of API events (v5): whether the operations below them run inside a CUDA
// graph capture. Their kernel channels would report on every replay against the handle of
// the capture, so captured operations are not tracked.
Handle g_api_eager{HandleKind::kApiEager, nullptr};
Handle g_api_captured{HandleKind::kApiCaptured, nullptr};

CommStats* Comm(void* context) { return static_cast<CommStats*>(context); }

Handle* AsHandle(void* p) { return static_cast<Handle*>(p); }

Result Init(void** context, int* mask, const CommIdentity& id, Timing timing, int version,
            int active) {
  *context = nullptr;
  *mask = 0;
  try {
    // v4/v5 name the rank: values no communicator can have mean NCCL passed arguments in
    // another version's layout.
    if (timing == Timing::kKernelChannels &&
        (id.nranks <= 0 || id.rank < 0 || id.rank >= id.nranks || id.nnodes < 0)) {
      Profiler::Instance().Disable("profiler API v" + std::to_string(version) + " init got rank " +
                                   std::to_string(id.rank) + " of " + std::to_string(id.nranks) +
                                   " ranks: NCCL and this plugin disagree on the API");
      return abi::kSuccess;
    }
    CommStats* comm = Profiler::Instance().AddCommunicator(id, timing, version);
    if (comm != nullptr) {
      *context = comm;
      *mask = active;
    }
  } catch (const std::exception& e) {
    Profiler::Instance().Disable(e.what());
  } catch (...) {
    Profiler::Instance().Disable("unknown error at init");
  }
  return abi::kSuccess;
}

void* StartColl(CommStats* comm, const char* func, size_t count, const char* datatype,
                const char* algo, const char* proto, int channels, int nranks) {
  OpStart o;
  o.op = ParseNcclOp(func);
  o.bytes = MessageBytes(o.op, count, DataTypeSize(datatype), nranks);
  o.algo = ParseAlgo(algo);
  o.proto = ParseProto(proto);
  o.channels = channels;
  return comm->StartOp(o, MonotonicNs());
}

void* StartP2p(CommStats* comm, const char* func, size_t count, const char* datatype,
               int channels) {
  OpStart o;
  o.op = ParseNcclOp(func);
  o.bytes = MessageBytes(o.op, count, DataTypeSize(datatype), 1);
  o.channels = channels;
  return comm->StartOp(o, MonotonicNs());
}

void* StartChannel(void* parent, uint64_t gpu_ns) {
  Handle* h = AsHandle(parent);
  if (h == nullptr || h->kind != HandleKind::kOp) return nullptr;
  return h->slot->comm->StartChannel(h->slot, gpu_ns, gpu_ns != 0 ? 0 : MonotonicNs());
}

Result StopEvent(void* handle) {
  Handle* h = AsHandle(handle);
  if (h == nullptr) return abi::kSuccess;
  switch (h->kind) {
    case HandleKind::kOp:
      h->slot->comm->StopOp(h->slot);
      break;
    case HandleKind::kChannel:
      h->slot->comm->StopChannel(h->slot);
      break;
    case HandleKind::kApiEager:
    case HandleKind::kApiCaptured:
      break;
  }
  return abi::kSuccess;
}

Result RecordV4(void* handle, int state, abi::EventStateArgsV4* args) {
  Handle* h = AsHandle(handle);
  if (h != nullptr && h->kind == HandleKind::kChannel && state == abi::kKernelChStop &&
      args != nullptr) {
    const uint64_t gpu_ns = args->kernelCh.pTimer;
    h->slot->comm->RecordChannelStop(h->slot, gpu_ns, gpu_ns != 0 ? 0 : MonotonicNs());
  }
  return abi::kSuccess;
}

Result RecordV2(void*, int, abi::EventStateArgsV2*) { return abi::kSuccess; }

Result Finalize(void* context) {
  try {
    Profiler::Instance().FinalizeCommunicator(Comm(context));
  } catch (...) {
    // Finalize must not fail NCCL's destroy; the numbers so far stay exported.
  }
  return abi::kSuccess;
}

// ---- v5 ----
Result InitV5(void** context, uint64_t comm_id, int* mask, const char* name, int nnodes, int nranks,
              int rank, abi::DebugLogger) {
  CommIdentity id{comm_id, name ? name : "", rank, nranks, nnodes};
  return Init(context, mask, id, Timing::kKernelChannels, 5,
              abi::kColl | abi::kP2p | abi::kKernelCh | abi::kCollApi | abi::kP2pApi);
}

Result StartV5(void* context, void** handle, abi::EventDescrV5* d) {
  *handle = nullptr;
  CommStats* comm = Comm(context);
  if (comm == nullptr || d == nullptr) return abi::kSuccess;
  switch (d->type) {
    case abi::kCollApi:
      *handle = d->collApi.graphCaptured ? &g_api_captured : &g_api_eager;
      break;
    case abi::kP2pApi:
      *handle = d->p2pApi.graphCaptured ? &g_api_captured : &g_api_eager;
      break;
    case abi::kColl:
      if (d->parentObj != nullptr && AsHandle(d->parentObj)->kind == HandleKind::kApiCaptured)
        break;
      *handle = StartColl(comm, d->coll.func, d->coll.count, d->coll.datatype, d->coll.algo,
                          d->coll.proto, d->coll.nChannels, comm->identity().nranks);
      break;
    case abi::kP2p:
      if (d->parentObj != nullptr && AsHandle(d->parentObj)->kind == HandleKind::kApiCaptured)
        break;
      *handle = StartP2p(comm, d->p2p.func, d->p2p.count, d->p2p.datatype, d->p2p.nChannels);
      break;
    case abi::kKernelCh:
      *handle = StartChannel(d->parentObj, d->kernelCh.pTimer);
      break;
    default:
      break;
  }
  return abi::kSuccess;
}

// ---- v4 ----
Result InitV4(void** context, int* mask, const char* name, uint64_t comm_hash, int nnodes,
              int nranks, int rank, abi::DebugLogger) {
  CommIdentity id{comm_hash, name ? name : "", rank, nranks, nnodes};
  return Init(context, mask, id, Timing::kKernelChannels, 4,
              abi::kColl | abi::kP2p | abi::kKernelCh);
}

Result StartV4(void* context, void** handle, abi::EventDescrV4* d) {
  *handle = nullptr;
  CommStats* comm = Comm(context);
  if (comm == nullptr || d == nullptr) return abi::kSuccess;
  switch (d->type) {
    case abi::kColl:
      *handle = StartColl(comm, d->coll.func, d->coll.count, d->coll.datatype, d->coll.algo,
                          d->coll.proto, d->coll.nChannels, comm->identity().nranks);
      break;
    case abi::kP2p:
      *handle = StartP2p(comm, d->p2p.func, d->p2p.count, d->p2p.datatype, d->p2p.nChannels);
      break;
    case abi::kKernelCh:
      *handle = StartChannel(d->parentObj, d->kernelCh.pTimer);
      break;
    default:
      break;
  }
  return abi::kSuccess;
}

// ---- v3 and v2: no identity at init, no completion: enqueue-only counts ----
template <int kVersion>
Result InitOld(void** context, int* mask) {
  return Init(context, mask, CommIdentity{}, Timing::kEnqueueOnly, kVersion,
              abi::kColl | abi::kP2p);
}

template <class Descr>
Result StartOld(void* context, void** handle, Descr* d) {
  *handle = nullptr;
  CommStats* comm = Comm(context);
  if (comm == nullptr || d == nullptr) return abi::kSuccess;
  if (d->type == abi::kColl) {
    comm->LearnIdentity(d->coll.commHash, d->rank);
    *handle = StartColl(comm, d->coll.func, d->coll.count, d->coll.datatype, d->coll.algo,
                        d->coll.proto, 0, 0);
  } else if (d->type == abi::kP2p) {
    comm->LearnIdentity(d->p2p.commHash, d->rank);
    *handle = StartP2p(comm, d->p2p.func, d->p2p.count, d->p2p.datatype, 0);
  }
  return abi::kSuccess;
}

}  // namespace
}  // namespace ringpilot::nccl_profiler

namespace np = ringpilot::nccl_profiler;

extern "C" {
RINGPILOT_EXPORT np::abi::ProfilerV5 ncclProfiler_v5 = {np::kName,     np::InitV5,   np::StartV5,
                                                        np::StopEvent, np::RecordV4, np::Finalize};
RINGPILOT_EXPORT np::abi::ProfilerV4 ncclProfiler_v4 = {np::kName,     np::InitV4,   np::StartV4,
                                                        np::StopEvent, np::RecordV4, np::Finalize};
RINGPILOT_EXPORT np::abi::ProfilerV3 ncclProfiler_v3 = {
    np::kName,     np::InitOld<3>, np::StartOld<np::abi::EventDescrV3>,
    np::StopEvent, np::RecordV2,   np::Finalize};
RINGPILOT_EXPORT np::abi::ProfilerV2 ncclProfiler_v2 = {
    np::kName,     np::InitOld<2>, np::StartOld<np::abi::EventDescrV2>,
    np::StopEvent, np::RecordV2,   np::Finalize};
}
