#include "comm/nccl_communicator.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>

#include "comm/device_timeline.h"
#include "comm/status.h"

namespace ringpilot::comm {

namespace {

std::string Where(const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line) + ": ";
}

// Hot-path checks print and abort the job instead of throwing.
#define NCCL_CHECK_FATAL(call)                                                            \
  do {                                                                                    \
    ncclResult_t r_ = (call);                                                             \
    if (r_ != ncclSuccess)                                                                \
      AbortJob(Where(__FILE__, __LINE__) + #call + " failed: " + ncclGetErrorString(r_)); \
  } while (0)

#define CUDA_CHECK_FATAL(call)                                                            \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess)                                                                \
      AbortJob(Where(__FILE__, __LINE__) + #call + " failed: " + cudaGetErrorString(e_)); \
  } while (0)

ncclDataType_t ToNcclType(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return ncclFloat32;
    case at::kDouble:
      return ncclFloat64;
    case at::kHalf:
      return ncclFloat16;
    case at::kBFloat16:
      return ncclBfloat16;
    case at::kInt:
      return ncclInt32;
    case at::kLong:
      return ncclInt64;
    case at::kByte:
    case at::kBool:
      return ncclUint8;
    case at::kChar:
      return ncclInt8;
    default:
      throw CommError(std::string("nccl communicator: unsupported dtype ") + at::toString(t) +
                      " (" + ProcessLocation() + ")");
  }
}

ncclRedOp_t ToNcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
  }
  return ncclSum;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool Capturing(cudaStream_t s) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(s, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone;
}

}  // namespace

// An event shared by the Work that waits on it and the timing queue that reads it.
std::shared_ptr<void> MakeEvent(unsigned flags) {
  cudaEvent_t ev = nullptr;
  if (cudaEventCreateWithFlags(&ev, flags) != cudaSuccess) return nullptr;
  return std::shared_ptr<void>(ev, [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
}

inline cudaEvent_t Ev(const std::shared_ptr<void>& e) { return static_cast<cudaEvent_t>(e.get()); }

class NcclWork : public Work {
 public:
  explicit NcclWork(std::shared_ptr<void> done) : done_(std::move(done)) {}
  bool Test() override { return cudaEventQuery(Ev(done_)) == cudaSuccess; }
  void Wait() override {
    // Orders the caller's stream after the collective; the host never blocks.
    cudaStreamWaitEvent(c10::cuda::getCurrentCUDAStream().stream(), Ev(done_), 0);
  }

 private:
  std::shared_ptr<void> done_;
};

NcclCommunicator::NcclCommunicator(MPI_Comm bootstrap, int device, NcclOptions options)
    : device_(device),
      options_(options),
      stream_(c10::cuda::getStreamFromPool(options.high_priority_stream, device)) {
  MPI_CHECK(MPI_Comm_rank(bootstrap, &rank_));
  MPI_CHECK(MPI_Comm_size(bootstrap, &size_));
  if (!(options_.timeout_s > 0)) {
    throw CommError("NCCL communicator: timeout must be positive (" + ProcessLocation() + ")");
  }
  c10::cuda::CUDAGuard guard(device_);
  ncclUniqueId id;
  if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, bootstrap));
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  switch (options_.cta_policy) {
    case NcclCtaPolicy::kDefault:
      break;  // NCCL_CONFIG_INITIALIZER leaves it to NCCL
    case NcclCtaPolicy::kEfficiency:
      config.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY;
      break;
    case NcclCtaPolicy::kZero:
      config.CTAPolicy = NCCL_CTA_POLICY_ZERO;
      break;
  }
  NCCL_CHECK(ncclCommInitRankConfig(&comm_, size_, id, rank_, &config));
#else
  if (options_.cta_policy != NcclCtaPolicy::kDefault) {
    throw CommError("comm.nccl_cta_policy needs NCCL >= 2.27; ringpilot was built against " +
                    std::to_string(NCCL_VERSION_CODE) + " (" + ProcessLocation() + ")");
  }
  NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
#endif
  watchdog_ = std::thread([this] { WatchdogLoop(); });
}

