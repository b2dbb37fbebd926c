#include "trainer/startup/rank_setup.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <thread>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include "base/environment.h"
#include "comm/status.h"
#include "trainer/startup/host_memory.h"
#include "trainer/telemetry/rank_telemetry.h"

#ifdef RINGPILOT_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "comm/nccl_communicator.h"
#endif

namespace ringpilot::trainer::startup {

RankPlace JoinWorld() {
  RankPlace p;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &p.rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &p.world));
  MPI_Comm local;
  MPI_CHECK(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, p.rank, MPI_INFO_NULL, &local));
  MPI_CHECK(MPI_Comm_rank(local, &p.local_rank));
  MPI_CHECK(MPI_Comm_size(local, &p.local_size));
  MPI_Comm_free(&local);
  p.node = base::HostName();
  return p;
}

bool CudaAvailable() {
#ifdef RINGPILOT_WITH_CUDA
  return torch::cuda::is_available();
#else
  return false;
#endif
}

RankDevice SetUpDevice(const DeviceOptions& options, const RankPlace& place,
                       telemetry::RankLog& log) {
  const config::DevicePlan& plan = options.plan;
  if (!plan.notice.empty() && place.rank == 0) log.Warn(plan.notice);
  RankDevice d;
  d.cuda = plan.cuda;
  d.cuda_graphs = plan.cuda_graphs;
  d.precision = plan.precision;
  d.threads = options.threads_per_rank;
  if (d.threads == 0) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    d.threads = std::max(1, cores / std::max(1, place.local_size));
  }
  at::set_num_threads(d.threads);
  const HostMemoryPolicy host_memory = ConfigureHostMemory(options.retain_host_memory);
  if (place.rank == 0) log.Detail(host_memory.detail);
#ifdef RINGPILOT_WITH_CUDA
  if (d.cuda) {
    const int devices = static_cast<int>(torch::cuda::device_count());
    const int dev = place.local_rank % devices;
    if (place.local_size > devices) {
      log.Warn(std::to_string(place.local_size) + " ranks on " + place.node + " share " +
               std::to_string(devices) + " GPU(s)");
    }
    c10::cuda::set_device(dev);
    d.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(dev));
    at::globalContext().setBenchmarkCuDNN(!options.deterministic);
    at::globalContext().setDeterministicCuDNN(options.deterministic);
    at::globalContext().setAllowTF32CuBLAS(options.tf32);
    at::globalContext().setAllowTF32CuDNN(options.tf32);
  }
#endif
  return d;
}

struct TrainingStream::Impl {
#ifdef RINGPILOT_WITH_CUDA
  std::optional<c10::cuda::CUDAStreamGuard> guard;
#endif
};

TrainingStream::TrainingStream(const RankDevice& device) : impl_(std::make_unique<Impl>()) {
#ifdef RINGPILOT_WITH_CUDA
  if (device.cuda) {
    impl_->guard.emplace(
        c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.device.index()));
  }
#else
  (void)device;
#endif
}

TrainingStream::~TrainingStream() = default;

comm::Communicator* RankCommunicators::batch_norm() const {
  return norm ? static_cast<comm::Communicator*>(norm.get()) : device.get();
}

RankCommunicators MakeCommunicators(const CommunicatorOptions& options, const RankPlace& place,
                                    const RankDevice& device, const std::string& run_dir) {
  RankCommunicators c;
  c.host = std::make_unique<comm::MpiCommunicator>(MPI_COMM_WORLD);
#ifdef RINGPILOT_WITH_CUDA
  if (device.cuda) {
    telemetry::PrepareNcclDebugLog(run_dir, place.rank);  // transports per peer, in a file
    c.device = std::make_unique<comm::NcclCommunicator>(MPI_COMM_WORLD, device.device.index(),
                                                        options.nccl);
  }
#else
  (void)place;
  (void)run_dir;
#endif
  if (!c.device) {
    auto mpi = std::make_unique<comm::MpiCommunicator>(MPI_COMM_WORLD);
    mpi->set_timeout(options.timeout_s);
    c.device = std::move(mpi);
  }
  if (!device.cuda && options.sync_batchnorm) {
    c.norm = std::make_unique<comm::MpiCommunicator>(MPI_COMM_WORLD);
    c.norm->set_timeout(options.timeout_s);
  }
  // MPI waits forever for a stopped peer: every MPI communicator keeps comm.timeout_s
  // (NCCL's has its own watchdog).
  c.host->set_timeout(options.timeout_s);
  return c;
}

}  // namespace ringpilot::trainer::startup
