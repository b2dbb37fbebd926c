// Per-rank step accounting for diagnosis: phase times, exposed communication and
// overlap, online straggler attribution, and collective statistics by op and size.
// Feeds the Prometheus series (docs/metrics.md) and the rank's step statistics file
// (history/rank_stats.h: logs/rank-N.stats.json, attempts/N/rank-R.stats.json), which
// `ringpilot diagnose` reads.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "history/rank_stats.h"
#include "trainer/telemetry/gpu_clock_window.h"

namespace ringpilot::trainer::telemetry {

enum class Phase { kData, kForward, kBackward, kOptimizer, kCommExposed };
constexpr int kNumPhases = 5;
const char* ToString(Phase p);

/// Size classes of the `size_bucket` label (comm/collective_op.h, shared with the NCCL
/// profiler plugin).
using comm::SizeBucket;

/// Outcome of one step's straggler exchange, from this rank's point of view.
struct StragglerStep {
  int culprit = -1;         ///< the rank that arrived last at the gradient exchange
  double wait_seconds = 0;  ///< our whole wait: from our readiness to the culprit's
  double skew_seconds = 0;  ///< our compute time minus the fastest rank's
  /// The wait split by whom it was spent on (rank, seconds; sums to wait_seconds): each
  /// rank that arrived after us is blamed for the interval between the arrival before it
  /// and its own. The culprit's share is then its lead over the second-to-last arrival,
  /// the delay it alone caused, whatever our own speed.
  std::vector<std::pair<int, double>> blame;
};

/// One rank's share of the per-step exchange.
struct ArrivalSample {
  double ready_unix = 0;       ///< when its gradients were ready (end of backward), on
                               ///< rank 0's clock
  double compute_seconds = 0;  ///< step start to end of backward
};

/// Given every rank's sample of one step (index = rank), whom `rank` waited for and
/// how long: the last rank to be ready is the culprit; everyone's wait is the time from
/// its own readiness to the culprit's, blamed interval by interval on the later arrivals.
StragglerStep AttributeStraggler(const std::vector<ArrivalSample>& samples, int rank);

/// Offset to add to this rank's system clock to read rank 0's: 0 on rank 0's host; on
/// other hosts the lowest rank estimates it by MPI ping-pong with rank 0 (the exchange
/// with the shortest round trip of `rounds`) and shares it with its host's ranks.
/// Collective over MPI_COMM_WORLD.
double EstimateClockOffset(int rounds = 8);

/// Linear-interpolated percentile of `v`, q in [0, 1]; 0 for an empty list.
double Percentile(std::vector<double> v, double q);

/// Not thread-safe except OnCollective, which the communicator calls on the training
/// thread too.
class StepStats {
 public:
  StepStats(int rank, int world, std::string node, int local_rank);

  /// A step's phase time; kData once per step is also the step's input wait (the time the
  /// training thread spent getting its batch), kept per step for the JSON's
  /// input_wait_seconds percentiles.
  void AddPhase(Phase p, double seconds) {
    phase_total_[static_cast<int>(p)] += seconds;
    if (p == Phase::kData) input_waits_.push_back(seconds);
  }
  void AddStraggler(const StragglerStep& s);
  void AddStep(double seconds);
  /// CUDA ranks: how long the GPU sat idle before a timed step, waiting for the host to queue
  /// it (step::StepClock::idle_before_step). Written to the JSON as gpu_idle_seconds_total.
  void AddGpuIdle(double seconds) {
    gpu_idle_total_ += seconds;
    gpu_idle_known_ = true;
  }
  void AddCollective(comm::CollectiveOp op, int64_t bytes, double seconds);
  /// Forgets phase and collective totals so far: the warm-up steps (cuDNN autotuning,
  /// graph capture, eager steps before it) would skew bandwidth and overlap figures. With a
  /// clock source, starts its GpuClockWindow: gpu_clocks cover the timed window.
  void StartTimedWindow();
  /// Leave a checkpoint or an evaluation out of gpu_clocks, as the rates leave it out.
  void PauseTimedWindow() {
    if (clocks_) clocks_->Pause();
  }
  void ResumeTimedWindow() {
    if (clocks_) clocks_->Resume();
  }
  /// After the last timed step: records after it report the window up to here (what
  /// follows is not training); before it, a record reads the counters itself.
  void EndTimedWindow() {
    if (clocks_) clocks_->End();
  }
  /// Communication time of collectives completed since the last call (for overlap).
  double TakeCommSeconds();

  /// Bus bandwidth (nccl-tests definition) of the largest size class seen for `op`,
  /// bytes/s; 0 when none.
  double BusBandwidth(comm::CollectiveOp op) const;
  /// The job's expected bus bandwidth from the topology plan (bytes/s, one figure for every
  /// op: busbw is normalised to the slowest link); 0 = no model. Written to the JSON.
  void set_expected_busbw(double bytes_per_second) { expected_busbw_ = bytes_per_second; }
  /// Image kinds: how the rank decodes its training images (written to the JSON).
  void set_image_decode(history::ImageDecode route) { image_decode_ = std::move(route); }
  /// CUDA ranks whose GPU NVML samples (RankTelemetry::ClockSource): read where the timed
  /// window starts, pauses, resumes and ends, and at a Record before the end; records then
  /// carry gpu_clocks (GpuClockWindow). Must outlive this object.
  void set_gpu_clock_source(GpuClockWindow::Read read) { clocks_.emplace(std::move(read)); }
  double overlap_ratio() const;
  /// The step statistics file's record (history::WriteRankStats writes it). `steps` (timed
  /// steps) and the step time percentiles `p50`/`p99` come from the trainer.
  history::RankStats Record(int64_t steps, double p50, double p99) const;

 private:
  struct Coll {
    int64_t count = 0;
    int64_t bytes = 0;
    double seconds = 0;
  };
  int rank_, world_, local_rank_;
  std::string node_;
  std::array<double, kNumPhases> phase_total_{};
  std::vector<double> input_waits_;  // kData per step, timed window
  double step_total_ = 0;
  int64_t steps_ = 0;
  double comm_since_take_ = 0;
  double comm_total_ = 0;
  double expected_busbw_ = 0;
  std::optional<history::ImageDecode> image_decode_;
  std::optional<GpuClockWindow> clocks_;
  double gpu_idle_total_ = 0;
  bool gpu_idle_known_ = false;
  double wait_total_ = 0;
  double skew_sum_ = 0;
  int64_t straggler_steps_ = 0;
  std::map<int, int64_t> culprit_steps_;
  std::map<int, double> wait_by_culprit_;
  std::map<std::pair<int, std::string>, Coll> coll_;  // (op, size bucket)
};

}  // namespace ringpilot::trainer::telemetry
