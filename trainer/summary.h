// RUN_DIR/summary.json (its path and the fields readers use: history/run_summary.h),
// written by rank 0 at the end of a run: final loss, throughput, step-time percentiles,
// and a fingerprint of the final weights to compare runs; and
// RUN_DIR/attempts/N/ (history/attempts.h): each attempt's own summary and its ranks'
// step statistics, kept while it runs, so a failed attempt leaves what it had done.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/TensorBody.h>

#include "comm/communicator.h"
#include "history/attempts.h"
#include "trainer/evaluation.h"
#include "trainer/telemetry/rank_log.h"
#include "trainer/telemetry/step_stats.h"

namespace ringpilot::trainer {

/// What the loop measured in this attempt.
struct RunTotals {
  int64_t start_step = 0;    ///< resumed from (0: from scratch)
  int64_t timed_steps = 0;   ///< steps in the timed window
  double timed_seconds = 0;  ///< wall time of the timed window, without checkpoints
  double first_step_s = 0;   ///< launch to end of the first step
  double checkpoint_seconds = 0;
  double eval_seconds = 0;           ///< evaluations inside the timed window
  int64_t epochs = 0;                ///< dataset kinds: epochs started (0: synthetic)
  std::optional<EvalResult> eval;    ///< the last evaluation
  std::vector<double> step_seconds;  ///< timed steps
  std::vector<double> data_seconds;  ///< host time generating each batch
  int restarts = 0;                  ///< restarts before this attempt (attempt - 1)
  int attempt = 1;                   ///< this attempt's number (RINGPILOT_ATTEMPT, 1 = first)
  std::optional<int64_t> bad_files;  ///< image kinds: distinct files skipped, all ranks
  int64_t train_samples = -1;        ///< dataset kinds: samples in data.train (-1: synthetic)
  int64_t train_files = 0;           ///< ... and the files they are in
  double final_lr = 0;               ///< learning rate of the last step
  std::optional<double> grad_norm;   ///< train.max_grad_norm: last step's pre-clip norm
  double started_unix = 0;           ///< when the loop began (attempts/N/summary.json)
};

/// This attempt's progress with `last_step` steps done (1-based: the last one completed)
/// and `timed_seconds` of its timed window so far.
history::AttemptProgress ProgressOf(const RunTotals& totals, int64_t last_step,
                                    double timed_seconds, const char* outcome);

/// Keeps this attempt's record while it runs (at its start and at every checkpoint, so a
/// failed attempt leaves what it had done): rank 0 rewrites attempts/N/summary.json with
/// `progress`; with `stats`, every rank writes attempts/N/rank-R.stats.json. Not a
/// collective. A file that cannot be written is a warning in `log`, never the run's end.
void RecordAttempt(const std::string& run_dir, int rank, const history::AttemptProgress& progress,
                   const telemetry::StepStats* stats, const RunTotals& totals,
                   telemetry::RankLog& log);

/// Fingerprint of the weights: L2 norm, sum of |x| (both in float64) and SHA-256 of the
/// raw bytes in parameter order, to tell bit-identical runs from close ones.
struct ParamFingerprint {
  double norm = 0;
  double abs_sum = 0;
  std::string sha256;
};
ParamFingerprint FingerprintParams(const std::vector<at::Tensor>& params);

/// What the run summary reads of the job and the plan (trainer/options.cpp
/// SummaryOptionsFor).
struct SummaryOptions {
  std::string run_dir;
  std::string job_name;      ///< name
  std::string model;         ///< model.name as the job spells it
  int batch_per_rank = 0;    ///< data.batch_per_rank
  int grad_accum_steps = 1;  ///< train.grad_accum_steps
  int64_t steps = 0;         ///< the run's optimizer steps (RunPlan::steps)
};

/// Collective over `host`: averages the final `loss` (undefined when this attempt ran no
/// step) over the world; rank 0 then writes this attempt's summary to
/// RUN_DIR/attempts/N/summary.json and the combined one (every attempt:
/// history::WriteRunSummary) to RUN_DIR/summary.json, each atomically.
/// `peak_device_bytes`: this rank's peak device memory (allocator plus NCCL buffers).
/// summary.json's `final_loss` is the mean (the global batch's loss, as
/// avg(ringpilot_loss)); `final_loss_rank0` is rank 0's own, the number its last progress
/// line shows. Returns the mean (nullopt when no
/// step ran), for rank 0's closing line.
std::optional<double> WriteSummary(const SummaryOptions& options, int rank, int world, bool cuda,
                                   const RunTotals& totals, const at::Tensor& loss,
                                   const std::vector<at::Tensor>& params, double peak_device_bytes,
                                   comm::Communicator& host);

}  // namespace ringpilot::trainer
