#include "commbench/runner.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ringpilot::commbench {
namespace {

constexpr float kSentinel = -1.0f;
constexpr int kTransferTag = 7001;

void Check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("MPI error in ") + what);
}

class MpiBackend : public Backend {
 public:
  explicit MpiBackend(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }

  bool nccl() const override { return false; }
  bool Supports(Op, bool) const override { return true; }

  void Reserve(std::size_t send_elems, std::size_t recv_elems) override {
    if (send_.size() < send_elems) send_.resize(send_elems);
    if (recv_.size() < recv_elems) recv_.resize(recv_elems);
  }

  void Upload(bool recv, std::size_t offset, const std::vector<float>& data) override {
    std::copy(data.begin(), data.end(), Buffer(recv) + offset);
  }

  std::vector<float> Download(bool recv, std::size_t offset, std::size_t elems) override {
    const float* p = Buffer(recv) + offset;
    return std::vector<float>(p, p + elems);
  }

  void RunOnce(Op op, bool in_place, const Layout& l) override {
    const int count = static_cast<int>(l.count);
    float* send = send_.data();
    float* recv = recv_.data();
    void* in = in_place ? MPI_IN_PLACE : static_cast<void*>(send);
    const int next = (rank_ + 1) % size_;
    const int prev = (rank_ + size_ - 1) % size_;
    switch (op) {
      case Op::kAllReduce:
        Check(MPI_Allreduce(in, recv, count, MPI_FLOAT, MPI_SUM, comm_), "MPI_Allreduce");
        break;
      case Op::kAllGather:
        Check(MPI_Allgather(in, count, MPI_FLOAT, recv, count, MPI_FLOAT, comm_), "MPI_Allgather");
        break;
      case Op::kReduceScatter:
        Check(MPI_Reduce_scatter_block(in, recv, count, MPI_FLOAT, MPI_SUM, comm_),
              "MPI_Reduce_scatter_block");
        break;
      case Op::kBroadcast:
        // MPI_Bcast has one buffer per rank: out of place, the root sends from its send
        // buffer (which is then its result) and the others receive into theirs.
        Check(MPI_Bcast(!in_place && rank_ == 0 ? send : recv, count, MPI_FLOAT, 0, comm_),
              "MPI_Bcast");
        break;
      case Op::kAllToAll:
        Check(MPI_Alltoall(in, count, MPI_FLOAT, recv, count, MPI_FLOAT, comm_), "MPI_Alltoall");
        break;
      case Op::kSendRecv:
        if (in_place) {
          Check(MPI_Sendrecv_replace(recv, count, MPI_FLOAT, next, kTransferTag, prev, kTransferTag,
                                     comm_, MPI_STATUS_IGNORE),
                "MPI_Sendrecv_replace");
        } else {
          Check(MPI_Sendrecv(send, count, MPI_FLOAT, next, kTransferTag, recv, count, MPI_FLOAT,
                             prev, kTransferTag, comm_, MPI_STATUS_IGNORE),
                "MPI_Sendrecv");
        }
        break;
      case Op::kBarrier:  // moves no data: not swept (AllOps)
        Check(MPI_Barrier(comm_), "MPI_Barrier");
        break;
    }
  }

  double TimeOnce(Op op, bool in_place, const Layout& l) override {
    MPI_Barrier(comm_);
    const double t0 = MPI_Wtime();
    RunOnce(op, in_place, l);
    return MPI_Wtime() - t0;
  }

  double TimeLoop(Op op, bool in_place, const Layout& l, int iters, int graph_replays) override {
    // `bench comm` refuses --graphs with --device cpu before it starts any rank.
    if (graph_replays > 0) throw std::invalid_argument("CUDA graphs need the NCCL backend");
    MPI_Barrier(comm_);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) RunOnce(op, in_place, l);
    return (MPI_Wtime() - t0) / iters;
  }

  double TimeTransfer(int src, int dst, std::size_t elems, int iters) override {
    Reserve(elems, elems);
    const int count = static_cast<int>(elems);
    if (rank_ == src) {
      for (int i = 0; i < iters; ++i) {
        Check(MPI_Send(send_.data(), count, MPI_FLOAT, dst, kTransferTag, comm_), "MPI_Send");
      }
      // The receiver's reply closes the measurement on both sides.
      Check(MPI_Recv(nullptr, 0, MPI_BYTE, dst, kTransferTag, comm_, MPI_STATUS_IGNORE),
            "MPI_Recv");
      return 0;
    }
    const double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
      Check(MPI_Recv(recv_.data(), count, MPI_FLOAT, src, kTransferTag, comm_, MPI_STATUS_IGNORE),
            "MPI_Recv");
    }
    const double t = MPI_Wtime() - t0;
    Check(MPI_Send(nullptr, 0, MPI_BYTE, src, kTransferTag, comm_), "MPI_Send");
    return t;
  }

 private:
  float* Buffer(bool recv) { return recv ? recv_.data() : send_.data(); }

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<float> send_;
  std::vector<float> recv_;
};

// In place, the receive buffer holds the input too (reduce-scatter: all n blocks).
std::size_t RecvCapacity(const Layout& l) { return std::max(l.send_elems, l.recv_elems); }

