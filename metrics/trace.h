// Per-rank timeline of step phases and collectives in the Chrome Trace Event format
// (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU; opens in
// ui.perfetto.dev and chrome://tracing). Events go into a bounded ring buffer (the newest
// `capacity` are kept) and are written to a JSON file at exit and on SIGUSR2.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <semaphore.h>

namespace ringpilot::metrics {

/// One complete ("ph":"X") event. `name`, `cat` and `arg_name` must be string literals
/// (or otherwise outlive the trace): recording copies pointers, never strings.
struct TraceEvent {
  const char* name = "";
  const char* cat = "";
  std::int64_t ts_us = 0;          ///< start, microseconds since the Unix epoch on rank 0's clock
  std::int64_t dur_us = 0;         ///< duration, microseconds
  int tid = 0;                     ///< lane in the viewer (see Trace::kTrainTid, kCommTid)
  const char* arg_name = nullptr;  ///< optional single integer argument
  std::int64_t arg = 0;
};

class Trace {
 public:
  static constexpr int kTrainTid = 0;  ///< the training thread's phases and steps
  static constexpr int kCommTid = 1;   ///< collectives, as the communicator observes them

  /// `pid` is the rank; `process_name` labels it in the viewer ("rank 3 (node-a)").
  /// `clock_offset_seconds` is added to this host's clock to read rank 0's
  /// (trainer/telemetry/step_stats.h EstimateClockOffset), so ranks line up. Throws
  /// std::invalid_argument for capacity 0.
  Trace(int pid, std::string process_name, std::size_t capacity, double clock_offset_seconds);
  ~Trace();
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  /// Records an event. Thread-safe; takes an uncontended mutex for a fixed-size copy, never
  /// allocates. When the buffer is full the oldest event is overwritten.
  void Record(const TraceEvent& event);
  /// Records an event that ends now and lasted `seconds`.
  void Complete(const char* name, const char* cat, int tid, double seconds,
                const char* arg_name = nullptr, std::int64_t arg = 0);
  /// Records an event that started at `start_unix` (seconds since the Unix epoch on this
  /// host's clock, e.g. a GPU timestamp mapped to it) and lasted `seconds`.
  void CompleteAt(const char* name, const char* cat, int tid, double start_unix, double seconds,
                  const char* arg_name = nullptr, std::int64_t arg = 0);
  /// Microseconds since the Unix epoch, on rank 0's clock.
  std::int64_t NowMicros() const;

  /// Events held, oldest first.
  std::vector<TraceEvent> Snapshot() const;
  /// Events recorded so far, including overwritten ones.
  std::uint64_t recorded() const;
  /// The trace as a JSON document: {"traceEvents": [...], "displayTimeUnit": "ms",
  /// "otherData": {...}}, with process and thread name metadata events first.
  std::string ToJson() const;
  /// Writes ToJson() to `path` atomically (temp file, fsync, rename). Throws
  /// base::FileError (a std::runtime_error) naming the file and errno on failure; the
  /// temp file is removed and an earlier `path` is left as it was.
  void WriteFile(const std::string& path) const;

  /// Installs a SIGUSR2 handler and starts a thread that writes the trace to `path`
  /// whenever the signal arrives (the handler only posts a semaphore). One trace per
  /// process may do this; the destructor stops the thread and restores the old handler.
  /// `on_error` receives write failures (called on the flush thread).
  void FlushOnSigusr2(std::string path, void (*on_error)(const std::string&) = nullptr);

 private:
  const int pid_;
  const std::string process_name_;
  const std::int64_t offset_us_;
  mutable std::mutex mu_;
  std::vector<TraceEvent> ring_;
  std::uint64_t next_ = 0;  // events recorded; slot next_ % capacity is written next
  std::thread flusher_;
  std::atomic<bool> stop_{false};
  bool handler_installed_ = false;
};

}  // namespace ringpilot::metrics
