// The trainer's Prometheus series (docs/metrics.md) and their HTTP exporter.
#pragma once

#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "metrics/counter_journal.h"
#include "metrics/exporter.h"
#include "metrics/families.h"
#include "metrics/gpu_sampler.h"
#include "metrics/process_metrics.h"
#include "metrics/trace.h"
#include "trainer/telemetry/step_stats.h"

namespace ringpilot::trainer::telemetry {

struct RankIdentity {
  std::string job;   ///< job name: ringpilot_job_info's `name`, not a label of every series
  std::string node;  ///< host name: the `Hostname` label (dcgm-exporter's name)
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  /// The rank's GPU as NVML names it; empty on CPU ranks or without NVML (no GPU labels).
  metrics::GpuIdentity gpu;
};

/// The labels every series of the rank carries: `Hostname`, `rank`, `local_rank`, and on
/// a CUDA rank whose GPU NVML found, dcgm-exporter's `UUID`, `gpu`, `pci_bus_id`.
metrics::Labels RankLabels(const RankIdentity& id);

/// Owns the metric families of one rank (prometheus-cpp, metrics/families.h). Hot-path
/// updates go through references taken at setup: counters and gauges are lock-free atomics,
/// a histogram observation takes that histogram's uncontended mutex. A series exists only
/// when its value means something (docs/metrics.md, "No false zeros"): the evaluation
/// gauges appear with the first evaluation (top-1/top-5 for image models, MLM accuracy for
/// BERT), the gradient norm with the first norm computed, a bus bandwidth once there is one,
/// the image input series when EnableImageInput was called. Those few series, and a
/// straggler culprit's (the first time it is blamed, at most kMaxCulpritSeries + 1 of
/// them), are created on first use; nothing else allocates after setup. OnCollective is
/// called by the communicator on the training thread.
class TrainingMetrics : public comm::CollectiveObserver {
 public:
  /// Culprit ranks with a series of their own; later culprits share culprit_rank="other".
  static constexpr int kMaxCulpritSeries = 8;

  /// `counters_path`: this rank's counter journal (RUN_DIR/logs/rank-N.counters.json): the
  /// counters of kContinuedCounters start where an earlier process of the job left them,
  /// and are written there at every scrape and by SaveCounters(); "" = start at 0.
  /// `restart`: the attempt (RINGPILOT_RESTART); above 0, ringpilot_restarts_total counts
  /// one more restart.
  TrainingMetrics(const RankIdentity& id, const std::string& counters_path, int restart);

  /// Serves /metrics with `options` (port 0 = any free port). Throws when it cannot.
  void Serve(const metrics::ExporterOptions& options);
  /// The exporter, or null when not serving.
  const metrics::Exporter* exporter() const { return exporter_.get(); }

  /// `ringpilot_build_info` 1 with `version` and LABELS (trainer/telemetry/versions.h
  /// BuildInfoLabels).
  void SetBuildInfo(const std::vector<std::pair<std::string, std::string>>& labels);
  /// The topology model's expected bus bandwidth of the job (trainer/startup/bootstrap.h), for
  /// every op but barrier; 0 = no model: no series.
  void SetExpectedBusBandwidth(double bytes_per_second);
  /// The rank reads an image set (data.kind image_folder, image_shards): the ringpilot_data_*
  /// counters exist from now on, at 0 (or where the job's earlier processes left them), the
  /// prefetch gauge from the first OnImageInput. Call at setup, before OnImageInput.
  void EnableImageInput();
  /// The job's optimizer steps (train.steps, or what train.epochs makes of it).
  void SetStepsTarget(int64_t steps);
  /// A step ended: `steps_done` is the job's steps completed with it (the step index + 1).
  void OnStep(double seconds, int64_t samples, int64_t steps_done);
  /// This rank's loss of a step (its own batch).
  void SetLoss(double loss);
  /// The learning rate of the last step (train.lr_schedule), set every step (host value).
  void SetLearningRate(double lr);
  /// train.max_grad_norm: the gradients' global norm before clipping (the same on every
  /// rank), of the step whose loss was set last.
  void SetGradNorm(double norm);
  /// The last evaluation on data.val (the same on every rank: results are all-reduced).
  void SetEval(double top1, double top5, double loss, double samples);
  /// The same for a masked-LM model: accuracy over the masked positions of data.val.
  void SetMlmEval(double accuracy, double loss, double samples);
  /// A checkpoint took `seconds` (collective: every rank observes the whole pause).
  void OnCheckpoint(double seconds);
  /// Image kinds, once per step: images decoded and bad samples since the last call, and
  /// the batches ready ahead of the training step. Ignored before EnableImageInput.
  void OnImageInput(int64_t decoded, int64_t bad_samples, int ready_batches);
  void OnCollective(comm::CollectiveOp op, int64_t bytes, double seconds,
                    double start_unix) override;
  /// `start_unix`: when the phase began (Unix seconds, this host's clock; GPU phases come
  /// from comm::DeviceTimeline), or NaN when it ended just now.
  void OnPhase(Phase phase, double seconds, double start_unix = std::nan(""));
  void OnStraggler(const StragglerStep& s);
  void SetOverlapRatio(double ratio);
  /// Refreshes gauges derived from `stats` (bus bandwidth per op).
  void Refresh(const StepStats& stats);
  /// Collectives also feed `stats` (not owned; may be null).
  void set_stats(StepStats* stats) { stats_ = stats; }
  /// Sequence gauges read `comm` at scrape time (not owned; may be null).
  void WatchSequences(const comm::Communicator* comm);
  /// Writes the continued counters to the journal now (the end of a run).
  void SaveCounters() const;

