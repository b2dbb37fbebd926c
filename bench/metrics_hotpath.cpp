// Microbenchmark of the metrics code the trainer runs (bench/results/*-cpu-metrics.md):
//   hot path  ns per Counter increment, Gauge set and Histogram observe, the updates the
//             training loop makes every step, on references taken once at setup; alone and
//             while another thread scrapes the same registry without pause;
//   scrape    time to serialize a registry shaped like a trainer rank's (the families of
//             trainer/training_metrics.cpp, metrics/gpu_sampler.cpp and the NCCL transports,
//             with the rank labels), and optionally padded with gauge families; and one
//             HTTP GET /metrics through the exporter on loopback.
// Built with the project (target ringpilot-bench-metrics), never run by the tests.
//
// Usage: ringpilot-bench-metrics [--iterations N] [--scrapes N] [--pad-families N]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "metrics/buckets.h"
#include "metrics/exporter.h"
#include "metrics/families.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace m = ringpilot::metrics;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// --- the registry of one trainer rank ---------------------------------------------------------

struct RankMetrics {
  m::Families metrics;
  m::Counter* samples = nullptr;
  m::Counter* steps = nullptr;
  m::Gauge* loss = nullptr;
  m::Histogram* step_seconds = nullptr;
  m::Histogram* phase_seconds = nullptr;       // phase="forward"
  m::Histogram* collective_seconds = nullptr;  // op="allreduce"
  m::Counter* collective_bytes = nullptr;      // op="allreduce"
  std::size_t families = 0;
  std::size_t series = 0;

  RankMetrics()
      : metrics({{"Hostname", "node-0"},
                 {"rank", "3"},
                 {"local_rank", "3"},
                 {"UUID", "GPU-8f6c2a1e-5b7d-4c1e-9a3f-0d2b6e4c8a10"},
                 {"gpu", "3"},
                 {"pci_bus_id", "00000000:18:00.0"}}) {}
};

