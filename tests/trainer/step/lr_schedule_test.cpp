// trainer/step/lr_schedule.h: each schedule against the learning rates torch.optim.SGD reported
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

#include "trainer/options.h"
#include "trainer/step/lr_schedule.h"

namespace ringpilot::trainer {
namespace {

using Table = std::vector<std::pair<int64_t, double>>;

step::LrScheduleOptions Reference(config::LrSchedule kind) {
  step::LrScheduleOptions o;
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

void ExpectTable(const step::LrScheduleOptions& o, const Table& table) {
  for (const auto& [step, lr] : table) {
    EXPECT_NEAR(step::LearningRateAt(o, step), lr, 1e-15) << "step " << step;
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
    step::LrScheduleOptions o = Reference(kind);
    o.warmup_steps = 0;
    EXPECT_DOUBLE_EQ(step::LearningRateAt(o, 0), 0.1) << config::ToString(kind);
  }
  // Cosine to 0 at the end: lr x (1 + cos(pi s / T)) / 2.
  step::LrScheduleOptions o = Reference(config::LrSchedule::kCosine);
  o.warmup_steps = 0;
  o.min_ratio = 0;
  EXPECT_NEAR(step::LearningRateAt(o, 25), 0.1 * (1 + std::cos(M_PI / 4)) / 2, 1e-15);
  EXPECT_NEAR(step::LearningRateAt(o, 50), 0.05, 1e-15);
}

TEST(LrSchedule, OnlyConstantWithoutWarmupIsConstant) {
  EXPECT_FALSE(step::IsConstant(Reference(config::LrSchedule::kConstant)));
  step::LrScheduleOptions o = Reference(config::LrSchedule::kConstant);
  o.warmup_steps = 0;
  EXPECT_TRUE(step::IsConstant(o));
  o.kind = config::LrSchedule::kCosine;
  EXPECT_FALSE(step::IsConstant(o));
}

TEST(LrSchedule, JobKeysReachTheScheduleAndTheOptimizer) {
  config::JobConfig job;  // job defaults: constant
  config::TrainConfig& train = job.train;
  EXPECT_TRUE(step::IsConstant(LrScheduleOptionsFor(job, job.train.steps)));
  EXPECT_FALSE(OptimizerOptionsFor(job, job.train.steps).lr_on_device);
  EXPECT_FALSE(OptimizerOptionsFor(job, job.train.steps).exempt_1d_from_decay);
  train.lr_schedule = config::LrSchedule::kPolynomial;
  train.steps = 40;
  train.lr_warmup_steps = 4;
  train.lr_min_ratio = 0.2;
  train.lr_power = 3;
  train.decay_norm_and_bias = false;
  const step::LrScheduleOptions o = LrScheduleOptionsFor(job, job.train.steps);
  EXPECT_EQ(o.kind, config::LrSchedule::kPolynomial);
  EXPECT_EQ(o.total_steps, 40);
  EXPECT_EQ(o.warmup_steps, 4);
  EXPECT_DOUBLE_EQ(o.min_ratio, 0.2);
  EXPECT_DOUBLE_EQ(o.power, 3);
  EXPECT_DOUBLE_EQ(o.lr, train.lr);
  EXPECT_TRUE(OptimizerOptionsFor(job, job.train.steps).lr_on_device);
  EXPECT_TRUE(OptimizerOptionsFor(job, job.train.steps).exempt_1d_from_decay);
}

// ResNet-50's recipe: lr 0.1 per 256 samples, 5 warm-up epochs of 90.
TEST(LrSchedule, BaseBatchScalesTheLrAndEpochsSetTheWarmup) {
  config::JobConfig job;
  job.world.nodes = 2;
  job.world.procs_per_node = 4;
  job.data.batch_per_rank = 64;
  job.train.grad_accum_steps = 2;  // global batch 2 x 4 x 64 x 2 = 1024
  job.train.lr = 0.1;
  job.train.lr_base_batch = 256;
  job.train.lr_schedule = config::LrSchedule::kCosine;
  job.train.epochs = 90;
  job.train.steps = 90 * 1251;  // as the RunPlan resolves it
  job.train.lr_warmup_epochs = 5;
  EXPECT_EQ(config::GlobalBatch(job), 1024);
  const step::LrScheduleOptions o = LrScheduleOptionsFor(job, job.train.steps);
  EXPECT_DOUBLE_EQ(o.lr, 0.4);
  EXPECT_DOUBLE_EQ(OptimizerOptionsFor(job, job.train.steps).lr, 0.4);
  EXPECT_EQ(o.warmup_steps, 5 * 1251);
  EXPECT_NEAR(step::LearningRateAt(o, 1251), 0.4 / 5, 1e-15);      // linear: one epoch of five
  EXPECT_NEAR(step::LearningRateAt(o, 90 * 1251 - 1), 0.0, 1e-8);  // cosine to 0
  // A fraction of an epoch rounds to whole steps, and never to none or all of them.
  job.train.epochs = 1;
  job.train.steps = 10;
  job.train.lr_warmup_epochs = 0.26;
  EXPECT_EQ(WarmupSteps(job.train, job.train.steps), 3);
  job.train.lr_warmup_epochs = 0.01;
  EXPECT_EQ(WarmupSteps(job.train, job.train.steps), 1);
  job.train.lr_warmup_epochs = 0.99;
  EXPECT_EQ(WarmupSteps(job.train, job.train.steps), 9);
  // Without lr_base_batch the lr is train.lr whatever the batch.
  job.train.lr_base_batch = 0;
  EXPECT_DOUBLE_EQ(config::PeakLearningRate(job), 0.1);
}

}  // namespace
}  // namespace ringpilot::trainer
