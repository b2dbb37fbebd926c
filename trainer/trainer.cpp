#include "trainer/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>

#include "base/environment.h"
#include "base/exit_status.h"
#include "base/files.h"
#include "base/run_variables.h"
#include "base/time.h"
#include "comm/gradient_reducer.h"
#include "trainer/bootstrap.h"
#include "trainer/checkpoint/store.h"
#include "trainer/evaluation.h"
#include "trainer/fatal_report.h"
#include "trainer/graphed_step.h"
#include "trainer/input/dataset_factory.h"
#include "trainer/input/input_feed.h"
#include "trainer/lr_schedule.h"
#include "trainer/options.h"
#include "trainer/phase_report.h"
#include "trainer/preemption.h"
#include "trainer/rank_setup.h"
#include "trainer/run_plan.h"
#include "trainer/step_clock.h"
#include "trainer/step_phases.h"
#include "trainer/step_readback.h"
#include "trainer/summary.h"
#include "trainer/telemetry/device.h"
#include "trainer/telemetry/heartbeat.h"
#include "trainer/telemetry/kernel_profile.h"
#include "trainer/telemetry/nvtx_range.h"
#include "trainer/telemetry/rank_log.h"
#include "trainer/telemetry/rank_telemetry.h"
#include "trainer/telemetry/scrape_targets.h"
#include "trainer/telemetry/step_stats.h"
#include "trainer/telemetry/training_metrics.h"
#include "trainer/telemetry/versions.h"
#include "trainer/train_step.h"
#include "trainer/training_state.h"

namespace ringpilot::trainer {
namespace {

using Clock = std::chrono::steady_clock;

// Eager steps before capture: the first rebuilds gradient buckets from the observed
// order, the next ones let cuDNN autotune and the allocator settle.
constexpr int64_t kGraphWarmupSteps = 3;

// Exit status of a rank killed by fault.crash_* (any non-zero status restarts the job).
constexpr int kInjectedCrashStatus = 17;

// What the loop drives; everything is owned by Trainer::Run and outlives the loop.
struct LoopParts {
  const config::JobConfig& job;
  const RunPlan& plan;
  const TrainerOptions& opts;
  const RankPlace& place;
  const RankDevice& device;
  RankCommunicators& comms;
  TrainingState& state;
  checkpoint::CheckpointStore& store;
  input::InputFeed& input;
  TrainStep& step;
  StepPhases& phases;
  PhaseReporter& reporter;
  telemetry::TrainingMetrics& metrics;
  telemetry::RankTelemetry& telemetry;
  telemetry::StepStats& stats;
  telemetry::RankLog& log;
  telemetry::Heartbeat& heartbeat;
  const PreemptionWatch& preemption;
  input::ValidationSet* val;              // data.val, or null
  const data::ImageSource* train_images;  // image kinds' data.train, else null
};

// Steps start_step..plan.steps: graph capture after the eager warm-up, the timed window,
// progress lines, periodic checkpoints, preemption, and the summary at the end.
class TrainingLoop {
 public:
  TrainingLoop(const LoopParts& p, int64_t start_step)
      : p_(p),
        start_step_(start_step),
        total_(p.plan.steps),
        accum_(p.job.train.grad_accum_steps),
        schedule_(LrScheduleOptionsFor(p.job, p.plan.steps)),
        varying_lr_(!IsConstant(schedule_)),
        clock_(p.device.cuda, p.job.train.host_lead_steps),
        readback_(p.device.cuda, p.job.train.host_lead_steps),
        profile_(p.place.rank, p.device.cuda) {
    // The clock reports a step `host_lead_steps` steps late: the window shifts with it.
    const int64_t untimed = std::max<int64_t>(p.device.cuda_graphs ? kGraphWarmupSteps + 1 : 1,
                                              p.job.train.timing_skip_steps) +
                            (p.device.cuda ? p.job.train.host_lead_steps - 1 : 0);
    warmup_end_ = std::min(total_ - 1, start_step_ + untimed - 1);
    launch_unix_ = base::UnixNow();
    if (const char* t = std::getenv(base::kLaunchTimeVar)) launch_unix_ = std::atof(t);
    totals_.start_step = start_step;
    p.heartbeat.SetTotalSteps(total_);
    p.metrics.SetStepsTarget(total_);
    totals_.train_samples = p.plan.data.samples;
    totals_.train_files = p.plan.data.files;
    totals_.restarts = p.opts.attempt - 1;
    totals_.attempt = p.opts.attempt;
  }

