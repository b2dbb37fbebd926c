// gpu_clocks over the timed window's spans (see gpu_clock_window.h).
#include "trainer/telemetry/gpu_clock_window.h"

namespace ringpilot::trainer::telemetry {
namespace {

// Growth of a counter since the driver loaded; none when it is missing or went back.
std::optional<double> Grown(const std::optional<double>& a, const std::optional<double>& b) {
  return a && b && *b >= *a ? std::optional<double>(*b - *a) : std::nullopt;
}

// The first span sets a sum; a later one adds to it, and a missing growth voids it.
void AddTo(std::optional<double>* sum, const std::optional<double>& growth, bool first) {
  if (first) {
    *sum = growth;
  } else if (*sum && growth) {
    **sum += *growth;
  } else {
    sum->reset();
  }
}

}  // namespace

void GpuClockSums::Add(const metrics::GpuClockReading& start, const metrics::GpuClockReading& end,
                       double span_seconds) {
  const bool first = !spans;
  spans = true;
  seconds += span_seconds;
  AddTo(&power_limited_seconds, Grown(start.power_limited_seconds, end.power_limited_seconds),
        first);
  AddTo(&thermal_limited_seconds, Grown(start.thermal_limited_seconds, end.thermal_limited_seconds),
        first);
  AddTo(&energy_joules, Grown(start.energy_joules, end.energy_joules), first);
  if (end.sm_clock_samples >= start.sm_clock_samples) {
    sm_clock_samples += end.sm_clock_samples - start.sm_clock_samples;
    sm_clock_mhz_sum += end.sm_clock_mhz_sum - start.sm_clock_mhz_sum;
  }
}

history::GpuClocks GpuClockSums::ToGpuClocks(const metrics::GpuClockReading& last) const {
  history::GpuClocks g;
  g.seconds = seconds;
  g.power_limited_seconds = power_limited_seconds;
  g.thermal_limited_seconds = thermal_limited_seconds;
  // A snapshot of the power at either end says little (the board idles at the run's last
  // sync); the energy counter gives the mean over exactly the spans.
  if (energy_joules && seconds > 0) g.power_watts = *energy_joules / seconds;
  if (sm_clock_samples > 0) {
    g.sm_clock_mhz = sm_clock_mhz_sum / static_cast<double>(sm_clock_samples);
  }
  g.sm_clock_max_mhz = last.sm_clock_max_mhz;
  g.power_limit_watts = last.power_limit_watts;
  return g;
}

history::GpuClocks ClocksBetween(const metrics::GpuClockReading& start,
                                 const metrics::GpuClockReading& end, double seconds) {
  GpuClockSums sums;
  sums.Add(start, end, seconds);
  return sums.ToGpuClocks(end);
}

void GpuClockWindow::Start() {
  if (!read_) return;
  started_ = true;
  ended_ = false;
  closed_ = GpuClockSums{};
  open_ = read_();
  last_ = open_;
  open_since_ = Clock::now();
}

void GpuClockWindow::Pause() {
  if (!open_) return;
  const metrics::GpuClockReading now = read_();
  closed_.Add(*open_, now, std::chrono::duration<double>(Clock::now() - open_since_).count());
  last_ = now;
  open_.reset();
}

void GpuClockWindow::Resume() {
  if (!started_ || ended_ || open_) return;
  open_ = read_();
  last_ = open_;
  open_since_ = Clock::now();
}

void GpuClockWindow::End() {
  Pause();
  if (started_) ended_ = true;
}

std::optional<history::GpuClocks> GpuClockWindow::Report() const {
  if (!started_) return std::nullopt;
  if (!open_) return closed_.ToGpuClocks(*last_);
  GpuClockSums sums = closed_;
  const metrics::GpuClockReading now = read_();
  sums.Add(*open_, now, std::chrono::duration<double>(Clock::now() - open_since_).count());
  return sums.ToGpuClocks(now);
}

}  // namespace ringpilot::trainer::telemetry
