// Suite names start with "metrics_" so that `ctest -R metrics` selects them.
// metrics::Families on prometheus-cpp: constant labels on every series, the exposition as
// prometheus::TextSerializer writes it (and promtool accepts), setup errors that name the
// metric, bucket layouts, and a hot path that never allocates.
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/subprocess.h"
#include "metrics/families.h"

// Counts heap allocations in this binary, to check the hot path never allocates.
static std::atomic<long> g_allocations{0};
// noinline (both): inlined, GCC 12 pairs the malloc with a sized delete in prometheus-cpp's
// make_unique and flags it (-Wmismatched-new-delete) without seeing they belong together.
__attribute__((noinline)) void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
__attribute__((noinline)) void operator delete(void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace ringpilot::metrics {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <class Fn>
std::string ErrorOf(Fn&& fn) {
  try {
    fn();
  } catch (const MetricsError& e) {
    return e.what();
  }
  return "<no MetricsError thrown>";
}

TEST(metrics_Families, ConstantLabelsFirstThenOwnEachSortedByName) {
  Families families({{"job", "train"}, {"rank", "3"}, {"node", "n1"}});
  auto& samples = families.AddCounter("ringpilot_samples_total", "Samples processed.");
  samples.Add({{"zeta", "z"}, {"alpha", "a"}}).Increment(32);
  EXPECT_EQ(families.Serialize(),
            "# HELP ringpilot_samples_total Samples processed.\n"
            "# TYPE ringpilot_samples_total counter\n"
            "ringpilot_samples_total{job=\"train\",node=\"n1\",rank=\"3\",alpha=\"a\",zeta=\"z\"} "
            "32\n");
}

TEST(metrics_Families, GaugeWithoutLabels) {
  Families families;
  families.AddGauge("ringpilot_loss", "Last loss.").Add({}).Set(0.25);
  EXPECT_EQ(families.Serialize(),
            "# HELP ringpilot_loss Last loss.\n"
            "# TYPE ringpilot_loss gauge\n"
            "ringpilot_loss 0.25\n");
}

// prometheus-cpp 1.0.1 writes _count and _sum before the buckets.
TEST(metrics_Families, HistogramExposition) {
  Families families({{"rank", "0"}});
  Histogram& h = families.AddHistogram("ringpilot_step_seconds", "Step time.")
                     .Add({}, Histogram::BucketBoundaries{0.1, 1});
  h.Observe(0.05);
  h.Observe(0.5);
  h.Observe(2);
  EXPECT_EQ(families.Serialize(),
            "# HELP ringpilot_step_seconds Step time.\n"
            "# TYPE ringpilot_step_seconds histogram\n"
            "ringpilot_step_seconds_count{rank=\"0\"} 3\n"
            "ringpilot_step_seconds_sum{rank=\"0\"} 2.55\n"
            "ringpilot_step_seconds_bucket{rank=\"0\",le=\"0.1\"} 1\n"
            "ringpilot_step_seconds_bucket{rank=\"0\",le=\"1\"} 2\n"
            "ringpilot_step_seconds_bucket{rank=\"0\",le=\"+Inf\"} 3\n");
}

TEST(metrics_Families, EscapesLabelValues) {
  Families families({{"node", "a\\b"}});
  families.AddGauge("g", "help with \"quotes\"").Add({{"path", "say \"hi\"\nnext"}}).Set(1);
  EXPECT_EQ(families.Serialize(),
            "# HELP g help with \"quotes\"\n"
            "# TYPE g gauge\n"
            "g{node=\"a\\\\b\",path=\"say \\\"hi\\\"\\nnext\"} 1\n");
}

TEST(metrics_Families, SpecialValuesAndPrecision) {
  Families families;
  auto& family = families.AddGauge("g", "special");
  family.Add({{"v", "pinf"}}).Set(kInf);
  family.Add({{"v", "ninf"}}).Set(-kInf);
  family.Add({{"v", "nan"}}).Set(kNaN);
  family.Add({{"v", "tiny"}}).Set(1e-300);
  family.Add({{"v", "time"}}).Set(1764000000.125);
  const std::string out = families.Serialize();
  EXPECT_NE(out.find("g{v=\"pinf\"} +Inf\n"), std::string::npos) << out;
  EXPECT_NE(out.find("g{v=\"ninf\"} -Inf\n"), std::string::npos) << out;
  EXPECT_NE(out.find("g{v=\"nan\"} Nan\n"), std::string::npos) << out;  // Go's ParseFloat reads it
  EXPECT_NE(out.find("g{v=\"tiny\"} 1e-300\n"), std::string::npos) << out;
  EXPECT_NE(out.find("g{v=\"time\"} 1764000000.125\n"), std::string::npos) << out;
}

TEST(metrics_Families, EmptyHelpOmitsHelpLineAndEmptyFamilyIsSkipped) {
  Families families;
  families.AddCounter("unused_total", "never gets a series");
  families.AddCounter("c_total", "").Add({}).Increment();
  EXPECT_EQ(families.Serialize(), "# TYPE c_total counter\nc_total 1\n");
}

TEST(metrics_Families, SameLabelsSameObjectAndReferencesStayValid) {
  Families families;
  auto& family = families.AddCounter("ops_total", "ops");
  Counter& first = family.Add({{"op", "allreduce"}});
  for (int i = 0; i < 1000; ++i) family.Add({{"op", "op" + std::to_string(i)}});
  EXPECT_EQ(&family.Add({{"op", "allreduce"}}), &first);
  EXPECT_NE(&family.Add({{"op", "broadcast"}}), &first);
  first.Increment(5);
  EXPECT_EQ(family.Add({{"op", "allreduce"}}).Value(), 5.0);
}

TEST(metrics_Families, DuplicateRegistration) {
  Families families({{"rank", "0"}});
  auto& a = families.AddCounter("x_total", "first help");
  EXPECT_EQ(&families.AddCounter("x_total", "other help"), &a);
  const std::string type = ErrorOf([&] { families.AddGauge("x_total", "g"); });
  EXPECT_EQ(type.rfind("metrics: x_total: ", 0), 0u) << type;
  EXPECT_NE(type.find("different type"), std::string::npos) << type;
  auto& h = families.AddHistogram("h_seconds", "h");
  EXPECT_EQ(&families.AddHistogram("h_seconds", "h"), &h);
  EXPECT_THROW(families.AddCounter("h_seconds", "h"), MetricsError);
}

TEST(metrics_Families, InvalidNamesHelpAndConstantLabelsRejected) {
  Families families;
  for (const char* name : {"", "1abc", "a-b", "a b", "a.b", "__reserved"}) {
    const std::string error = ErrorOf([&] { families.AddCounter(name, "x"); });
    EXPECT_NE(error.find("invalid metric name '" + std::string(name) + "'"), std::string::npos)
        << error;
  }
  families.AddCounter("ok:name_1_total", "colons are allowed in metric names");
  families.AddGauge("_leading_underscore", "x");
  // prometheus-cpp 1.0.1 writes HELP unescaped, so such help text is refused at setup.
  EXPECT_NE(ErrorOf([&] { families.AddGauge("g", "two\nlines"); }).find("metrics: g: help"),
            std::string::npos);
  EXPECT_THROW(families.AddGauge("g", "back\\slash"), MetricsError);
  EXPECT_THROW(Families({{"__x", "1"}}), MetricsError);
  EXPECT_THROW(Families({{"le", "1"}}), MetricsError);
  EXPECT_THROW(Families({{"a-b", "1"}}), MetricsError);
}

TEST(metrics_Families, InvalidSeriesLabelsAndBucketsRejectedByPrometheusCpp) {
  Families families({{"rank", "0"}});
  auto& gauge = families.AddGauge("g", "g");
  EXPECT_THROW(gauge.Add({{"__name", "x"}}), std::invalid_argument);
  EXPECT_THROW(gauge.Add({{"1a", "x"}}), std::invalid_argument);
  EXPECT_THROW(gauge.Add({{"rank", "1"}}), std::invalid_argument);  // a constant label
  EXPECT_THROW(families.AddHistogram("h", "h").Add({}, Histogram::BucketBoundaries{2.0, 1.0}),
               std::invalid_argument);
  EXPECT_EQ(families.Serialize(), "");
}

TEST(metrics_Buckets, Exponential) {
  EXPECT_EQ(ExponentialBuckets(1.0, 2.0, 4), (std::vector<double>{1, 2, 4, 8}));
  EXPECT_EQ(ExponentialBuckets(0.001, 10.0, 1), (std::vector<double>{0.001}));
  EXPECT_THROW(ExponentialBuckets(0.0, 2.0, 3), MetricsError);
  EXPECT_THROW(ExponentialBuckets(1.0, 1.0, 3), MetricsError);
  EXPECT_THROW(ExponentialBuckets(1.0, 2.0, 0), MetricsError);
  EXPECT_THROW(ExponentialBuckets(1e300, 1e10, 3), MetricsError);
}

TEST(metrics_Buckets, Linear) {
  const std::vector<double> b = LinearBuckets(0.1, 0.1, 3);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_DOUBLE_EQ(b[0], 0.1);
  EXPECT_DOUBLE_EQ(b[1], 0.2);
  EXPECT_DOUBLE_EQ(b[2], 0.3);
  EXPECT_EQ(LinearBuckets(-1.0, 1.0, 3), (std::vector<double>{-1, 0, 1}));
  EXPECT_THROW(LinearBuckets(0.0, 0.0, 3), MetricsError);
  EXPECT_THROW(LinearBuckets(0.0, 1.0, 0), MetricsError);
  EXPECT_THROW(LinearBuckets(kNaN, 1.0, 2), MetricsError);
}

TEST(metrics_HotPath, UpdatesDoNotAllocate) {
  Families families({{"rank", "0"}});
  Counter& counter = families.AddCounter("c_total", "c").Add({{"op", "allreduce"}});
  Gauge& gauge = families.AddGauge("g", "g").Add({});
  Histogram& histogram = families.AddHistogram("h", "h").Add({}, ExponentialBuckets(1e-4, 2, 20));
  const long at_setup = g_allocations.load();
  families.AddGauge("probe", "probe").Add({});
  ASSERT_GT(g_allocations.load(), at_setup) << "the allocation counter does not count";
  const long before = g_allocations.load();
  for (int i = 0; i < 1000; ++i) {
    counter.Increment(i);
    gauge.Set(i);
    gauge.Increment(-0.5);
    histogram.Observe(i * 1e-3);
  }
  EXPECT_EQ(g_allocations.load(), before);
  EXPECT_EQ(histogram.Collect().histogram.sample_count, 1000u);
}

TEST(metrics_Concurrency, UpdatesFromFourThreadsSumExactlyWhileScraped) {
  Families families;
  Counter& counter = families.AddCounter("n_total", "n").Add({});
  Histogram& histogram =
      families.AddHistogram("v", "v").Add({}, Histogram::BucketBoundaries{10, 100});
  constexpr int kThreads = 4;
  constexpr int kPerThread = 200000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        counter.Increment();
        histogram.Observe(static_cast<double>((i + t) % 200));
      }
    });
  }
  // Scrapes run concurrently with the updates and see monotonic counts.
  std::uint64_t last_count = 0;
  for (int scrape = 0; scrape < 50; ++scrape) {
    families.Serialize();
    const std::uint64_t count = histogram.Collect().histogram.sample_count;
    EXPECT_GE(count, last_count);
    last_count = count;
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(counter.Value(), static_cast<double>(kThreads) * kPerThread);
  const prometheus::ClientMetric m = histogram.Collect();
  EXPECT_EQ(m.histogram.sample_count, static_cast<std::uint64_t>(kThreads) * kPerThread);
  // Values 0..199 each seen equally often: 11 of 200 are <= 10, 101 of 200 are <= 100.
  EXPECT_EQ(m.histogram.bucket.at(0).cumulative_count, 11u * kThreads * kPerThread / 200);
  EXPECT_EQ(m.histogram.bucket.at(1).cumulative_count, 101u * kThreads * kPerThread / 200);
  EXPECT_EQ(m.histogram.sample_sum, 99.5 * kThreads * kPerThread);
}

