// Straggler attribution and the rank's stats file record (trainer/telemetry/step_stats.h).
#include <gtest/gtest.h>

#include "trainer/telemetry/step_stats.h"

namespace ringpilot::trainer::telemetry {
namespace {

double Blamed(const StragglerStep& s, int rank) {
  double total = 0;
  for (const auto& [r, seconds] : s.blame) {
    if (r == rank) total += seconds;
  }
  return total;
}

// Rank 2 sleeps 50 ms; rank 1 happens to be 15 ms faster than ranks 0 and 3.
std::vector<ArrivalSample> Samples() {
  return {{10.100, 0.100}, {10.085, 0.085}, {10.150, 0.100}, {10.101, 0.101}};
}

TEST(AttributeStraggler, LastArrivalIsTheCulpritForEveryRank) {
  for (int r = 0; r < 4; ++r) EXPECT_EQ(AttributeStraggler(Samples(), r).culprit, 2);
}

TEST(AttributeStraggler, CulpritIsBlamedOnlyForItsLeadOverTheSecondToLast) {
  const StragglerStep fast = AttributeStraggler(Samples(), 1);
  EXPECT_NEAR(fast.wait_seconds, 0.065, 1e-9);
  EXPECT_NEAR(Blamed(fast, 2), 0.049, 1e-9);  // 10.150 - 10.101
  EXPECT_NEAR(Blamed(fast, 0), 0.015, 1e-9);  // 10.100 - 10.085
  EXPECT_NEAR(Blamed(fast, 3), 0.001, 1e-9);
  double sum = 0;
  for (const auto& [r, seconds] : fast.blame) sum += seconds;
  EXPECT_NEAR(sum, fast.wait_seconds, 1e-12);
  EXPECT_NEAR(fast.skew_seconds, 0.0, 1e-12);

  const StragglerStep second_last = AttributeStraggler(Samples(), 3);
  ASSERT_EQ(second_last.blame.size(), 1u);
  EXPECT_EQ(second_last.blame[0].first, 2);
  EXPECT_NEAR(second_last.blame[0].second, 0.049, 1e-9);
}

TEST(AttributeStraggler, CulpritWaitsForNobody) {
  const StragglerStep s = AttributeStraggler(Samples(), 2);
  EXPECT_EQ(s.wait_seconds, 0);
  EXPECT_TRUE(s.blame.empty());
  EXPECT_NEAR(s.skew_seconds, 0.015, 1e-12);
}

TEST(AttributeStraggler, TiesBlameNobodyAndNameTheSameCulprit) {
  const std::vector<ArrivalSample> tie = {{5.0, 0.1}, {5.0, 0.1}};
  const StragglerStep a = AttributeStraggler(tie, 0), b = AttributeStraggler(tie, 1);
  EXPECT_EQ(a.culprit, b.culprit);
  EXPECT_TRUE(a.blame.empty());
  EXPECT_TRUE(b.blame.empty());
}

TEST(AttributeStraggler, OutOfRangeRankGivesNoCulprit) {
  EXPECT_EQ(AttributeStraggler(Samples(), 4).culprit, -1);
  EXPECT_EQ(AttributeStraggler({}, 0).culprit, -1);
}

// What logs/rank-N.stats.json holds (history::RankStats, written through history/): the
// totals of the timed window.
TEST(StepStats, TheRecordHoldsTheTimedWindowsTotals) {
  StepStats stats(1, 4, "gpu-01", 1);
  stats.set_expected_busbw(2e9);
  stats.AddPhase(Phase::kData, 9.0);  // a warm-up step's: forgotten
  stats.AddCollective(comm::CollectiveOp::kBroadcast, 1024, 1.0);
  stats.StartTimedWindow();
  stats.AddPhase(Phase::kData, 0.25);
  stats.AddPhase(Phase::kData, 0.75);
  stats.AddPhase(Phase::kForward, 1.5);
  stats.AddStep(2.0);
  stats.AddStep(4.0);
  StragglerStep late;
  late.culprit = 2;
  late.wait_seconds = 0.5;
  late.skew_seconds = 0.1;
  late.blame = {{3, 0.125}, {2, 0.375}};
  stats.AddStraggler(late);
  const int64_t bytes = int64_t(4) << 20;
  stats.AddCollective(comm::CollectiveOp::kAllReduce, bytes, 0.01);
  const history::RankStats r = stats.Record(2, 2.5, 3.9);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.node, "gpu-01");
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.world_size, 4);
  EXPECT_EQ(r.steps, 2u);
  EXPECT_EQ(r.step_p50, 2.5);
  EXPECT_EQ(r.step_p99, 3.9);
  EXPECT_EQ(r.step_mean, 3.0);
  EXPECT_EQ(r.phase_seconds_total.size(), static_cast<size_t>(kNumPhases));
  EXPECT_EQ(r.phase_seconds_total.at("data"), 1.0);
  EXPECT_EQ(r.phase_seconds_total.at("forward"), 1.5);
  EXPECT_EQ(r.phase_seconds_total.at("comm_exposed"), 0.0);
  ASSERT_TRUE(r.input_wait.has_value());
  EXPECT_EQ(r.input_wait->steps, 2u);
  EXPECT_EQ(r.input_wait->total, 1.0);
  EXPECT_EQ(r.input_wait->max, 0.75);
  EXPECT_EQ(r.input_wait->p50, 0.5);
  EXPECT_EQ(r.overlap_ratio, 1.0);  // nothing exposed
  EXPECT_EQ(r.wait_seconds_total, 0.5);
  EXPECT_EQ(r.culprit_steps, (std::map<int, double>{{2, 1}}));
  EXPECT_EQ(r.wait_by_culprit, (std::map<int, double>{{2, 0.375}, {3, 0.125}}));
  EXPECT_EQ(r.compute_skew_mean, 0.1);
  ASSERT_EQ(r.collectives.size(), 1u) << "the warm-up's broadcast is forgotten";
  EXPECT_EQ(r.collectives[0].op, "allreduce");
  EXPECT_EQ(r.collectives[0].count, 1u);
  EXPECT_EQ(r.collectives[0].bytes_total, static_cast<uint64_t>(bytes));
  EXPECT_EQ(r.collectives[0].seconds_total, 0.01);
  EXPECT_DOUBLE_EQ(r.collectives[0].busbw_bytes_per_second,
                   bytes * comm::BusBandwidthFactor(comm::CollectiveOp::kAllReduce, 4) / 0.01);
  EXPECT_EQ(r.expected_busbw, (std::map<std::string, double>{
                                  {"allreduce", 2e9}, {"allgather", 2e9}, {"broadcast", 2e9}}));
  EXPECT_FALSE(r.gpu_clocks.has_value()) << "no clock source: a CPU rank";
}

