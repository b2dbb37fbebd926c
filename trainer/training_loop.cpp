#include "trainer/training_loop.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "base/exit_status.h"
#include "base/run_variables.h"
#include "base/time.h"
#include "history/run_summary.h"
#include "trainer/step/graphed_step.h"
#include "trainer/step/step_clock.h"
#include "trainer/step/step_readback.h"
#include "trainer/telemetry/device.h"
#include "trainer/telemetry/kernel_profile.h"
#include "trainer/telemetry/nvtx_range.h"
#include "trainer/telemetry/scrape_targets.h"

namespace ringpilot::trainer {
namespace {

using Clock = std::chrono::steady_clock;

// Eager steps before capture: the first rebuilds gradient buckets from the observed
// order, the next ones let cuDNN autotune and the allocator settle.
constexpr int64_t kGraphWarmupSteps = 3;

// Exit status of a rank killed by fault.crash_* (any non-zero status restarts the job).
constexpr int kInjectedCrashStatus = 17;

// Steps start_step..options.steps: graph capture after the eager warm-up, the timed window,
// progress lines, periodic checkpoints, preemption, and the summary at the end.
class TrainingLoop {
 public:
  TrainingLoop(const TrainingLoopOptions& options, const startup::RankPlace& place,
               const startup::RankDevice& device, startup::RankCommunicators& comms,
               step::TrainingState& state, step::TrainStep& train_step, step::StepPhases& phases,
               checkpoint::CheckpointStore& store, const LoopData& data,
               const LoopReporting& reporting, const startup::PreemptionWatch& preemption,
               int64_t start_step)
      : o_(options),
        place_(place),
        device_(device),
        comms_(comms),
        state_(state),
        step_(train_step),
        phases_(phases),
        store_(store),
        data_(data),
        out_(reporting),
        preemption_(preemption),
        start_step_(start_step),
        total_(options.steps),
        accum_(options.grad_accum_steps),
        varying_lr_(!step::IsConstant(options.lr_schedule)),
        clock_(device.cuda, options.host_lead_steps),
        readback_(device.cuda, options.host_lead_steps),
        profile_(place.rank, device.cuda) {
    // The clock reports a step `host_lead_steps` steps late: the window shifts with it.
    const int64_t untimed = std::max<int64_t>(device.cuda_graphs ? kGraphWarmupSteps + 1 : 1,
                                              options.timing_skip_steps) +
                            (device.cuda ? options.host_lead_steps - 1 : 0);
    warmup_end_ = std::min(total_ - 1, start_step_ + untimed - 1);
    launch_unix_ = base::UnixNow();
    if (const char* t = std::getenv(base::kLaunchTimeVar)) launch_unix_ = std::atof(t);
    totals_.start_step = start_step;
    reporting.heartbeat.SetTotalSteps(total_);
    reporting.metrics.SetStepsTarget(total_);
    totals_.train_samples = options.train_samples;
    totals_.train_files = options.train_files;
    totals_.restarts = options.attempt - 1;
    totals_.attempt = options.attempt;
  }

  // The exit status: base::kExitOk, or base::kExitPreempted after SIGUSR1.
  int Run() {
    totals_.started_unix = base::UnixNow();
    Record(start_step_, nullptr, history::kRunning);
    if (start_step_ < total_) data_.input.Fill(start_step_ * accum_);
    for (int64_t step = start_step_; step < total_; ++step) {
      telemetry::NvtxRange step_range("step");
      out_.heartbeat.Beat(step, "step");
      const double step_s = RunStep(step);
      Measure(step, step_s);
      const bool last = step + 1 == total_;
      const bool preempt = !last && preemption_.AgreeToStop(*comms_.host);
      if (place_.rank == 0) LogProgress(step, step_s, last);
      const int64_t done = step + 1;
      const int64_t eval_every = o_.eval_every_steps;
      if (data_.val && (last || (eval_every > 0 && done % eval_every == 0))) {
        Evaluate(step);
      }
      const int every = o_.checkpoint_every_steps;
      if (last || preempt || (every > 0 && done % every == 0)) Checkpoint(step);
      if (preempt) {
        Record(done, nullptr, history::kPreempted);
        EndOnPurpose();
        return preemption_.Stop(out_.log, done);
      }
    }
    Finish();
    return base::kExitOk;
  }