NcclCommunicator::~NcclCommunicator() {
  stop_ = true;
  if (watchdog_.joinable()) watchdog_.join();
  timed_.clear();
  if (comm_) {
    // Deregistration is collective like registration: every rank destroys its
    // communicator at the end of the job, in the same order.
    cudaDeviceSynchronize();
    for (const Registered& r : registered_) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
      if (options_.buffer_registration == NcclBufferRegistration::kSymmetric) {
        ncclCommWindowDeregister(comm_, static_cast<ncclWindow_t>(r.handle));
        continue;
      }
#endif
      ncclCommDeregister(comm_, r.handle);
    }
    ncclCommDestroy(comm_);
  }
  for (const Registered& r : registered_) ncclMemFree(r.ptr);
}

at::Tensor NcclCommunicator::AllocateCollectiveBuffer(int64_t numel,
                                                      const at::TensorOptions& options) {
  if (options_.buffer_registration == NcclBufferRegistration::kNone) {
    return Communicator::AllocateCollectiveBuffer(numel, options);
  }
  c10::cuda::CUDAGuard guard(device_);
  const size_t bytes =
      static_cast<size_t>(numel) * c10::elementSize(options.dtype().toScalarType());
  Registered r;
  NCCL_CHECK(ncclMemAlloc(&r.ptr, bytes));
  registered_.push_back(r);  // freed by the destructor even if registration fails below
  registered_bytes_ += static_cast<int64_t>(bytes);
  if (options_.buffer_registration == NcclBufferRegistration::kSymmetric) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
    ncclWindow_t win = nullptr;
    NCCL_CHECK(ncclCommWindowRegister(comm_, r.ptr, bytes, &win, NCCL_WIN_COLL_SYMMETRIC));
    registered_.back().handle = win;
#else
    throw CommError(
        "comm.nccl_buffer_registration: symmetric needs NCCL >= 2.27; ringpilot "
        "was built against " +
        std::to_string(NCCL_VERSION_CODE) + " (" + ProcessLocation() + ")");
#endif
  } else {
    NCCL_CHECK(ncclCommRegister(comm_, r.ptr, bytes, &registered_.back().handle));
  }
  CUDA_CHECK(cudaMemset(r.ptr, 0, bytes));
  // Not owning: the communicator frees it (NCCL's allocator, registered with this comm).
  return at::from_blob(
      r.ptr, {numel}, [](void*) {}, options.device(at::Device(at::kCUDA, device_)));
}

template <class Launch>
std::unique_ptr<Work> NcclCommunicator::Enqueue(CollectiveOp op, const at::Tensor& tensor,
                                                int64_t bytes, Launch&& launch) {
  if (!tensor.is_cuda() || !tensor.is_contiguous()) {
    throw CommError("nccl communicator: needs a contiguous CUDA tensor (" + ProcessLocation() +
                    ")");
  }
  c10::cuda::CUDAGuard guard(device_);
  cudaStream_t caller = c10::cuda::getCurrentCUDAStream(device_).stream();
  cudaStream_t comm_stream = stream_.stream();
  const bool capturing = Capturing(caller);
  // Order the collective after the work that produced its input.
  cudaEvent_t ready;
  CUDA_CHECK_FATAL(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  CUDA_CHECK_FATAL(cudaEventRecord(ready, caller));
  CUDA_CHECK_FATAL(cudaStreamWaitEvent(comm_stream, ready, 0));
  cudaEventDestroy(ready);
  // The caching allocator must not hand this memory out again before the comm stream
  // is done with it.
  c10::cuda::CUDACachingAllocator::recordStream(tensor.storage().data_ptr(), stream_);

  const unsigned flags = capturing ? cudaEventDisableTiming : cudaEventDefault;
  std::shared_ptr<void> start;
  // Inside a graph, events cannot time a replay; GPU-side marks can (comm/device_timeline.h).
  const int marks = capturing && timeline_ ? timeline_->AllocateMarks(2) : -1;
  if (!capturing) {
    start = MakeEvent(flags);
    if (!start) AbortJob("cudaEventCreateWithFlags failed");
    CUDA_CHECK_FATAL(cudaEventRecord(Ev(start), comm_stream));
  } else if (marks > 0) {
    timeline_->Mark(marks, comm_stream);
  }
  launch(comm_stream);
  if (capturing) ++captured_collectives_;
  if (marks > 0) {
    timeline_->Mark(marks + 1, comm_stream);
    captured_.push_back({op, bytes, marks, marks + 1});
  }
  std::shared_ptr<void> done = MakeEvent(flags);
  if (!done) AbortJob("cudaEventCreateWithFlags failed");
  CUDA_CHECK_FATAL(cudaEventRecord(Ev(done), comm_stream));
  if (capturing) {
    // Inside a graph the event only expresses the dependency.
    return std::make_unique<NcclWork>(std::move(done));
  }
  const uint64_t seq = started_seq_.fetch_add(1) + 1;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    pending_.push_back({seq, Now(), done, /*replay=*/false});
  }
  timed_.push_back({op, bytes, start, done});
  return std::make_unique<NcclWork>(std::move(done));
}