  /// Step phases, steps and collectives are also recorded here (not owned; may be null).
  void set_trace(metrics::Trace* trace) { trace_ = trace; }

  const metrics::Families& families() const { return *families_; }
  /// For components that add their own series (GPU sampler, NCCL transports).
  metrics::Families& mutable_families() { return *families_; }

 private:
  // Records a trace event that ended now (start_unix NaN) or began at start_unix.
  void Trace(const char* name, const char* cat, int tid, double seconds, double start_unix,
             const char* arg_name = nullptr, int64_t arg = 0);
  // A counter of kContinuedCounters, started from the journal.
  metrics::Counter& Continued(metrics::Family<metrics::Counter>& family, const std::string& name,
                              const metrics::Labels& labels);
  metrics::Counter& CulpritCounter(int rank);
  static metrics::Gauge& FirstUse(metrics::Family<metrics::Gauge>& family, metrics::Gauge*& gauge);
  // Before each scrape: sequence gauges and process metrics.
  void BeforeScrape();

  static constexpr int kOps = comm::kTrainingCollectiveOps;
  std::unique_ptr<metrics::Families> families_;
  std::shared_ptr<metrics::CounterJournal> journal_;  // null without a journal path
  std::unique_ptr<metrics::ProcessMetrics> process_;
  std::unique_ptr<metrics::Exporter> exporter_;
  metrics::Histogram* step_seconds_;
  metrics::Counter* samples_total_;
  metrics::Counter* steps_total_;
  metrics::Gauge* step_;
  metrics::Gauge* steps_target_;
  metrics::Gauge* loss_;
  metrics::Gauge* learning_rate_;
  // Created on first use (null until then): see the class comment.
  metrics::Family<metrics::Gauge>* grad_norm_family_;
  metrics::Gauge* grad_norm_ = nullptr;
  metrics::Family<metrics::Gauge>* eval_top1_family_;
  metrics::Family<metrics::Gauge>* eval_top5_family_;
  metrics::Family<metrics::Gauge>* eval_mlm_accuracy_family_;
  metrics::Family<metrics::Gauge>* eval_loss_family_;
  metrics::Family<metrics::Gauge>* eval_samples_family_;
  metrics::Gauge* eval_top1_ = nullptr;
  metrics::Gauge* eval_top5_ = nullptr;
  metrics::Gauge* eval_mlm_accuracy_ = nullptr;
  metrics::Gauge* eval_loss_ = nullptr;
  metrics::Gauge* eval_samples_ = nullptr;
  metrics::Histogram* checkpoint_seconds_;
  metrics::Counter* images_decoded_ = nullptr;  // null until EnableImageInput
  metrics::Counter* bad_samples_ = nullptr;
  metrics::Family<metrics::Gauge>* prefetch_family_ = nullptr;
  metrics::Gauge* prefetch_batches_ = nullptr;
  metrics::Family<metrics::Gauge>* expected_busbw_family_;
  metrics::Family<metrics::Gauge>* busbw_family_;
  std::array<metrics::Gauge*, kOps> expected_busbw_{};  // null for barrier and without a model
  std::array<metrics::Histogram*, kOps> collective_seconds_{};
  std::array<metrics::Histogram*, kNumPhases> phase_seconds_{};
  std::array<metrics::Gauge*, kOps> busbw_{};               // null for barrier and until measured
  std::array<metrics::Counter*, kOps> collective_bytes_{};  // null for barrier
  metrics::Family<metrics::Counter>* straggler_wait_;
  std::array<std::pair<int, metrics::Counter*>, kMaxCulpritSeries> culprits_{};
  int num_culprits_ = 0;
  metrics::Counter* other_culprits_ = nullptr;
  metrics::Gauge* skew_;
  metrics::Gauge* overlap_;
  metrics::Gauge* started_seq_;
  metrics::Gauge* completed_seq_;
  StepStats* stats_ = nullptr;
  metrics::Trace* trace_ = nullptr;
  int64_t steps_ = 0;  // steps of this process (the trace's attempt_step)
  const comm::Communicator* watched_ = nullptr;
  metrics::Family<metrics::Gauge>* build_info_;
};

}  // namespace ringpilot::trainer::telemetry