 private:
  // Copies the batch in, runs the step (eager, or a graph replay once captured), and
  // fills the next batch while the device works. Returns the step's time.
  double RunStep(int64_t step) {
    profile_.BeforeStep(step - start_step_);
    clock_.Begin();
    // The step's learning rate: a host formula; on CUDA a fill of the optimizer's device
    // lr, queued before the step (or its replay) that reads it.
    lr_ = varying_lr_ ? step::LearningRateAt(o_.lr_schedule, step) : o_.lr_schedule.lr;
    if (varying_lr_) state_.optimizer->set_lr(lr_);
    if (accum_ > 1) return RunAccumulatedStep(step);
    data_.input.CopyToDevice(step);
    MaybeCrash(step);
    if (device_.cuda_graphs && step - start_step_ >= kGraphWarmupSteps) {
      if (!graph_.captured()) {
        comms_.device->Barrier();  // drain timing events before capture
        graph_.Capture([this] { step_.Run(); });
        if (place_.rank == 0) out_.log.Info("captured the training step in a CUDA graph");
      }
      graph_.Replay();
      clock_.Launched();
      phases_.Launched(/*replay=*/true);
      comms_.device->OnReplayLaunched();
    } else {
      step_.Run();
      clock_.Launched();
      phases_.Launched(/*replay=*/false);
    }
    // Generate the next batch while the device works on this one.
    if (step + 1 < total_) data_.input.Fill(step + 1);
    return EndStep(step);
  }

  // train.grad_accum_steps k > 1: micro-batches step x k .. step x k + k - 1, each copied in
  // and run in turn (the next one generated while the device works). With CUDA graphs two
  // graphs, captured at the same step as the single-batch graph would be: the micro-batch
  // (forward + backward, no communication), replayed k - 1 times, and the last micro-batch
  // with the all-reduces and the update. Zeroing the gradients and the loss runs eagerly
  // before them (two small kernels).
  double RunAccumulatedStep(int64_t step) {
    MaybeCrash(step);
    const bool graphed = device_.cuda_graphs && step - start_step_ >= kGraphWarmupSteps;
    if (graphed && !graph_.captured()) comms_.device->Barrier();  // as in RunStep
    step_.BeginAccumulation();
    for (int m = 0; m < accum_; ++m) {
      const int64_t batch = step * accum_ + m;
      const bool last = m + 1 == accum_;
      data_.input.CopyToDevice(batch);
      if (graphed) {
        step::GraphedStep& graph = last ? graph_ : micro_graph_;
        if (!graph.captured()) {
          graph.Capture([this, last] {
            if (last) {
              step_.RunLastMicroBatch();
            } else {
              step_.RunMicroBatch();
            }
          });
          if (place_.rank == 0 && last) {
            out_.log.Info("captured the training step in CUDA graphs (micro-batch and last)");
          }
        }
        graph.Replay();
      } else if (last) {
        step_.RunLastMicroBatch();
      } else {
        step_.RunMicroBatch();
      }
      if (batch + 1 < total_ * accum_) data_.input.Fill(batch + 1);
    }
    phases_.Launched(/*replay=*/graphed);
    if (graphed) comms_.device->OnReplayLaunched();
    return EndStep(step);
  }

  // fault.crash_rank/crash_step (first attempt only): the rank dies before the step.
  void MaybeCrash(int64_t step) {
    if (place_.rank != o_.crash_rank || step + 1 != o_.crash_step || o_.attempt != 1) return;
    out_.log.Fatal("fault injection: crashing at step " + std::to_string(step + 1) +
                   " (fault.crash_rank=" + std::to_string(o_.crash_rank) + ")");
    std::_Exit(kInjectedCrashStatus);
  }

  // After a step's work is queued: the step clock, profiles, phase report, and the first
  // step's launch-to-end time. Returns the step's time.
  double EndStep(int64_t step) {
    // Before the clock's end event, so that when the clock has waited for a step, that
    // step's loss is on the host too.
    readback_.Record(step, step_.loss(), step_.grad_norm());
    const double step_s = clock_.End();
    if (const std::string path = profile_.AfterStep(step - start_step_); !path.empty()) {
      out_.log.Info("kernel profile " + path);
    }
    out_.reporter.Report(/*device_idle=*/false);
    comms_.device->Progress();
    if (step == start_step_) {
      // Time to the end of the first step, from when the front end launched this
      // attempt (one host synchronisation, first step only).
      telemetry::SynchronizeDevice(device_.cuda);
      totals_.first_step_s = base::UnixNow() - launch_unix_;
    }
    return step_s;
  }