std::unique_ptr<Work> NcclCommunicator::AllReduce(const at::Tensor& tensor, ReduceOp op) {
  const auto type = ToNcclType(tensor.scalar_type());
  // On one rank NCCL runs an in-place average as a scaling kernel (PreMulSum by 1) and an
  // in-place sum as nothing: 18 kernels and 0.36 ms per BERT-base step on one H200.
  const auto nop = size_ == 1 && op == ReduceOp::kAvg ? ncclSum : ToNcclOp(op);
  return Enqueue(CollectiveOp::kAllReduce, tensor, tensor.nbytes(), [&](cudaStream_t s) {
    NCCL_CHECK_FATAL(
        ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), type, nop, comm_, s));
  });
}

std::unique_ptr<Work> NcclCommunicator::Broadcast(const at::Tensor& tensor, int root) {
  return Enqueue(CollectiveOp::kBroadcast, tensor, tensor.nbytes(), [&](cudaStream_t s) {
    NCCL_CHECK_FATAL(ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), tensor.nbytes(), ncclUint8,
                                   root, comm_, s));
  });
}

std::unique_ptr<Work> NcclCommunicator::AllGather(const at::Tensor& input,
                                                  const at::Tensor& output) {
  if (output.nbytes() != input.nbytes() * static_cast<size_t>(size_)) {
    throw CommError("nccl communicator: AllGather output must be size() x input (" +
                    ProcessLocation() + ")");
  }
  c10::cuda::CUDACachingAllocator::recordStream(input.storage().data_ptr(), stream_);
  return Enqueue(CollectiveOp::kAllGather, output, input.nbytes(), [&](cudaStream_t s) {
    NCCL_CHECK_FATAL(
        ncclAllGather(input.data_ptr(), output.data_ptr(), input.nbytes(), ncclUint8, comm_, s));
  });
}

void NcclCommunicator::Barrier() {
  at::Tensor one = at::ones({1}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, device_));
  AllReduce(one, ReduceOp::kSum)->Wait();
  CUDA_CHECK(cudaStreamSynchronize(stream_.stream()));
  CUDA_CHECK(cudaStreamSynchronize(c10::cuda::getCurrentCUDAStream(device_).stream()));
}

void NcclCommunicator::Progress() {
  // Never query events while this thread's stream is being captured.
  if (Capturing(c10::cuda::getCurrentCUDAStream(device_).stream())) return;
  while (!timed_.empty() && cudaEventQuery(Ev(timed_.front().end)) == cudaSuccess) {
    Timed t = std::move(timed_.front());
    timed_.pop_front();
    float ms = 0.f;
    cudaEventElapsedTime(&ms, Ev(t.start), Ev(t.end));
    if (auto* obs = observer()) obs->OnCollective(t.op, t.bytes, ms / 1e3, std::nan(""));
    completed_seq_.fetch_add(1);
  }
}