  // The exit status: base::kExitOk, or base::kExitPreempted after SIGUSR1.
  int Run() {
    totals_.started_unix = base::UnixNow();
    Record(start_step_, nullptr, history::kRunning);
    if (start_step_ < total_) p_.input.Fill(start_step_ * accum_);
    for (int64_t step = start_step_; step < total_; ++step) {
      telemetry::NvtxRange step_range("step");
      p_.heartbeat.Beat(step, "step");
      const double step_s = RunStep(step);
      Measure(step, step_s);
      const bool last = step + 1 == total_;
      const bool preempt = !last && p_.preemption.AgreeToStop(*p_.comms.host);
      if (p_.place.rank == 0) LogProgress(step, step_s, last);
      const int64_t done = step + 1;
      const int64_t eval_every = p_.job.eval.every_steps;
      if (p_.val && (last || (eval_every > 0 && done % eval_every == 0))) {
        Evaluate(step);
      }
      const int every = p_.job.checkpoint.every_steps;
      if (last || preempt || (every > 0 && done % every == 0)) Checkpoint(step);
      if (preempt) {
        Record(done, nullptr, history::kPreempted);
        EndOnPurpose();
        return p_.preemption.Stop(p_.log, done);
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
    lr_ = varying_lr_ ? LearningRateAt(schedule_, step) : schedule_.lr;
    if (varying_lr_) p_.state.optimizer->set_lr(lr_);
    if (accum_ > 1) return RunAccumulatedStep(step);
    p_.input.CopyToDevice(step);
    MaybeCrash(step);
    if (p_.device.cuda_graphs && step - start_step_ >= kGraphWarmupSteps) {
      if (!graph_.captured()) {
        p_.comms.device->Barrier();  // drain timing events before capture
        graph_.Capture([this] { p_.step.Run(); });
        if (p_.place.rank == 0) p_.log.Info("captured the training step in a CUDA graph");
      }
      graph_.Replay();
      p_.phases.Launched(/*replay=*/true);
      p_.comms.device->OnReplayLaunched();
    } else {
      p_.step.Run();
      p_.phases.Launched(/*replay=*/false);
    }
    // Generate the next batch while the device works on this one.
    if (step + 1 < total_) p_.input.Fill(step + 1);
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
    const bool graphed = p_.device.cuda_graphs && step - start_step_ >= kGraphWarmupSteps;
    if (graphed && !graph_.captured()) p_.comms.device->Barrier();  // as in RunStep
    p_.step.BeginAccumulation();
    for (int m = 0; m < accum_; ++m) {
      const int64_t batch = step * accum_ + m;
      const bool last = m + 1 == accum_;
      p_.input.CopyToDevice(batch);
      if (graphed) {
        GraphedStep& graph = last ? graph_ : micro_graph_;
        if (!graph.captured()) {
          graph.Capture([this, last] {
            if (last) {
              p_.step.RunLastMicroBatch();
            } else {
              p_.step.RunMicroBatch();
            }
          });
          if (p_.place.rank == 0 && last) {
            p_.log.Info("captured the training step in CUDA graphs (micro-batch and last)");
          }
        }
        graph.Replay();
      } else if (last) {
        p_.step.RunLastMicroBatch();
      } else {
        p_.step.RunMicroBatch();
      }
      if (batch + 1 < total_ * accum_) p_.input.Fill(batch + 1);
    }
    p_.phases.Launched(/*replay=*/graphed);
    if (graphed) p_.comms.device->OnReplayLaunched();
    return EndStep(step);
  }

  // fault.crash_rank/crash_step (first attempt only): the rank dies before the step.
  void MaybeCrash(int64_t step) {
    const config::FaultConfig& f = p_.job.fault;
    if (p_.place.rank != f.crash_rank || step + 1 != f.crash_step || p_.opts.attempt != 1) return;
    p_.log.Fatal("fault injection: crashing at step " + std::to_string(step + 1) +
                 " (fault.crash_rank=" + std::to_string(f.crash_rank) + ")");
    std::_Exit(kInjectedCrashStatus);
  }

  // After a step's work is queued: the step clock, profiles, phase report, and the first
  // step's launch-to-end time. Returns the step's time.
  double EndStep(int64_t step) {
    // Before the clock's end event, so that when the clock has waited for a step, that
    // step's loss is on the host too.
    readback_.Record(step, p_.step.loss(), p_.step.grad_norm());
    const double step_s = clock_.End();
    if (const std::string path = profile_.AfterStep(step - start_step_); !path.empty()) {
      p_.log.Info("kernel profile " + path);
    }
    p_.reporter.Report(/*device_idle=*/false);
    p_.comms.device->Progress();
    if (step == start_step_) {
      // Time to the end of the first step, from when the front end launched this
      // attempt (one host synchronisation, first step only).
      telemetry::SynchronizeDevice(p_.device.cuda);
      totals_.first_step_s = base::UnixNow() - launch_unix_;
    }
    return step_s;
  }

  // Warm-up steps (the first of an attempt; with CUDA graphs, up to the first replay) are
  // left out of rates and percentiles, unless nothing else is left.
  void Measure(int64_t step, double step_s) {
    if (step <= warmup_end_) {
      if (step == warmup_end_) {
        timed_start_ = Clock::now();
        p_.stats.StartTimedWindow();
      }
      if (step + 1 == total_ && totals_.timed_steps == 0) {
        totals_.step_seconds.push_back(step_s);
        totals_.timed_steps = 1;
        timed_start_ = Clock::now() - std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(step_s));
      }
    } else {
      totals_.step_seconds.push_back(step_s);
      ++totals_.timed_steps;
    }
    p_.metrics.OnStep(step_s, static_cast<int64_t>(p_.job.data.batch_per_rank) * accum_, step + 1);
    p_.metrics.SetLearningRate(lr_);
    // Every rank's own loss, every step (on CUDA the step `host_lead_steps` back).
    if (const std::optional<StepReadback::Values> v = readback_.Take()) {
      p_.metrics.SetLoss(v->loss);
      if (v->grad_norm) p_.metrics.SetGradNorm(*v->grad_norm);
    }
    p_.telemetry.AfterStep(step - start_step_ + 1);
    p_.stats.AddStep(step_s);
  }

  // Rank 0: a progress line every train.log_every_s and at the end, with rank 0's loss of
  // the step just run (its own batch: the line waits for the step to finish).
  void LogProgress(int64_t step, double step_s, bool last) {
    const auto now = Clock::now();
    if (!last && base::Seconds(last_report_, now) < p_.job.train.log_every_s) return;
    last_report_ = now;
    const double loss = p_.step.loss().item<double>();
    p_.heartbeat.SetLoss(loss);
    // The pre-clip norm comes back with the loss (one synchronisation per line).
    if (const at::Tensor norm = p_.step.grad_norm(); norm.defined()) {
      totals_.grad_norm = norm.item<double>();
    }
    p_.metrics.Refresh(p_.stats);
    const double elapsed = base::Seconds(timed_start_, now);
    const int64_t timed = totals_.timed_steps;
    const double rate = timed > 0 && elapsed > 0
                            ? static_cast<double>(timed) * p_.job.data.batch_per_rank * accum_ *
                                  p_.place.world / elapsed
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
    if (p_.plan.steps_per_epoch > 0) {
      text += " | epoch " + std::to_string(p_.input.EpochOf(LastBatchOf(step)) + 1);
    }
    if (totals_.eval) {
      if (totals_.eval->mlm) {
        std::snprintf(line, sizeof(line), " | eval mlm_acc %.4f", totals_.eval->mlm_accuracy);
      } else {
        std::snprintf(line, sizeof(line), " | eval top1 %.4f", totals_.eval->top1);
      }
      text += line;
    }
    p_.log.Info(text);
  }

  // Collective: every rank scores its part of data.val; the same result on every rank.
  void Evaluate(int64_t step) {
    p_.heartbeat.Beat(step, "eval");
    const auto e0 = Clock::now();
    telemetry::SynchronizeDevice(p_.device.cuda);  // the step's work first, then eager eval
    const EvalResult r = p_.plan.tokens ? EvaluateMaskedLm(p_.job, p_.place, p_.device, p_.state,
                                                           *p_.val, *p_.plan.tokens, p_.comms)
                                        : trainer::Evaluate(p_.job, p_.place, p_.device, p_.state,
                                                            *p_.val, p_.comms);
    totals_.eval = r;
    for (const std::string& w : p_.val->TakeWarnings()) p_.log.Warn(w);
    const double samples = static_cast<double>(r.samples);
    if (r.mlm) {
      p_.metrics.SetMlmEval(r.mlm_accuracy, r.loss, samples);
    } else {
      p_.metrics.SetEval(r.top1, r.top5, r.loss, samples);
    }
    if (p_.place.rank == 0) {
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
                    static_cast<long long>(p_.input.EpochOf(LastBatchOf(step)) + 1), scores, r.loss,
                    static_cast<long long>(r.samples));
      p_.log.Info(line);
    }
    if (step > warmup_end_) totals_.eval_seconds += base::Seconds(e0, Clock::now());
  }