  // Warm-up steps (the first of an attempt; with CUDA graphs, up to the first replay) are
  // left out of rates and percentiles, unless nothing else is left.
  void Measure(int64_t step, double step_s) {
    if (step == warmup_end_) {
      timed_start_ = Clock::now();
      out_.stats.StartTimedWindow();
    }
    const bool only_step = step <= warmup_end_ && step + 1 == total_ && totals_.timed_steps == 0;
    if (step > warmup_end_ || only_step) {
      if (only_step) {
        timed_start_ = Clock::now() - std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(step_s));
      }
      totals_.step_seconds.push_back(step_s);
      ++totals_.timed_steps;
      if (const std::optional<double> idle = clock_.idle_before_step()) {
        out_.stats.AddGpuIdle(*idle);
      }
      // The stats file's mean covers the steps its percentiles and phase totals cover: a
      // warm-up step (graph capture, cuDNN autotuning) can take seconds.
      out_.stats.AddStep(step_s);
    }
    out_.metrics.OnStep(step_s, static_cast<int64_t>(o_.batch_per_rank) * accum_, step + 1);
    out_.metrics.SetLearningRate(lr_);
    // Every rank's own loss, every step (on CUDA the step `host_lead_steps` back).
    if (const std::optional<step::StepReadback::Values> v = readback_.Take()) {
      out_.metrics.SetLoss(v->loss);
      if (v->grad_norm) out_.metrics.SetGradNorm(*v->grad_norm);
    }
    out_.telemetry.AfterStep(step - start_step_ + 1);
  }

  // Rank 0: a progress line every train.log_every_s and at the end, with rank 0's loss of
  // the step just run (its own batch: the line waits for the step to finish).
  void LogProgress(int64_t step, double step_s, bool last) {
    const auto now = Clock::now();
    if (!last && base::Seconds(last_report_, now) < o_.log_every_s) return;
    last_report_ = now;
    const double loss = step_.loss().item<double>();
    out_.heartbeat.SetLoss(loss);
    // The pre-clip norm comes back with the loss (one synchronisation per line).
    if (const at::Tensor norm = step_.grad_norm(); norm.defined()) {
      totals_.grad_norm = norm.item<double>();
    }
    out_.metrics.Refresh(out_.stats);
    const double elapsed = base::Seconds(timed_start_, now);
    const int64_t timed = totals_.timed_steps;
    const double rate = timed > 0 && elapsed > 0 ? static_cast<double>(timed) * o_.batch_per_rank *
                                                       accum_ * place_.world / elapsed
                                                 : 0;
    const double per_step = timed > 0 ? elapsed / timed : step_s;
    char line[256];
    std::snprintf(line, sizeof(line),
                  "step %lld/%lld | loss %.4f | %.1f samples/s | %.3f s/step | eta %s",
                  static_cast<long long>(step + 1), static_cast<long long>(total_), loss, rate,
                  per_step, base::FormatDuration(per_step * (total_ - step - 1)).c_str());
    std::string text = line;
    std::snprintf(line, sizeof(line), " | lr %.4g", lr_);
    text += line;
    if (totals_.grad_norm) {
      std::snprintf(line, sizeof(line), " | grad norm %.4g", *totals_.grad_norm);
      text += line;
    }
    if (o_.steps_per_epoch > 0) {
      text += " | epoch " + std::to_string(data_.input.EpochOf(LastBatchOf(step)) + 1);
    }
    if (totals_.eval) {
      if (totals_.eval->mlm) {
        std::snprintf(line, sizeof(line), " | eval mlm_acc %.4f", totals_.eval->mlm_accuracy);
      } else {
        std::snprintf(line, sizeof(line), " | eval top1 %.4f", totals_.eval->top1);
      }
      text += line;
    }
    out_.log.Info(text);
  }

