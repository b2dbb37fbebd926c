// NCCL backend of ringpilot-commbench: device buffers, one communicator and one stream,
// iterations timed with CUDA events. Compiled when RINGPILOT_WITH_CUDA.
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>
#include <nccl.h>

#include "commbench/runner.h"

namespace ringpilot::commbench {
namespace {

void CudaCheck(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(rc));
  }
}

void NcclCheck(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) {
    throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(rc));
  }
}

class NcclBackend : public Backend {
 public:
  NcclBackend(MPI_Comm comm, int local_rank) : mpi_(comm) {
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
    int devices = 0;
    CudaCheck(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
    if (devices == 0) throw std::runtime_error("no CUDA device visible");
    CudaCheck(cudaSetDevice(local_rank % devices), "cudaSetDevice");
    ncclUniqueId id;
    if (rank_ == 0) NcclCheck(ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm);
    NcclCheck(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
    CudaCheck(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    CudaCheck(cudaEventCreate(&start_), "cudaEventCreate");
    CudaCheck(cudaEventCreate(&stop_), "cudaEventCreate");
  }

  ~NcclBackend() override {
    cudaFree(send_);
    cudaFree(recv_);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
    if (comm_) ncclCommDestroy(comm_);
  }

  bool nccl() const override { return true; }

  // Grouped send/recv on one buffer races with itself: nccl-tests' in-place all-to-all and
  // send/recv are not well defined, so they are left out.
  bool Supports(Op op, bool in_place) const override {
    return !(in_place && (op == Op::kAllToAll || op == Op::kSendRecv));
  }

  void Reserve(std::size_t send_elems, std::size_t recv_elems) override {
    Grow(&send_, &send_cap_, send_elems);
    Grow(&recv_, &recv_cap_, recv_elems);
  }

  // Copies go through the collective stream and wait for it. A plain cudaMemcpy runs on the
  // legacy default stream, which a non-blocking stream does not wait for, and from pageable
  // memory it may return before the DMA has landed: the collective could then read the
  // sentinel instead of the input (seen at 4 ranks: wrong elements at 1 MiB only).
  void Upload(bool recv, std::size_t offset, const std::vector<float>& data) override {
    CudaCheck(cudaMemcpyAsync(Buffer(recv) + offset, data.data(), data.size() * sizeof(float),
                              cudaMemcpyHostToDevice, stream_),
              "cudaMemcpyAsync");
    CudaCheck(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  std::vector<float> Download(bool recv, std::size_t offset, std::size_t elems) override {
    std::vector<float> out(elems);
    CudaCheck(cudaMemcpyAsync(out.data(), Buffer(recv) + offset, elems * sizeof(float),
                              cudaMemcpyDeviceToHost, stream_),
              "cudaMemcpyAsync");
    CudaCheck(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    return out;
  }

  void RunOnce(Op op, bool in_place, const Layout& l) override {
    Enqueue(op, in_place, l);
    CudaCheck(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  double TimeOnce(Op op, bool in_place, const Layout& l) override {
    MPI_Barrier(mpi_);
    CudaCheck(cudaEventRecord(start_, stream_), "cudaEventRecord");
    Enqueue(op, in_place, l);
    CudaCheck(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    return ElapsedSeconds();
  }

  double TimeLoop(Op op, bool in_place, const Layout& l, int iters, int graph_replays) override {
    if (graph_replays > 0) return TimeGraphLoop(op, in_place, l, iters, graph_replays);
    MPI_Barrier(mpi_);
    CudaCheck(cudaEventRecord(start_, stream_), "cudaEventRecord");
    for (int i = 0; i < iters; ++i) Enqueue(op, in_place, l);
    CudaCheck(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    return ElapsedSeconds() / iters;
  }

  double TimeTransfer(int src, int dst, std::size_t elems, int iters) override {
    Reserve(elems, elems);
    CudaCheck(cudaEventRecord(start_, stream_), "cudaEventRecord");
    for (int i = 0; i < iters; ++i) {
      if (rank_ == src) {
        NcclCheck(ncclSend(send_, elems, ncclFloat, dst, comm_, stream_), "ncclSend");
      } else {
        NcclCheck(ncclRecv(recv_, elems, ncclFloat, src, comm_, stream_), "ncclRecv");
      }
    }
    CudaCheck(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    const double t = ElapsedSeconds();
    return rank_ == dst ? t : 0;
  }

 private:
  float* Buffer(bool recv) { return recv ? recv_ : send_; }

  void Grow(float** buf, std::size_t* cap, std::size_t elems) {
    if (*cap >= elems) return;
    CudaCheck(cudaFree(*buf), "cudaFree");
    *buf = nullptr;
    *cap = 0;
    CudaCheck(cudaMalloc(reinterpret_cast<void**>(buf), elems * sizeof(float)), "cudaMalloc");
    *cap = elems;
  }

  // nccl-tests' -G: the loop captured once (every rank captures the same calls, so the
  // communicator sees them in one order), replayed once to upload it and warm up, then timed
  // over `replays` replays. A training step replays its collectives the same way.
  double TimeGraphLoop(Op op, bool in_place, const Layout& l, int iters, int replays) {
    cudaGraph_t graph = nullptr;
    CudaCheck(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
              "cudaStreamBeginCapture");
    for (int i = 0; i < iters; ++i) Enqueue(op, in_place, l);
    CudaCheck(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    CudaCheck(made, "cudaGraphInstantiate");
    struct ExecGuard {
      cudaGraphExec_t e;
      ~ExecGuard() { cudaGraphExecDestroy(e); }
    } guard{exec};
    CudaCheck(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch");
    CudaCheck(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    MPI_Barrier(mpi_);
    CudaCheck(cudaEventRecord(start_, stream_), "cudaEventRecord");
    for (int r = 0; r < replays; ++r) CudaCheck(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch");
    CudaCheck(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    return ElapsedSeconds() / (static_cast<double>(iters) * replays);
  }

  double ElapsedSeconds() {
    CudaCheck(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    CudaCheck(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return static_cast<double>(ms) / 1e3;
  }

  void Enqueue(Op op, bool in_place, const Layout& l) {
    const std::size_t count = l.count;
    const std::size_t r = static_cast<std::size_t>(rank_);
    float* recv = recv_;
    // nccl-tests' in-place conventions: the input is (a block of) the output buffer.
    float* send = in_place ? recv_ : send_;
    switch (op) {
      case Op::kAllReduce:
        NcclCheck(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm_, stream_),
                  "ncclAllReduce");
        break;
      case Op::kAllGather:
        if (in_place) send = recv_ + r * l.chunk;
        NcclCheck(ncclAllGather(send, recv, count, ncclFloat, comm_, stream_), "ncclAllGather");
        break;
      case Op::kReduceScatter:
        if (in_place) recv = recv_ + r * l.chunk;
        NcclCheck(ncclReduceScatter(send, recv, count, ncclFloat, ncclSum, comm_, stream_),
                  "ncclReduceScatter");
        break;
      case Op::kBroadcast:
        NcclCheck(ncclBroadcast(send, recv, count, ncclFloat, 0, comm_, stream_), "ncclBroadcast");
        break;
      case Op::kAllToAll:
        NcclCheck(ncclGroupStart(), "ncclGroupStart");
        for (int peer = 0; peer < size_; ++peer) {
          const std::size_t p = static_cast<std::size_t>(peer);
          NcclCheck(ncclSend(send + p * l.chunk, count, ncclFloat, peer, comm_, stream_),
                    "ncclSend");
          NcclCheck(ncclRecv(recv + p * l.chunk, count, ncclFloat, peer, comm_, stream_),
                    "ncclRecv");
        }
        NcclCheck(ncclGroupEnd(), "ncclGroupEnd");
        break;
      case Op::kSendRecv:
        NcclCheck(ncclGroupStart(), "ncclGroupStart");
        NcclCheck(ncclSend(send, count, ncclFloat, (rank_ + 1) % size_, comm_, stream_),
                  "ncclSend");
        NcclCheck(ncclRecv(recv, count, ncclFloat, (rank_ + size_ - 1) % size_, comm_, stream_),
                  "ncclRecv");
        NcclCheck(ncclGroupEnd(), "ncclGroupEnd");
        break;
      case Op::kBarrier:  // NCCL has none; not swept (AllOps)
        break;
    }
  }

  MPI_Comm mpi_;
  int rank_ = 0;
  int size_ = 1;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  float* send_ = nullptr;
  float* recv_ = nullptr;
  std::size_t send_cap_ = 0;
  std::size_t recv_cap_ = 0;
};

}  // namespace

std::unique_ptr<Backend> MakeNcclBackend(MPI_Comm comm, int local_rank) {
  return std::make_unique<NcclBackend>(comm, local_rank);
}

}  // namespace ringpilot::commbench
