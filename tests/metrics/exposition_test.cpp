// Suite names start with "metrics_" so that `ctest -R metrics` selects them.
#include "metrics/exposition.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>

#include "metrics/registry.h"

namespace ringpilot::metrics {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(metrics_Exposition, FormatsSpecialValues) {
  EXPECT_EQ(FormatValue(kInf), "+Inf");
  EXPECT_EQ(FormatValue(-kInf), "-Inf");
  EXPECT_EQ(FormatValue(kNaN), "NaN");
  EXPECT_EQ(FormatValue(-kNaN), "NaN");
}

TEST(metrics_Exposition, FormatsShortestRoundTrip) {
  EXPECT_EQ(FormatValue(0.0), "0");
  EXPECT_EQ(FormatValue(-0.0), "-0");
  EXPECT_EQ(FormatValue(3.0), "3");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(2.5e-7), "2.5e-07");
  EXPECT_EQ(FormatValue(1e21), "1e+21");
  EXPECT_EQ(FormatValue(123456789.0), "123456789");
  EXPECT_EQ(FormatValue(0.1 + 0.2), "0.30000000000000004");
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<std::uint64_t> bits;
  for (int i = 0; i < 10000; ++i) {
    const std::uint64_t b = bits(rng);
    double v;
    std::memcpy(&v, &b, sizeof v);
    if (!std::isfinite(v)) continue;
    const std::string text = FormatValue(v);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), v) << text;
  }
}

TEST(metrics_Exposition, FormatsIntegers) {
  std::string out;
  AppendValue(out, std::uint64_t{18446744073709551615u});
  EXPECT_EQ(out, "18446744073709551615");
}

TEST(metrics_Exposition, EscapesLabelValues) {
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  EXPECT_EQ(EscapeLabelValue("a\\b"), "a\\\\b");
  EXPECT_EQ(EscapeLabelValue("say \"hi\""), "say \\\"hi\\\"");
  EXPECT_EQ(EscapeLabelValue("two\nlines"), "two\\nlines");
  EXPECT_EQ(EscapeLabelValue("tab\tkept, ünïcode kept"), "tab\tkept, ünïcode kept");
}

TEST(metrics_Exposition, EscapesHelpButNotQuotes) {
  EXPECT_EQ(EscapeHelp("a \"b\" c\\d\ne"), "a \"b\" c\\\\d\\ne");
}

TEST(metrics_Exposition, MetricNameRules) {
  EXPECT_TRUE(IsValidMetricName("ringpilot_step_seconds"));
  EXPECT_TRUE(IsValidMetricName("job:rate5m"));
  EXPECT_TRUE(IsValidMetricName("_x9"));
  EXPECT_TRUE(IsValidMetricName(":x"));
  EXPECT_FALSE(IsValidMetricName(""));
  EXPECT_FALSE(IsValidMetricName("9x"));
  EXPECT_FALSE(IsValidMetricName("a-b"));
  EXPECT_FALSE(IsValidMetricName("a b"));
}

TEST(metrics_Exposition, LabelNameRules) {
  EXPECT_TRUE(IsValidLabelName("rank"));
  EXPECT_TRUE(IsValidLabelName("_x"));
  EXPECT_TRUE(IsValidLabelName("gpu_uuid2"));
  EXPECT_FALSE(IsValidLabelName("__reserved"));
  EXPECT_FALSE(IsValidLabelName("__"));
  EXPECT_FALSE(IsValidLabelName("a:b"));
  EXPECT_FALSE(IsValidLabelName("2a"));
  EXPECT_FALSE(IsValidLabelName(""));
}

TEST(metrics_Exposition, Utf8Rules) {
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("ü € 𝄞"));
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("\xc3"));              // truncated
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // UTF-16 surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
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
  const std::string command = "'" + promtool + "' check metrics < '" + path + "' 2>&1";
  ToolResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  char buffer[4096];
  std::size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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
  Registry registry({{"job", "quick\"start"},
                     {"node", "host\\1"},
                     {"rank", "0"},
                     {"local_rank", "0"},
                     {"gpu_uuid", "GPU-0f1e2d3c"},
                     {"pci_bus_id", "00000000:3B:00.0"}});
  auto& samples = registry.AddCounter("ringpilot_samples_total", "Samples processed by this rank.");
  samples.Add().Increment(1234);
  auto& bytes = registry.AddCounter("ringpilot_collective_bytes_total",
                                    "Bytes moved by collectives.\nSecond line with \\ backslash.");
  bytes.Add({{"op", "allreduce"}}).Increment(1e12);
  bytes.Add({{"op", "broadcast"}}).Increment(0.5);
  bytes.Add({{"op", "weird \"op\"\nwith newline and ünïcode"}}).Increment(kInf);
  auto& loss = registry.AddGauge("ringpilot_loss", "Last step's loss.");
  loss.Add({{"v", "nan"}}).Set(kNaN);
  loss.Add({{"v", "pinf"}}).Set(kInf);
  loss.Add({{"v", "ninf"}}).Set(-kInf);
  loss.Add({{"v", "tiny"}}).Set(-4.9e-324);
  loss.Add({{"v", "huge"}}).Set(1.7976931348623157e308);
  loss.Add({{"v", ""}}).Set(0.1);
  auto& step = registry.AddHistogram("ringpilot_step_seconds", "Wall time of one step.",
                                     ExponentialBuckets(0.001, 2, 12));
  Histogram& h = step.Add();
  for (const double v : {0.0005, 0.01, 0.3, 7.0, 100.0}) h.Observe(v);
  auto& coll = registry.AddHistogram("ringpilot_collective_seconds", "Collective time.",
                                     LinearBuckets(-1, 0.25, 9));
  coll.Add({{"op", "allgather"}}).Observe(kNaN);
  coll.Add({{"op", "broadcast"}});  // a histogram with no observations
  registry.AddGauge("ringpilot_build_info", "Build information.")
      .Add({{"version", "0.1.0"}, {"torch", "2.3.0"}, {"cuda", "none"}, {"nccl", "none"}})
      .Set(1);

  const std::string exposition = registry.Serialize();
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
