// Straggler attribution (trainer/telemetry/step_stats.h).
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

}  // namespace
}  // namespace ringpilot::trainer::telemetry
