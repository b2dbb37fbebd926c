// The NCCL profiler plugin's Prometheus series (docs/metrics.md, "NCCL profiler plugin"),
// refreshed from communicator snapshots right before each scrape is collected, so a scrape
// is never staler than the snapshot it triggers.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "metrics/families.h"
#include "metrics/process_metrics.h"
#include "nccl_profiler/comm_stats.h"

namespace ringpilot::nccl_profiler {

/// Who the process is (docs/metrics.md conventions): `node` becomes every series' Hostname
/// label, `rank` and `local_rank` theirs; `job` is ringpilot_job_info's `name`.
struct RankLabels {
  std::string job;
  std::string node;
  int rank = 0;
  int local_rank = -1;  ///< -1: no local_rank label
};

/// Owns the families; Refresh creates series the first time a label set appears and moves
/// counters and histograms forward by what changed since the last Refresh. Not thread-safe:
/// call from one thread at a time (the exporter's scrape hook is serialized).
class PrometheusExport {
 public:
  explicit PrometheusExport(const RankLabels& labels, int api_version);
  ~PrometheusExport();

  /// `comms`: every communicator's snapshot, live and finalized (whose series stay at
  /// their final values). Counters never go back: a snapshot behind the last one (cannot
  /// happen for one communicator) adds nothing. Also reads the process_* series.
  void Refresh(const std::vector<CommSnapshot>& comms);

  const metrics::Families& families() const { return families_; }

 private:
  struct Oldest {
    metrics::Gauge* age = nullptr;
    std::string op;
  };
  void Advance(metrics::Counter& c, double value);
  void RefreshComm(const CommSnapshot& s);

  metrics::Families families_;
  const int api_version_;
  std::unique_ptr<metrics::ProcessMetrics> process_;
  metrics::Family<metrics::Histogram>* coll_seconds_;
  metrics::Family<metrics::Counter>* coll_bytes_;
  metrics::Family<metrics::Gauge>* coll_busbw_;
  metrics::Family<metrics::Gauge>* started_seq_;
  metrics::Family<metrics::Gauge>* completed_seq_;
  metrics::Family<metrics::Counter>* ops_;
  metrics::Family<metrics::Counter>* bytes_;
  metrics::Family<metrics::Counter>* seconds_;
  metrics::Family<metrics::Gauge>* busbw_;
  metrics::Family<metrics::Gauge>* p2p_started_;
  metrics::Family<metrics::Gauge>* p2p_completed_;
  metrics::Family<metrics::Gauge>* in_flight_;
  metrics::Family<metrics::Gauge>* oldest_age_;
  metrics::Family<metrics::Gauge>* oldest_seq_;
  metrics::Family<metrics::Gauge>* oldest_start_;
  metrics::Family<metrics::Gauge>* info_;
  metrics::Family<metrics::Counter>* dropped_;
  metrics::Family<metrics::Gauge>* abandoned_;
  std::map<const metrics::Counter*, double> counted_;  // value each counter was moved to
  std::map<const metrics::Histogram*, HistogramSnapshot> observed_;
  std::map<std::string, Oldest> oldest_;  // by comm label
};

/// The `comm` label: the communicator hash as 16 lower-case hex digits.
std::string CommLabel(uint64_t hash);

}  // namespace ringpilot::nccl_profiler
