// ringpilot-commbench drivers: one Backend per device (MPI collectives on host buffers,
// NCCL on device buffers) and the two measurements that run on it: the collective sweep
// and the pairwise send/recv matrix. Every rank calls these together.
#pragma once

#include <mpi.h>

#include <memory>
#include <optional>
#include <vector>

#include "commbench/sweep.h"

namespace ringpilot::commbench {

class Backend {
 public:
  virtual ~Backend() = default;
  /// NCCL conventions for in-place buffers (see MakePlacement).
  virtual bool nccl() const = 0;
  /// Whether the backend has a form of `op` in this mode.
  virtual bool Supports(Op op, bool in_place) const = 0;
  /// Makes the send and receive buffers at least this large (elements).
  virtual void Reserve(std::size_t send_elems, std::size_t recv_elems) = 0;
  /// Copies host data into a buffer at an element offset.
  virtual void Upload(bool recv, std::size_t offset, const std::vector<float>& data) = 0;
  virtual std::vector<float> Download(bool recv, std::size_t offset, std::size_t elems) = 0;
  /// Runs one call and waits for it to complete on this rank.
  virtual void RunOnce(Op op, bool in_place, const Layout& layout) = 0;
  /// Barrier, then one call, timed on this rank (seconds).
  virtual double TimeOnce(Op op, bool in_place, const Layout& layout) = 0;
  /// Barrier, then `iters` back-to-back calls timed as one span on this rank; returns the
  /// span divided by `iters` (seconds). nccl-tests' method: launch gaps and the skew with
  /// which ranks leave the barrier are amortised over the loop. With `graph_replays` > 0
  /// (NCCL only: nccl-tests -G) the `iters` calls are captured once as a CUDA graph, replayed
  /// once untimed, then `graph_replays` times in the span, which is divided by
  /// iters x graph_replays.
  virtual double TimeLoop(Op op, bool in_place, const Layout& layout, int iters,
                          int graph_replays) = 0;
  /// `iters` back-to-back sends of `elems` from `src` to `dst`; both call it, the others
  /// do not. Returns the time the receiver saw (seconds); 0 on the sender.
  virtual double TimeTransfer(int src, int dst, std::size_t elems, int iters) = 0;
};

/// MPI collectives on host buffers over `comm`.
std::unique_ptr<Backend> MakeMpiBackend(MPI_Comm comm);

#ifdef RINGPILOT_WITH_CUDA
/// NCCL on device buffers: cudaSetDevice(local_rank), unique id broadcast over `comm`.
std::unique_ptr<Backend> MakeNcclBackend(MPI_Comm comm, int local_rank);
#endif

struct SweepOptions {
  std::vector<Op> ops;
  std::vector<std::size_t> sizes;
  bool out_of_place = true;
  bool in_place = false;
  int warmup = 5;
  int iters = 20;
  int graph_replays = 0;      ///< > 0: the loop's mean from a CUDA graph (TimeLoop)
  bool inject_error = false;  ///< testing: rank 0 corrupts one input element of each check
  std::optional<double> expected_busbw_gbps;
};

/// Runs the sweep; every rank returns the same results (`wrong` is the sum over ranks).
/// The mean time (and with it algbw/busbw) comes from a back-to-back loop of `iters` calls
/// as nccl-tests times it (replayed from a CUDA graph with `graph_replays`); min/max/p99
/// from `iters` separately timed eager calls. Times are the slowest rank's.
std::vector<Result> RunSweep(Backend& backend, MPI_Comm comm, const SweepOptions& options);

/// Matrix [src][dst] of send/recv bandwidth (GB/s) for `bytes` per transfer, on rank 0
/// (other ranks get an empty matrix). The diagonal is 0.
std::vector<std::vector<double>> RunPairwise(Backend& backend, MPI_Comm comm, std::size_t bytes,
                                             int warmup, int iters);

}  // namespace ringpilot::commbench
