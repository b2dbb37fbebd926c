// What a rank sets up before it builds a model: its place in the world, its device and
// threads, the training stream, and its communicators.
#pragma once

#include <memory>
#include <string>

#include <ATen/core/TensorBody.h>
#include <c10/core/Device.h>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "config/job.h"
#include "trainer/telemetry/rank_log.h"

namespace ringpilot::trainer {

/// This rank in MPI_COMM_WORLD and on its node.
struct RankPlace {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string node;  ///< host name
};

/// Collective over MPI_COMM_WORLD (every rank, once, after MPI_Init).
RankPlace JoinWorld();

/// The compute device and intra-op threads of this rank.
struct RankDevice {
  bool cuda = false;
  c10::Device device = c10::kCPU;
  int threads = 1;  ///< at::set_num_threads
  /// train.cuda_graphs and train.precision as they apply on this device
  /// (config::PlanDevice): what the step and the evaluation read, not the job's keys.
  bool cuda_graphs = false;
  config::Precision precision = config::Precision::kFp32;
};

/// Picks the device (config::PlanDevice: world.device, CUDA when visible for auto, the
/// GPU-only settings off on CPU ranks of an auto job, rank 0 logging the notice), sets
/// LibTorch's threads (train.threads_per_rank, 0 = cores / local ranks), the host memory
/// policy and the cuDNN and TF32 switches. Throws config::ConfigError for world.device
/// cuda with no CUDA device visible (no attempt can succeed here).
RankDevice SetUpDevice(const config::JobConfig& job, const RankPlace& place,
                       telemetry::RankLog& log);

/// Makes a non-default CUDA stream current from construction to destruction (nothing on
/// the CPU). It must exist before the first gradient accumulator: autograd runs each
/// AccumulateGrad on the stream it was created on, and the legacy default stream cannot
/// join a CUDA graph capture.
class TrainingStream {
 public:
  explicit TrainingStream(const RankDevice& device);
  ~TrainingStream();
  TrainingStream(const TrainingStream&) = delete;
  TrainingStream& operator=(const TrainingStream&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The rank's communicators. All are collective over MPI_COMM_WORLD.
struct RankCommunicators {
  std::unique_ptr<comm::MpiCommunicator> host;  ///< control plane, CPU tensors
  std::unique_ptr<comm::Communicator> device;   ///< gradients: NCCL on CUDA, else MPI
  /// SyncBatchNorm statistics on CPU ranks (a second MPI communicator, so its collectives
  /// never interleave with gradient buckets); null otherwise.
  std::unique_ptr<comm::MpiCommunicator> norm;
  /// Where SyncBatchNorm reduces: `norm`, else `device`.
  comm::Communicator* batch_norm() const;
};

/// On CUDA routes NCCL's log to RUN_DIR/logs (telemetry::PrepareNcclDebugLog) first.
RankCommunicators MakeCommunicators(const config::JobConfig& job, const RankPlace& place,
                                    const RankDevice& device, const std::string& run_dir);

}  // namespace ringpilot::trainer
