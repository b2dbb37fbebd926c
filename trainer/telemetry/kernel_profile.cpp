#include "trainer/telemetry/kernel_profile.h"

#include <cstdio>
#include <cstdlib>
#include <set>
#include <stdexcept>

#include <torch/csrc/autograd/profiler_kineto.h>

#include "trainer/telemetry/device.h"

namespace ringpilot::trainer::telemetry {

namespace prof = torch::profiler::impl;

KernelProfile::KernelProfile(int rank, bool cuda) : rank_(rank), cuda_(cuda) {
  const char* prefix = std::getenv("RINGPILOT_KINETO_TRACE");
  if (prefix == nullptr || *prefix == '\0') return;
  prefix_ = prefix;
  if (const char* steps = std::getenv("RINGPILOT_KINETO_STEPS")) {
    long long first = 0, count = 0;
    if (std::sscanf(steps, "%lld:%lld", &first, &count) != 2 || first < 0 || count < 1) {
      throw std::runtime_error("RINGPILOT_KINETO_STEPS: expected FIRST:COUNT, got '" +
                               std::string(steps) + "'");
    }
    first_ = first;
    count_ = count;
  }
}

void KernelProfile::BeforeStep(int64_t index) {
  if (!active() || index != first_) return;
  std::set<prof::ActivityType> activities{prof::ActivityType::CPU};
  if (cuda_) activities.insert(prof::ActivityType::CUDA);
  const prof::ProfilerConfig config(prof::ProfilerState::KINETO);
  torch::autograd::profiler::prepareProfiler(config, activities);
  torch::autograd::profiler::enableProfiler(config, activities);
  running_ = true;
}

std::string KernelProfile::AfterStep(int64_t index) {
  if (!running_ || index != first_ + count_ - 1) return "";
  SynchronizeDevice(cuda_);
  running_ = false;
  auto result = torch::autograd::profiler::disableProfiler();
  const std::string path = prefix_ + ".rank-" + std::to_string(rank_) + ".json";
  result->save(path);
  return path;
}

}  // namespace ringpilot::trainer::telemetry
