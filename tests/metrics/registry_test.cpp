// Suite names start with "metrics_" so that `ctest -R metrics` selects them.
#include "metrics/registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <string>
#include <thread>
#include <vector>

// Counts heap allocations in this binary, to check the hot path never allocates.
static std::atomic<long> g_allocations{0};
void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
// noinline: inlined into std::allocator, GCC 12 flags free() of an `operator new`
// pointer (-Wmismatched-new-delete) without seeing that this operator new is malloc.
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

TEST(metrics_Counter, IncrementsAndIgnoresNegativeAndNaN) {
  Counter c;
  EXPECT_EQ(c.Value(), 0.0);
  c.Increment();
  c.Increment(2.5);
  c.Increment(0.0);
  c.Increment(-1.0);
  c.Increment(kNaN);
  EXPECT_EQ(c.Value(), 3.5);
  c.Increment(kInf);
  EXPECT_EQ(c.Value(), kInf);
}

TEST(metrics_Gauge, SetAndAdd) {
  Gauge g;
  g.Set(10.0);
  g.Add(-2.5);
  g.Add(1.0);
  EXPECT_EQ(g.Value(), 8.5);
  g.Set(kNaN);
  EXPECT_TRUE(std::isnan(g.Value()));
}

TEST(metrics_Histogram, CumulativeBucketsSumAndCount) {
  Histogram h({1.0, 2.0, 5.0});
  for (const double v : {0.5, 1.0, 1.5, 3.0, 10.0, -4.0}) h.Observe(v);
  EXPECT_EQ(h.BucketCounts(), (std::vector<std::uint64_t>{3, 4, 5, 6}));
  EXPECT_EQ(h.Count(), 6u);
  EXPECT_DOUBLE_EQ(h.Sum(), 12.0);
  EXPECT_EQ(h.Bounds(), (std::vector<double>{1.0, 2.0, 5.0}));
}

TEST(metrics_Histogram, NaNGoesToInfBucketOnly) {
  Histogram h({1.0});
  h.Observe(kNaN);
  EXPECT_EQ(h.BucketCounts(), (std::vector<std::uint64_t>{0, 1}));
  EXPECT_TRUE(std::isnan(h.Sum()));
}

TEST(metrics_Histogram, TrailingInfIsDroppedAndEmptyIsAllowed) {
  Histogram a({1.0, kInf});
  EXPECT_EQ(a.Bounds(), (std::vector<double>{1.0}));
  Histogram b({});
  b.Observe(3.0);
  EXPECT_EQ(b.BucketCounts(), (std::vector<std::uint64_t>{1}));
}