// The trainer's families (training_metrics.cpp), the GPU sampler's (gpu_sampler.cpp) and the
// NCCL transports (rank_telemetry.cpp), with the label values a rank of an 8-GPU job has.
void BuildRankMetrics(RankMetrics& rm, int pad_families) {
  m::Families& r = rm.metrics;
  const char* ops[] = {"allreduce", "broadcast", "allgather", "barrier"};
  const char* phases[] = {"data", "forward", "backward", "optimizer", "comm_exposed"};
  auto series = [&rm](auto& metric) -> auto& {
    ++rm.series;
    return metric;
  };
  auto family = [&rm](auto& f) -> auto& {
    ++rm.families;
    return f;
  };

  series(family(r.AddGauge("ringpilot_job_info", "Job."))
             .Add({{"name", "bench"}, {"world_size", "8"}}))
      .Set(1);
  rm.step_seconds = &series(family(r.AddHistogram("ringpilot_step_seconds", "Wall time."))
                                .Add({}, m::BucketsOf(m::kStepSecondsBounds)));
  series(family(r.AddGauge("ringpilot_step", "Step.")).Add({})).Set(1234);
  series(family(r.AddGauge("ringpilot_steps_target", "Target.")).Add({})).Set(100000);
  rm.samples = &series(family(r.AddCounter("ringpilot_samples_total", "Samples.")).Add({}));
  rm.steps = &series(family(r.AddCounter("ringpilot_steps_total", "Steps.")).Add({}));
  rm.loss = &series(family(r.AddGauge("ringpilot_loss", "Loss.")).Add({}));
  series(family(r.AddHistogram("ringpilot_checkpoint_seconds", "Checkpoint time."))
             .Add({}, m::BucketsOf(m::kCheckpointSecondsBounds)))
      .Observe(3.5);
  series(family(r.AddCounter("ringpilot_restarts_total", "Restarts.")).Add({})).Increment(0);
  auto& expected = family(r.AddGauge("ringpilot_expected_bus_bandwidth_bytes_per_second", "E."));
  for (int i = 0; i < 3; ++i) series(expected.Add({{"op", ops[i]}})).Set(1.8e11);
  // process_* (metrics/process_metrics.h): six series.
  family(r.AddGauge("process_start_time_seconds", "Start.")).Add({}).Set(1764000000.125);
  ++rm.series;
  for (const char* name : {"process_resident_memory_bytes", "process_virtual_memory_bytes",
                           "process_open_fds", "process_max_fds"}) {
    series(family(r.AddGauge(name, "Process.")).Add({})).Set(1e9);
  }
  series(family(r.AddCounter("process_cpu_seconds_total", "CPU.")).Add({})).Increment(12.5);
  auto& coll_seconds = family(r.AddHistogram("ringpilot_collective_seconds", "Collective time."));
  const std::vector<double> coll_buckets = m::BucketsOf(m::kCollectiveSecondsBounds);
  auto& coll_bytes = family(r.AddCounter("ringpilot_collective_bytes_total", "Bytes."));
  auto& busbw = family(r.AddGauge("ringpilot_collective_bus_bandwidth_bytes_per_second", "B."));
  for (const char* op : ops) {
    series(coll_seconds.Add({{"op", op}}, coll_buckets)).Observe(0.0123);
    if (std::string(op) == "barrier") continue;  // no bytes, no bandwidth
    series(coll_bytes.Add({{"op", op}})).Increment(1e9);
    series(busbw.Add({{"op", op}})).Set(1.5e11);
  }
  rm.collective_seconds = &coll_seconds.Add({{"op", "allreduce"}}, coll_buckets);
  rm.collective_bytes = &coll_bytes.Add({{"op", "allreduce"}});
  auto& phase = family(r.AddHistogram("ringpilot_step_phase_seconds", "Phase time."));
  const std::vector<double> phase_buckets = m::BucketsOf(m::kPhaseSecondsBounds);
  for (const char* p : phases) series(phase.Add({{"phase", p}}, phase_buckets)).Observe(0.02);
  rm.phase_seconds = &phase.Add({{"phase", "forward"}}, phase_buckets);
  auto& straggler = family(r.AddCounter("ringpilot_straggler_wait_seconds_total", "Wait."));
  for (int culprit = 0; culprit < 8; ++culprit) {
    series(straggler.Add({{"culprit_rank", std::to_string(culprit)}})).Increment(0.25);
  }
  series(family(r.AddGauge("ringpilot_rank_compute_skew_seconds", "Skew.")).Add({})).Set(0.001);
  series(family(r.AddGauge("ringpilot_comm_overlap_ratio", "Overlap.")).Add({})).Set(0.8);
  series(family(r.AddGauge("ringpilot_collective_last_started_seq", "Started.")).Add({}))
      .Set(123456);
  series(family(r.AddGauge("ringpilot_collective_last_completed_seq", "Completed.")).Add({}))
      .Set(123455);
  series(family(r.AddGauge("ringpilot_build_info", "Versions."))
             .Add({{"version", "0.1.0"},
                   {"torch", "2.11.0"},
                   {"cuda", "13.0"},
                   {"cudnn", "91300"},
                   {"nccl", "2.28.9"},
                   {"mpi", "Open MPI v4.1.6"},
                   {"driver", "580.95.05"}}))
      .Set(1);
  // GPU sampler: the rank labels already hold UUID, gpu and pci_bus_id.
  for (const char* name :
       {"ringpilot_gpu_utilization_ratio", "ringpilot_gpu_memory_utilization_ratio",
        "ringpilot_gpu_memory_used_bytes", "ringpilot_gpu_memory_total_bytes",
        "ringpilot_gpu_power_watts", "ringpilot_gpu_temperature_celsius",
        "ringpilot_gpu_sm_clock_hertz", "ringpilot_gpu_last_xid"}) {
    series(family(r.AddGauge(name, "GPU reading.")).Add({})).Set(612.5);
  }
  auto& reasons = family(r.AddGauge("ringpilot_gpu_clock_event_reason_active", "Reasons."));
  for (const char* reason :
       {"gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
        "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
        "display_clock_setting"}) {
    series(reasons.Add({{"reason", reason}})).Set(0);
  }
  auto& nvlink = family(r.AddCounter("ringpilot_gpu_nvlink_bytes_total", "NVLink."));
  auto& pcie = family(r.AddGauge("ringpilot_gpu_pcie_bytes_per_second", "PCIe."));
  for (const char* direction : {"tx", "rx"}) {
    series(nvlink.Add({{"direction", direction}})).Increment(1.234e12);
    series(pcie.Add({{"direction", direction}})).Set(8192000);
  }
  series(family(r.AddCounter("ringpilot_gpu_xid_errors_total", "XID.")).Add({})).Increment(0);
  auto& ecc = family(r.AddCounter("ringpilot_gpu_ecc_errors_total", "ECC."));
  for (const char* type : {"corrected", "uncorrected"}) series(ecc.Add({{"type", type}}));
  auto& limited = family(r.AddCounter("ringpilot_gpu_clock_limited_seconds_total", "Limited."));
  for (const char* cause : {"power", "thermal"}) series(limited.Add({{"cause", cause}}));
  auto& nccl = family(r.AddGauge("ringpilot_nccl_transport_info", "Transports."));
  for (int peer = 0; peer < 8; ++peer) {
    if (peer != 3) series(nccl.Add({{"peer", std::to_string(peer)}, {"transport", "P2P"}})).Set(1);
  }
  for (int i = 0; i < pad_families; ++i) {
    auto& pad = family(r.AddGauge("ringpilot_bench_pad_" + std::to_string(i), "Padding."));
    for (const char* op : ops) series(pad.Add({{"op", op}})).Set(i * 0.5);
  }
}

