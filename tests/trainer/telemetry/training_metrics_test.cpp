// TrainingMetrics as Prometheus scrapes it: every series a rank can have, created by driving
// every update a long job makes, served over HTTP and counted (docs/metrics.md states the
// counts; the budget is 300 series per rank); the labels (no `job`, dcgm-exporter's GPU
// names); counters that continue in the next process of the job.
#include "trainer/telemetry/training_metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "base/files.h"
#include "metrics/gpu_sampler.h"
#include "tests/test_util.h"

namespace ringpilot::trainer::telemetry {
namespace {

constexpr int kSeriesBudget = 300;

// testing::TempDir removes with std::filesystem, which LibTorch shadows: POSIX here.
class TempDir {
 public:
  TempDir() {
    std::string pattern = "/tmp/ringpilot-test-XXXXXX";
    path_ = ::mkdtemp(pattern.data()) ? pattern : "";
  }
  ~TempDir() { base::RemoveTree(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// GET /metrics from 127.0.0.1:port; the body ("" on failure).
std::string Scrape(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string raw;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) > 0) {
      char buffer[8192];
      ssize_t n;
      while ((n = recv(fd, buffer, sizeof buffer, 0)) > 0) raw.append(buffer, n);
    }
  }
  close(fd);
  const auto body = raw.find("\r\n\r\n");
  return raw.rfind("HTTP/1.1 200", 0) == 0 && body != std::string::npos ? raw.substr(body + 4) : "";
}

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

std::vector<Sample> Parse(const std::string& text) {
  static const std::regex line(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$)");
  static const std::regex label(R"re(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)")re");
  std::vector<Sample> out;
  for (const std::string& l : testing::SplitLines(text)) {
    std::smatch m;
    if (l.empty() || l[0] == '#' || !std::regex_match(l, m, line)) continue;
    Sample s;
    s.name = m[1];
    const std::string labels = m[3];
    for (auto it = std::sregex_iterator(labels.begin(), labels.end(), label);
         it != std::sregex_iterator(); ++it) {
      s.labels[(*it)[1]] = (*it)[2];
    }
    s.value = std::stod(m[4]);
    out.push_back(std::move(s));
  }
  return out;
}

double Value(const std::vector<Sample>& samples, const std::string& name,
             const std::map<std::string, std::string>& want = {}) {
  for (const Sample& s : samples) {
    if (s.name != name) continue;
    bool match = true;
    for (const auto& [k, v] : want) match = match && s.labels.count(k) && s.labels.at(k) == v;
    if (match) return s.value;
  }
  return -1;
}

RankIdentity Rank3() {
  RankIdentity id;
  id.job = "llm";
  id.node = "node-a";
  id.rank = 3;
  id.local_rank = 1;
  id.world_size = 64;
  return id;
}

// Everything a rank of a 64-rank job does in a long run, so every series it can have
// exists: all ops, phases, evaluations, checkpoints, image input, a straggler exchange
// that blames every other rank.
void DriveEverything(TrainingMetrics& m, int world) {
  m.EnableImageInput();
  m.SetBuildInfo({{"torch", "2.11.0"}, {"cuda", "none"}});
  m.SetExpectedBusBandwidth(1e11);
  m.SetStepsTarget(1000);
  for (int step = 0; step < 20; ++step) {
    m.OnStep(0.05, 32, step + 1);
    m.SetLoss(2.5 - step * 0.01);
    m.SetLearningRate(0.1);
    m.SetGradNorm(1.5);
    for (int op = 0; op < comm::kTrainingCollectiveOps; ++op) {
      m.OnCollective(static_cast<comm::CollectiveOp>(op), 25 << 20, 0.004, std::nan(""));
      m.OnCollective(static_cast<comm::CollectiveOp>(op), 1024, 0.0001, std::nan(""));
    }
    for (int p = 0; p < kNumPhases; ++p) m.OnPhase(static_cast<Phase>(p), 0.01);
    StragglerStep s;
    s.culprit = step % world;
    for (int r = 0; r < world; ++r) s.blame.emplace_back(r, 0.001);
    m.OnStraggler(s);
    m.OnImageInput(32, 1, 2);
  }
  m.SetEval(0.7, 0.9, 1.2, 10000);
  m.SetMlmEval(0.4, 2.0, 10000);
  m.OnCheckpoint(3.5);
  m.SetOverlapRatio(0.8);
}

std::vector<Sample> ServeAndScrape(TrainingMetrics& m) {
  metrics::ExporterOptions o;
  o.port = 0;
  m.Serve(o);
  const std::string text = Scrape(m.exporter()->port());
  EXPECT_FALSE(text.empty());
  return Parse(text);
}

TEST(TrainingMetrics, CpuRankStaysWithinTheSeriesBudget) {
  TempDir dir;
  TrainingMetrics m(Rank3(), dir.path() + "/rank-3.counters.json", 0);
  DriveEverything(m, 64);
  const std::vector<Sample> samples = ServeAndScrape(m);
  std::set<std::string> culprits;
  for (const Sample& s : samples) {
    if (s.name == "ringpilot_straggler_wait_seconds_total")
      culprits.insert(s.labels.at("culprit_rank"));
  }
  // 63 ranks were blamed: 8 of them have their own series, the rest share "other".
  EXPECT_EQ(culprits.size(), static_cast<size_t>(TrainingMetrics::kMaxCulpritSeries) + 1);
  EXPECT_TRUE(culprits.count("other"));
  EXPECT_LE(samples.size(), static_cast<size_t>(kSeriesBudget));
  std::printf("CPU rank: %zu series per scrape\n", samples.size());
  ::testing::Test::RecordProperty("cpu_series", static_cast<int>(samples.size()));
}

TEST(TrainingMetrics, GpuRankStaysWithinTheSeriesBudget) {
  RankIdentity id = Rank3();
  id.gpu = {"GPU-fake-1", "00000000:2A:00.0", "1"};
  TrainingMetrics m(id, "", 0);
  DriveEverything(m, 64);
  // The GPU sampler's series (fake NVML with every reading) and NCCL transports to the
  // ring and tree neighbours, as a rank of 8 GPUs per node has them.
  metrics::GpuSamplerOptions o;
  o.nvml_library = RINGPILOT_FAKE_NVML;
  o.pci_bus_id = "0000:2a:00.0";
  o.period_seconds = 0;
  metrics::GpuSampler sampler(m.mutable_families(), o);
  ASSERT_TRUE(sampler.active()) << sampler.warning();
  sampler.SampleOnce();
  auto& transports = m.mutable_families().AddGauge("ringpilot_nccl_transport_info", "T.");
  for (const char* peer : {"2", "4", "11", "19"}) {
    transports.Add({{"peer", peer}, {"transport", "P2P"}}).Set(1);
    transports.Add({{"peer", peer}, {"transport", "NET_IB"}}).Set(1);
  }
  const std::vector<Sample> samples = ServeAndScrape(m);
  // dcgm-exporter's GPU labels on every series of the rank.
  for (const Sample& s : samples) {
    if (s.name.rfind("ringpilot_", 0) != 0) continue;
    EXPECT_EQ(s.labels.count("UUID") ? s.labels.at("UUID") : "", "GPU-fake-1") << s.name;
    EXPECT_EQ(s.labels.count("gpu") ? s.labels.at("gpu") : "", "1") << s.name;
  }
  EXPECT_GT(Value(samples, "ringpilot_gpu_power_watts"), 0);
  EXPECT_LE(samples.size(), static_cast<size_t>(kSeriesBudget));
  std::printf("GPU rank: %zu series per scrape\n", samples.size());
  ::testing::Test::RecordProperty("gpu_series", static_cast<int>(samples.size()));
}

TEST(TrainingMetrics, LabelsFollowPrometheusAndDcgmConventions) {
  TrainingMetrics m(Rank3(), "", 0);
  DriveEverything(m, 4);
  const std::vector<Sample> samples = ServeAndScrape(m);
  for (const Sample& s : samples) {
    EXPECT_FALSE(s.labels.count("job")) << s.name << ": Prometheus owns `job`";
    if (s.name.rfind("exposer_", 0) == 0) continue;  // prometheus-cpp's own
    EXPECT_EQ(s.labels.at("Hostname"), "node-a") << s.name;
    EXPECT_EQ(s.labels.at("rank"), "3") << s.name;
    EXPECT_EQ(s.labels.at("local_rank"), "1") << s.name;
    EXPECT_FALSE(s.labels.count("UUID")) << s.name << ": a CPU rank has no GPU labels";
  }
  EXPECT_EQ(Value(samples, "ringpilot_job_info", {{"name", "llm"}, {"world_size", "64"}}), 1.0);
  // Progress, this rank's loss, and the process as every client library reports it.
  EXPECT_EQ(Value(samples, "ringpilot_step"), 20.0);
  EXPECT_EQ(Value(samples, "ringpilot_steps_target"), 1000.0);
  EXPECT_NEAR(Value(samples, "ringpilot_loss"), 2.31, 1e-9);
  EXPECT_GT(Value(samples, "process_resident_memory_bytes"), 1e6);
  EXPECT_GT(Value(samples, "process_start_time_seconds"), 1.7e9);
  EXPECT_GT(Value(samples, "process_open_fds"), 2);
  EXPECT_GT(Value(samples, "process_max_fds"), 2);
  EXPECT_GE(Value(samples, "process_cpu_seconds_total"), 0);
  // Buckets in the range steps and collectives take: a 50 ms step lands between bounds
  // 1.25 apart, not in a power-of-2 bucket.
  EXPECT_EQ(Value(samples, "ringpilot_step_seconds_bucket", {{"le", "0.04"}}), 0.0);
  EXPECT_EQ(Value(samples, "ringpilot_step_seconds_bucket", {{"le", "0.05"}}), 20.0);
  EXPECT_EQ(
      Value(samples, "ringpilot_collective_seconds_bucket", {{"op", "allreduce"}, {"le", "0.005"}}),
      40.0);
  EXPECT_EQ(Value(samples, "ringpilot_collective_bytes_total", {{"op", "barrier"}}), -1)
      << "a barrier moves no bytes";
  EXPECT_EQ(Value(samples, "ringpilot_checkpoint_seconds_count"), 1.0);
}

TEST(TrainingMetrics, CountersContinueInTheJobsNextProcess) {
  TempDir dir;
  const std::string journal = dir.path() + "/rank-3.counters.json";
  {
    TrainingMetrics first(Rank3(), journal, 0);
    DriveEverything(first, 4);
    // A scrape writes what it serves: the process may die right after it.
    const std::vector<Sample> served = ServeAndScrape(first);
    EXPECT_EQ(Value(served, "ringpilot_steps_total"), 20.0);
    EXPECT_EQ(Value(served, "ringpilot_restarts_total"), 0.0);
    first.OnStep(0.05, 32, 21);  // after the last scrape: lost with the process
  }
  RankIdentity moved = Rank3();
  moved.node = "node-b";  // restarted on another host: the same rank's counters
  TrainingMetrics second(moved, journal, /*restart=*/1);
  second.EnableImageInput();
  second.OnStep(0.05, 32, 1);
  const std::vector<Sample> samples = ServeAndScrape(second);
  EXPECT_EQ(Value(samples, "ringpilot_steps_total"), 21.0);
  EXPECT_EQ(Value(samples, "ringpilot_samples_total"), 21.0 * 32);
  EXPECT_EQ(Value(samples, "ringpilot_restarts_total"), 1.0);
  EXPECT_EQ(Value(samples, "ringpilot_collective_bytes_total", {{"op", "allreduce"}}),
            20.0 * ((25 << 20) + 1024));
  EXPECT_NEAR(Value(samples, "ringpilot_straggler_wait_seconds_total", {{"culprit_rank", "2"}}),
              0.02, 1e-12);
  EXPECT_EQ(Value(samples, "ringpilot_data_images_decoded_total"), 20.0 * 32);
  // Gauges and histograms are the process's own.
  EXPECT_EQ(Value(samples, "ringpilot_step"), 1.0);
  EXPECT_EQ(Value(samples, "ringpilot_step_seconds_count"), 1.0);
  // SaveCounters (the end of a run) writes values no scrape served yet.
  second.OnStep(0.05, 32, 2);
  second.SaveCounters();
  TrainingMetrics third(Rank3(), journal, 0);
  metrics::ExporterOptions o;
  third.Serve(o);
  EXPECT_EQ(Value(Parse(Scrape(third.exporter()->port())), "ringpilot_steps_total"), 22.0);
}

// No false zeros: a series appears when its value means something (docs/metrics.md).
TEST(TrainingMetrics, SeriesAppearWhenTheyMeanSomething) {
  TrainingMetrics m(Rank3(), "", 0);
  metrics::ExporterOptions o;
  m.Serve(o);
  m.SetExpectedBusBandwidth(0);  // no topology model
  m.OnStep(0.05, 32, 1);
  m.SetLoss(2.5);
  m.OnImageInput(32, 0, 2);  // not an image job: no data series
  std::vector<Sample> samples = Parse(Scrape(m.exporter()->port()));
  const auto absent = [&](const std::string& name) {
    for (const Sample& s : samples) {
      if (s.name == name) return false;
    }
    return true;
  };
  for (const char* name :
       {"ringpilot_eval_top1_ratio", "ringpilot_eval_top5_ratio",
        "ringpilot_eval_mlm_accuracy_ratio", "ringpilot_eval_loss", "ringpilot_eval_samples",
        "ringpilot_grad_norm", "ringpilot_expected_bus_bandwidth_bytes_per_second",
        "ringpilot_collective_bus_bandwidth_bytes_per_second",
        "ringpilot_data_images_decoded_total", "ringpilot_data_prefetch_batches"}) {
    EXPECT_TRUE(absent(name)) << name << " exists before it means anything";
  }
  // Histograms and counters are there from the start, at 0 (Prometheus's convention:
  // rate() and histogram_quantile() see the series before the first event).
  EXPECT_EQ(Value(samples, "ringpilot_checkpoint_seconds_count"), 0.0);
  EXPECT_EQ(Value(samples, "ringpilot_collective_seconds_count", {{"op", "allgather"}}), 0.0);
  EXPECT_EQ(Value(samples, "ringpilot_restarts_total"), 0.0);

  // An image model's evaluation: top-1/top-5, never MLM accuracy; the norm once clipped.
  m.SetEval(0.7, 0.9, 1.2, 100);
  m.SetGradNorm(1.5);
  samples = Parse(Scrape(m.exporter()->port()));
  EXPECT_EQ(Value(samples, "ringpilot_eval_top1_ratio"), 0.7);
  EXPECT_EQ(Value(samples, "ringpilot_eval_samples"), 100.0);
  EXPECT_EQ(Value(samples, "ringpilot_grad_norm"), 1.5);
  EXPECT_TRUE(absent("ringpilot_eval_mlm_accuracy_ratio"));

  // BERT's: MLM accuracy, never top-1/top-5.
  TrainingMetrics bert(Rank3(), "", 0);
  bert.Serve(o);
  bert.SetMlmEval(0.4, 2.0, 50);
  samples = Parse(Scrape(bert.exporter()->port()));
  EXPECT_EQ(Value(samples, "ringpilot_eval_mlm_accuracy_ratio"), 0.4);
  EXPECT_TRUE(absent("ringpilot_eval_top1_ratio"));
  EXPECT_TRUE(absent("ringpilot_eval_top5_ratio"));

  // An image job's data series start at 0 with the job.
  TrainingMetrics images(Rank3(), "", 0);
  images.Serve(o);
  images.EnableImageInput();
  samples = Parse(Scrape(images.exporter()->port()));
  EXPECT_EQ(Value(samples, "ringpilot_data_images_decoded_total"), 0.0);
  EXPECT_EQ(Value(samples, "ringpilot_data_bad_samples_total"), 0.0);
  EXPECT_EQ(Value(samples, "ringpilot_data_prefetch_batches"), -1) << "no batch taken yet";
  images.OnImageInput(32, 1, 2);
  samples = Parse(Scrape(images.exporter()->port()));
  EXPECT_EQ(Value(samples, "ringpilot_data_images_decoded_total"), 32.0);
  EXPECT_EQ(Value(samples, "ringpilot_data_prefetch_batches"), 2.0);
}

TEST(TrainingMetrics, ATornJournalStartsTheCountersAtZero) {
  TempDir dir;
  const std::string journal = dir.path() + "/rank-3.counters.json";
  testing::WriteFile(journal, "{\"ringpilot_steps_total\": [{\"labels\": {}, \"val");
  TrainingMetrics m(Rank3(), journal, 0);
  EXPECT_EQ(Value(ServeAndScrape(m), "ringpilot_steps_total"), 0.0);
}

}  // namespace
}  // namespace ringpilot::trainer::telemetry
