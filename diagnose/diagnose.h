// `ringpilot diagnose RUN_DIR`: reads a finished (or interrupted) run's summary.json,
// per-rank statistics (logs/rank-<N>.stats.json) and NCCL init logs
// (logs/nccl-rank-<N>.log), and explains where the step time went: which rank the others
// waited for, how much communication was exposed, how close the collectives came to the
// expected bus bandwidth, and which transport NCCL picked per peer.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringpilot::diagnose {

/// Bad input: a missing run directory, unreadable or malformed JSON. The message names
/// the file and fits on one line.
class DiagnoseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CollectiveStat {
  std::string op;
  std::string size_bucket;
  double count = 0;
  double bytes_total = 0;
  double seconds_total = 0;
  double busbw = 0;  ///< bytes/s as measured by the rank
};

/// One rank's logs/rank-<N>.stats.json.
struct RankStats {
  std::string file;
  int rank = 0;
  std::string node;
  int local_rank = -1;
  int world_size = 0;
  double steps = 0;
  double step_p50 = 0, step_p99 = 0, step_mean = 0;
  std::map<std::string, double> phase_seconds_total;  ///< data, forward, ..., comm_exposed
  /// Per-step wait for the input batch (the data phase), when the file has it.
  std::optional<double> input_wait_p50, input_wait_p99;
  std::optional<double> overlap_ratio;
  double wait_seconds_total = 0;
  std::map<int, double> culprit_steps;    ///< culprit rank -> steps it was last
  std::map<int, double> wait_by_culprit;  ///< culprit rank -> seconds this rank waited
  double compute_skew_mean = 0;
  std::vector<CollectiveStat> collectives;
  std::map<std::string, double> expected_busbw;  ///< op -> bytes/s, 0 = unknown
};

/// Transports NCCL reported for the connections of one rank to one peer.
struct PeerTransport {
  int rank = 0;
  int peer = 0;
  std::set<std::string> transports;  ///< P2P, SHM, NET_IB, NET_Socket, ...
};

struct RunData {
  std::string run_dir;
  std::optional<nlohmann::json> summary;  ///< summary.json, when present
  std::vector<RankStats> ranks;           ///< sorted by rank
  std::vector<PeerTransport> transports;  ///< sorted by (rank, peer)
  std::vector<std::string> ib_ports;      ///< "mlx5_0/1", ... on this machine
};

/// Reads RUN_DIR. `infiniband_dir` is where to look for InfiniBand ports (normally
/// /sys/class/infiniband). Throws DiagnoseError.
RunData LoadRun(const std::string& run_dir,
                const std::string& infiniband_dir = "/sys/class/infiniband");

/// Transport label for NCCL's "via X" text: P2P, SHM, NET_IB, NET_Socket, or the NET
/// plugin's name as NET_<name>; "" when not a transport.
std::string ClassifyTransport(const std::string& via);

/// Parses one NCCL INFO "Channel xx/y : a[..] -> b[..] via T" line. Returns false for
/// other lines.
bool ParseNcclChannelLine(const std::string& line, int* from, int* to, std::string* transport);

/// Lower and upper bound in bytes of a size bucket label such as "1MiB-4MiB", "<1KiB" or
/// ">=1GiB"; -1 for an open end. Both -1 when the label cannot be read.
std::pair<double, double> ParseSizeBucket(const std::string& label);

struct CulpritTotal {
  int rank = 0;
  double wait_seconds = 0;   ///< summed over the ranks that waited
  double culprit_steps = 0;  ///< summed over the ranks that observed it
};

struct CollectiveRow {
  std::string op;
  std::string size_bucket;
  double count = 0, bytes_total = 0, seconds_total = 0;
  double busbw_mean = 0;  ///< mean over the ranks that reported this op and bucket
  double busbw_min = 0;
  int busbw_min_rank = 0;
  double expected = 0;  ///< 0 = unknown
  bool low = false;     ///< below half of expected
};

struct Diagnosis {
  RunData data;
  std::vector<CulpritTotal> ranking;  ///< by wait, then steps, descending
  std::optional<CulpritTotal> straggler;
  double wait_per_rank_step = 0;        ///< straggler's wait / steps of the ranks that waited
  std::map<int, double> exposed_share;  ///< rank -> comm_exposed / total step time
  std::map<int, double> input_share;    ///< rank -> input wait (data phase) / total step time
  std::vector<int> input_bound_ranks;   ///< ranks whose input share is above kInputBoundShare
  std::optional<double> mean_exposed_share;
  std::optional<double> mean_overlap;
  std::vector<CollectiveRow> collectives;  ///< by op, then bucket size
  std::vector<std::string> warnings;
  std::vector<std::string> missing;  ///< what this run directory lacks
};

/// A rank whose input wait is above this share of its step time is input-bound.
inline constexpr double kInputBoundShare = 0.2;

Diagnosis Analyze(RunData data);

/// The human report and the `--json` object.
std::string RenderDiagnosisText(const Diagnosis& d);
nlohmann::json DiagnosisToJson(const Diagnosis& d);

/// Writes busbw-vs-size.svg and step-time-per-rank.svg into `dir` (created if missing)
/// and returns their paths; throws std::runtime_error naming the file on failure.
std::vector<std::string> WriteDiagnosisSvgs(const Diagnosis& d, const std::string& dir);

/// Outcome of merging the per-rank traces (diagnose_trace.cpp).
struct TraceMerge {
  std::string path;  ///< RUN_DIR/trace.json; "" when the run has no trace-rank-<N>.json
  int ranks = 0;
  std::size_t events = 0;             ///< complete events, all ranks
  std::vector<std::string> warnings;  ///< per-rank files that could not be used, one line each
};

/// Merges RUN_DIR/trace-rank-<N>.json (Chrome Trace Event files the trainer writes) into
/// RUN_DIR/trace.json: one timeline, one process per rank (pid = rank, named "rank N
/// (node)"). Unreadable or malformed rank files are skipped with a warning. Throws
/// DiagnoseError when trace.json cannot be written.
TraceMerge MergeTraces(const std::string& run_dir);

/// The two plots as SVG documents (diagnose_svg.cpp).
std::string BusbwSvg(const Diagnosis& d);
std::string StepTimeSvg(const Diagnosis& d);

}  // namespace ringpilot::diagnose
