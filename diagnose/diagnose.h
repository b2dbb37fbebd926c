// `ringpilot diagnose RUN_DIR`: reads a finished (or interrupted) run's summary.json
// (history/run_summary.h),
// per-rank statistics (logs/rank-<N>.stats.json, history/rank_stats.h) and NCCL init logs
// (logs/nccl-rank-<N>.log, history/rank_files.h), and explains where the step time went: which rank
// the others waited for, how much communication was exposed, how close the collectives came to the
// expected bus bandwidth, and which transport NCCL picked per peer. For a user's program
// (launch.command) it reads the NCCL profiler plugin's logs/rank-<N>.nccl.json instead,
// while the run goes on or afterwards (diagnose/program.cpp). Every attempt of the job
// counts: RUN_DIR/attempts/N/ (history/attempts.h) says which steps each trained, how it
// ended and what its ranks measured, for a live, interrupted, failed or finished run
// (diagnose/attempts.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "history/attempts.h"
#include "history/failure.h"
#include "history/launcher_record.h"
#include "history/program_beat.h"
#include "history/rank_stats.h"
#include "history/record_fields.h"
#include "history/run_summary.h"

namespace ringpilot::diagnose {

/// Bad input: a missing run directory, unreadable or malformed JSON. The message names
/// the file and fits on one line. A record of the run directory that cannot be read throws
/// its base, history::RecordError (history/record_fields.h), with the same kind of message.
class DiagnoseError : public history::RecordError {
 public:
  using history::RecordError::RecordError;
};

/// A rank's collectives of one op and size class: a trainer rank's (its stats file) or a
/// program rank's (its NCCL record, algorithms and protocols summed).
using history::CollectiveTotals;
/// One trainer rank's logs/rank-<N>.stats.json or attempts/N/rank-<R>.stats.json.
using history::RankStats;

/// Transports NCCL reported for the connections of one rank to one peer.
struct PeerTransport {
  int rank = 0;
  int peer = 0;
  std::set<std::string> transports;  ///< P2P, SHM, NET_IB, NET_Socket, ...
};

/// One timed collective of a program's rank ("recent_collectives" of its nccl.json).
struct RecentCollective {
  uint64_t seq = 0;
  std::string op;
  double bytes = 0;
  double enqueue_unix = 0;     ///< when the rank enqueued it (host clock)
  double kernel_start_ns = 0;  ///< GPU clock of its first channel; 0 = none
  double seconds = 0;          ///< its kernel time: waiting for late ranks included
};

/// An operation a program's rank had in flight when its file was written, or, when
/// `abandoned`, the one it was stuck in when its communicator was aborted.
struct InFlightOp {
  std::string op;
  uint64_t seq = 0;
  double start_unix = 0;
  double age_seconds = 0;  ///< at the time of the file (abandoned: of the abort)
  bool abandoned = false;
};

/// One communicator as one program rank's NCCL profiler plugin saw it.
struct PluginComm {
  std::string comm;  ///< hash, 16 hex digits: equal on every rank of the communicator
  std::string name;
  int comm_rank = -1;
  int comm_size = 0;
  int nodes = 0;            ///< 0 unknown (API v2/v3)
  bool gpu_timing = false;  ///< times are GPU kernel spans (API v4/v5)
  bool finalized = false;
  double init_unix = 0;
  uint64_t coll_started = 0, coll_completed = 0;
  std::vector<CollectiveTotals> ops;  ///< per op and size bucket (algorithms summed)
  std::optional<InFlightOp> in_flight;
  std::vector<RecentCollective> recent;  ///< ascending seq
};

/// A program rank's logs/rank-<N>.nccl.json (history/nccl_record.h) as diagnose uses it:
/// operations summed over algorithms and protocols, recent collectives by seq.
struct PluginRank {
  std::string file;
  int rank = 0;
  std::string node;
  int local_rank = -1;
  double written_unix = 0;  ///< rewritten every few seconds while the process lives
  std::vector<PluginComm> comms;
};

struct RunData {
  std::string run_dir;
  std::optional<history::RunSummary> summary;  ///< summary.json, when present
  std::vector<RankStats> ranks;                ///< sorted by rank
  std::vector<PeerTransport> transports;       ///< sorted by (rank, peer)
  std::vector<std::string> ib_ports;           ///< "mlx5_0/1", ... on this machine
  std::vector<PluginRank> plugin_ranks;        ///< a program's ranks, sorted by rank
  /// A launch.command program's ranks as `ringpilot exec` saw their processes
  /// (logs/rank-<N>.program.json): command, state, CPU, memory, reported progress.
  std::map<int, history::ProgramBeat> program_beats;
  /// logs/topology-<host>.json (written by `ringpilot exec --bind`): host -> path.
  std::map<std::string, std::string> topology_files;
  double now_unix = 0;  ///< when it was read: a live run's files are this old
  /// Every run's attempts (history::ReadAttempts): attempts.prev.N/, attempts.prev/,
  /// attempts/; each run's by N.
  std::vector<history::AttemptRecord> attempts;
  /// rank-R.stats.json in each attempt's directory: (run, attempt) -> its ranks' statistics
  /// (sorted by rank).
  std::map<std::pair<int, int>, std::vector<RankStats>> attempt_ranks;
  /// `ranks` come from the last attempt that recorded any (its rank-R.stats.json), not
  /// logs/: the run did not finish (live, interrupted or failed). 0 when from logs/.
  int ranks_from_attempt = 0;
  int ranks_from_run = 0;                           ///< ... and the run that attempt belongs to
  std::optional<history::LauncherRecord> launcher;  ///< RUN_DIR/launcher.json, when present
  /// RUN_DIR/failure.json: the report of the last run that failed for good, when readable.
  std::optional<history::FailureRecord> failure;
};

/// One rank over every attempt: attempts/N/rank-R.stats.json of each N.
struct RankAttemptsRow {
  int rank = 0;
  double steps = 0;         ///< timed steps, summed over attempts
  double step_seconds = 0;  ///< their time: steps x mean step time, summed
  std::map<std::pair<int, int>, double> steps_by_attempt;  ///< by (run, attempt)
};

/// How the job failed for good, when it stands failed (failure.json).
struct FailureView {
  history::FailureRecord record;
  int attempt = 0;  ///< the failed attempt's number in the last run
  /// That attempt trained no step (it left no record of one): the job never got going (a
  /// metrics port taken, a missing data root, a bad data file).
  bool before_first_step = false;
};

/// The run over its attempts.
struct AttemptsView {
  history::StepCoverage coverage;
  std::vector<int> failed;  ///< the last run's failed attempts' numbers
  int failed_total = 0;     ///< failed attempts over every run
  int runs = 0;             ///< history::RunsOf
  std::vector<RankAttemptsRow> ranks;
  /// How the run stands: "finished", "failed", "stopped", "running" (launcher.json), else
  /// from the attempts: "finished" (summary.json), "failed", "preempted", "live or
  /// interrupted" (the last attempt left no end); "" without either.
  std::string state;
  std::optional<FailureView> failure;  ///< when state is "failed" and failure.json tells
};

/// Reads RUN_DIR: any directory `ringpilot status` reads (a job.yaml in it), a run that
/// failed before its first step included, or one that holds a run's records. `infiniband_dir`
/// is where to look for InfiniBand ports (normally /sys/class/infiniband). Throws
/// DiagnoseError.
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

/// A program rank's share of time in NCCL collectives.
struct ProgramRankRow {
  int rank = 0;
  std::string node;
  double comm_seconds = 0;     ///< kernel time of every timed operation, all communicators
  double elapsed_seconds = 0;  ///< first communicator's creation to the file's time
  double comm_share = 0;
  uint64_t started = 0, completed = 0;  ///< collective sequence numbers (largest communicator)
  double silent_seconds = 0;            ///< now - the file's time
};

/// A rank the others waited for in a program's collectives, from the collectives every
/// rank recorded with the same sequence number: the rank whose kernel was shortest arrived
/// last (the others' kernels include waiting for it), and the others' extra time is
/// charged to it; the last to enqueue it is counted too (host clocks).
struct ProgramCulprit {
  int rank = 0;
  double caused_wait_seconds = 0;  ///< summed over the other ranks and collectives
  int last_arrivals = 0;           ///< collectives whose kernel it ran shortest
  int last_enqueues = 0;           ///< collectives it enqueued last
};

/// A program stuck in a collective: which rank the others wait for, and in which one.
struct HangReport {
  std::string comm;
  int rank_behind = -1;
  uint64_t behind_completed = 0;  ///< its last completed collective
  uint64_t behind_started = 0;
  uint64_t seq = 0;  ///< the collective the others are in
  std::string op;
  std::vector<int> waiting;   ///< ranks in flight in it (or beyond)
  double waited_seconds = 0;  ///< the longest of their waits, as of now
  bool aborted = false;       ///< the communicator was aborted meanwhile
  std::vector<int> silent;    ///< ranks whose file stopped being rewritten (dead, stopped)
};

struct ProgramDiagnosis {
  std::vector<ProgramRankRow> ranks;
  std::optional<double> comm_share;     ///< over the ranks
  std::string comm;                     ///< the communicator the ranking and hang look at
  int aligned_collectives = 0;          ///< collectives every rank of it recorded
  std::vector<ProgramCulprit> ranking;  ///< by caused wait, descending
  std::vector<CollectiveRow> collectives;
  std::string expected_source;  ///< the bottleneck behind `expected`, or why none
  std::optional<HangReport> hang;
};

/// A rank not heard from (its nccl.json not rewritten) for this long is stopped or dead.
inline constexpr double kSilentSeconds = 20.0;
/// A collective in flight this long (or at an abort) makes a hang report.
inline constexpr double kStuckSeconds = 10.0;

/// A rank whose GPU clocks a power or thermal limit held down for a large share of its
/// timed steps (history::GpuClocks).
struct ClockLimitedRank {
  int rank = 0;
  std::string cause;  ///< "power" or "thermal"
  double share = 0;   ///< of the timed window, [0, 1]
};

struct Diagnosis {
  RunData data;
  ProgramDiagnosis program;           ///< from plugin_ranks, when there are any
  std::vector<CulpritTotal> ranking;  ///< by wait, then steps, descending
  std::optional<CulpritTotal> straggler;
  double wait_per_rank_step = 0;        ///< straggler's wait / steps of the ranks that waited
  std::map<int, double> exposed_share;  ///< rank -> comm_exposed / total step time
  std::map<int, double> input_share;    ///< rank -> input wait (data phase) / total step time
  /// rank -> the GPU's idle time between steps / its total step time (which holds it), CUDA
  /// ranks
  std::map<int, double> gpu_idle_share;
  /// Ranks whose input share is above kInputBoundShare and, where the GPU's idle time is
  /// known and the input is made on the host, whose GPU idled at least
  /// kInputBoundGpuIdleShare of the time.
  std::vector<int> input_bound_ranks;
  /// Ranks with a limit share of at least kClockLimitedShare, by cause, then share descending.
  std::vector<ClockLimitedRank> clock_limited;
  std::optional<double> mean_exposed_share;
  std::optional<double> mean_overlap;
  std::vector<CollectiveRow> collectives;  ///< by op, then bucket size
  std::vector<std::string> warnings;
  std::vector<std::string> missing;  ///< what this run directory lacks
  AttemptsView attempts;             ///< from data.attempts and data.attempt_ranks
};

/// A rank whose input wait is above this share of its step time is input-bound...
inline constexpr double kInputBoundShare = 0.2;
/// ...on CUDA with input made on the host, only when its GPU also idled between steps for
/// at least this share of the time: the host waits for input while the GPU still runs the
/// step before, so a long host wait can cost nothing (a synthetic ResNet-50 batch takes
/// 10 ms of the host's 33 ms step to make, all of it behind the GPU's step).
inline constexpr double kInputBoundGpuIdleShare = 0.05;
/// A GPU whose clocks a limit held down for at least this share of the timed steps is named.
inline constexpr double kClockLimitedShare = 0.1;
/// Communication exposed under this share of the step time is hidden behind compute: its
/// collectives' bus bandwidth (low beside backward, which shares the SMs and HBM with them)
/// does not set the step time, so a LOW row gets no warning.
inline constexpr double kHiddenCommShare = 0.02;

Diagnosis Analyze(RunData data);

/// Whether the run's communication stayed hidden behind compute (exposed under
/// kHiddenCommShare; false when the exposure is unknown): its LOW bus bandwidth rows then
/// get no warning, and the text report says why.
inline bool CommunicationHidden(const Diagnosis& d) {
  return d.mean_exposed_share && *d.mean_exposed_share < kHiddenCommShare;
}

/// The program part (diagnose/program.cpp): reads RUN_DIR/logs/rank-<N>.nccl.json and
/// logs/topology-<host>.json into `data`; analyses them into `d->program` and its warnings.
void LoadPluginRanks(const std::string& run_dir, RunData* data);
void AnalyzeProgram(Diagnosis* d);
std::string RenderProgramText(const Diagnosis& d);
nlohmann::json ProgramToJson(const Diagnosis& d);

/// The attempts part (diagnose/attempts.cpp): fills `d->attempts` and its warnings (a last
/// attempt still "running" when launcher.json says the job ended becomes "interrupted", or
/// "failed" when the launcher is gone without a report), and the failure of a job that
/// stands failed; its section of the text report ("" without attempts or failure) and of
/// the JSON.
void AnalyzeAttempts(Diagnosis* d);
std::string RenderAttemptsText(const Diagnosis& d);
nlohmann::json AttemptsToJson(const Diagnosis& d);

/// The GPU clocks part (diagnose/gpu_clocks.cpp): fills `d->clock_limited` from the ranks'
/// gpu_clocks and adds one warning per limit (naming the straggler when it is among them);
/// its section of the text report ("" when no rank recorded its clocks) and a rank's
/// gpu_clocks in the JSON (null when it has none).
void AnalyzeGpuClocks(Diagnosis* d);
std::string RenderGpuClocksText(const Diagnosis& d);
nlohmann::json GpuClocksJson(const RankStats& r);

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
