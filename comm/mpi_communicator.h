// Communicator over MPI for CPU tensors: non-blocking collectives (MPI_Iallreduce,
// MPI_Ibcast, MPI_Iallgather) on a private duplicate of the caller's communicator.
#pragma once

#include <mpi.h>

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

 private:
  friend class MpiWork;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  bool spin_waits_ = false;
  // Works still in flight, so Progress() can advance and time all of them.
  std::vector<MpiWork*> inflight_;
};

}  // namespace ringpilot::comm
