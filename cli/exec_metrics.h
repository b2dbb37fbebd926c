// The metrics `ringpilot exec --log-dir` serves for its rank's program (a launch.command
// job under `ringpilot run`): the program's process series (metrics/process_metrics.h:
// CPU, memory, file descriptors, start time) and ringpilot_restarts_total, on the rank's
// metrics port (RINGPILOT_METRICS_PORT_BASE + LOCAL_RANK, the next free block when it is
// taken). So a program without NCCL has a target too; the NCCL profiler plugin that NCCL
// loads into the program finds that port taken and serves its series on the next block.
// RUN_DIR/prometheus-targets-rank-N.process.json lists the endpoint (the glob
// prometheus-targets*.json finds it with the plugin's).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/environment.h"

namespace ringpilot::metrics {
class Exporter;
class Families;
class ProcessMetrics;
}  // namespace ringpilot::metrics

namespace ringpilot::cli {

class ProgramMetrics {
 public:
  /// Serves when `env` names a port base other than 0 (RINGPILOT_METRICS_PORT_BASE, set by
  /// `ringpilot run`); nullptr otherwise, or when the exporter cannot start (then one line
  /// in *notes says why: the rank runs without these series).
  static std::unique_ptr<ProgramMetrics> Start(const base::Environment& env,
                                               std::vector<std::string>* notes);
  ~ProgramMetrics();
  ProgramMetrics(const ProgramMetrics&) = delete;
  ProgramMetrics& operator=(const ProgramMetrics&) = delete;

  /// The program's pid, once it runs: the process series are its from then on.
  void Watch(int pid);
  /// "HOST:PORT" it serves on.
  std::string Target() const;

 private:
  ProgramMetrics() = default;
  void BeforeScrape();

  std::unique_ptr<metrics::Families> families_;
  std::unique_ptr<metrics::Exporter> exporter_;
  std::mutex mutex_;  // process_ and pid_ between Watch and the scrape thread
  std::unique_ptr<metrics::ProcessMetrics> process_;
  int pid_ = 0;
  std::string targets_path_;  // emptied ("[]") when the program ended
};

}  // namespace ringpilot::cli
