// data/sampler.h: per-epoch permutations, disjoint ranks, and positions across resumes.
#include <algorithm>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "data/sampler.h"

namespace ringpilot::data {
namespace {

TEST(EpochSampler, EachEpochIsASeededPermutation) {
  EpochSampler s(1000, 2, 16, /*seed=*/7);
  const auto p0 = s.Permutation(0), p1 = s.Permutation(1);
  std::vector<int64_t> sorted = p0;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_NE(p0, p1);
  EXPECT_EQ(p0, EpochSampler(1000, 4, 8, 7).Permutation(0));  // not a function of the geometry
  EXPECT_NE(p0, EpochSampler(1000, 2, 16, 8).Permutation(0));
}

TEST(EpochSampler, RanksAreDisjointAndAnEpochDropsOnlyTheTail) {
  EpochSampler s(1000, 3, 10, 1);  // 33 steps of 30, 10 samples left out per epoch
  EXPECT_EQ(s.steps_per_epoch(), 33);
  std::set<int64_t> seen;
  std::vector<int64_t> batch;
  for (int64_t step = 0; step < 33; ++step) {
    for (int rank = 0; rank < 3; ++rank) {
      s.Batch(step, rank, &batch);
      ASSERT_EQ(batch.size(), 10u);
      for (int64_t i : batch) ASSERT_TRUE(seen.insert(i).second) << "sample " << i << " twice";
    }
  }
  EXPECT_EQ(seen.size(), 990u);
  EXPECT_EQ(s.PositionOf(33).epoch, 1);
  EXPECT_EQ(s.PositionOf(33).offset, 0);
}

TEST(EpochSampler, ResumingAtAStepGivesTheSameBatches) {
  EpochSampler unbroken(500, 2, 8, 3);
  EpochSampler resumed(500, 2, 8, 3);
  resumed.Resume(45, unbroken.PositionOf(45));
  std::vector<int64_t> a, b;
  for (int64_t step = 45; step < 120; ++step) {
    for (int rank = 0; rank < 2; ++rank) {
      unbroken.Batch(step, rank, &a);
      resumed.Batch(step, rank, &b);
      ASSERT_EQ(a, b) << "step " << step << " rank " << rank;
    }
  }
  EXPECT_THROW(resumed.PositionOf(44), std::invalid_argument);
}

TEST(EpochSampler, AnotherWorldSizeContinuesTheEpochWithoutRepeats) {
  EpochSampler before(600, 2, 10, 5);  // 30 steps per epoch
  const SamplePosition at = before.PositionOf(12);
  EXPECT_EQ(at.epoch, 0);
  EXPECT_EQ(at.offset, 240);
  std::set<int64_t> seen;
  std::vector<int64_t> batch;
  for (int64_t step = 0; step < 12; ++step) {
    for (int rank = 0; rank < 2; ++rank) {
      before.Batch(step, rank, &batch);
      seen.insert(batch.begin(), batch.end());
    }
  }
  EpochSampler after(600, 3, 10, 5);  // 30 samples per step now
  after.Resume(12, at);
  for (int64_t step = 12; step < 24; ++step) {  // (600 - 240) / 30 = 12 steps left in epoch 0
    EXPECT_EQ(after.PositionOf(step).epoch, 0);
    for (int rank = 0; rank < 3; ++rank) {
      after.Batch(step, rank, &batch);
      for (int64_t i : batch) ASSERT_TRUE(seen.insert(i).second) << "sample " << i << " again";
    }
  }
  EXPECT_EQ(seen.size(), 600u);
  EXPECT_EQ(after.PositionOf(24).epoch, 1);
}

TEST(EpochSampler, RejectsADatasetSmallerThanAGlobalBatch) {
  EXPECT_THROW(EpochSampler(15, 2, 8, 0), std::invalid_argument);
  EXPECT_NO_THROW(EpochSampler(16, 2, 8, 0));
}

}  // namespace
}  // namespace ringpilot::data
