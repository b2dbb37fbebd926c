#include "trainer/step/step_phases.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace ringpilot::trainer {
namespace {

void SleepMs(double ms) {
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
}

// One CPU step with the markers in the trainer's order.
void RunStep(step::StepPhases& p, double forward_ms, double backward_ms) {
  p.Begin();
  SleepMs(forward_ms);
  p.ForwardDone();
  p.FirstGradientsReady();
  SleepMs(backward_ms);
  p.BackwardDone();
  p.CommDone();
  p.OptimizerDone();
  p.Launched(/*replay=*/false);
}

TEST(StepPhases, CpuReportsTheStepJustRunOnce) {
  step::StepPhases p(/*device=*/-1, nullptr);
  EXPECT_FALSE(p.Collect(false).has_value()) << "nothing launched yet";
  RunStep(p, 20, 30);
  const auto t = p.Collect(false);
  ASSERT_TRUE(t.has_value());
  EXPECT_TRUE(t->valid);
  EXPECT_FALSE(t->replay);
  EXPECT_TRUE(t->marks.empty());
  // Lower bounds only: a loaded host may sleep longer, never shorter.
  EXPECT_GE(t->forward, 0.019);
  EXPECT_GE(t->backward, 0.029);
  EXPECT_GE(t->comm_exposed, 0.0);
  EXPECT_GE(t->optimizer, 0.0);
  // On CPU a rank arrives at the end of its backward.
  EXPECT_NEAR(t->ready_unix, t->start_unix + t->forward + t->backward, 1e-6);
  EXPECT_FALSE(p.Collect(false).has_value()) << "each step is reported once";
}

// With an early optimizer update: the update's two parts are the optimizer phase, the
// wait between them is the exposed communication. A later step without one has none.
TEST(StepPhases, EarlyUpdateSplitsTheOptimizerAroundTheLastWait) {
  step::StepPhases p(-1, nullptr);
  p.Begin();
  p.ForwardDone();
  p.BackwardDone();
  SleepMs(20);  // optimizer on the buckets already reduced
  p.EarlyUpdateDone();
  SleepMs(30);  // waiting for the last buckets
  p.CommDone();
  SleepMs(10);  // optimizer on the last buckets
  p.OptimizerDone();
  p.Launched(false);
  const auto t = p.Collect(false);
  ASSERT_TRUE(t.has_value());
  EXPECT_GE(t->comm_exposed, 0.029);
  EXPECT_GE(t->optimizer, 0.029) << "both parts of the update (20 + 10 ms)";

  RunStep(p, 1, 1);
  SleepMs(1);
  const auto plain = p.Collect(false);
  ASSERT_TRUE(plain.has_value());
  // Were the older early-update mark used, the first part would be negative (it lies
  // before this step's backward) and the wait would span the whole step.
  EXPECT_GE(plain->optimizer, 0.0);
  EXPECT_GE(plain->comm_exposed, 0.0);
}

TEST(StepPhases, CpuSlowDownSleeps) {
  step::StepPhases p(-1, nullptr);
  const auto start = std::chrono::steady_clock::now();
  p.SlowDown(0.03);
  p.SlowDown(0.0);  // no-op
  EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.029);
}

TEST(StepPhases, StepsAreReportedInLaunchOrder) {
  step::StepPhases p(-1, nullptr);
  RunStep(p, 1, 1);
  const auto first = p.Collect(false);
  RunStep(p, 1, 1);
  const auto second = p.Collect(true);
  ASSERT_TRUE(first.has_value() && second.has_value());
  EXPECT_LT(first->start_unix, second->start_unix);
}

}  // namespace
}  // namespace ringpilot::trainer