  // Collective: every rank's RNG state to rank 0, which writes the checkpoint of `step`
  // with the data position of the next step.
  void Checkpoint(int64_t step) {
    p_.heartbeat.Beat(step, "checkpoint");
    const auto c0 = Clock::now();
    const data::SamplePosition next = p_.input.PositionOf((step + 1) * accum_);
    p_.state.data_position[0] = next.epoch;
    p_.state.data_position[1] = next.offset;
    p_.state.rng->Gather(*p_.comms.host);
    if (p_.place.rank == 0) {
      const checkpoint::CheckpointInfo info =
          p_.store.Save(step + 1, p_.place.world, p_.job.name, p_.state.named);
      const double seconds = base::Seconds(c0, Clock::now());
      p_.log.Info("checkpoint " + info.path + " (" + base::FormatDuration(seconds) + ")");
    }
    p_.comms.host->Barrier();
    // Every rank: how long training paused for the checkpoint; the counters as of the
    // checkpoint, which a restart resumes from.
    const double paused = base::Seconds(c0, Clock::now());
    p_.metrics.OnCheckpoint(paused);
    p_.metrics.SaveCounters();
    if (step > warmup_end_) totals_.checkpoint_seconds += paused;
    Record(step + 1, &p_.stats, history::kRunning);
  }

