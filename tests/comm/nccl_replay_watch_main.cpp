// The NCCL watchdog watches CUDA graph replays (comm/nccl_communicator.h). Under mpirun -np 2
// on two GPUs, both ranks capture a graph holding one NCCL all-reduce; rank 0 replays it and
// rank 1 never does, as if stopped (the barrier before is collective #1, the replay's #2).
// Rank 0's watchdog must end the job with its FATAL line about the replay within
// comm.timeout_s plus a watchdog period; the ctest checks that line
// (PASS_REGULAR_EXPRESSION), so a watch that never fires, or fires late, fails it. Where
// fewer GPUs than ranks are visible (CI machines) it prints a skip line.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include "comm/nccl_communicator.h"

namespace {

constexpr double kTimeoutS = 3.0;

void SleepSeconds(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  int enough = devices >= size && size >= 2 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &enough, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!enough) {
    if (rank == 0) std::printf("skipped: needs %d CUDA devices (and 2 ranks or more)\n", size);
    MPI_Finalize();
    return 0;
  }

  namespace comm = ringpilot::comm;
  comm::NcclOptions options;
  options.timeout_s = kTimeoutS;
  comm::NcclCommunicator nccl(MPI_COMM_WORLD, rank, options);
  c10::cuda::CUDAGuard device(rank);
  // Graphs are captured on a side stream, never the legacy default one.
  c10::cuda::CUDAStreamGuard stream(c10::cuda::getStreamFromPool(false, rank));
  at::Tensor grads = at::ones({1 << 20}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
  nccl.Barrier();

  at::cuda::CUDAGraph graph;
  graph.capture_begin({0, 0}, cudaStreamCaptureModeRelaxed);
  nccl.AllReduce(grads, comm::ReduceOp::kSum)->Wait();
  graph.capture_end();
  c10::cuda::getCurrentCUDAStream().synchronize();
  MPI_Barrier(MPI_COMM_WORLD);

  cudaEvent_t replayed = nullptr;
  if (rank == 0) {
    graph.replay();
    nccl.OnReplayLaunched();
    cudaEventCreateWithFlags(&replayed, cudaEventDisableTiming);
    cudaEventRecord(replayed, c10::cuda::getCurrentCUDAStream().stream());
    std::printf("rank 0: replay launched; rank 1 never replays\n");
    std::fflush(stdout);
  }
  // The watchdog ends both ranks (MPI_Abort); reaching the end is the failure.
  SleepSeconds(2 * kTimeoutS);
  if (rank == 0) {
    // Tells a watch that missed a hung replay from a replay that did not hang.
    const bool done = cudaEventQuery(replayed) == cudaSuccess;
    std::printf("rank 0: the replay is %s %.0f s after its launch\n",
                done ? "complete" : "still in flight", 2 * kTimeoutS);
    std::fflush(stdout);
  }
  SleepSeconds(2 * kTimeoutS);
  if (rank == 0) std::printf("FAILED: no abort %.0f s after the replay\n", 4 * kTimeoutS);
  std::fflush(stdout);
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}
