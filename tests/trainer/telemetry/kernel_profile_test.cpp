#include <stdlib.h>

#include <fstream>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "trainer/telemetry/kernel_profile.h"

namespace ringpilot::trainer::telemetry {
namespace {

class KernelProfileTest : public ::testing::Test {
 protected:
  void TearDown() override {
    ::unsetenv("RINGPILOT_KINETO_TRACE");
    ::unsetenv("RINGPILOT_KINETO_STEPS");
    ::unsetenv("RINGPILOT_CUDA_PROFILER_STEPS");
  }
};

TEST_F(KernelProfileTest, InactiveWithoutTheVariable) {
  ::unsetenv("RINGPILOT_KINETO_TRACE");
  KernelProfile p(0, false);
  EXPECT_FALSE(p.active());
  p.BeforeStep(10);
  EXPECT_EQ(p.AfterStep(12), "");
}

TEST_F(KernelProfileTest, TracesTheChosenStepsIntoAChromeTrace) {
  const std::string prefix = ::testing::TempDir() + "/kernel_profile_test";
  ::setenv("RINGPILOT_KINETO_TRACE", prefix.c_str(), 1);
  ::setenv("RINGPILOT_KINETO_STEPS", "1:2", 1);
  KernelProfile p(3, false);
  ASSERT_TRUE(p.active());
  std::string path;
  for (int64_t step = 0; step < 4; ++step) {
    p.BeforeStep(step);
    at::Tensor a = at::randn({32, 32});
    at::Tensor b = at::mm(a, a);
    const std::string written = p.AfterStep(step);
    if (step == 2) {
      path = written;
    } else {
      EXPECT_EQ(written, "") << "step " << step;
    }
  }
  ASSERT_EQ(path, prefix + ".rank-3.json");
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  const auto doc = nlohmann::json::parse(in);
  int mm = 0;
  for (const auto& e : doc.at("traceEvents")) mm += e.value("name", "") == "aten::mm";
  EXPECT_EQ(mm, 2) << "one aten::mm per profiled step";
}

TEST_F(KernelProfileTest, MalformedStepsAreRejected) {
  ::setenv("RINGPILOT_KINETO_TRACE", "/tmp/x", 1);
  for (const char* bad : {"10", "a:b", "-1:3", "2:0"}) {
    ::setenv("RINGPILOT_KINETO_STEPS", bad, 1);
    EXPECT_THROW(KernelProfile(0, false), std::runtime_error) << bad;
  }
}

TEST_F(KernelProfileTest, CudaProfilerStepsAreCheckedOnCudaRanksOnly) {
  for (const char* bad : {"10", "3:1x", "-1:3", "2:0"}) {
    ::setenv("RINGPILOT_CUDA_PROFILER_STEPS", bad, 1);
    EXPECT_THROW(KernelProfile(0, true), std::runtime_error) << bad;
    // A CPU rank has no CUDA profiler to start: the variable is not its business.
    EXPECT_NO_THROW(KernelProfile(0, false)) << bad;
  }
  ::setenv("RINGPILOT_CUDA_PROFILER_STEPS", "10:1", 1);
  KernelProfile p(0, true);
  EXPECT_FALSE(p.active()) << "the CUDA profiler range alone writes no Kineto trace";
}

}  // namespace
}  // namespace ringpilot::trainer::telemetry