  // attempts/N/ as of `done` steps (summary.h: RecordAttempt).
  void Record(int64_t done, const telemetry::StepStats* stats, const char* outcome) {
    const double timed_s = totals_.timed_steps == 0
                               ? 0
                               : base::Seconds(timed_start_, Clock::now()) -
                                     totals_.checkpoint_seconds - totals_.eval_seconds;
    RecordAttempt(p_.opts.run_dir, p_.place.rank, ProgressOf(totals_, done, timed_s, outcome),
                  stats, totals_, p_.log);
  }

  // Last phases, per-rank stats file and the run summary.
  void Finish() {
    p_.heartbeat.Beat(total_ - 1, "done");
    telemetry::SynchronizeDevice(p_.device.cuda);
    p_.reporter.Report(/*device_idle=*/true);
    // Throughput is training time only: checkpoints are reported separately.
    totals_.timed_seconds = base::Seconds(timed_start_, Clock::now()) - totals_.checkpoint_seconds -
                            totals_.eval_seconds;
    if (p_.plan.steps_per_epoch > 0) {
      totals_.epochs = p_.input.EpochOf(LastBatchOf(total_ - 1)) + 1;
    }
    totals_.final_lr = lr_;
    if (const at::Tensor norm = p_.step.grad_norm(); norm.defined()) {
      totals_.grad_norm = norm.item<double>();
    }
    totals_.data_seconds = p_.input.data_seconds();
    if (p_.train_images) totals_.bad_files = CountBadFiles();
    p_.metrics.Refresh(p_.stats);
    const std::string& run_dir = p_.opts.run_dir;
    history::WriteRankStats(
        history::RankStatsPath(run_dir + "/logs", p_.place.rank),
        p_.stats.Record(totals_.timed_steps, telemetry::Percentile(totals_.step_seconds, 0.5),
                        telemetry::Percentile(totals_.step_seconds, 0.99)));
    const double peak = telemetry::PeakDeviceMemoryBytes(p_.device.cuda) +
                        static_cast<double>(p_.comms.device->registered_bytes());
    const std::optional<double> final_loss =
        WriteSummary(p_.job, p_.plan.steps, run_dir, p_.place.rank, p_.place.world, p_.device.cuda,
                     totals_, p_.step.loss(), p_.state.params, peak, *p_.comms.host);
    if (p_.place.rank == 0 && final_loss) {
      // The last progress line showed rank 0's own loss; summary.json's final_loss (and
      // `status` after the run) is the mean: say which is which.
      char line[256];
      std::snprintf(line, sizeof(line),
                    "final loss %.4f: the last step's loss averaged over the %d rank(s) "
                    "(summary.json final_loss); rank 0's own, as in the last progress line: %.4f",
                    *final_loss, p_.place.world, p_.step.loss().item<double>());
      p_.log.Info(line);
      p_.heartbeat.SetLoss(*final_loss);
    }
    if (p_.place.rank == 0) {
      p_.log.Info("done: " + std::to_string(total_) + " steps, summary " + run_dir +
                  "/summary.json");
    }
    p_.comms.host->Barrier();
    EndOnPurpose();
  }