// A CUDA rank's GPU idle time between timed steps reaches the record; a CPU rank has none,
// and a new timed window starts from zero.
TEST(StepStats, GpuIdleTimeIsSummedOverTheTimedWindow) {
  StepStats stats(0, 1, "gpu-01", 0);
  EXPECT_FALSE(stats.Record(1, 0, 0).gpu_idle_seconds.has_value()) << "nothing added: a CPU rank";
  stats.AddGpuIdle(0.5);  // a warm-up step's, forgotten below
  stats.StartTimedWindow();
  EXPECT_FALSE(stats.Record(1, 0, 0).gpu_idle_seconds.has_value());
  stats.AddGpuIdle(0.25);
  stats.AddGpuIdle(0.0);
  stats.AddGpuIdle(0.125);
  EXPECT_EQ(stats.Record(3, 0, 0).gpu_idle_seconds, 0.375);
}

// With a clock source, the record carries gpu_clocks from the timed window on (the window's
// arithmetic: gpu_clock_window_test.cpp); a checkpoint's pause and the window's end reach it.
TEST(StepStats, GpuClocksCoverTheTimedWindow) {
  StepStats stats(0, 2, "gpu-01", 0);
  int reads = 0;
  stats.set_gpu_clock_source([&reads] {
    ++reads;
    metrics::GpuClockReading r;
    r.power_limited_seconds = 100.0 + 2.0 * reads;  // since the driver loaded
    r.power_limit_watts = 700;
    return r;
  });
  EXPECT_FALSE(stats.Record(0, 0, 0).gpu_clocks.has_value()) << "before the timed window";
  stats.PauseTimedWindow();
  stats.ResumeTimedWindow();
  EXPECT_EQ(reads, 0) << "no window to pause or resume yet";
  stats.StartTimedWindow();
  EXPECT_EQ(reads, 1);
  history::RankStats r = stats.Record(10, 0.01, 0.02);
  EXPECT_EQ(reads, 2);
  ASSERT_TRUE(r.gpu_clocks.has_value());
  EXPECT_EQ(r.gpu_clocks->power_limited_seconds, 2.0);
  EXPECT_EQ(r.gpu_clocks->power_limit_watts, 700.0);

  stats.PauseTimedWindow();   // read 3: the span 1-3 closes
  stats.ResumeTimedWindow();  // read 4: a checkpoint's 2 s of counter left out
  stats.EndTimedWindow();     // read 5
  r = stats.Record(10, 0.01, 0.02);
  EXPECT_EQ(stats.Record(10, 0.01, 0.02).gpu_clocks->seconds, r.gpu_clocks->seconds);
  EXPECT_EQ(reads, 5);
  EXPECT_EQ(r.gpu_clocks->power_limited_seconds, 6.0);
}

}  // namespace
}  // namespace ringpilot::trainer::telemetry
