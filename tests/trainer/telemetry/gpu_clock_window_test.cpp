// gpu_clocks over the timed window's spans (trainer/telemetry/gpu_clock_window.h).
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "trainer/telemetry/gpu_clock_window.h"

namespace ringpilot::trainer::telemetry {
namespace {

// Counters since the driver loaded, as NVML gives them; each read moves them on by one
// "tick": 0.5 s at the power limit, 350 J of energy and two SM clock samples at `mhz`.
struct FakeGpu {
  int reads = 0;
  double mhz = 1900;
  double limited = 100, energy = 1e6, mhz_sum = 0;
  uint64_t samples = 0;
  metrics::GpuClockReading Read() {
    ++reads;
    limited += 0.5;
    energy += 350;
    samples += 2;
    mhz_sum += 2 * mhz;
    metrics::GpuClockReading r;
    r.power_limited_seconds = limited;
    r.thermal_limited_seconds = 3;
    r.energy_joules = energy;
    r.sm_clock_samples = samples;
    r.sm_clock_mhz_sum = mhz_sum;
    r.sm_clock_max_mhz = 1980;
    r.power_limit_watts = 700;
    return r;
  }
};

TEST(GpuClockWindow, SumsTheRunningSpansAndLeavesPausesOut) {
  FakeGpu gpu;
  GpuClockWindow window([&gpu] { return gpu.Read(); });
  EXPECT_FALSE(window.Report().has_value()) << "before Start";
  window.Pause();
  window.Resume();
  window.End();
  EXPECT_EQ(gpu.reads, 0) << "nothing to pause, resume or end before Start";

  window.Start();  // read 1
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  gpu.mhz = 1800;  // the next samples
  window.Pause();  // read 2: span 1 closes (one tick)
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  window.Resume();  // read 3: a checkpoint's tick left out
  window.Resume();  // already open: no read
  EXPECT_EQ(gpu.reads, 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  gpu.mhz = 1700;
  const history::GpuClocks open = *window.Report();  // read 4: span 2 up to now
  EXPECT_EQ(gpu.reads, 4);
  EXPECT_DOUBLE_EQ(*open.power_limited_seconds, 1.0);
  EXPECT_DOUBLE_EQ(*open.thermal_limited_seconds, 0.0);
  EXPECT_DOUBLE_EQ(open.sm_clock_mhz.value(), 1750.0);  // 2 at 1800, 2 at 1700
  EXPECT_GE(open.seconds, 0.06);
  EXPECT_LT(open.seconds, 0.09 + 5) << "the 60 ms pause is not in it";

  window.End();  // read 5: span 2 (reads 3-5) closes
  const history::GpuClocks ended = *window.Report();
  EXPECT_EQ(gpu.reads, 5) << "an ended window reads nothing more";
  EXPECT_DOUBLE_EQ(*ended.power_limited_seconds, 1.5);
  EXPECT_NEAR(*ended.power_watts * ended.seconds, 1050.0, 1e-6);  // three ticks of 350 J
  EXPECT_DOUBLE_EQ(ended.sm_clock_mhz.value(), (2 * 1800.0 + 4 * 1700.0) / 6);
  EXPECT_EQ(ended.sm_clock_max_mhz, 1980.0);
  EXPECT_EQ(ended.power_limit_watts, 700.0);
  window.Resume();
  EXPECT_EQ(gpu.reads, 5) << "no resume after the end";

  window.Start();  // a new attempt: earlier spans forgotten
  EXPECT_DOUBLE_EQ(*window.Report()->power_limited_seconds, 0.5);
}

TEST(GpuClockWindow, WithoutASourceItNeverReports) {
  GpuClockWindow window{GpuClockWindow::Read()};
  window.Start();
  window.End();
  EXPECT_FALSE(window.Report().has_value());
}

TEST(ClocksBetween, ACounterMissingOrGoingBackGivesNoLimitedTime) {
  metrics::GpuClockReading start, end;
  start.power_limited_seconds = 50;
  end.power_limited_seconds = 10;   // the driver reloaded in between
  end.thermal_limited_seconds = 3;  // the start lacks it
  const history::GpuClocks g = ClocksBetween(start, end, 4.0);
  EXPECT_EQ(g.seconds, 4.0);
  EXPECT_FALSE(g.power_limited_seconds.has_value());
  EXPECT_FALSE(g.thermal_limited_seconds.has_value());
  EXPECT_FALSE(g.sm_clock_mhz.has_value()) << "no sample in the window";
}

TEST(ClocksBetween, MeanPowerIsTheEnergyOverTheWindow) {
  metrics::GpuClockReading start, end;
  start.energy_joules = 1.0e6;
  end.energy_joules = 1.0e6 + 2772.0;
  EXPECT_DOUBLE_EQ(*ClocksBetween(start, end, 4.0).power_watts, 693.0);
  EXPECT_FALSE(ClocksBetween(start, end, 0.0).power_watts.has_value()) << "no window";
  end.energy_joules = 10.0;  // the driver reloaded in between
  EXPECT_FALSE(ClocksBetween(start, end, 4.0).power_watts.has_value());
  start.energy_joules.reset();
  end.energy_joules = 5000.0;
  EXPECT_FALSE(ClocksBetween(start, end, 4.0).power_watts.has_value()) << "no counter at the start";
}

// A span without a counter voids its sum for the whole window, not just that span.
TEST(GpuClockSums, ASpanMissingACounterVoidsItsSum) {
  metrics::GpuClockReading a, b, c;
  a.power_limited_seconds = 1;
  b.power_limited_seconds = 2;
  GpuClockSums sums;
  sums.Add(a, b, 1.0);
  EXPECT_EQ(sums.power_limited_seconds, 1.0);
  sums.Add(b, c, 1.0);
  EXPECT_FALSE(sums.power_limited_seconds.has_value());
  sums.Add(a, b, 1.0);
  EXPECT_FALSE(sums.power_limited_seconds.has_value());
  EXPECT_EQ(sums.seconds, 3.0);
}

}  // namespace
}  // namespace ringpilot::trainer::telemetry