// What a scrape does: prometheus::Registry::Collect, then prometheus::TextSerializer.
std::string Serialize(const RankMetrics& rm) { return rm.metrics.Serialize(); }

// --- timing -------------------------------------------------------------------------------------

// Values spread over the buckets, as step and collective times are.
std::vector<double> Observations() {
  std::vector<double> v(4096);
  std::uint64_t x = 88172645463325252ull;
  for (double& d : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    d = 1e-5 * static_cast<double>(1u << (x % 22)) * (1.0 + static_cast<double>(x % 1000) / 1000);
  }
  return v;
}

// Median over `rounds` timed runs of fn(iterations), in ns per iteration.
template <class Fn>
double NsPerOp(long iterations, Fn&& fn, int rounds = 5) {
  fn(iterations / 10);  // warm-up
  std::vector<double> ns;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = Clock::now();
    fn(iterations);
    ns.push_back(Seconds(t0, Clock::now()) * 1e9 / static_cast<double>(iterations));
  }
  return Median(ns);
}

struct HotPath {
  double counter_inc, gauge_set, histogram_observe, step_mix;
};

// `step_mix`: what one training step does through TrainingMetrics (OnStep: 1 observe + 2
// increments; 5 OnPhase observes; SetLoss; 8 OnCollective: observe + increment), per step.
HotPath MeasureHotPath(RankMetrics& rm, long iterations) {
  const std::vector<double> obs = Observations();
  const std::size_t mask = obs.size() - 1;
  HotPath h{};
  h.counter_inc = NsPerOp(iterations, [&](long n) {
    for (long i = 0; i < n; ++i) rm.samples->Increment(32);
  });
  h.gauge_set = NsPerOp(iterations, [&](long n) {
    for (long i = 0; i < n; ++i) rm.loss->Set(obs[static_cast<std::size_t>(i) & mask]);
  });
  h.histogram_observe = NsPerOp(iterations, [&](long n) {
    for (long i = 0; i < n; ++i)
      rm.collective_seconds->Observe(obs[static_cast<std::size_t>(i) & mask]);
  });
  h.step_mix = NsPerOp(iterations / 16, [&](long n) {
    for (long i = 0; i < n; ++i) {
      const double v = obs[static_cast<std::size_t>(i) & mask];
      rm.step_seconds->Observe(v);
      rm.samples->Increment(32);
      rm.steps->Increment();
      for (int p = 0; p < 5; ++p) rm.phase_seconds->Observe(v);
      rm.loss->Set(v);
      for (int c = 0; c < 8; ++c) {
        rm.collective_seconds->Observe(v);
        rm.collective_bytes->Increment(4194304);
      }
    }
  });
  return h;
}

struct ScrapeCost {
  double us_median = 0, us_min = 0;
  std::size_t bytes = 0, lines = 0;
};

ScrapeCost MeasureScrape(const RankMetrics& rm, int scrapes) {
  ScrapeCost c;
  const std::string sample = Serialize(rm);
  c.bytes = sample.size();
  c.lines = static_cast<std::size_t>(std::count(sample.begin(), sample.end(), '\n'));
  for (int i = 0; i < scrapes / 10; ++i) Serialize(rm);  // warm-up
  std::vector<double> us;
  for (int i = 0; i < scrapes; ++i) {
    const auto a = Clock::now();
    const std::string text = Serialize(rm);
    us.push_back(Seconds(a, Clock::now()) * 1e6);
    if (text.size() < c.bytes / 2) std::abort();  // keep the work observable
  }
  c.us_median = Median(us);
  c.us_min = *std::min_element(us.begin(), us.end());
  return c;
}

// Median microseconds of prometheus::Registry::Collect, the copy a scrape serializes.
double MeasureCollect(const RankMetrics& rm, int scrapes) {
  std::vector<double> us;
  for (int i = 0; i < scrapes; ++i) {
    const auto a = Clock::now();
    const auto families = rm.metrics.registry()->Collect();
    us.push_back(Seconds(a, Clock::now()) * 1e6);
    if (families.empty()) std::abort();
  }
  return Median(us);
}

