// The process-wide side of the NCCL profiler plugin: the communicators NCCL reported, the
// HTTP exporter and the per-rank stats file, and the one way the plugin turns itself off.
//
// Lifetime: one Profiler per loaded copy of the library, made at the first communicator's
// init and never destroyed (the library is linked with -z nodelete, so NCCL's dlclose does
// not unmap code the exporter's threads still run; at process exit nothing is torn down
// under NCCL's feet). Threads: AddCommunicator and FinalizeCommunicator come from the
// threads that create and destroy communicators, scrapes from the exporter's threads and
// the stats writer from its own; they share one mutex, which NCCL's event hooks (the hot
// path, comm_stats.h) never take.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nccl_profiler/comm_stats.h"
#include "nccl_profiler/settings.h"

namespace ringpilot::metrics {
class Exporter;
}

namespace ringpilot::nccl_profiler {

class PrometheusExport;

class Profiler {
 public:
  /// This library's instance.
  static Profiler& Instance();

  Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  /// A communicator NCCL initialised. The first call reads the settings from the
  /// environment and starts the exporter and the stats writer; any error there disables
  /// the plugin (one line on stderr). Returns the communicator's stats, or null when the
  /// plugin is disabled. `api_version`: the profiler API NCCL chose (2..5).
  CommStats* AddCommunicator(const CommIdentity& id, Timing timing, int api_version);
  /// NCCL finalized (destroyed or aborted) the communicator: its final numbers stay in the
  /// export and the stats file; `comm` is freed.
  void FinalizeCommunicator(CommStats* comm);

  /// Turns the plugin off for the rest of the process and writes, once,
  /// "ringpilot-nccl-profiler: disabled: <reason>" to stderr.
  void Disable(const std::string& reason);
  bool disabled() const { return disabled_.load(std::memory_order_acquire); }

  /// Live and finalized communicators (finalized: at most kMaxRetired, newest kept).
  std::vector<CommSnapshot> Snapshots();
  /// Writes RUN_DIR/logs/rank-N.nccl.json now (when a run directory is set).
  void WriteStatsFile();
  /// At a normal exit: RUN_DIR/prometheus-targets-rank-N.json (when written) becomes an
  /// empty list, so Prometheus stops scraping a process that ended on purpose.
  void WithdrawScrapeTarget();
  static constexpr size_t kMaxRetired = 256;

 private:
  void Start(const CommIdentity& first, int api_version);  // under mu_; throws on failure
  void WriterLoop();
  std::vector<CommSnapshot> SnapshotsLocked();

  std::atomic<bool> disabled_{false};
  std::atomic<bool> reported_{false};
  std::mutex mu_;
  bool started_ = false;
  Settings settings_;
  int rank_ = 0;  // RANK, else the first communicator's rank
  int api_version_ = 0;
  std::vector<std::unique_ptr<CommStats>> live_;
  std::vector<CommSnapshot> retired_;
  std::unique_ptr<PrometheusExport> export_;
  std::unique_ptr<metrics::Exporter> exporter_;
  std::string stats_path_;
  std::string targets_path_;  // this process's file_sd file, once written
  std::mutex write_mu_;       // one stats file writer at a time
  std::thread writer_;
  std::condition_variable wake_;
};

}  // namespace ringpilot::nccl_profiler
