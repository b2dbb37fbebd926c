// What a rank sets up before it builds a model: its place in the world, its device and
// threads, the training stream, and its communicators.
#pragma once

#include <memory>
#include <string>

#include <ATen/core/TensorBody.h>
#include <c10/core/Device.h>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "config/device_plan.h"
#include "config/job.h"
#include "trainer/telemetry/rank_log.h"

#ifdef RINGPILOT_WITH_CUDA
#include "comm/nccl_communicator.h"
#endif

namespace ringpilot::trainer::startup {

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

/// Whether LibTorch sees a CUDA device in this process (false in a build without CUDA).
bool CudaAvailable();

/// What SetUpDevice reads (trainer/options.cpp DeviceOptionsFor fills it from the job).
struct DeviceOptions {
  /// world.device resolved on this host (config::PlanDevice: CUDA when visible for auto,
  /// the GPU-only settings off on CPU ranks of an auto job, and the notice saying so).
  config::DevicePlan plan;
  int threads_per_rank = 0;         ///< LibTorch's intra-op threads; 0 = cores / local ranks
  bool retain_host_memory = false;  ///< ConfigureHostMemory's `retain`
  bool deterministic = false;       ///< cuDNN deterministic, no benchmark autotuning
  bool tf32 = false;                ///< TF32 in cuBLAS and cuDNN
};

/// Takes the device of `options.plan` (rank 0 logs its notice), sets LibTorch's threads,
/// the host memory policy and the cuDNN and TF32 switches.
RankDevice SetUpDevice(const DeviceOptions& options, const RankPlace& place,
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

/// What MakeCommunicators reads (trainer/options.cpp CommunicatorOptionsFor).
struct CommunicatorOptions {
  /// Every MPI communicator's timeout (MPI waits forever for a stopped peer; NCCL's
  /// communicator has its own watchdog, set in `nccl`).
  double timeout_s = 0;
  bool sync_batchnorm = false;  ///< CPU ranks then get the `norm` communicator
#ifdef RINGPILOT_WITH_CUDA
  comm::NcclOptions nccl;
#endif
};

/// On CUDA routes NCCL's log to RUN_DIR/logs (telemetry::PrepareNcclDebugLog) first.
RankCommunicators MakeCommunicators(const CommunicatorOptions& options, const RankPlace& place,
                                    const RankDevice& device, const std::string& run_dir);

}  // namespace ringpilot::trainer::startup
