#include "config/device_plan.h"

#include <gtest/gtest.h>

namespace ringpilot::config {
namespace {

// A GPU recipe as the shipped examples write it.
JobConfig GpuRecipe(Device device) {
  JobConfig job = ParseJobConfig(
      "name: r\nmodel: {name: resnet18-cifar}\ntrain: {precision: bf16, cuda_graphs: true}\n",
      "r.yaml", {std::string("world.device=") + ToString(device)});
  return job;
}

TEST(DevicePlan, AutoWithAGpuKeepsTheRecipe) {
  const DevicePlan plan = PlanDevice(GpuRecipe(Device::kAuto), true, "h1");
  EXPECT_TRUE(plan.cuda);
  EXPECT_TRUE(plan.cuda_graphs);
  EXPECT_EQ(plan.precision, Precision::kBf16);
  EXPECT_EQ(plan.notice, "");
}

TEST(DevicePlan, AutoWithoutAGpuTurnsTheGpuSettingsOffWithOneLine) {
  const JobConfig job = GpuRecipe(Device::kAuto);
  const DevicePlan plan = PlanDevice(job, false, "h1");
  EXPECT_FALSE(plan.cuda);
  EXPECT_FALSE(plan.cuda_graphs);
  EXPECT_EQ(plan.precision, Precision::kFp32);
  EXPECT_EQ(plan.notice,
            "world.device auto: no GPU visible on h1: CPU ranks with train.cuda_graphs off and "
            "train.precision fp32 instead of bf16 (GPU-only settings)");
  // The job itself is as loaded.
  EXPECT_TRUE(job.train.cuda_graphs);
  EXPECT_EQ(job.train.precision, Precision::kBf16);
}

TEST(DevicePlan, AutoWithoutGpuSettingsSaysNothing) {
  JobConfig job = GpuRecipe(Device::kAuto);
  job.train.cuda_graphs = false;
  job.train.precision = Precision::kFp32;
  const DevicePlan plan = PlanDevice(job, false, "h1");
  EXPECT_FALSE(plan.cuda);
  EXPECT_EQ(plan.notice, "");
}

TEST(DevicePlan, CudaWithoutAGpuIsAConfigError) {
  try {
    PlanDevice(GpuRecipe(Device::kCuda), false, "h1");
    FAIL() << "planned";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "r.yaml: world.device: cuda, but no GPU is visible on h1 (world.device auto "
              "trains on the CPU there)");
  }
  EXPECT_TRUE(PlanDevice(GpuRecipe(Device::kCuda), true, "h1").cuda_graphs);
}

TEST(DevicePlan, CpuKeepsBf16AsAsked) {
  JobConfig job = GpuRecipe(Device::kAuto);
  job.world.device = Device::kCpu;
  job.train.cuda_graphs = false;  // refused with device cpu when loaded
  for (const bool gpu : {false, true}) {
    const DevicePlan plan = PlanDevice(job, gpu, "h1");
    EXPECT_FALSE(plan.cuda);
    EXPECT_EQ(plan.precision, Precision::kBf16);
    EXPECT_EQ(plan.notice, "");
  }
}

}  // namespace
}  // namespace ringpilot::config
