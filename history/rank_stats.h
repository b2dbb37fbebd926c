// RUN_DIR/logs/rank-N.stats.json and RUN_DIR/attempts/N/rank-R.stats.json: a trainer rank's
// step statistics (phase times, input wait, overlap, straggler attribution, collectives by
// op and size class). trainer/telemetry's StepStats fills the record; every rank writes
// attempts/N/rank-R.stats.json at each checkpoint and at the end of its attempt, and
// logs/rank-N.stats.json at the end of the run; `ringpilot diagnose` reads both. This file is
// the format's one definition: the trainer writes through WriteRankStats, every reader
// parses through ReadRankStats.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ringpilot::history {

/// rank-R<this>, in logs/ and in attempts/N/.
inline constexpr const char* kRankStatsSuffix = ".stats.json";

/// A rank's collectives of one op and size class ("collectives": one row each).
struct CollectiveTotals {
  std::string op;           ///< "allreduce", ... (comm/collective_op.h names)
  std::string size_bucket;  ///< comm::SizeBucketName
  uint64_t count = 0;
  uint64_t bytes_total = 0;
  double seconds_total = 0;
  double busbw_bytes_per_second = 0;  ///< bytes x bus factor / seconds; 0 when not timed
};

/// The per-step wait for the input batch (the data phase), over the timed steps.
struct InputWaitSeconds {
  uint64_t steps = 0;  ///< steps measured
  double total = 0, p50 = 0, p99 = 0, max = 0;
};

/// ImageDecode::where: libjpeg-turbo on host threads, or nvJPEG on the GPU.
inline constexpr const char* kDecodeOnHost = "host";
inline constexpr const char* kDecodeOnGpu = "gpu";

/// How an image-kind rank decoded its training images ("image_decode"): what
/// `ringpilot diagnose` names when the rank is input-bound.
struct ImageDecode {
  std::string where;     ///< kDecodeOnHost or kDecodeOnGpu
  int threads = 0;       ///< host decode threads, or nvJPEG's reader threads
  int64_t batch = 0;     ///< images per optimizer step on this rank (all its micro-batches)
  std::string decision;  ///< the rank log's `input:` sentence: which path and why
};

/// What held a CUDA rank's GPU clocks down over its timed steps ("gpu_clocks"), from NVML
/// read when the timed steps began and when the record was written: what `ringpilot
/// diagnose` names when every step runs at the clock a power or thermal limit allows.
/// Absent on CPU ranks and where NVML is not sampled (metrics.gpu_sample_seconds 0).
struct GpuClocks {
  double seconds = 0;  ///< the window: host time between the two readings
  /// Time in the window the clocks were held by the power limit, and by the thermal limit
  /// (NVML's violation counters); absent where NVML does not count it.
  std::optional<double> power_limited_seconds, thermal_limited_seconds;
  /// Mean of the GPU sampler's SM clock samples in the window (one per
  /// metrics.gpu_sample_seconds); absent when none fell in it.
  std::optional<double> sm_clock_mhz;
  std::optional<double> sm_clock_max_mhz;  ///< the GPU's maximum SM clock
  /// Mean board power over the window (NVML's energy counter); absent without the counter.
  std::optional<double> power_watts;
  std::optional<double> power_limit_watts;  ///< the enforced power limit
};

/// The whole file.
struct RankStats {
  int rank = 0;
  std::string node;
  int local_rank = -1;  ///< -1 unknown
  int world_size = 0;
  uint64_t steps = 0;                                 ///< timed steps (the warm-up steps are not)
  double step_p50 = 0, step_p99 = 0, step_mean = 0;   ///< "step_seconds"
  std::map<std::string, double> phase_seconds_total;  ///< data, forward, ..., comm_exposed
  std::optional<InputWaitSeconds> input_wait;         ///< absent in files of older versions
  std::optional<ImageDecode> image_decode;            ///< image kinds (from 2026-11-30)
  std::optional<GpuClocks> gpu_clocks;                ///< CUDA ranks (from 2026-11-30)
  /// "gpu_idle_seconds_total", CUDA ranks (from 2026-11-30): the GPU's idle time between
  /// timed steps, nothing queued, waiting for the host (input, launches, host syncs); the
  /// host-side input wait overlaps the GPU's previous step and is not this.
  std::optional<double> gpu_idle_seconds;
  std::optional<double> overlap_ratio;  ///< share of communication hidden, [0, 1]
  // "straggler": whom this rank waited for at the gradient exchange.
  double wait_seconds_total = 0;
  std::map<int, double> culprit_steps;    ///< culprit rank -> steps it was last (whole)
  std::map<int, double> wait_by_culprit;  ///< culprit rank -> seconds this rank waited
  double compute_skew_mean = 0;           ///< "compute_skew_seconds_mean"
  std::vector<CollectiveTotals> collectives;
  std::map<std::string, double> expected_busbw;  ///< op -> bytes/s, 0 = no model
};

/// dir/rank-R.stats.json (dir: RUN_DIR/logs, or an attempt's directory).
std::string RankStatsPath(const std::string& dir, int rank);

/// The files dir/rank-R.stats.json by rank (R up to kMaxRecordRank); none when the folder is
/// missing or unreadable.
std::map<int, std::string> RankStatsFiles(const std::string& dir);

/// The file's text: one JSON object (indented by 2) and a newline.
std::string RankStatsJson(const RankStats& stats);

/// Writes RankStatsJson(stats) to `path` atomically (base::WriteFileAtomically). Throws
/// base::FileError.
void WriteRankStats(const std::string& path, const RankStats& stats);

/// The record in `path`, the file of rank `file_rank` (its "rank" must agree; a missing
/// "rank" is file_rank). Missing keys keep the struct's defaults. Throws RecordError
/// (history/record_fields.h: one line naming the file and the key) when the file cannot be
/// read, is not JSON, or holds a value of the wrong type.
RankStats ReadRankStats(const std::string& path, int file_rank);

}  // namespace ringpilot::history