void NcclCommunicator::OnReplayLaunched() {
  const uint64_t n = captured_collectives_;
  const uint64_t last = started_seq_.fetch_add(n, std::memory_order_relaxed) + n;
  if (n == 0) return;
  // A replay's collectives never pass through Enqueue, so the watchdog cannot see them one
  // by one; an event after the replay stands for all of them. Without it a peer stopped
  // mid-replay left this rank spinning in NCCL's kernel until the next control-plane
  // collective timed out. Recording is asynchronous: no host sync on the hot path.
  std::shared_ptr<void> done = MakeEvent(cudaEventDisableTiming);
  if (!done) AbortJob("cudaEventCreateWithFlags failed");
  CUDA_CHECK_FATAL(cudaEventRecord(Ev(done), c10::cuda::getCurrentCUDAStream(device_).stream()));
  std::lock_guard<std::mutex> lock(pending_mu_);
  pending_.push_back({last, Now(), std::move(done), /*replay=*/true});
}

void NcclCommunicator::OnReplayTimed(const std::vector<uint64_t>& marks) {
  for (const Captured& c : captured_) {
    const uint64_t start = marks[c.start_mark], end = marks[c.end_mark];
    if (start == 0 || end < start) continue;  // not stamped in this replay
    if (auto* obs = observer()) {
      obs->OnCollective(c.op, c.bytes, (end - start) * 1e-9, timeline_->ToUnix(start));
    }
  }
  completed_seq_.fetch_add(captured_collectives_, std::memory_order_relaxed);
}

void NcclCommunicator::WatchdogLoop() {
  c10::cuda::CUDAGuard guard(device_);
  const auto period = std::chrono::duration<double>(options_.watchdog_period_s);
  while (!stop_) {
    std::this_thread::sleep_for(period);
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess &&
        async != ncclInProgress) {
      AbortJob(std::string("NCCL asynchronous error: ") + ncclGetErrorString(async));
    }
    std::lock_guard<std::mutex> lock(pending_mu_);
    while (!pending_.empty() && cudaEventQuery(Ev(pending_.front().done)) == cudaSuccess) {
      pending_.pop_front();
    }
    const double age = pending_.empty() ? 0 : Now() - pending_.front().issued_s;
    if (age > options_.timeout_s) {
      // The MPI communicator's wording, so that failure reports read both alike.
      const Pending& p = pending_.front();
      const std::string what =
          p.replay ? "CUDA graph replay (collectives to #" + std::to_string(p.seq) + ")"
                   : "collective #" + std::to_string(p.seq);
      AbortJob(what + " not complete after " + std::to_string(age) + " s (comm.timeout_s " +
               std::to_string(options_.timeout_s) + "); a peer rank is stopped, hung or dead");
    }
  }
}

void NcclCommunicator::AbortJob(const std::string& why) {
  // The FATAL line goes out before ncclCommAbort: the abort frees this rank's kernels so
  // the process can exit, but it may itself wait on a kernel that never ends, and a rank
  // hung in its own abort would tell no one. It gets kAbortWaitS in a thread of its own;
  // MPI_Abort ends the job either way.
  ::ringpilot::comm::AbortJob("nccl communicator: " + why, 3, [comm = comm_] {
    if (!comm) return;
    constexpr double kAbortWaitS = 5;
    auto returned = std::make_shared<std::atomic<bool>>(false);
    std::thread([comm, returned] {
      ncclCommAbort(comm);
      returned->store(true);
    }).detach();
    const double deadline = Now() + kAbortWaitS;
    while (!returned->load() && Now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!returned->load()) {
      std::fprintf(
          stderr,
          "ringpilot: ncclCommAbort did not return within %.0f s; ending the job without it (%s)\n",
          kAbortWaitS, ProcessLocation().c_str());
    }
  });
}

}  // namespace ringpilot::comm
