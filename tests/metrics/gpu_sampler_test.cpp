// GpuSampler against the fake libnvidia-ml (tests/topology/fake_nvml.cpp): readings reach the
// exposition under the documented names, units and labels; no NVML means no series and a
// warning. Each test runs in its own process (gtest_discover_tests), so the fake's state
// (NVLink counters, the one XID event) starts fresh.
#include <chrono>
#include <limits>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "metrics/families.h"
#include "metrics/gpu_sampler.h"

namespace ringpilot::metrics {
namespace {

// dcgm-exporter's names: UUID, gpu (NVML index), pci_bus_id.
const Labels kGpu = {{"UUID", "GPU-fake-1"}, {"gpu", "1"}, {"pci_bus_id", "00000000:2A:00.0"}};

// A value as prometheus::TextSerializer writes it (16 significant digits).
std::string Format(double value) {
  std::ostringstream out;
  out.precision(std::numeric_limits<double>::max_digits10 - 1);
  out << value;
  return out.str();
}

// `name{prefix,own...} value`: the families' constant labels (`prefix`) come first, then
// the series' own labels sorted by name.
std::string Line(const std::string& name, const std::string& prefix, Labels own, double value,
                 const char* extra_name = nullptr, const char* extra_value = nullptr) {
  if (extra_name != nullptr) own.emplace(extra_name, extra_value);
  std::string labels = prefix;
  for (const auto& [k, v] : own) labels += (labels.empty() ? "" : ",") + k + "=\"" + v + "\"";
  return name + "{" + labels + "} " + Format(value) + "\n";
}

GpuSamplerOptions FakeOptions() {
  GpuSamplerOptions o;
  o.nvml_library = RINGPILOT_FAKE_NVML;
  o.pci_bus_id = "0000:2a:00.0";  // as CUDA writes it; NVML's spelling differs
  o.period_seconds = 0;           // no thread: the test samples
  return o;
}

TEST(GpuSampler, ValuesReachExpositionInBaseUnits) {
  Families families({{"rank", "1"}});
  GpuSampler sampler(families, FakeOptions());
  ASSERT_TRUE(sampler.active()) << sampler.warning();
  EXPECT_EQ(sampler.identity().uuid, "GPU-fake-1");
  EXPECT_EQ(sampler.identity().pci_bus_id, "00000000:2A:00.0");
  sampler.SampleOnce();  // the constructor took the first sample
  const std::string text = families.Serialize();
  const std::string r = R"(rank="1")";
  for (const std::string& want : {
           Line("ringpilot_gpu_utilization_ratio", r, kGpu, 0.87),
           Line("ringpilot_gpu_memory_utilization_ratio", r, kGpu, 0.42),
           Line("ringpilot_gpu_memory_used_bytes", r, kGpu, 42949672960),
           Line("ringpilot_gpu_memory_total_bytes", r, kGpu, 150754820096),
           Line("ringpilot_gpu_power_watts", r, kGpu, 612.5),
           Line("ringpilot_gpu_temperature_celsius", r, kGpu, 67),
           Line("ringpilot_gpu_sm_clock_hertz", r, kGpu, 1980000000),
           Line("ringpilot_gpu_clock_event_reason_active", r, kGpu, 1, "reason", "sw_power_cap"),
           Line("ringpilot_gpu_clock_event_reason_active", r, kGpu, 1, "reason",
                "sw_thermal_slowdown"),
           Line("ringpilot_gpu_clock_event_reason_active", r, kGpu, 0, "reason", "hw_slowdown"),
           Line("ringpilot_gpu_clock_event_reason_active", r, kGpu, 0, "reason", "gpu_idle"),
           // Two reads, 1000/3000 KiB apart: bytes since sampling began.
           Line("ringpilot_gpu_nvlink_bytes_total", r, kGpu, 1024000, "direction", "tx"),
           Line("ringpilot_gpu_nvlink_bytes_total", r, kGpu, 3072000, "direction", "rx"),
           Line("ringpilot_gpu_pcie_bytes_per_second", r, kGpu, 2048000, "direction", "tx"),
           Line("ringpilot_gpu_pcie_bytes_per_second", r, kGpu, 8192000, "direction", "rx"),
           Line("ringpilot_gpu_xid_errors_total", r, kGpu, 1),
           Line("ringpilot_gpu_last_xid", r, kGpu, 79),
           Line("ringpilot_gpu_ecc_errors_total", r, kGpu, 5, "type", "corrected"),
           Line("ringpilot_gpu_ecc_errors_total", r, kGpu, 1, "type", "uncorrected"),
           // Two reads, 250 ms / 10 ms apart: time limited since sampling began.
           Line("ringpilot_gpu_clock_limited_seconds_total", r, kGpu, 250e6 * 1e-9, "cause",
                "power"),
           Line("ringpilot_gpu_clock_limited_seconds_total", r, kGpu, 10e6 * 1e-9, "cause",
                "thermal"),
       }) {
    EXPECT_NE(text.find(want), std::string::npos) << "missing: " << want << "in:\n" << text;
  }
  EXPECT_NE(text.find("# TYPE ringpilot_gpu_nvlink_bytes_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE ringpilot_gpu_power_watts gauge\n"), std::string::npos);
  // Nine reason bits, no more: a bounded label set.
  std::size_t reasons = 0;
  for (std::size_t at = 0;
       (at = text.find("ringpilot_gpu_clock_event_reason_active{", at)) != std::string::npos;
       ++at) {
    ++reasons;
  }
  EXPECT_EQ(reasons, 9u);
}

TEST(GpuSampler, KeepsRegistryGpuLabelsInsteadOfRepeatingThem) {
  Families families({{"rank", "0"}, {"UUID", "GPU-fake-0"}, {"gpu", "0"}, {"pci_bus_id", "x"}});
  GpuSamplerOptions o = FakeOptions();
  o.pci_bus_id = "";  // NVML's GPU 0
  GpuSampler sampler(families, o);
  ASSERT_TRUE(sampler.active()) << sampler.warning();
  EXPECT_EQ(sampler.identity().uuid, "GPU-fake-0");
  EXPECT_NE(
      families.Serialize().find(
          "ringpilot_gpu_power_watts{UUID=\"GPU-fake-0\",gpu=\"0\",pci_bus_id=\"x\",rank=\"0\"} "
          "612.5\n"),
      std::string::npos)
      << families.Serialize();
}

// The value of the series whose line starts with `prefix` ("name{labels} "); -1 if absent.
double Value(const std::string& text, const std::string& prefix) {
  const auto at = text.find(prefix);
  return at == std::string::npos ? -1 : std::stod(text.substr(at + prefix.size()));
}

TEST(GpuSampler, BackgroundThreadSamples) {
  Families families;
  GpuSamplerOptions o = FakeOptions();
  o.period_seconds = 0.01;
  GpuSampler sampler(families, o);
  ASSERT_TRUE(sampler.active());
  const std::string tx = R"(ringpilot_gpu_nvlink_bytes_total{UUID="GPU-fake-1",direction="tx",)"
                         R"(gpu="1",pci_bus_id="00000000:2A:00.0"} )";
  // The first sample is the baseline (0 bytes); each later one adds 1000 KiB.
  double bytes = Value(families.Serialize(), tx);
  for (int i = 0; i < 500 && bytes <= 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    bytes = Value(families.Serialize(), tx);
  }
  EXPECT_GE(bytes, 1024000) << families.Serialize();
}

// The fake's violation counters grow by 250 ms (power) and 10 ms (thermal) a read, its
// energy counter by 612.5 J.
TEST(GpuSampler, ReadClocksGivesTheLimitCountersClocksAndPower) {
  Families families;
  GpuSampler sampler(families, FakeOptions());
  ASSERT_TRUE(sampler.active()) << sampler.warning();
  const GpuClockReading a = sampler.ReadClocks();
  const GpuClockReading b = sampler.ReadClocks();
  ASSERT_TRUE(a.power_limited_seconds && b.power_limited_seconds);
  ASSERT_TRUE(a.thermal_limited_seconds && b.thermal_limited_seconds);
  EXPECT_NEAR(*b.power_limited_seconds - *a.power_limited_seconds, 0.25, 1e-12);
  EXPECT_NEAR(*b.thermal_limited_seconds - *a.thermal_limited_seconds, 0.01, 1e-12);
  // The clock comes from the sampler's own samples (the fake's is 1980 MHz), not the read.
  EXPECT_EQ(b.sm_clock_samples, a.sm_clock_samples);
  sampler.SampleOnce();
  const GpuClockReading sampled = sampler.ReadClocks();
  EXPECT_EQ(sampled.sm_clock_samples, a.sm_clock_samples + 1);
  EXPECT_DOUBLE_EQ(sampled.sm_clock_mhz_sum - a.sm_clock_mhz_sum, 1980.0);
  EXPECT_EQ(b.sm_clock_max_mhz, 1980.0);
  ASSERT_TRUE(a.energy_joules && b.energy_joules);
  EXPECT_NEAR(*b.energy_joules - *a.energy_joules, 612.5, 1e-9);
  EXPECT_EQ(b.power_limit_watts, 700.0);

  GpuSamplerOptions none;
  none.nvml_library = "libringpilot-no-such-nvml.so.1";
  GpuSampler inactive(families, none);
  const GpuClockReading c = inactive.ReadClocks();
  EXPECT_FALSE(c.power_limited_seconds || c.thermal_limited_seconds || c.sm_clock_samples ||
               c.sm_clock_max_mhz || c.energy_joules || c.power_limit_watts);
}

TEST(GpuSampler, MissingNvmlGivesWarningAndNoSeries) {
  Families families({{"rank", "0"}});
  GpuSamplerOptions o;
  o.nvml_library = "libringpilot-no-such-nvml.so.1";
  GpuSampler sampler(families, o);
  EXPECT_FALSE(sampler.active());
  EXPECT_EQ(sampler.warning().rfind("GPU metrics off: NVML: cannot load "
                                    "libringpilot-no-such-nvml.so.1",
                                    0),
            0u)
      << sampler.warning();
  sampler.SampleOnce();  // harmless
  EXPECT_EQ(families.Serialize(), "");
}

TEST(GpuSampler, UnknownBusIdIsAWarning) {
  Families families;
  GpuSamplerOptions o = FakeOptions();
  o.pci_bus_id = "0000:99:00.0";
  GpuSampler sampler(families, o);
  EXPECT_FALSE(sampler.active());
  EXPECT_NE(sampler.warning().find("no NVML device at PCI bus id '0000:99:00.0'"),
            std::string::npos)
      << sampler.warning();
  EXPECT_EQ(families.Serialize(), "");
}

TEST(GpuSampler, LookupIdentity) {
  GpuIdentity id;
  std::string error;
  ASSERT_TRUE(LookupGpuIdentity(RINGPILOT_FAKE_NVML, "00000000:18:00.0", &id, &error)) << error;
  EXPECT_EQ(id.uuid, "GPU-fake-0");
  EXPECT_EQ(id.pci_bus_id, "00000000:18:00.0");
  EXPECT_EQ(id.index, "0");
  EXPECT_EQ(GpuLabels(id),
            (Labels{{"UUID", "GPU-fake-0"}, {"gpu", "0"}, {"pci_bus_id", "00000000:18:00.0"}}));
  EXPECT_FALSE(LookupGpuIdentity("libringpilot-no-such-nvml.so.1", "", &id, &error));
  EXPECT_NE(error.find("cannot load"), std::string::npos);
}

}  // namespace
}  // namespace ringpilot::metrics
