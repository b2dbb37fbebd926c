// Communicator over MPI for CPU tensors: non-blocking collectives (MPI_Iallreduce,
// MPI_Ibcast, MPI_Iallgather) on a private duplicate of the caller's communicator.
#pragma once

#include <mpi.h>

#include <chrono>
#include <vector>

#include "comm/communicator.h"

namespace ringpilot::comm {

class MpiWork;

class MpiCommunicator : public Communicator {
 public:
  /// Duplicates `parent` so our collectives never interleave with the caller's.
  /// MPI must be initialised; collective over `parent`. Throws CommError on failure.
  ///
  /// Work::Wait spins on MPI_Test while this node's ranks times ATen's
  /// intra-op threads fit in its online CPUs; when they do not (oversubscribed), they spin
  /// 200 us and then poll with 50 us sleeps, so a waiting rank leaves the cores to the rank
  /// it waits for. RINGPILOT_MPI_WAIT=spin|polite|auto overrides the choice.
  explicit MpiCommunicator(MPI_Comm parent = MPI_COMM_WORLD);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  /// float32/float64/int32/int64/uint8 and bfloat16 (summed through float32 with a
  /// user-defined MPI_Op). Tensors must be contiguous CPU tensors.
  std::unique_ptr<Work> AllReduce(const at::Tensor& tensor, ReduceOp op) override;
  std::unique_ptr<Work> Broadcast(const at::Tensor& tensor, int root) override;
  std::unique_ptr<Work> AllGather(const at::Tensor& input, const at::Tensor& output) override;
  void Barrier() override;
  void Progress() override;

  MPI_Comm comm() const { return comm_; }
  /// Whether waits spin (true) or poll politely (false); see the constructor.
  bool spin_waits() const { return spin_waits_; }

  /// comm.timeout_s: a Work::Wait or Barrier that has waited this long ends the job through
  /// AbortJob (comm/status.h), naming the collective, its sequence number and the wait: a
  /// peer is stopped, hung or dead, and MPI itself would wait forever. 0 (the default):
  /// wait forever. Set it before the first collective.
  void set_timeout(double seconds) { timeout_s_ = seconds; }

 private:
  friend class MpiWork;
  using Clock = std::chrono::steady_clock;
  // Polls `request` to completion, politely or not (spin_waits_), and ends the job past
  // timeout_s_ since `start`.
  void WaitFor(MPI_Request* request, CollectiveOp op, uint64_t seq, Clock::time_point start);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  bool spin_waits_ = false;
  double timeout_s_ = 0;
  // Works still in flight, so Progress() can advance and time all of them.
  std::vector<MpiWork*> inflight_;
};

}  // namespace ringpilot::comm