  // Collective: every rank scores its part of data.val; the same result on every rank.
  void Evaluate(int64_t step) {
    out_.heartbeat.Beat(step, "eval");
    const auto e0 = Clock::now();
    out_.stats.PauseTimedWindow();
    clock_.ExcludeNextGap();
    telemetry::SynchronizeDevice(device_.cuda);  // the step's work first, then eager eval
    const EvalResult r =
        o_.tokens ? EvaluateMaskedLm(o_.evaluation, place_, device_, state_, *data_.val, *o_.tokens,
                                     comms_)
                  : trainer::Evaluate(o_.evaluation, place_, device_, state_, *data_.val, comms_);
    totals_.eval = r;
    for (const std::string& w : data_.val->TakeWarnings()) out_.log.Warn(w);
    const double samples = static_cast<double>(r.samples);
    if (r.mlm) {
      out_.metrics.SetMlmEval(r.mlm_accuracy, r.loss, samples);
    } else {
      out_.metrics.SetEval(r.top1, r.top5, r.loss, samples);
    }
    if (place_.rank == 0) {
      char scores[120];
      if (r.mlm) {
        std::snprintf(scores, sizeof(scores), "mlm_accuracy %.4f", r.mlm_accuracy);
      } else {
        std::snprintf(scores, sizeof(scores), "top1 %.4f | top5 %.4f", r.top1, r.top5);
      }
      char line[240];
      std::snprintf(line, sizeof(line),
                    "eval after step %lld (epoch %lld): %s | loss %.4f | %lld samples",
                    static_cast<long long>(step + 1),
                    static_cast<long long>(data_.input.EpochOf(LastBatchOf(step)) + 1), scores,
                    r.loss, static_cast<long long>(r.samples));
      out_.log.Info(line);
    }
    if (step > warmup_end_) totals_.eval_seconds += base::Seconds(e0, Clock::now());
    out_.stats.ResumeTimedWindow();
  }

  // Collective: every rank's RNG state to rank 0, which writes the checkpoint of `step`
  // with the data position of the next step.
  void Checkpoint(int64_t step) {
    out_.heartbeat.Beat(step, "checkpoint");
    const auto c0 = Clock::now();
    // Like the rates, gpu_clocks leave the checkpoint out: the board idles while it is
    // written, and the run's last one would otherwise weigh on a short run's shares.
    out_.stats.PauseTimedWindow();
    clock_.ExcludeNextGap();
    const data::SamplePosition next = data_.input.PositionOf((step + 1) * accum_);
    state_.data_position[0] = next.epoch;
    state_.data_position[1] = next.offset;
    state_.rng->Gather(*comms_.host);
    if (place_.rank == 0) {
      const checkpoint::CheckpointInfo info =
          store_.Save(step + 1, place_.world, o_.job_name, state_.named);
      const double seconds = base::Seconds(c0, Clock::now());
      out_.log.Info("checkpoint " + info.path + " (" + base::FormatDuration(seconds) + ")");
    }
    comms_.host->Barrier();
    // Every rank: how long training paused for the checkpoint; the counters as of the
    // checkpoint, which a restart resumes from.
    const double paused = base::Seconds(c0, Clock::now());
    out_.metrics.OnCheckpoint(paused);
    out_.metrics.SaveCounters();
    if (step > warmup_end_) totals_.checkpoint_seconds += paused;
    out_.stats.ResumeTimedWindow();
    Record(step + 1, &out_.stats, history::kRunning);
  }

  // attempts/N/ as of `done` steps (summary.h: RecordAttempt).
  void Record(int64_t done, const telemetry::StepStats* stats, const char* outcome) {
    const double timed_s = totals_.timed_steps == 0
                               ? 0
                               : base::Seconds(timed_start_, Clock::now()) -
                                     totals_.checkpoint_seconds - totals_.eval_seconds;
    RecordAttempt(o_.run_dir, place_.rank, ProgressOf(totals_, done, timed_s, outcome), stats,
                  totals_, out_.log);
  }