  // The job ends on purpose (finished, or checkpointed and stopped): the counters as they
  // end, for the job's next process; no more scrape targets.
  void EndOnPurpose() {
    p_.metrics.SaveCounters();
    if (p_.place.rank == 0) telemetry::WithdrawScrapeTargets(p_.opts.run_dir);
  }

  // Collective: distinct bad files of data.train and data.val over all ranks (ranks meet
  // the same training file in different epochs, so the sets are merged, not summed).
  int64_t CountBadFiles() {
    const int64_t train = p_.train_images->size();
    const int64_t val = p_.val ? p_.val->size() : 0;
    at::Tensor seen = at::zeros({train + val}, at::kByte);
    uint8_t* s = seen.data_ptr<uint8_t>();
    for (int64_t i : p_.input.bad_files()) s[i] = 1;
    if (p_.val) {
      for (int64_t i : p_.val->bad_files()) s[train + i] = 1;
    }
    p_.comms.host->AllReduce(seen, comm::ReduceOp::kMax)->Wait();
    return seen.sum().item<int64_t>();
  }

  // The input batch index of `step`'s last micro-batch (the step itself without
  // accumulation).
  int64_t LastBatchOf(int64_t step) const { return (step + 1) * accum_ - 1; }

  const LoopParts& p_;
  const int64_t start_step_;
  const int64_t total_;
  const int accum_;  // train.grad_accum_steps
  const LrScheduleOptions schedule_;
  const bool varying_lr_;
  double lr_ = 0;  // the current step's learning rate
  int64_t warmup_end_ = 0;
  double launch_unix_ = 0;
  StepClock clock_;
  StepReadback readback_;             // every step's loss for the metrics
  telemetry::KernelProfile profile_;  // RINGPILOT_KINETO_TRACE (developers)
  GraphedStep graph_;                 // the step, or with accumulation its last micro-batch
  GraphedStep micro_graph_;           // accumulation: the other micro-batches
  RunTotals totals_;
  Clock::time_point timed_start_ = Clock::now();
  Clock::time_point last_report_ = Clock::now();
};

void LogJobLine(const config::JobConfig& job, const RankPlace& place, const RankDevice& device,
                const TrainingState& state, const comm::GradientReducer& reducer,
                const comm::Communicator& device_comm, const telemetry::TrainingMetrics& metrics,
                telemetry::RankLog& log) {
  int64_t nparams = 0;
  for (const at::Tensor& p : state.params) nparams += p.numel();
  log.Info("job " + job.name + ": " + config::ToString(job.model.name) + " (" +
           std::to_string(nparams) + " parameters), " + std::to_string(place.world) +
           " rank(s) x batch " + std::to_string(job.data.batch_per_rank) + " on " +
           (device.cuda ? "cuda" : "cpu") + ", " + std::to_string(device.threads) +
           " thread(s)/rank, " + std::to_string(reducer.buckets().size()) +
           " gradient bucket(s), comm " + device_comm.backend() +
           (metrics.exporter() ? ", metrics on " + metrics.exporter()->url() : ""));
}

}  // namespace

// The job stays as loaded: what the data decides is the RunPlan's.
struct Trainer::State {
  const config::JobConfig job;
  const TrainerOptions opts;
};

Trainer::Trainer(config::JobConfig config, TrainerOptions options)
    : s_(std::make_unique<State>(State{std::move(config), std::move(options)})) {}

Trainer::~Trainer() = default;

int Trainer::Run() {
  const config::JobConfig& job = s_->job;
  const std::string& run_dir = s_->opts.run_dir;
  PreemptionWatch preemption;  // SIGUSR1: checkpoint at the next step boundary and stop
  const RankPlace place = JoinWorld();
  base::MakeDirs(run_dir + "/logs");
  telemetry::RankLog log(run_dir + "/logs/rank-" + std::to_string(place.rank) + ".log", place.rank,
                         place.rank == 0, s_->opts.verbose);
  const FatalReporterScope fatal_reporter(log);
  log.Detail("rank " + std::to_string(place.rank) + "/" + std::to_string(place.world) + " on " +
             place.node + " (local rank " + std::to_string(place.local_rank) + "/" +
             std::to_string(place.local_size) + ", pid " + std::to_string(::getpid()) +
             ", attempt " + std::to_string(s_->opts.attempt) + ")");
  if (place.world != job.world.size()) {
    throw std::runtime_error("world size is " + std::to_string(place.world) +
                             " but the job asks for " + std::to_string(job.world.size()) +
                             " (world.nodes x procs_per_node)");
  }
  // data.train is opened once, before anything else starts (an image set is indexed, CIFAR
  // read, a token shard mapped): a bad file stops the rank here. What it decides about the
  // run (steps, vocabulary) is the plan's; the job stays as loaded.
  const input::InputOptions input_options = InputOptionsFor(job);
  const std::unique_ptr<input::Dataset> dataset =
      input::OpenDataset(input_options, place.rank, place.world);
  const RunPlan plan = MakeRunPlan(job, *dataset);
  if (place.rank == 0 && !plan.data_line.empty()) log.Info(plan.data_line);
  if (place.rank == 0 && !plan.epochs_line.empty()) log.Info(plan.epochs_line);
  CheckRunPlan(job, plan);
  if (job.train.lr_base_batch > 0 && place.rank == 0) log.Info(LearningRateLine(job));
  // Topology, cluster view, plan: NCCL NIC variables and CPU binding (trainer/bootstrap.h),
  // before CUDA, NCCL and compute threads start.
  const RankPlacement placement = PlaceRank(PlacementOptionsFor(job), place.rank, place.world,
                                            place.local_rank, place.local_size, log);
  const RankDevice device =
      SetUpDevice(DeviceOptionsFor(job, CudaAvailable(), place.node), place, log);
  const TrainingStream stream(device);
  RankCommunicators comms = MakeCommunicators(CommunicatorOptionsFor(job), place, device, run_dir);
  telemetry::Heartbeat heartbeat(
      run_dir + "/logs/rank-" + std::to_string(place.rank) + ".heartbeat", place.rank,
      comms.device.get());
  const FatalHeartbeatScope fatal_heartbeat(heartbeat);

  // Metrics first, so a port clash fails fast, before the model is built. They outlive
  // the telemetry, which detaches from them when it ends.
  std::unique_ptr<telemetry::TrainingMetrics> metrics;
  telemetry::RankTelemetry telemetry(
      RankTelemetryOptionsFor(job), run_dir,
      {job.name, place.node, place.rank, place.local_rank, place.world, {}},
      device.cuda ? device.device.index() : -1);
  metrics = std::make_unique<telemetry::TrainingMetrics>(
      telemetry.identity(), run_dir + "/logs/rank-" + std::to_string(place.rank) + ".counters.json",
      s_->opts.attempt - 1);
  metrics->SetBuildInfo(telemetry::BuildInfoLabels(telemetry::QueryLibraryVersions()));
  metrics->SetExpectedBusBandwidth(placement.expected_bus_bytes_per_second);
  if (dataset->images()) metrics->EnableImageInput();
  if (job.metrics.enabled) {
    const bool multi_node = place.world > place.local_size;
    metrics::ExporterOptions serve =
        ExporterOptionsFor(job.metrics, place.local_rank, multi_node, base::CurrentEnvironment());
    // A port another job holds: this node's ranks move up a block together.
    serve.port_step = std::max(1, place.local_size);
    serve.port_tries = base::kMetricsPortBlocks;
    metrics->Serve(serve);
    // Every rank's real address and port (free ones with port_base 0) for Prometheus.
    telemetry::PublishScrapeTargets(*comms.host, metrics->exporter(), job.name, run_dir,
                                    job.metrics.file_sd_dir);
  }
  comms.device->set_observer(metrics.get());
  telemetry::StepStats stats(place.rank, place.world, place.node, place.local_rank);
  stats.set_expected_busbw(placement.expected_bus_bytes_per_second);
  const double clock_offset = telemetry::EstimateClockOffset();
  metrics->set_stats(&stats);
  // Phase markers; on CUDA a GPU timeline that also times collectives in graph replays.
  StepPhases phases(device.cuda ? device.device.index() : -1, comms.device.get());
  metrics->WatchSequences(comms.device.get());
  telemetry.Start(*metrics, clock_offset, log);

  TrainingState state = BuildTrainingState(job, plan, place, device, comms.batch_norm());
  checkpoint::CheckpointStore store(run_dir + "/checkpoints", job.checkpoint.keep);
  const int64_t start_step = ResumeFromCheckpoint(job, plan, place, comms, store, state, log);
  comm::ReducerOptions reducer_options = ReducerOptionsFor(job.comm);
  reducer_options.on_first_launch = [&phases] { phases.FirstGradientsReady(); };
  comm::GradientReducer reducer(state.params, *comms.device, reducer_options);
  if (place.rank == 0) {
    LogJobLine(job, place, device, state, reducer, *comms.device, *metrics, log);
  }

  input::InputFeed input(input_options, *dataset, *state.model, device.device, device.threads,
                         plan.batches, *metrics, log);
  if (start_step > 0 && state.data_position[0].item<int64_t>() >= 0) {
    input.Resume(start_step * job.train.grad_accum_steps,
                 {state.data_position[0].item<int64_t>(), state.data_position[1].item<int64_t>()});
  }
  const std::unique_ptr<input::ValidationSet> val =
      dataset->LoadValidationSet(state.model->image_spec(), device.cuda);
  TrainStep train_step(TrainStepOptionsFor(job, device, place.rank), device, state, reducer, phases,
                       input, plan.tokens);
  PhaseReporter reporter(phases, *metrics, *comms.device, *comms.host, place.rank, place.world,
                         clock_offset);
  const LoopParts parts{job,    plan,      s_->opts,   place,     device,
                        comms,  state,     store,      input,     train_step,
                        phases, reporter,  *metrics,   telemetry, stats,
                        log,    heartbeat, preemption, val.get(), dataset->images()};
  return TrainingLoop(parts, start_step).Run();
}

}  // namespace ringpilot::trainer
