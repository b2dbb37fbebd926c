#include "trainer/summary.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "history/run_summary.h"
#include "trainer/checkpoint/sha256.h"

namespace ringpilot::trainer {

ParamFingerprint FingerprintParams(const std::vector<at::Tensor>& params) {
  double norm_sq = 0;
  ParamFingerprint f;
  checkpoint::Sha256 sha;
  for (const at::Tensor& p : params) {
    const at::Tensor c = p.detach().to(at::kCPU).contiguous();
    const at::Tensor d = c.to(at::kDouble);
    norm_sq += d.square().sum().item<double>();
    f.abs_sum += d.abs().sum().item<double>();
    sha.Update(c.data_ptr(), c.nbytes());
  }
  f.norm = std::sqrt(norm_sq);
  f.sha256 = sha.HexDigest();
  return f;
}

history::AttemptProgress ProgressOf(const RunTotals& totals, int64_t last_step,
                                    double timed_seconds, const char* outcome) {
  history::AttemptProgress p;
  p.attempt = totals.attempt;
  p.resumed_from_step = totals.start_step;
  p.last_step = last_step;
  p.outcome = outcome;
  p.timed_steps = totals.timed_steps;
  p.timed_seconds = timed_seconds;
  p.started_unix = totals.started_unix;
  return p;
}

void RecordAttempt(const std::string& run_dir, int rank, const history::AttemptProgress& progress,
                   const telemetry::StepStats* stats, const RunTotals& totals,
                   telemetry::RankLog& log) {
  try {
    // Every rank: the directory may not be there yet when a rank gets here first.
    base::MakeDirs(history::AttemptDir(run_dir, totals.attempt));
    if (rank == 0) {
      base::WriteFileAtomically(history::AttemptSummaryPath(run_dir, totals.attempt),
                                history::AttemptProgressJson(progress).dump(2) + "\n");
    }
    if (stats) {
      history::WriteRankStats(
          history::AttemptRankStatsPath(run_dir, totals.attempt, rank),
          stats->Record(totals.timed_steps, telemetry::Percentile(totals.step_seconds, 0.5),
                        telemetry::Percentile(totals.step_seconds, 0.99)));
    }
  } catch (const base::FileError& e) {
    // History is for diagnosis: training goes on without it.
    log.Warn(std::string("attempt record not written: ") + e.what());
  }
}

std::optional<double> WriteSummary(const SummaryOptions& options, int rank, int world, bool cuda,
                                   const RunTotals& totals, const at::Tensor& loss,
                                   const std::vector<at::Tensor>& params, double peak_device_bytes,
                                   comm::Communicator& host) {
  at::Tensor loss_sum = at::zeros({1}, at::kDouble);
  if (loss.defined()) loss_sum[0] = loss.item<double>();
  const double own = loss.defined() ? loss_sum[0].item<double>() : 0.0;
  host.AllReduce(loss_sum, comm::ReduceOp::kAvg)->Wait();
  const std::optional<double> mean =
      loss.defined() ? std::optional<double>(loss_sum[0].item<double>()) : std::nullopt;
  if (rank != 0) return mean;
  using nlohmann::json;
  // Samples per optimizer step and rank: every micro-batch counts.
  const int64_t batch = static_cast<int64_t>(options.batch_per_rank) * options.grad_accum_steps;
  const ParamFingerprint fp = FingerprintParams(params);
  // What readers use (history/run_summary.h), then the trainer's own fields.
  history::RunSummary read_fields;
  read_fields.name = options.job_name;
  read_fields.world_size = world;
  read_fields.steps = options.steps;
  read_fields.epochs = totals.epochs;
  // No step in this attempt (resumed at train.steps): nothing measured.
  read_fields.final_loss = mean;
  if (totals.timed_steps > 0 && totals.timed_seconds > 0) {
    read_fields.samples_per_second = totals.timed_steps * batch * world / totals.timed_seconds;
  }
  read_fields.step_seconds_p50 = telemetry::Percentile(totals.step_seconds, 0.5);
  read_fields.step_seconds_p99 = telemetry::Percentile(totals.step_seconds, 0.99);
  read_fields.restarts = totals.restarts;
  json summary = history::RunSummaryJson(read_fields);
  summary.update({
      // final_loss is the mean over the ranks of the last step's loss; rank 0's own is the
      // number of its last progress line.
      {"final_loss_of", "mean over the ranks of the last step's loss"},
      {"final_loss_rank0", loss.defined() ? json(own) : json(nullptr)},
      {"attempt", totals.attempt},
      {"param_norm", fp.norm},
      {"param_abs_sum", fp.abs_sum},
      {"param_sha256", fp.sha256},
      {"resumed_from_step", totals.start_step},
      {"device", cuda ? "cuda" : "cpu"},
      {"model", options.model},
      {"batch_per_rank", options.batch_per_rank},
      {"grad_accum_steps", options.grad_accum_steps},
      {"final_lr", totals.final_lr},
      {"first_step_s", totals.first_step_s},
      {"checkpoint_seconds", totals.checkpoint_seconds},
      {"data_seconds_p50", telemetry::Percentile(totals.data_seconds, 0.5)},
      {"peak_mem_gb", peak_device_bytes / 1e9},
  });
  if (totals.grad_norm) summary["grad_norm"] = *totals.grad_norm;
  if (totals.train_samples >= 0) {
    summary["data"]["train_samples"] = totals.train_samples;
    summary["data"]["train_files"] = totals.train_files;
  }
  if (totals.bad_files) summary["data"]["bad_files"] = *totals.bad_files;
  if (totals.eval && totals.eval->mlm) {
    summary["eval"] = {{"mlm_accuracy", totals.eval->mlm_accuracy},
                       {"loss", totals.eval->loss},
                       {"samples", totals.eval->samples}};
  } else if (totals.eval) {
    summary["eval"] = {{"top1", totals.eval->top1},
                       {"top5", totals.eval->top5},
                       {"loss", totals.eval->loss},
                       {"samples", totals.eval->samples}};
  }
  // This attempt alone, then the run over every attempt (earlier ones' records and the
  // launcher's failure reports) in the root file.
  const int64_t last_step = std::max(totals.start_step, options.steps);
  summary.update(history::AttemptProgressJson(
      ProgressOf(totals, last_step, totals.timed_seconds, history::kCompleted)));
  base::MakeDirs(history::AttemptDir(options.run_dir, totals.attempt));
  base::WriteFileAtomically(history::AttemptSummaryPath(options.run_dir, totals.attempt),
                            summary.dump(2) + "\n");
  history::WriteRunSummary(options.run_dir, summary);
  return mean;
}

}  // namespace ringpilot::trainer