  // Last phases, per-rank stats file and the run summary.
  void Finish() {
    out_.heartbeat.Beat(total_ - 1, "done");
    out_.stats.EndTimedWindow();
    telemetry::SynchronizeDevice(device_.cuda);
    out_.reporter.Report(/*device_idle=*/true);
    // Throughput is training time only: checkpoints are reported separately.
    totals_.timed_seconds = base::Seconds(timed_start_, Clock::now()) - totals_.checkpoint_seconds -
                            totals_.eval_seconds;
    if (o_.steps_per_epoch > 0) {
      totals_.epochs = data_.input.EpochOf(LastBatchOf(total_ - 1)) + 1;
    }
    totals_.final_lr = lr_;
    if (const at::Tensor norm = step_.grad_norm(); norm.defined()) {
      totals_.grad_norm = norm.item<double>();
    }
    totals_.data_seconds = data_.input.data_seconds();
    if (data_.train_images) totals_.bad_files = CountBadFiles();
    out_.metrics.Refresh(out_.stats);
    const std::string& run_dir = o_.run_dir;
    history::WriteRankStats(
        history::RankStatsPath(run_dir + "/logs", place_.rank),
        out_.stats.Record(totals_.timed_steps, telemetry::Percentile(totals_.step_seconds, 0.5),
                          telemetry::Percentile(totals_.step_seconds, 0.99)));
    const double peak = telemetry::PeakDeviceMemoryBytes(device_.cuda) +
                        static_cast<double>(comms_.device->registered_bytes());
    const std::optional<double> final_loss =
        WriteSummary(o_.summary, place_.rank, place_.world, device_.cuda, totals_, step_.loss(),
                     state_.params, peak, *comms_.host);
    if (place_.rank == 0 && final_loss) {
      // The last progress line showed rank 0's own loss; summary.json's final_loss (and
      // `status` after the run) is the mean: say which is which.
      char line[256];
      std::snprintf(line, sizeof(line),
                    "final loss %.4f: the last step's loss averaged over the %d rank(s) "
                    "(summary.json final_loss); rank 0's own, as in the last progress line: %.4f",
                    *final_loss, place_.world, step_.loss().item<double>());
      out_.log.Info(line);
      out_.heartbeat.SetLoss(*final_loss);
    }
    if (place_.rank == 0) {
      out_.log.Info("done: " + std::to_string(total_) + " steps, summary " +
                    history::RunSummaryPath(run_dir));
    }
    comms_.host->Barrier();
    EndOnPurpose();
  }

  // The job ends on purpose (finished, or checkpointed and stopped): the counters as they
  // end, for the job's next process; no more scrape targets.
  void EndOnPurpose() {
    out_.metrics.SaveCounters();
    if (place_.rank == 0) telemetry::WithdrawScrapeTargets(o_.run_dir);
  }

  // Collective: distinct bad files of data.train and data.val over all ranks (ranks meet
  // the same training file in different epochs, so the sets are merged, not summed).
  int64_t CountBadFiles() {
    const int64_t train = data_.train_images->size();
    const int64_t val = data_.val ? data_.val->size() : 0;
    at::Tensor seen = at::zeros({train + val}, at::kByte);
    uint8_t* s = seen.data_ptr<uint8_t>();
    for (int64_t i : data_.input.bad_files()) s[i] = 1;
    if (data_.val) {
      for (int64_t i : data_.val->bad_files()) s[train + i] = 1;
    }
    comms_.host->AllReduce(seen, comm::ReduceOp::kMax)->Wait();
    return seen.sum().item<int64_t>();
  }

  // The input batch index of `step`'s last micro-batch (the step itself without
  // accumulation).
  int64_t LastBatchOf(int64_t step) const { return (step + 1) * accum_ - 1; }

  const TrainingLoopOptions& o_;
  const startup::RankPlace& place_;
  const startup::RankDevice& device_;
  startup::RankCommunicators& comms_;
  step::TrainingState& state_;
  step::TrainStep& step_;
  step::StepPhases& phases_;
  checkpoint::CheckpointStore& store_;
  const LoopData& data_;
  const LoopReporting& out_;
  const startup::PreemptionWatch& preemption_;
  const int64_t start_step_;
  const int64_t total_;
  const int accum_;  // train.grad_accum_steps
  const bool varying_lr_;
  double lr_ = 0;  // the current step's learning rate
  int64_t warmup_end_ = 0;
  double launch_unix_ = 0;
  step::StepClock clock_;
  step::StepReadback readback_;       // every step's loss for the metrics
  telemetry::KernelProfile profile_;  // RINGPILOT_KINETO_TRACE (developers)
  step::GraphedStep graph_;           // the step, or with accumulation its last micro-batch
  step::GraphedStep micro_graph_;     // accumulation: the other micro-batches
  RunTotals totals_;
  Clock::time_point timed_start_ = Clock::now();
  Clock::time_point last_report_ = Clock::now();
};

}  // namespace

int RunTrainingLoop(const TrainingLoopOptions& options, int64_t start_step,
                    const startup::RankPlace& place, const startup::RankDevice& device,
                    startup::RankCommunicators& comms, step::TrainingState& state,
                    step::TrainStep& train_step, step::StepPhases& phases,
                    checkpoint::CheckpointStore& store, const LoopData& data,
                    const LoopReporting& reporting, const startup::PreemptionWatch& preemption) {
  return TrainingLoop(options, place, device, comms, state, train_step, phases, store, data,
                      reporting, preemption, start_step)
      .Run();
}

}  // namespace ringpilot::trainer
