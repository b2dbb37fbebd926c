#include "trainer/step/step_clock.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#ifdef RINGPILOT_WITH_CUDA
#include <ATen/cuda/Sleep.h>
#endif

namespace ringpilot::trainer {
namespace {

TEST(StepClock, CpuStepIsTheHostTimeSinceBegin) {
  step::StepClock clock(/*cuda=*/false, /*lead=*/3);
  for (int step = 0; step < 3; ++step) {
    clock.Begin();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const double s = clock.End();
    EXPECT_GE(s, 0.005) << "step " << step;
    EXPECT_LT(s, 5.0) << "step " << step;
    EXPECT_FALSE(clock.idle_before_step().has_value()) << "no GPU to idle";
  }
}

#ifdef RINGPILOT_WITH_CUDA
// With lead L the first L steps report host time; from then on each End() reports the GPU
// time of the step L back, which spun the GPU for a known number of cycles, and returns
// while the later steps are still queued.
TEST(StepClockCuda, ReportsTheGpuTimeOfTheStepLeadStepsBack) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  constexpr int64_t kCycles = 20'000'000;  // ~10 ms at 2 GHz
  // The first launch loads the sleep kernel's module (lazy loading), which would widen
  // the first timed step by that host time: load it before any step is timed.
  at::cuda::sleep(1000);
  torch::cuda::synchronize();
  for (int lead = 1; lead <= step::StepClock::kMaxLead; ++lead) {
    step::StepClock clock(/*cuda=*/true, lead);
    std::vector<double> gpu;
    for (int step = 0; step < lead + 4; ++step) {
      clock.Begin();
      at::cuda::sleep(kCycles);
      const double s = clock.End();
      if (step >= lead) gpu.push_back(s);
    }
    torch::cuda::synchronize();
    ASSERT_EQ(gpu.size(), 4u);
    for (double s : gpu) {
      // One spin each: equal to within clock changes, and no more than a few steps' worth.
      EXPECT_GT(s, 0.5 * gpu.front()) << "lead " << lead;
      EXPECT_LT(s, 2.0 * gpu.front()) << "lead " << lead;
      EXPECT_GT(s, 1e-4) << "lead " << lead;
    }
  }
}

// The GPU idles between steps only when the host is late: a host that queues the next step
// before the GPU is done gives gaps near 0; one that waits 60 ms for its next batch after
// queueing a ~10 ms step (between Launched() and End(), as the training loop's Fill does)
// leaves the GPU idle up to ~50 ms (less by what was still queued: at most lead + 1 steps); an
// excluded gap (a checkpoint) and a step without Launched() give none.
TEST(StepClockCuda, IdleBeforeStepIsTheGpuGapTheHostLeft) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  constexpr int64_t kCycles = 20'000'000;  // ~10 ms at 2 GHz
  at::cuda::sleep(1000);
  torch::cuda::synchronize();
  for (int lead : {1, 2}) {
    step::StepClock clock(/*cuda=*/true, lead);
    std::vector<std::optional<double>> idle;
    for (int step = 0; step < lead + 12; ++step) {
      if (step == lead + 6) clock.ExcludeNextGap();
      clock.Begin();
      at::cuda::sleep(kCycles);
      if (step != lead + 8) clock.Launched();
      // Steps lead+3 on: the host waits for its next batch, and the GPU runs dry.
      if (step >= lead + 3) std::this_thread::sleep_for(std::chrono::milliseconds(60));
      clock.End();
      idle.push_back(clock.idle_before_step());
    }
    torch::cuda::synchronize();
    // End() of step k reports the gap before step k - lead.
    for (int step = 0; step <= lead; ++step) {
      EXPECT_FALSE(idle[step].has_value()) << "lead " << lead << " step " << step;
    }
    for (int step = lead + 1; step < lead + 12; ++step) {
      const int timed = step - lead;  // the step whose gap End() reported
      if (timed == lead + 6 || timed == lead + 9) {
        EXPECT_FALSE(idle[step].has_value())
            << "excluded, or the step before had no Launched(); lead " << lead;
      } else if (timed <= lead + 3) {
        ASSERT_TRUE(idle[step].has_value());
        EXPECT_LT(*idle[step], 0.002) << "host ahead; lead " << lead << " step " << timed;
      } else {
        ASSERT_TRUE(idle[step].has_value());
        EXPECT_GT(*idle[step], 0.015) << "host late; lead " << lead << " step " << timed;
        EXPECT_LT(*idle[step], 0.065) << "lead " << lead << " step " << timed;
      }
    }
  }
}
#endif

}  // namespace
}  // namespace ringpilot::trainer
