// The stats file's gpu_clocks (history::GpuClocks) over a rank's timed steps: how long the
// power and thermal limits held its GPU's clocks down, its mean power and SM clock, from
// NVML's counters read where the timed window starts, pauses, resumes and ends.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>

#include "history/rank_stats.h"
#include "metrics/gpu_sampler.h"

namespace ringpilot::trainer::telemetry {

/// Counter growth summed over spans of the timed window. A counter missing at either end of
/// a span, or going back in it (a driver reload), makes its sum absent.
struct GpuClockSums {
  double seconds = 0;
  std::optional<double> power_limited_seconds, thermal_limited_seconds, energy_joules;
  uint64_t sm_clock_samples = 0;
  double sm_clock_mhz_sum = 0;
  bool spans = false;  ///< whether any span was added

  /// Adds the span between two readings `seconds` apart.
  void Add(const metrics::GpuClockReading& start, const metrics::GpuClockReading& end,
           double seconds);
  /// The stats file's record: the limited times as summed, the energy over the seconds the
  /// mean power, the clock sums over their sample count the mean SM clock (absent without a
  /// sample); the maximum clock and the power limit are `last`'s.
  history::GpuClocks ToGpuClocks(const metrics::GpuClockReading& last) const;
};

/// gpu_clocks between two readings `seconds` apart (one span).
history::GpuClocks ClocksBetween(const metrics::GpuClockReading& start,
                                 const metrics::GpuClockReading& end, double seconds);

/// The timed window's spans: checkpoints and evaluations are left out, as the run's rates
/// leave them out (the board is near idle while a checkpoint is written: counted in, the
/// share of time at the power limit read 57% for a run at the limit throughout). Each call
/// that reads is five NVML calls on the caller's thread: never per step. Not thread-safe.
class GpuClockWindow {
 public:
  using Read = std::function<metrics::GpuClockReading()>;
  /// `read` (GpuSampler::ReadClocks) must outlive the window.
  explicit GpuClockWindow(Read read) : read_(std::move(read)) {}

  /// Forgets earlier spans and opens one (a new attempt's timed steps).
  void Start();
  /// Closes the open span; nothing until Resume. No-op without an open span.
  void Pause();
  /// Opens a span after a Pause. No-op before Start, after End, or when one is open.
  void Resume();
  /// Closes the window after the last timed step: reports after it read nothing.
  void End();
  /// gpu_clocks so far (the closed spans, and the open one up to now: one read); none
  /// before Start.
  std::optional<history::GpuClocks> Report() const;

 private:
  using Clock = std::chrono::steady_clock;
  Read read_;
  bool started_ = false, ended_ = false;
  GpuClockSums closed_;
  std::optional<metrics::GpuClockReading> last_;  // the latest reading (for the limits)
  std::optional<metrics::GpuClockReading> open_;  // the open span's start reading
  Clock::time_point open_since_;
};

}  // namespace ringpilot::trainer::telemetry
