// Collective communication behind one interface: MPI for CPU tensors, NCCL for CUDA
// tensors. The GradientReducer drives either without knowing which.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "comm/collective_op.h"

namespace ringpilot::comm {

class DeviceTimeline;

/// kAvg divides the sum by size() (floating-point tensors only).
enum class ReduceOp { kSum, kAvg, kMax, kMin };

/// Receives one record per completed collective. Implementations must be cheap and
/// must not call back into the communicator. Called on the thread that observed the
/// completion (the training thread for MPI; the one polling events for NCCL).
class CollectiveObserver {
 public:
  virtual ~CollectiveObserver() = default;
  /// `seconds` is issue-to-completion time; `bytes` the payload of one rank; `start_unix`
  /// when it started (Unix seconds, this host's clock), or NaN: it ended just now.
  virtual void OnCollective(CollectiveOp op, int64_t bytes, double seconds, double start_unix) = 0;
};

/// One collective in flight. Not thread-safe; owned by whoever issued it.
class Work {
 public:
  virtual ~Work() = default;
  /// Non-blocking completion check; also drives progress for MPI.
  virtual bool Test() = 0;
  /// CPU: blocks until complete. CUDA: makes the caller's current stream wait for the
  /// collective (no host synchronisation).
  virtual void Wait() = 0;
};

/// A group of `size()` ranks. Collectives must be issued in the same order on every
/// rank (MPI and NCCL both require it); a Communicator is used from one thread at a time.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "mpi" or "nccl".
  virtual std::string backend() const = 0;

  /// In-place all-reduce of a contiguous tensor.
  virtual std::unique_ptr<Work> AllReduce(const at::Tensor& tensor, ReduceOp op) = 0;
  /// In-place broadcast of a contiguous tensor from `root`.
  virtual std::unique_ptr<Work> Broadcast(const at::Tensor& tensor, int root) = 0;
  /// Gathers `input` from every rank into `output` (size() * input.numel(), rank order).
  virtual std::unique_ptr<Work> AllGather(const at::Tensor& input, const at::Tensor& output) = 0;
  /// Blocks until every rank has called it.
  virtual void Barrier() = 0;

  /// A zeroed buffer of `numel` elements (`options`: dtype and device) for collectives
  /// that run on it again and again, such as the gradient buckets. The NCCL communicator
  /// may allocate and register it with NCCL (NcclOptions::buffer_registration), so
  /// collectives on it need no staging copies; it then owns that memory, and the tensor
  /// (and every view of it) must not be used after the communicator is destroyed.
  /// Collective: every rank calls it in the same order with the same size.
  virtual at::Tensor AllocateCollectiveBuffer(int64_t numel, const at::TensorOptions& options);
  /// Device memory of AllocateCollectiveBuffer's that PyTorch's memory statistics do not
  /// see (allocated by NCCL), for peak-memory reports.
  virtual int64_t registered_bytes() const { return 0; }

  /// Lets outstanding collectives advance while the caller does other work (MPI only
  /// progresses inside MPI calls). Cheap; safe to call often.
  virtual void Progress() {}

  /// CUDA graphs: collectives captured while a timeline is set are stamped on the GPU
  /// (comm/device_timeline.h); after each replay the graph's owner calls OnReplayLaunched
  /// (on the training thread, the replay's stream current; NCCL also puts the replay under
  /// its comm.timeout_s watchdog), and OnReplayTimed with the replay's marks once it has
  /// finished, which reports them to the observer and advances the sequence numbers. Not
  /// owned; no-ops for MPI.
  void set_timeline(DeviceTimeline* timeline) { timeline_ = timeline; }
  virtual void OnReplayLaunched() {}
  virtual void OnReplayTimed(const std::vector<uint64_t>& marks) {}

  /// Observer of completed collectives (may be null). Not owned.
  void set_observer(CollectiveObserver* observer) { observer_ = observer; }
  CollectiveObserver* observer() const { return observer_; }

  /// Sequence numbers of the last collective issued and the last one observed complete
  /// (hang visibility: a rank whose started stays ahead of completed is stuck in a
  /// collective). Safe to read from any thread.
  uint64_t started_seq() const { return started_seq_.load(std::memory_order_relaxed); }
  uint64_t completed_seq() const { return completed_seq_.load(std::memory_order_relaxed); }

 protected:
  std::atomic<uint64_t> started_seq_{0};
  std::atomic<uint64_t> completed_seq_{0};
  DeviceTimeline* timeline_ = nullptr;

 private:
  CollectiveObserver* observer_ = nullptr;
};

/// Broadcasts `tensors` from `root` in as few collectives as possible (one per dtype and
/// device, through a flat staging buffer) and blocks until done. Setup path only.
void BroadcastCoalesced(Communicator& comm, const std::vector<at::Tensor>& tensors, int root);

}  // namespace ringpilot::comm
