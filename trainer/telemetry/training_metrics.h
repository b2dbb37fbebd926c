// The trainer's Prometheus series (docs/metrics.md) and their HTTP exporter.
#pragma once

#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "metrics/exporter.h"
#include "metrics/families.h"
#include "metrics/trace.h"
#include "trainer/telemetry/step_stats.h"

namespace ringpilot::trainer::telemetry {

struct RankIdentity {
  std::string job;
  std::string node;
  int rank = 0;
  int local_rank = 0;
  std::string gpu_uuid;    ///< "" on CPU ranks or without NVML (then no label)
  std::string pci_bus_id;  ///< as NVML writes it; "" likewise
};

/// Owns the metric families of one rank (prometheus-cpp, metrics/families.h). Hot-path
/// updates go through references taken at setup: counters and gauges are lock-free atomics,
/// a histogram observation takes that histogram's uncontended mutex. OnCollective is
/// called by the communicator on the training thread.
class TrainingMetrics : public comm::CollectiveObserver {
 public:
  explicit TrainingMetrics(const RankIdentity& id);

  /// Serves /metrics on bind:port (port 0 = any free port). Throws when it cannot.
  void Serve(const std::string& bind, int port);
  /// The bound port, or 0 when not serving.
  int port() const;

  /// `ringpilot_build_info` 1 with `version` and LABELS (trainer/telemetry/versions.h
  /// BuildInfoLabels).
  void SetBuildInfo(const std::vector<std::pair<std::string, std::string>>& labels);
  void SetRestarts(int restarts);
  /// The topology model's expected bus bandwidth of the job (trainer/bootstrap.h), for
  /// every op but barrier; 0 = no model.
  void SetExpectedBusBandwidth(double bytes_per_second);
  void OnStep(double seconds, int64_t samples);
  void SetLoss(double loss);
  /// The learning rate of the last step (train.lr_schedule), set every step (host value).
  void SetLearningRate(double lr);
  /// train.max_grad_norm: the gradients' global norm before clipping, as of the last
  /// progress line (read from the device with it).
  void SetGradNorm(double norm);
  /// The last evaluation on data.val (the same on every rank: results are all-reduced).
  void SetEval(double top1, double top5, double loss, double samples);
  /// The same for a masked-LM model: accuracy over the masked positions of data.val.
  void SetMlmEval(double accuracy, double loss, double samples);
  void OnCheckpoint(double seconds);
  /// Image kinds, once per step: images decoded and bad samples since the last call, and
  /// the batches ready ahead of the training step.
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

  /// Step phases, steps and collectives are also recorded here (not owned; may be null).
  void set_trace(metrics::Trace* trace) { trace_ = trace; }

  const metrics::Families& families() const { return *families_; }
  /// For components that add their own series (GPU sampler, NCCL transports).
  metrics::Families& mutable_families() { return *families_; }

 private:
  // Records a trace event that ended now (start_unix NaN) or began at start_unix.
  void Trace(const char* name, const char* cat, int tid, double seconds, double start_unix,
             const char* arg_name = nullptr, int64_t arg = 0);

  static constexpr int kOps = 4;
  static constexpr int kSizeBuckets = 6;
  std::unique_ptr<metrics::Families> families_;
  std::unique_ptr<metrics::Exporter> exporter_;
  metrics::Histogram* step_seconds_;
  metrics::Counter* samples_total_;
  metrics::Counter* steps_total_;
  metrics::Gauge* loss_;
  metrics::Gauge* learning_rate_;
  metrics::Gauge* grad_norm_;
  metrics::Gauge* eval_top1_;
  metrics::Gauge* eval_top5_;
  metrics::Gauge* eval_mlm_accuracy_;
  metrics::Gauge* eval_loss_;
  metrics::Gauge* eval_samples_;
  metrics::Histogram* checkpoint_seconds_;
  metrics::Gauge* restarts_;
  metrics::Counter* images_decoded_;
  metrics::Counter* bad_samples_;
  metrics::Gauge* prefetch_batches_;
  std::array<metrics::Gauge*, kOps> expected_busbw_{};
  std::array<std::array<metrics::Histogram*, kSizeBuckets>, kOps> collective_seconds_{};
  std::array<metrics::Histogram*, kNumPhases> phase_seconds_{};
  std::array<metrics::Gauge*, kOps> busbw_{};
  metrics::Family<metrics::Counter>* straggler_wait_;
  std::vector<metrics::Counter*> wait_by_culprit_;
  metrics::Gauge* skew_;
  metrics::Gauge* overlap_;
  metrics::Gauge* started_seq_;
  metrics::Gauge* completed_seq_;
  StepStats* stats_ = nullptr;
  metrics::Trace* trace_ = nullptr;
  int64_t steps_ = 0;
  const comm::Communicator* watched_ = nullptr;
  std::array<metrics::Counter*, kOps> collective_bytes_{};
  metrics::Family<metrics::Gauge>* build_info_;
};

}  // namespace ringpilot::trainer::telemetry
