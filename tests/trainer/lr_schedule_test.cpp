// trainer/lr_schedule.h: each schedule against the learning rates torch.optim.SGD reported
// step by step under the reference schedulers (transformers 5.24 / torch 2.11, lr 0.1,
// 100 steps, 10 warm-up steps):
//   cosine     get_cosine_with_min_lr_schedule_with_warmup(min_lr_rate=0.1)
//   polynomial get_polynomial_decay_schedule_with_warmup(lr_end=0.01, power=2)
//   constant   get_constant_schedule_with_warmup
//   step       SequentialLR(LinearLR(warm-up), StepLR(step_size=30, gamma=0.5), [10])
#include <cmath>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "trainer/lr_schedule.h"
#include "trainer/options.h"

namespace ringpilot::trainer {
namespace {

using Table = std::vector<std::pair<int64_t, double>>;

LrScheduleOptions Reference(config::LrSchedule kind) {
  LrScheduleOptions o;
  o.kind = kind;
  o.lr = 0.1;
  o.total_steps = 100;
  o.warmup_steps = 10;
  o.min_ratio = 0.1;
  o.step_every = 30;
  o.gamma = 0.5;
  o.power = 2.0;
  return o;
}

void ExpectTable(const LrScheduleOptions& o, const Table& table) {
  for (const auto& [step, lr] : table) {
    EXPECT_NEAR(LearningRateAt(o, step), lr, 1e-15) << "step " << step;
  }
}

TEST(LrSchedule, CosineMatchesTheReferenceScheduler) {
  ExpectTable(Reference(config::LrSchedule::kCosine), {{0, 0.0},
                                                       {1, 0.010000000000000002},
                                                       {5, 0.05},
                                                       {9, 0.09000000000000001},
                                                       {10, 0.1},
                                                       {11, 0.09997258721585932},
                                                       {37, 0.08145033635316129},
                                                       {55, 0.05500000000000001},
                                                       {80, 0.020528000059645998},
                                                       {99, 0.010027412784140691},
                                                       {100, 0.010000000000000002}});
}

TEST(LrSchedule, PolynomialMatchesTheReferenceScheduler) {
  ExpectTable(Reference(config::LrSchedule::kPolynomial), {{0, 0.0},
                                                           {5, 0.05},
                                                           {10, 0.1},
                                                           {11, 0.09801111111111113},
                                                           {37, 0.05410000000000001},
                                                           {55, 0.0325},
                                                           {80, 0.014444444444444444},
                                                           {99, 0.010011111111111111},
                                                           {100, 0.01}});
}

TEST(LrSchedule, ConstantWithWarmupMatchesTheReferenceScheduler) {
  ExpectTable(Reference(config::LrSchedule::kConstant),
              {{0, 0.0}, {3, 0.03}, {9, 0.09000000000000001}, {10, 0.1}, {50, 0.1}});
}

TEST(LrSchedule, StepMatchesTheReferenceScheduler) {
  ExpectTable(Reference(config::LrSchedule::kStep), {{5, 0.05},
                                                     {10, 0.1},
                                                     {11, 0.1},
                                                     {39, 0.1},
                                                     {40, 0.05},
                                                     {41, 0.05},
                                                     {70, 0.025},
                                                     {99, 0.025}});
}

TEST(LrSchedule, WithoutWarmupTheFirstStepTrainsAtTheFullRate) {
  for (auto kind : {config::LrSchedule::kConstant, config::LrSchedule::kCosine,
                    config::LrSchedule::kStep, config::LrSchedule::kPolynomial}) {
    LrScheduleOptions o = Reference(kind);
    o.warmup_steps = 0;
    EXPECT_DOUBLE_EQ(LearningRateAt(o, 0), 0.1) << config::ToString(kind);
  }
  // Cosine to 0 at the end: lr x (1 + cos(pi s / T)) / 2.
  LrScheduleOptions o = Reference(config::LrSchedule::kCosine);
  o.warmup_steps = 0;
  o.min_ratio = 0;
  EXPECT_NEAR(LearningRateAt(o, 25), 0.1 * (1 + std::cos(M_PI / 4)) / 2, 1e-15);
  EXPECT_NEAR(LearningRateAt(o, 50), 0.05, 1e-15);
}

TEST(LrSchedule, OnlyConstantWithoutWarmupIsConstant) {
  EXPECT_FALSE(IsConstant(Reference(config::LrSchedule::kConstant)));
  LrScheduleOptions o = Reference(config::LrSchedule::kConstant);
  o.warmup_steps = 0;
  EXPECT_TRUE(IsConstant(o));
  o.kind = config::LrSchedule::kCosine;
  EXPECT_FALSE(IsConstant(o));
}

TEST(LrSchedule, JobKeysReachTheScheduleAndTheOptimizer) {
  config::TrainConfig train;  // job defaults: constant
  EXPECT_TRUE(IsConstant(LrScheduleOptionsFor(train)));
  EXPECT_FALSE(OptimizerOptionsFor(train).lr_on_device);
  EXPECT_FALSE(OptimizerOptionsFor(train).exempt_1d_from_decay);
  train.lr_schedule = config::LrSchedule::kPolynomial;
  train.steps = 40;
  train.lr_warmup_steps = 4;
  train.lr_min_ratio = 0.2;
  train.lr_power = 3;
  train.decay_norm_and_bias = false;
  const LrScheduleOptions o = LrScheduleOptionsFor(train);
  EXPECT_EQ(o.kind, config::LrSchedule::kPolynomial);
  EXPECT_EQ(o.total_steps, 40);
  EXPECT_EQ(o.warmup_steps, 4);
  EXPECT_DOUBLE_EQ(o.min_ratio, 0.2);
  EXPECT_DOUBLE_EQ(o.power, 3);
  EXPECT_DOUBLE_EQ(o.lr, train.lr);
  EXPECT_TRUE(OptimizerOptionsFor(train).lr_on_device);
  EXPECT_TRUE(OptimizerOptionsFor(train).exempt_1d_from_decay);
}

}  // namespace
}  // namespace ringpilot::trainer