// One `GET /metrics` on loopback; returns the body size, 0 on failure.
std::size_t HttpGet(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return 0;
  }
  const std::string request =
      "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return 0;
  }
  std::string raw;
  char buffer[65536];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof buffer, 0)) > 0) raw.append(buffer, static_cast<size_t>(n));
  close(fd);
  if (raw.rfind("HTTP/1.1 200", 0) != 0) return 0;
  const auto body = raw.find("\r\n\r\n");
  return body == std::string::npos ? 0 : raw.size() - body - 4;
}

// Median microseconds of one scrape through the exporter.
double MeasureHttp(const RankMetrics& rm, int requests) {
  m::ExporterOptions o;
  o.port = 0;
  m::Exporter exporter(rm.metrics.registry(), o);
  for (int i = 0; i < requests / 10 + 1; ++i) HttpGet(exporter.port());
  std::vector<double> us;
  for (int i = 0; i < requests; ++i) {
    const auto a = Clock::now();
    if (HttpGet(exporter.port()) == 0) {
      std::fprintf(stderr, "HTTP scrape failed\n");
      std::exit(1);
    }
    us.push_back(Seconds(a, Clock::now()) * 1e6);
  }
  return Median(us);
}

// The first three fields of /proc/loadavg: how busy the host was around the run.
std::string LoadAverage() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return "?";
  double a = 0, b = 0, c = 0;
  const int n = std::fscanf(f, "%lf %lf %lf", &a, &b, &c);
  std::fclose(f);
  if (n != 3) return "?";
  char text[64];
  std::snprintf(text, sizeof text, "%.2f %.2f %.2f", a, b, c);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  long iterations = 20'000'000;
  int scrapes = 2000;
  int pad = 25;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--iterations") {
      iterations = std::atol(argv[i + 1]);
    } else if (flag == "--scrapes") {
      scrapes = std::atoi(argv[i + 1]);
    } else if (flag == "--pad-families") {
      pad = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s [--iterations N] [--scrapes N] [--pad-families N]\n",
                   argv[0]);
      return 2;
    }
  }

  RankMetrics trainer;
  BuildRankMetrics(trainer, 0);
  RankMetrics padded;
  BuildRankMetrics(padded, pad);

  std::printf("backend: prometheus-cpp 1.0.1 (metrics::Families, prometheus::Exposer)\n");
  std::printf("iterations %ld (median of 5 rounds), scrapes %d, loadavg %s\n\n", iterations,
              scrapes, LoadAverage().c_str());
  const HotPath alone = MeasureHotPath(trainer, iterations);
  std::atomic<bool> stop{false};
  std::atomic<long> background_scrapes{0};
  std::thread scraper([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      Serialize(trainer);
      background_scrapes.fetch_add(1, std::memory_order_relaxed);
    }
  });
  const HotPath contended = MeasureHotPath(trainer, iterations);
  stop = true;
  scraper.join();
  std::printf("hot path (ns/op)        alone  while scraping nonstop (%ld scrapes)\n",
              background_scrapes.load());
  std::printf("counter increment     %7.2f  %7.2f\n", alone.counter_inc, contended.counter_inc);
  std::printf("gauge set             %7.2f  %7.2f\n", alone.gauge_set, contended.gauge_set);
  std::printf("histogram observe     %7.2f  %7.2f\n", alone.histogram_observe,
              contended.histogram_observe);
  std::printf("one step's updates    %7.2f  %7.2f   (1+5+8 observes, 2+8 increments, 1 set)\n\n",
              alone.step_mix, contended.step_mix);

  for (const RankMetrics* rm : {&trainer, &padded}) {
    const ScrapeCost c = MeasureScrape(*rm, scrapes);
    std::printf("scrape: %zu families, %zu series, %zu lines, %zu bytes\n", rm->families,
                rm->series, c.lines, c.bytes);
    std::printf("  serialize           median %8.1f us   min %8.1f us\n", c.us_median, c.us_min);
    std::printf("    of which Collect  median %8.1f us   (prometheus::Registry::Collect alone)\n",
                MeasureCollect(*rm, scrapes));
    std::printf("  HTTP GET /metrics   median %8.1f us   (loopback, new connection each)\n",
                MeasureHttp(*rm, scrapes / 4));
  }
  std::printf("\nloadavg at the end %s\n", LoadAverage().c_str());
  return 0;
}
