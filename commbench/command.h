// `ringpilot bench comm`: runs ringpilot-commbench under mpirun on this host (a collective
// sweep over MPI or NCCL, or a pairwise send/recv matrix), then prints an nccl-tests-like
// table or the JSON document, and can plot busbw against size as SVG.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "base/environment.h"

namespace ringpilot::commbench {

struct BenchCommArgs {
  std::string device = "cpu";  ///< cpu (MPI on host buffers) | cuda (NCCL on device buffers)
  int np = 0;                  ///< 0: cpu 2, cuda the GPUs visible on this node
  std::string op = "all";
  std::string min_bytes = "1K";
  std::string max_bytes;  ///< "": cpu 1M, cuda 1G
  int step_factor = 2;
  int iters = 20;
  int warmup = 5;
  int graphs = 0;  ///< > 0 (cuda only): each size's mean from a CUDA graph replayed N times
  bool in_place = false;
  bool out_of_place = false;
  bool both = false;
  bool json = false;
  std::string plot;  ///< SVG path; "" none
  bool pairwise = false;
  bool inject_error = false;  ///< testing only: corrupt results, expect wrong > 0
};

/// Where things are: mpirun, ringpilot-commbench, and what decides the mpirun flags.
struct BenchContext {
  std::string mpirun = "mpirun";
  std::string commbench;
  unsigned euid = 1;       ///< 0 adds --allow-run-as-root
  base::Environment env;   ///< forwarded variables (NCCL_*, CUDA_VISIBLE_DEVICES, ...) get -x
  bool cma_works = false;  ///< mpirun::CrossMemoryAttachWorks() here (all ranks run on this host)
  std::string output;      ///< the JSON document's path, passed as --output
};

/// "4096", "64K", "1M", "2G" (binary multiples, optional trailing B) -> bytes; throws
/// std::invalid_argument on anything else or 0.
std::size_t ParseByteSize(const std::string& text);

/// "1K", "64M", "1G" for exact binary multiples, else the byte count.
std::string FormatByteSize(std::size_t bytes);

/// `MPIRUN -np N [--oversubscribe] --bind-to none [--allow-run-as-root] --mca
/// btl_vader_single_copy_mechanism none -x VAR... COMMBENCH --device D ... --output PATH`.
/// `args` must have np, max_bytes and the mode resolved. Throws std::invalid_argument for
/// a bad size or option combination.
std::vector<std::string> BuildCommbenchArgv(const BenchCommArgs& args, const BenchContext& ctx);

/// nccl-tests-like table of a sweep document ({"results": [...]}), with the average bus
/// bandwidth and the count of results with wrong elements last.
std::string FormatResultsTable(const nlohmann::json& doc);

/// Pairs (src, dst) of a pairwise matrix whose bandwidth is below `fraction` of the median
/// of the off-diagonal entries.
std::vector<std::pair<int, int>> FindSlowPairs(const std::vector<std::vector<double>>& gbps,
                                               double fraction = 0.5);
double OffDiagonalMedian(const std::vector<std::vector<double>>& gbps);

/// Whether (src, dst) is one of FindSlowPairs' pairs.
bool IsSlowPair(const std::vector<std::pair<int, int>>& slow, std::size_t src, std::size_t dst);

/// The matrix (GB/s; src rows, dst columns; '*' marks slow pairs) and a line per slow pair.
std::string FormatPairwiseMatrix(const std::vector<std::vector<double>>& gbps, std::size_t bytes);

/// Adds `bench comm`; its handler runs as a parse callback and exits with RunBenchComm's
/// status.
void AddBenchCommand(CLI::App& app);

/// 0; 1 when any result has wrong > 0 or the benchmark failed (mpirun's status when it
/// exited non-zero); 2 for bad options.
int RunBenchComm(BenchCommArgs args, std::ostream& out, std::ostream& err);

}  // namespace ringpilot::commbench
