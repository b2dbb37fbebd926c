// The process series every Prometheus client library exports (client_golang's and
// client_python's process collector, same names and meanings), read from /proc/self, so
// dashboards and alerts written for any exporter work on a ringpilot rank too.
#pragma once

#include <string>

#include "metrics/families.h"

namespace ringpilot::metrics {

/// One reading of /proc/self (or /proc/PID); a value that could not be read is negative.
struct ProcessReading {
  double cpu_seconds = -1;            ///< user + system CPU time (stat fields 14, 15)
  double resident_memory_bytes = -1;  ///< RSS pages x page size (stat field 24)
  double virtual_memory_bytes = -1;   ///< stat field 23
  double start_time_seconds = -1;     ///< Unix time: /proc/stat btime + stat field 22
  double open_fds = -1;               ///< entries of /proc/self/fd
  double max_fds = -1;                ///< soft "Max open files" of /proc/self/limits
};

/// Reads this process's values, or with `process` a pid's (PROC/PID/...). `proc` is the
/// /proc root (tests point it at a fake tree); never throws.
ProcessReading ReadProcess(const std::string& proc = "/proc", const std::string& process = "self");

/// Registers in `families` (with its constant labels):
///   process_cpu_seconds_total        counter  seconds
///   process_resident_memory_bytes    gauge    bytes
///   process_virtual_memory_bytes     gauge    bytes
///   process_start_time_seconds       gauge    Unix seconds
///   process_open_fds                 gauge    file descriptors
///   process_max_fds                  gauge    file descriptors
/// and sets them from /proc at construction and at each Update(). A value /proc does not
/// give keeps its last reading. Update() is not thread-safe: call it from one thread at a
/// time (an exporter's scrape hook, which the exporter serializes).
class ProcessMetrics {
 public:
  /// `process`: "self", or the pid of another process to report (`ringpilot exec` reports
  /// its program's).
  explicit ProcessMetrics(Families& families, std::string proc = "/proc",
                          std::string process = "self");
  ProcessMetrics(const ProcessMetrics&) = delete;
  ProcessMetrics& operator=(const ProcessMetrics&) = delete;

  void Update();

 private:
  const std::string proc_;
  const std::string process_;
  Counter* cpu_;
  double cpu_counted_ = 0;  // what cpu_ was moved to (a counter only goes up)
  Gauge* resident_;
  Gauge* virtual_;
  Gauge* start_;
  Gauge* open_fds_;
  Gauge* max_fds_;
};

}  // namespace ringpilot::metrics
