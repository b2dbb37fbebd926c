// Communicator over NCCL for CUDA tensors: one communicator per job, bootstrapped by
// broadcasting the unique id over MPI, collectives on a dedicated stream ordered
// against the caller's stream with events, capturable in CUDA graphs.
#pragma once

#include <mpi.h>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "comm/communicator.h"

namespace ringpilot::comm {

/// How AllocateCollectiveBuffer's memory is given to NCCL.
enum class NcclBufferRegistration {
  kNone,       ///< at::zeros from PyTorch's caching allocator, as any tensor
  kRegister,   ///< ncclMemAlloc + ncclCommRegister: the ring writes into peers' buffers
  kSymmetric,  ///< ncclMemAlloc + ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC), NCCL
               ///< >= 2.27: NCCL's symmetric-memory kernels where it picks them
};

/// ncclConfig_t::CTAPolicy: how many SMs NCCL's kernels take.
enum class NcclCtaPolicy {
  kDefault,     ///< NCCL_CTA_POLICY_DEFAULT
  kEfficiency,  ///< NCCL_CTA_POLICY_EFFICIENCY (NCCL >= 2.27)
  kZero,        ///< NCCL_CTA_POLICY_ZERO (NCCL >= 2.27)
};

/// No job defaults here (config/job.h holds them); the constructor throws CommError for a
/// timeout that is not positive.
struct NcclOptions {
  /// A collective not complete this long after issue aborts the communicator.
  double timeout_s = 0;
  /// How often the watchdog polls ncclCommGetAsyncError and pending collectives.
  double watchdog_period_s = 0.2;
  /// Other than kDefault needs NCCL >= 2.27 (the constructor throws CommError otherwise).
  NcclCtaPolicy cta_policy = NcclCtaPolicy::kDefault;
  /// The collectives' stream at high CUDA priority (else the default priority).
  bool high_priority_stream = false;
  NcclBufferRegistration buffer_registration = NcclBufferRegistration::kNone;
};

class NcclCommunicator : public Communicator {
 public:
  /// Collective over `bootstrap` (every rank calls it): rank 0 creates the unique id,
  /// MPI_Bcast shares it, ncclCommInitRank joins. `device` is this rank's CUDA device.
  /// Throws CommError (with rank and host) on failure.
  NcclCommunicator(MPI_Comm bootstrap, int device, NcclOptions options);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  std::unique_ptr<Work> AllReduce(const at::Tensor& tensor, ReduceOp op) override;
  std::unique_ptr<Work> Broadcast(const at::Tensor& tensor, int root) override;
  std::unique_ptr<Work> AllGather(const at::Tensor& input, const at::Tensor& output) override;
  /// Host barrier: a one-element all-reduce, then the comm stream is synchronised.
  void Barrier() override;
  /// kRegister / kSymmetric: NCCL memory registered with this communicator, freed with it.
  at::Tensor AllocateCollectiveBuffer(int64_t numel, const at::TensorOptions& options) override;
  int64_t registered_bytes() const override { return registered_bytes_; }
  /// Reports timings of collectives whose events completed (never blocks).
  void Progress() override;
  void OnReplayLaunched() override;
  void OnReplayTimed(const std::vector<uint64_t>& marks) override;

  cudaStream_t stream() const { return stream_.stream(); }
  int device() const { return device_; }

 private:
  friend class NcclWork;
  struct Timed {
    CollectiveOp op;
    int64_t bytes;
    std::shared_ptr<void> start;  // cudaEvent_t, destroyed with the last owner
    std::shared_ptr<void> end;    // shared with the Work that waits on it
  };
  // A collective captured into a CUDA graph, stamped by the timeline's marks.
  struct Captured {
    CollectiveOp op;
    int64_t bytes;
    int start_mark;
    int end_mark;
  };
  template <class Launch>
  std::unique_ptr<Work> Enqueue(CollectiveOp op, const at::Tensor& tensor, int64_t bytes,
                                Launch&& launch);
  void WatchdogLoop();
  [[noreturn]] void AbortJob(const std::string& why);

  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
  NcclOptions options_;
  ncclComm_t comm_ = nullptr;
  c10::cuda::CUDAStream stream_;
  struct Registered {
    void* ptr = nullptr;
    void* handle = nullptr;  // ncclCommRegister's handle or the ncclWindow_t
  };
  std::vector<Registered> registered_;
  int64_t registered_bytes_ = 0;
  std::deque<Timed> timed_;            // training thread only
  std::vector<Captured> captured_;     // likewise; only those a timeline stamps
  uint64_t captured_collectives_ = 0;  // every collective captured, timeline or not

  // Watchdog: the training thread publishes each collective it enqueued and each graph
  // replay it launched, with issue time and completion event.
  struct Pending {
    uint64_t seq;  // the collective's; a replay's last collective
    double issued_s;
    std::shared_ptr<void> done;  // cudaEvent_t
    bool replay;
  };
  std::mutex pending_mu_;
  std::deque<Pending> pending_;
  std::atomic<bool> stop_{false};
  std::thread watchdog_;
};

}  // namespace ringpilot::comm