TEST(metrics_Histogram, InvalidBoundsThrow) {
  EXPECT_THROW(Histogram({2.0, 1.0}), MetricsError);
  EXPECT_THROW(Histogram({1.0, 1.0}), MetricsError);
  EXPECT_THROW(Histogram({kNaN}), MetricsError);
  EXPECT_THROW(Histogram({-kInf, 1.0}), MetricsError);
  EXPECT_THROW(Histogram({kInf, 1.0}), MetricsError);
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

TEST(metrics_Registry, CounterExpositionWithConstLabelsInOrder) {
  Registry registry({{"job", "train"}, {"rank", "3"}});
  auto& family = registry.AddCounter("ringpilot_samples_total", "Samples processed.");
  family.Add({{"zeta", "z"}, {"alpha", "a"}}).Increment(32);
  family.Add({{"zeta", "y"}, {"alpha", "b"}}).Increment(1);
  EXPECT_EQ(registry.Serialize(),
            "# HELP ringpilot_samples_total Samples processed.\n"
            "# TYPE ringpilot_samples_total counter\n"
            "ringpilot_samples_total{job=\"train\",rank=\"3\",zeta=\"z\",alpha=\"a\"} 32\n"
            "ringpilot_samples_total{job=\"train\",rank=\"3\",zeta=\"y\",alpha=\"b\"} 1\n");
}

TEST(metrics_Registry, GaugeWithoutLabels) {
  Registry registry;
  registry.AddGauge("ringpilot_loss", "Last loss.").Add().Set(0.25);
  EXPECT_EQ(registry.Serialize(),
            "# HELP ringpilot_loss Last loss.\n"
            "# TYPE ringpilot_loss gauge\n"
            "ringpilot_loss 0.25\n");
}

TEST(metrics_Registry, HistogramExposition) {
  Registry registry({{"rank", "0"}});
  auto& family = registry.AddHistogram("ringpilot_step_seconds", "Step time.", {0.1, 1});
  Histogram& h = family.Add();
  h.Observe(0.05);
  h.Observe(0.5);
  h.Observe(2);
  EXPECT_EQ(registry.Serialize(),
            "# HELP ringpilot_step_seconds Step time.\n"
            "# TYPE ringpilot_step_seconds histogram\n"
            "ringpilot_step_seconds_bucket{rank=\"0\",le=\"0.1\"} 1\n"
            "ringpilot_step_seconds_bucket{rank=\"0\",le=\"1\"} 2\n"
            "ringpilot_step_seconds_bucket{rank=\"0\",le=\"+Inf\"} 3\n"
            "ringpilot_step_seconds_sum{rank=\"0\"} 2.55\n"
            "ringpilot_step_seconds_count{rank=\"0\"} 3\n");
}

TEST(metrics_Registry, HistogramWithoutAnyLabels) {
  Registry registry;
  registry.AddHistogram("h_seconds", "h", {}).Add().Observe(1);
  EXPECT_EQ(registry.Serialize(),
            "# HELP h_seconds h\n# TYPE h_seconds histogram\n"
            "h_seconds_bucket{le=\"+Inf\"} 1\nh_seconds_sum 1\nh_seconds_count 1\n");
}

TEST(metrics_Registry, EscapesLabelValuesAndHelp) {
  Registry registry({{"node", "a\\b"}});
  auto& family = registry.AddGauge("g", "line1\nline2 \\ \"quoted\"");
  family.Add({{"path", "say \"hi\"\nnext"}}).Set(1);
  EXPECT_EQ(registry.Serialize(),
            "# HELP g line1\\nline2 \\\\ \"quoted\"\n"
            "# TYPE g gauge\n"
            "g{node=\"a\\\\b\",path=\"say \\\"hi\\\"\\nnext\"} 1\n");
}

TEST(metrics_Registry, SpecialValues) {
  Registry registry;
  auto& family = registry.AddGauge("g", "special");
  family.Add({{"v", "pinf"}}).Set(kInf);
  family.Add({{"v", "ninf"}}).Set(-kInf);
  family.Add({{"v", "nan"}}).Set(kNaN);
  family.Add({{"v", "tiny"}}).Set(1e-300);
  const std::string out = registry.Serialize();
  EXPECT_NE(out.find("g{v=\"pinf\"} +Inf\n"), std::string::npos) << out;
  EXPECT_NE(out.find("g{v=\"ninf\"} -Inf\n"), std::string::npos) << out;
  EXPECT_NE(out.find("g{v=\"nan\"} NaN\n"), std::string::npos) << out;
  EXPECT_NE(out.find("g{v=\"tiny\"} 1e-300\n"), std::string::npos) << out;
}

TEST(metrics_Registry, EmptyHelpOmitsHelpLineAndEmptyFamilyIsSkipped) {
  Registry registry;
  registry.AddCounter("unused_total", "never gets a series");
  registry.AddCounter("c_total", "").Add().Increment();
  EXPECT_EQ(registry.Serialize(), "# TYPE c_total counter\nc_total 1\n");
}

TEST(metrics_Registry, FamiliesInRegistrationOrder) {
  Registry registry;
  registry.AddGauge("b", "b").Add().Set(1);
  registry.AddGauge("a", "a").Add().Set(2);
  const std::string out = registry.Serialize();
  EXPECT_LT(out.find("# TYPE b"), out.find("# TYPE a"));
}

TEST(metrics_Family, SameLabelsSameObjectAndReferencesStayValid) {
  Registry registry;
  auto& family = registry.AddCounter("ops_total", "ops");
  Counter& first = family.Add({{"op", "allreduce"}});
  for (int i = 0; i < 1000; ++i) family.Add({{"op", "op" + std::to_string(i)}});
  EXPECT_EQ(&family.Add({{"op", "allreduce"}}), &first);
  EXPECT_NE(&family.Add({{"op", "broadcast"}}), &first);
  first.Increment(5);
  EXPECT_EQ(family.Add({{"op", "allreduce"}}).Value(), 5.0);
  EXPECT_EQ(family.size(), 1002u);
}

TEST(metrics_Family, LabelNamesAreFixedByFirstAdd) {
  Registry registry;
  auto& family = registry.AddGauge("g", "g");
  family.Add({{"a", "1"}, {"b", "2"}});
  EXPECT_NE(ErrorOf([&] { family.Add({{"a", "1"}}); }).find("differ"), std::string::npos);
  EXPECT_THROW(family.Add({{"b", "2"}, {"a", "1"}}), MetricsError);
  EXPECT_THROW(family.Add({}), MetricsError);
}

TEST(metrics_Family, InvalidLabelsRejected) {
  Registry registry({{"rank", "0"}});
  auto& gauge = registry.AddGauge("g", "g");
  EXPECT_THROW(gauge.Add({{"__name", "x"}}), MetricsError);
  EXPECT_THROW(gauge.Add({{"1a", "x"}}), MetricsError);
  EXPECT_THROW(gauge.Add({{"a-b", "x"}}), MetricsError);
  EXPECT_THROW(gauge.Add({{"a:b", "x"}}), MetricsError);
  EXPECT_THROW(gauge.Add({{"", "x"}}), MetricsError);
  EXPECT_THROW(gauge.Add({{"a", "1"}, {"a", "2"}}), MetricsError);
  EXPECT_THROW(gauge.Add({{"a", "\xff"}}), MetricsError);
  const std::string clash = ErrorOf([&] { gauge.Add({{"rank", "1"}}); });
  EXPECT_NE(clash.find("const label"), std::string::npos) << clash;
  EXPECT_EQ(gauge.size(), 0u);
  gauge.Add({{"le", "x"}});  // only histograms reserve `le`
  auto& histogram = registry.AddHistogram("h", "h", {1});
  const std::string le = ErrorOf([&] { histogram.Add({{"le", "1"}}); });
  EXPECT_NE(le.find("'le'"), std::string::npos) << le;
  EXPECT_NE(le.find("metrics: h:"), std::string::npos) << le;
}

TEST(metrics_Registry, InvalidMetricNamesRejected) {
  Registry registry;
  for (const char* name : {"", "1abc", "a-b", "a b", "a.b", "é"}) {
    const std::string error = ErrorOf([&] { registry.AddCounter(name, "x"); });
    EXPECT_NE(error.find("invalid metric name '" + std::string(name) + "'"), std::string::npos)
        << error;
  }
  registry.AddCounter("ok:name_1_total", "colons are allowed in metric names");
  registry.AddGauge("_leading_underscore", "x");
  EXPECT_THROW(registry.AddGauge("bad_help", "\xc3"), MetricsError);
}

TEST(metrics_Registry, InvalidConstLabelsRejected) {
  EXPECT_THROW(Registry({{"__x", "1"}}), MetricsError);
  EXPECT_THROW(Registry({{"le", "1"}}), MetricsError);
  EXPECT_THROW(Registry({{"a", "1"}, {"a", "2"}}), MetricsError);
  EXPECT_THROW(Registry({{"a", "\xc0\x80"}}), MetricsError);  // overlong NUL
}

TEST(metrics_Registry, DuplicateRegistration) {
  Registry registry;
  auto& a = registry.AddCounter("x_total", "first help");
  EXPECT_EQ(&registry.AddCounter("x_total", "other help"), &a);
  const std::string type = ErrorOf([&] { registry.AddGauge("x_total", "g"); });
  EXPECT_NE(type.find("already registered as a counter"), std::string::npos) << type;

  auto& h = registry.AddHistogram("h_seconds", "h", {1, 2});
  EXPECT_EQ(&registry.AddHistogram("h_seconds", "h", {1, 2, kInf}), &h);
  EXPECT_THROW(registry.AddHistogram("h_seconds", "h", {1, 3}), MetricsError);
  EXPECT_THROW(registry.AddCounter("h_seconds", "h"), MetricsError);

  // A histogram's samples occupy <name>_bucket/_sum/_count.
  const std::string clash = ErrorOf([&] { registry.AddGauge("h_seconds_count", "g"); });
  EXPECT_NE(clash.find("clashes"), std::string::npos) << clash;
  registry.AddGauge("y_sum", "g");
  EXPECT_THROW(registry.AddHistogram("y", "h", {1}), MetricsError);
}

TEST(metrics_HotPath, UpdatesDoNotAllocate) {
  Registry registry({{"rank", "0"}});
  Counter& counter = registry.AddCounter("c_total", "c").Add({{"op", "allreduce"}});
  Gauge& gauge = registry.AddGauge("g", "g").Add();
  Histogram& histogram = registry.AddHistogram("h", "h", ExponentialBuckets(1e-4, 2, 20)).Add();
  const long at_setup = g_allocations.load();
  registry.AddGauge("probe", "probe").Add();
  ASSERT_GT(g_allocations.load(), at_setup) << "the allocation counter does not count";
  const long before = g_allocations.load();
  for (int i = 0; i < 1000; ++i) {
    counter.Increment(i);
    gauge.Set(i);
    gauge.Add(-0.5);
    histogram.Observe(i * 1e-3);
  }
  EXPECT_EQ(g_allocations.load(), before);
  EXPECT_EQ(histogram.Count(), 1000u);
}

TEST(metrics_Concurrency, CounterIncrementsFromFourThreadsSumExactly) {
  Registry registry;
  Counter& counter = registry.AddCounter("n_total", "n").Add();
  Histogram& histogram = registry.AddHistogram("v", "v", {10, 100}).Add();
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
  // Scrapes run concurrently with the updates and must see monotonic counts.
  std::uint64_t last_count = 0;
  for (int scrape = 0; scrape < 50; ++scrape) {
    registry.Serialize();
    const std::uint64_t count = histogram.Count();
    EXPECT_GE(count, last_count);
    last_count = count;
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(counter.Value(), static_cast<double>(kThreads) * kPerThread);
  EXPECT_EQ(histogram.Count(), static_cast<std::uint64_t>(kThreads) * kPerThread);
  // Values 0..199 each seen equally often: 11 of 200 are <= 10, 101 of 200 are <= 100.
  const auto buckets = histogram.BucketCounts();
  EXPECT_EQ(buckets[0], 11u * kThreads * kPerThread / 200);
  EXPECT_EQ(buckets[1], 101u * kThreads * kPerThread / 200);
  EXPECT_EQ(histogram.Sum(), 99.5 * kThreads * kPerThread);
}

TEST(metrics_Concurrency, AddAndSerializeWhileUpdating) {
  Registry registry;
  auto& family = registry.AddGauge("g", "g");
  std::atomic<bool> stop{false};
  std::thread scraper([&] {
    while (!stop.load()) registry.Serialize();
  });
  for (int i = 0; i < 2000; ++i) family.Add({{"i", std::to_string(i)}}).Set(i);
  stop = true;
  scraper.join();
  EXPECT_EQ(family.size(), 2000u);
  EXPECT_NE(registry.Serialize().find("g{i=\"1999\"} 1999\n"), std::string::npos);
}

}  // namespace
}  // namespace ringpilot::metrics