TEST(metrics_Concurrency, AddAndSerializeWhileUpdating) {
  Families families;
  auto& family = families.AddGauge("g", "g");
  std::atomic<bool> stop{false};
  std::thread scraper([&] {
    while (!stop.load()) families.Serialize();
  });
  for (int i = 0; i < 2000; ++i) family.Add({{"i", std::to_string(i)}}).Set(i);
  stop = true;
  scraper.join();
  EXPECT_NE(families.Serialize().find("g{i=\"1999\"} 1999\n"), std::string::npos);
}

// --- promtool ---------------------------------------------------------------

std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, end - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

struct ToolResult {
  int exit_code = -1;
  std::string output;
};

// Runs `promtool check metrics` on `exposition` (promtool reads it from stdin).
ToolResult PromtoolCheck(const std::string& promtool, const std::string& exposition) {
  char path[] = "/tmp/ringpilot_metrics_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return {-1, "mkstemp failed"};
  close(fd);
  std::ofstream(path) << exposition;
  // promtool reads the exposition from stdin: a shell redirects it.
  base::SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "exec \"$0\" check metrics < \"$1\"", promtool, path};
  o.stdout_to = base::ChildOutput::kPipe;
  o.stderr_to = base::ChildOutput::kMerge;
  const base::RunResult run = base::RunToEnd(o);
  ToolResult result;
  result.output = run.output;
  result.exit_code = run.status.term_signal == 0 ? run.status.exit_code : -1;
  std::remove(path);
  return result;
}