// Checks one call: sentinel-filled buffers, this rank's input, one call, then the output
// compared element by element. Returns this rank's wrong count.
std::size_t CheckOnce(Backend& b, Op op, bool in_place, const Layout& l, int rank, int ranks,
                      bool inject_error) {
  const Placement p = MakePlacement(op, l, in_place, b.nccl(), rank, ranks);
  b.Upload(false, 0, std::vector<float>(l.send_elems, kSentinel));
  b.Upload(true, 0, std::vector<float>(RecvCapacity(l), kSentinel));
  std::vector<float> input(p.input_elems);
  for (std::size_t i = 0; i < input.size(); ++i) input[i] = FillValue(rank, i);
  if (inject_error && rank == 0 && !input.empty()) input[0] += 1.0f;
  b.Upload(p.input_in_recv, p.input_offset, input);
  b.RunOnce(op, in_place, l);
  // MPI broadcast out of place leaves the root's result in its send buffer.
  const bool root_keeps_send = op == Op::kBroadcast && !in_place && !b.nccl() && rank == 0;
  const bool output_in_recv = root_keeps_send ? false : p.output_in_recv;
  const std::vector<float> out = b.Download(output_in_recv, p.output_offset, p.output_elems);
  return CountWrong(op, l, rank, ranks, out);
}

}  // namespace

std::unique_ptr<Backend> MakeMpiBackend(MPI_Comm comm) {
  return std::make_unique<MpiBackend>(comm);
}

std::vector<Result> RunSweep(Backend& backend, MPI_Comm comm, const SweepOptions& options) {
  int rank = 0;
  int ranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  std::vector<bool> modes;
  if (options.out_of_place) modes.push_back(false);
  if (options.in_place) modes.push_back(true);
  std::vector<Result> results;
  for (Op op : options.ops) {
    for (std::size_t size : options.sizes) {
      const Layout l = MakeLayout(op, size, ranks);
      if (l.bytes == 0) continue;  // below one element per rank block
      backend.Reserve(l.send_elems, RecvCapacity(l));
      for (bool in_place : modes) {
        if (!backend.Supports(op, in_place)) continue;
        unsigned long long wrong =
            CheckOnce(backend, op, in_place, l, rank, ranks, options.inject_error);
        Check(MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm),
              "MPI_Allreduce");
        for (int i = 0; i < options.warmup; ++i) backend.TimeOnce(op, in_place, l);
        std::vector<double> times(static_cast<std::size_t>(options.iters));
        for (double& t : times) t = backend.TimeOnce(op, in_place, l);
        // An iteration lasts until its slowest rank is done.
        Check(MPI_Allreduce(MPI_IN_PLACE, times.data(), options.iters, MPI_DOUBLE, MPI_MAX, comm),
              "MPI_Allreduce");
        double loop_mean = backend.TimeLoop(op, in_place, l, options.iters, options.graph_replays);
        Check(MPI_Allreduce(MPI_IN_PLACE, &loop_mean, 1, MPI_DOUBLE, MPI_MAX, comm),
              "MPI_Allreduce");
        Result r;
        r.op = op;
        r.bytes = l.bytes;
        r.in_place = in_place;
        r.time = Summarize(times);
        r.time.mean = loop_mean;
        r.expected_busbw_gbps = options.expected_busbw_gbps;
        r.wrong = static_cast<std::size_t>(wrong);
        ComputeBandwidth(&r, ranks);
        results.push_back(r);
      }
    }
  }
  return results;
}

std::vector<std::vector<double>> RunPairwise(Backend& backend, MPI_Comm comm, std::size_t bytes,
                                             int warmup, int iters) {
  int rank = 0;
  int ranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  const std::size_t elems = std::max<std::size_t>(bytes / kElementBytes, 1);
  const auto n = static_cast<std::size_t>(ranks);
  std::vector<double> local(n * n, 0.0);
  for (int src = 0; src < ranks; ++src) {
    for (int dst = 0; dst < ranks; ++dst) {
      if (src == dst) continue;
      MPI_Barrier(comm);
      if (rank != src && rank != dst) continue;
      if (warmup > 0) backend.TimeTransfer(src, dst, elems, warmup);
      const double t = backend.TimeTransfer(src, dst, elems, iters);
      if (rank == dst && t > 0) {
        local[static_cast<std::size_t>(src) * n + static_cast<std::size_t>(dst)] =
            static_cast<double>(elems * kElementBytes) * iters / t / 1e9;
      }
    }
  }
  std::vector<double> all(n * n, 0.0);
  Check(MPI_Reduce(local.data(), all.data(), static_cast<int>(n * n), MPI_DOUBLE, MPI_MAX, 0, comm),
        "MPI_Reduce");
  std::vector<std::vector<double>> matrix;
  if (rank != 0) return matrix;
  for (std::size_t s = 0; s < n; ++s) {
    matrix.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(s * n),
                        all.begin() + static_cast<std::ptrdiff_t>((s + 1) * n));
  }
  return matrix;
}

}  // namespace ringpilot::commbench
