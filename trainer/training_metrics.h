// The trainer's Prometheus series (docs/metrics.md) and their HTTP exporter.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "metrics/exporter.h"
#include "metrics/registry.h"
#include "trainer/step_stats.h"

namespace ringpilot::trainer {

struct RankIdentity {
  std::string job;
  std::string node;
  int rank = 0;
  int local_rank = 0;
};

/// Owns the registry of one rank. Hot-path updates are lock-free (metrics::Registry).
/// OnCollective is called by the communicator on the training thread.
class TrainingMetrics : public comm::CollectiveObserver {
 public:
  explicit TrainingMetrics(const RankIdentity& id);

  /// Serves /metrics on bind:port (port 0 = any free port). Throws when it cannot.
  void Serve(const std::string& bind, int port);
  /// The bound port, or 0 when not serving.
  int port() const;

  void SetBuildInfo(const std::string& torch, const std::string& mpi, const std::string& cuda,
                    const std::string& nccl);
  void SetRestarts(int restarts);
  void OnStep(double seconds, int64_t samples);
  void SetLoss(double loss);
  void OnCheckpoint(double seconds);
  void OnCollective(comm::CollectiveOp op, int64_t bytes, double seconds) override;
  void OnPhase(Phase phase, double seconds);
  void OnStraggler(const StragglerStep& s);
  void SetOverlapRatio(double ratio);
  /// Refreshes gauges derived from `stats` (bus bandwidth per op).
  void Refresh(const StepStats& stats);
  /// Collectives also feed `stats` (not owned; may be null).
  void set_stats(StepStats* stats) { stats_ = stats; }
  /// Sequence gauges read `comm` at scrape time (not owned; may be null).
  void WatchSequences(const comm::Communicator* comm);

  const metrics::Registry& registry() const { return *registry_; }

 private:
  static constexpr int kOps = 4;
  static constexpr int kSizeBuckets = 6;
  std::unique_ptr<metrics::Registry> registry_;
  std::unique_ptr<metrics::Exporter> exporter_;
  metrics::Histogram* step_seconds_;
  metrics::Counter* samples_total_;
  metrics::Counter* steps_total_;
  metrics::Gauge* loss_;
  metrics::Histogram* checkpoint_seconds_;
  metrics::Gauge* restarts_;
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
  const comm::Communicator* watched_ = nullptr;
  std::array<metrics::Counter*, kOps> collective_bytes_{};
  metrics::Family<metrics::Gauge>* build_info_;
};

}  // namespace ringpilot::trainer