class metrics_Promtool : public ::testing::Test {
 protected:
  void SetUp() override {
    promtool_ = FindOnPath("promtool");
    // Not a skip: CI installs promtool, and a silently skipped format check is how
    // broken expositions reach Prometheus.
    ASSERT_FALSE(promtool_.empty())
        << "promtool not found on PATH; install it (Debian: apt-get install prometheus)";
  }
  std::string promtool_;
};

TEST_F(metrics_Promtool, AcceptsEveryMetricTypeEscapingAndSpecialValues) {
  Families families({{"job", "quick\"start"},
                     {"node", "host\\1"},
                     {"rank", "0"},
                     {"local_rank", "0"},
                     {"gpu_uuid", "GPU-0f1e2d3c"},
                     {"pci_bus_id", "00000000:3B:00.0"}});
  families.AddCounter("ringpilot_samples_total", "Samples processed by this rank.")
      .Add({})
      .Increment(1234);
  auto& bytes = families.AddCounter("ringpilot_collective_bytes_total",
                                    "Bytes moved by collectives (\"payload\").");
  bytes.Add({{"op", "allreduce"}}).Increment(1e12);
  bytes.Add({{"op", "broadcast"}}).Increment(0.5);
  bytes.Add({{"op", "weird \"op\"\nwith newline and ünïcode"}}).Increment(kInf);
  auto& loss = families.AddGauge("ringpilot_loss", "Last step's loss.");
  loss.Add({{"v", "nan"}}).Set(kNaN);
  loss.Add({{"v", "pinf"}}).Set(kInf);
  loss.Add({{"v", "ninf"}}).Set(-kInf);
  loss.Add({{"v", "tiny"}}).Set(-4.9e-324);
  // Not the largest double: at 16 digits it rounds up past it (1.797693134862316e+308),
  // which Prometheus cannot parse.
  loss.Add({{"v", "huge"}}).Set(1.7e308);
  loss.Add({{"v", ""}}).Set(0.1);
  Histogram& h = families.AddHistogram("ringpilot_step_seconds", "Wall time of one step.")
                     .Add({}, ExponentialBuckets(0.001, 2, 12));
  for (const double v : {0.0005, 0.01, 0.3, 7.0, 100.0}) h.Observe(v);
  auto& coll = families.AddHistogram("ringpilot_collective_seconds", "Collective time.");
  coll.Add({{"op", "allgather"}}, LinearBuckets(-1, 0.25, 9)).Observe(kNaN);
  coll.Add({{"op", "broadcast"}}, LinearBuckets(-1, 0.25, 9));  // no observations
  families.AddGauge("ringpilot_build_info", "Build information.")
      .Add({{"version", "0.1.0"}, {"torch", "2.3.0"}, {"cuda", "none"}, {"nccl", "none"}})
      .Set(1);

  const std::string exposition = families.Serialize();
  const ToolResult result = PromtoolCheck(promtool_, exposition);
  EXPECT_EQ(result.exit_code, 0) << "promtool output:\n"
                                 << result.output << "\nexposition:\n"
                                 << exposition;
}

// Guards the harness itself: a broken exposition must make the check fail.
TEST_F(metrics_Promtool, RejectsMalformedExposition) {
  const ToolResult bad = PromtoolCheck(promtool_, "bad_metric{le=\"unterminated} 1\n");
  EXPECT_NE(bad.exit_code, 0) << bad.output;
  const ToolResult lint = PromtoolCheck(promtool_, "# HELP c c\n# TYPE c counter\nc 1\n");
  EXPECT_NE(lint.exit_code, 0) << "expected the '_total' lint to fire: " << lint.output;
}

}  // namespace
}  // namespace ringpilot::metrics
