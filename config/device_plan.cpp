#include "config/device_plan.h"

namespace ringpilot::config {

DevicePlan PlanDevice(const JobConfig& job, bool gpu_visible, const std::string& host) {
  DevicePlan plan;
  const TrainConfig& train = job.train;
  switch (job.world.device) {
    case Device::kCuda:
      if (!gpu_visible) {
        throw ConfigError(job.source + ": world.device: cuda, but no GPU is visible on " + host +
                          " (world.device auto trains on the CPU there)");
      }
      plan.cuda = true;
      break;
    case Device::kCpu:
      plan.cuda = false;
      break;
    case Device::kAuto:
      plan.cuda = gpu_visible;
      break;
  }
  if (plan.cuda || job.world.device == Device::kCpu) {
    // cuda_graphs with device cpu is refused when the job is loaded (cross_checks.cpp).
    plan.cuda_graphs = plan.cuda && train.cuda_graphs;
    plan.precision = train.precision;
    return plan;
  }
  // auto without a GPU: the recipe's GPU settings would fail here (CUDA graphs) or run
  // bf16 autocast, which CPUs without bf16 units emulate slowly; the same job file runs as
  // written on a GPU host.
  std::string changed;
  if (train.cuda_graphs) changed = "train.cuda_graphs off";
  if (train.precision != Precision::kFp32) {
    changed += std::string(changed.empty() ? "" : " and ") + "train.precision fp32 instead of " +
               ToString(train.precision);
  }
  if (!RunsCommand(job) && !changed.empty()) {
    plan.notice = "world.device auto: no GPU visible on " + host + ": CPU ranks with " + changed +
                  " (GPU-only settings)";
  }
  return plan;
}

}  // namespace ringpilot::config
