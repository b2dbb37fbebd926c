// GpuSampler against the fake libnvidia-ml (tests/topology/fake_nvml.cpp): readings reach the
// exposition under the documented names, units and labels; no NVML means no series and a
// warning. Each test runs in its own process (gtest_discover_tests), so the fake's state
// (NVLink counters, the one XID event) starts fresh.
#include "metrics/gpu_sampler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "metrics/exposition.h"

namespace ringpilot::metrics {
namespace {

constexpr char kLabels[] = R"(gpu_uuid="GPU-fake-1",pci_bus_id="00000000:2A:00.0")";

std::string Line(const std::string& name, const std::string& labels, double value) {
  return name + "{" + labels + "} " + FormatValue(value) + "\n";
}

GpuSamplerOptions FakeOptions() {
  GpuSamplerOptions o;
  o.nvml_library = RINGPILOT_FAKE_NVML;
  o.pci_bus_id = "0000:2a:00.0";  // as CUDA writes it; NVML's spelling differs
  o.period_seconds = 0;           // no thread: the test samples
  return o;
}

TEST(GpuSampler, ValuesReachExpositionInBaseUnits) {
  Registry registry({{"rank", "1"}});
  GpuSampler sampler(registry, FakeOptions());
  ASSERT_TRUE(sampler.active()) << sampler.warning();
  EXPECT_EQ(sampler.identity().uuid, "GPU-fake-1");
  EXPECT_EQ(sampler.identity().pci_bus_id, "00000000:2A:00.0");
  sampler.SampleOnce();  // the constructor took the first sample
  const std::string text = registry.Serialize();
  const std::string l = std::string(R"(rank="1",)") + kLabels;
  for (const std::string& want : {
           Line("ringpilot_gpu_utilization_ratio", l, 0.87),
           Line("ringpilot_gpu_memory_utilization_ratio", l, 0.42),
           Line("ringpilot_gpu_memory_used_bytes", l, 42949672960),
           Line("ringpilot_gpu_memory_total_bytes", l, 150754820096),
           Line("ringpilot_gpu_power_watts", l, 612.5),
           Line("ringpilot_gpu_temperature_celsius", l, 67),
           Line("ringpilot_gpu_sm_clock_hertz", l, 1980000000),
           Line("ringpilot_gpu_clock_event_reason_active", l + R"(,reason="sw_power_cap")", 1),
           Line("ringpilot_gpu_clock_event_reason_active", l + R"(,reason="sw_thermal_slowdown")",
                1),
           Line("ringpilot_gpu_clock_event_reason_active", l + R"(,reason="hw_slowdown")", 0),
           Line("ringpilot_gpu_clock_event_reason_active", l + R"(,reason="gpu_idle")", 0),
           // Two reads, 1000/3000 KiB apart: bytes since sampling began.
           Line("ringpilot_gpu_nvlink_bytes_total", l + R"(,direction="tx")", 1024000),
           Line("ringpilot_gpu_nvlink_bytes_total", l + R"(,direction="rx")", 3072000),
           Line("ringpilot_gpu_pcie_bytes_per_second", l + R"(,direction="tx")", 2048000),
           Line("ringpilot_gpu_pcie_bytes_per_second", l + R"(,direction="rx")", 8192000),
           Line("ringpilot_gpu_xid_errors_total", l, 1),
           Line("ringpilot_gpu_last_xid", l, 79),
           Line("ringpilot_gpu_ecc_errors_total", l + R"(,type="corrected")", 5),
           Line("ringpilot_gpu_ecc_errors_total", l + R"(,type="uncorrected")", 1),
           // Two reads, 250 ms / 10 ms apart: time limited since sampling began.
           Line("ringpilot_gpu_clock_limited_seconds_total", l + R"(,cause="power")", 250e6 * 1e-9),
           Line("ringpilot_gpu_clock_limited_seconds_total", l + R"(,cause="thermal")",
                10e6 * 1e-9),
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
  Registry registry({{"rank", "0"}, {"gpu_uuid", "GPU-fake-0"}, {"pci_bus_id", "x"}});
  GpuSamplerOptions o = FakeOptions();
  o.pci_bus_id = "";  // NVML's GPU 0
  GpuSampler sampler(registry, o);
  ASSERT_TRUE(sampler.active()) << sampler.warning();
  EXPECT_EQ(sampler.identity().uuid, "GPU-fake-0");
  EXPECT_NE(
      registry.Serialize().find(
          "ringpilot_gpu_power_watts{rank=\"0\",gpu_uuid=\"GPU-fake-0\",pci_bus_id=\"x\"} 612.5\n"),
      std::string::npos)
      << registry.Serialize();
}

// The value of the series whose line starts with `prefix` ("name{labels} "); -1 if absent.
double Value(const std::string& text, const std::string& prefix) {
  const auto at = text.find(prefix);
  return at == std::string::npos ? -1 : std::stod(text.substr(at + prefix.size()));
}

TEST(GpuSampler, BackgroundThreadSamples) {
  Registry registry;
  GpuSamplerOptions o = FakeOptions();
  o.period_seconds = 0.01;
  GpuSampler sampler(registry, o);
  ASSERT_TRUE(sampler.active());
  const std::string tx =
      std::string("ringpilot_gpu_nvlink_bytes_total{") + kLabels + R"(,direction="tx"} )";
  // The first sample is the baseline (0 bytes); each later one adds 1000 KiB.
  double bytes = Value(registry.Serialize(), tx);
  for (int i = 0; i < 500 && bytes <= 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    bytes = Value(registry.Serialize(), tx);
  }
  EXPECT_GE(bytes, 1024000) << registry.Serialize();
}

TEST(GpuSampler, MissingNvmlGivesWarningAndNoSeries) {
  Registry registry({{"rank", "0"}});
  GpuSamplerOptions o;
  o.nvml_library = "libringpilot-no-such-nvml.so.1";
  GpuSampler sampler(registry, o);
  EXPECT_FALSE(sampler.active());
  EXPECT_EQ(sampler.warning().rfind("GPU metrics off: NVML: cannot load "
                                    "libringpilot-no-such-nvml.so.1",
                                    0),
            0u)
      << sampler.warning();
  sampler.SampleOnce();  // harmless
  EXPECT_EQ(registry.Serialize(), "");
}

TEST(GpuSampler, UnknownBusIdIsAWarning) {
  Registry registry;
  GpuSamplerOptions o = FakeOptions();
  o.pci_bus_id = "0000:99:00.0";
  GpuSampler sampler(registry, o);
  EXPECT_FALSE(sampler.active());
  EXPECT_NE(sampler.warning().find("no NVML device at PCI bus id '0000:99:00.0'"),
            std::string::npos)
      << sampler.warning();
  EXPECT_EQ(registry.Serialize(), "");
}

TEST(GpuSampler, LookupIdentity) {
  GpuIdentity id;
  std::string error;
  ASSERT_TRUE(LookupGpuIdentity(RINGPILOT_FAKE_NVML, "00000000:18:00.0", &id, &error)) << error;
  EXPECT_EQ(id.uuid, "GPU-fake-0");
  EXPECT_EQ(id.pci_bus_id, "00000000:18:00.0");
  EXPECT_FALSE(LookupGpuIdentity("libringpilot-no-such-nvml.so.1", "", &id, &error));
  EXPECT_NE(error.find("cannot load"), std::string::npos);
}

}  // namespace
}  // namespace ringpilot::metrics
