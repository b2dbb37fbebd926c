// ringpilot-commbench core: the arithmetic of a collective sweep, free of MPI and CUDA so
// that it can be unit-tested: operation names, nccl-tests' byte accounting and bus
// bandwidth factors, the size sweep, per-iteration statistics, and the values that result
// checking fills in and expects back.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/collective_op.h"

namespace ringpilot::commbench {

using Op = comm::CollectiveOp;

/// Every operation a sweep runs, in the order it runs them (all but the barrier).
const std::vector<Op>& AllOps();
/// "all" or a comma-separated list of comm::ToString names (not "barrier"); throws
/// std::invalid_argument naming a bad one.
std::vector<Op> ParseOpList(const std::string& text);

/// Element counts (float32) of one operation at one sweep size, as nccl-tests lays them
/// out. `bytes` is nccl-tests' "size": the per-rank buffer for all-reduce, broadcast and
/// send/recv; the whole gathered / scattered / exchanged buffer (n chunks) for all-gather,
/// reduce-scatter and all-to-all. algbw = bytes / time.
struct Layout {
  std::size_t count = 0;  ///< per-rank element count of the call (chunk for the n-chunk ops)
  std::size_t chunk = 0;  ///< elements per rank block (n-chunk ops); == count otherwise
  std::size_t send_elems = 0;
  std::size_t recv_elems = 0;
  std::size_t bytes = 0;  ///< 0: the size is too small for this op and rank count
};

inline constexpr std::size_t kElementBytes = sizeof(float);

Layout MakeLayout(Op op, std::size_t size_bytes, int ranks);

/// min, min*factor, ... up to and including max (when reached exactly, else the last one
/// below it). Throws std::invalid_argument for min < 4, max < min or factor < 2.
std::vector<std::size_t> SweepSizes(std::size_t min_bytes, std::size_t max_bytes, int factor);

/// Summary of the iteration times (seconds) of one measurement.
struct TimeStats {
  double mean = 0;
  double min = 0;
  double max = 0;
  double p99 = 0;  ///< nearest-rank 99th percentile
};
/// Throws std::invalid_argument for an empty vector.
TimeStats Summarize(std::vector<double> seconds);

// ---- result checking ------------------------------------------------------------------
// Inputs are small integers that depend on the rank and the index, so every sum over up to
// thousands of ranks is exact in float32 and each output element has one right value.

/// Element `index` of rank `rank`'s input.
float FillValue(int rank, std::size_t index);

/// Where the input and the output of a call live, in the send ("send") or receive buffer,
/// as element offsets. `nccl` picks NCCL's in-place conventions (reduce-scatter writes its
/// result at rank * chunk of the receive buffer) over MPI's (at 0).
struct Placement {
  bool input_in_recv = false;
  std::size_t input_offset = 0;
  std::size_t input_elems = 0;
  bool output_in_recv = true;
  std::size_t output_offset = 0;
  std::size_t output_elems = 0;
};
Placement MakePlacement(Op op, const Layout& layout, bool in_place, bool nccl, int rank, int ranks);

/// The right value of output element `j` (relative to the output region) at `rank`.
/// Broadcast's root is rank 0; send/recv receives from rank - 1 (mod n).
float ExpectedValue(Op op, const Layout& layout, int rank, int ranks, std::size_t j);

/// Number of elements of `output` that differ from ExpectedValue.
std::size_t CountWrong(Op op, const Layout& layout, int rank, int ranks,
                       const std::vector<float>& output);

// ---- results --------------------------------------------------------------------------

struct Result {
  Op op = Op::kAllReduce;
  std::size_t bytes = 0;
  bool in_place = false;
  TimeStats time;  ///< seconds
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  std::optional<double> expected_busbw_gbps;
  std::size_t wrong = 0;
};

/// Fills algbw and busbw (GB/s, 1e9 bytes) from bytes and the mean time.
void ComputeBandwidth(Result* r, int ranks);

/// {"op","bytes","in_place","time_us","time_us_min","time_us_max","time_us_p99",
///  "algbw_gbps","busbw_gbps","expected_busbw_gbps","ratio","wrong"}; the expected
/// bandwidth and the ratio are null when the topology gives no figure.
nlohmann::ordered_json ToJson(const Result& r);

}  // namespace ringpilot::commbench
