#include "trainer/telemetry/kernel_profile.h"

#include <cstdio>
#include <cstdlib>
#include <set>
#include <stdexcept>

#include <torch/csrc/autograd/profiler_kineto.h>

#ifdef RINGPILOT_WITH_CUDA
#include <cuda_profiler_api.h>
#endif

#include "trainer/telemetry/device.h"

namespace ringpilot::trainer::telemetry {

namespace prof = torch::profiler::impl;

namespace {

// FIRST:COUNT from `name`; false when the variable is unset.
bool ReadSteps(const char* name, int64_t& first, int64_t& count) {
  const char* steps = std::getenv(name);
  if (steps == nullptr || *steps == '\0') return false;
  long long f = 0, c = 0;
  char extra = 0;
  if (std::sscanf(steps, "%lld:%lld%c", &f, &c, &extra) != 2 || f < 0 || c < 1) {
    throw std::runtime_error(std::string(name) + ": expected FIRST:COUNT, got '" + steps + "'");
  }
  first = f;
  count = c;
  return true;
}

}  // namespace

KernelProfile::KernelProfile(int rank, bool cuda) : rank_(rank), cuda_(cuda) {
  if (cuda_) ReadSteps("RINGPILOT_CUDA_PROFILER_STEPS", cuda_first_, cuda_count_);
  const char* prefix = std::getenv("RINGPILOT_KINETO_TRACE");
  if (prefix == nullptr || *prefix == '\0') return;
  prefix_ = prefix;
  ReadSteps("RINGPILOT_KINETO_STEPS", first_, count_);
}

void KernelProfile::BeforeStep(int64_t index) {
#ifdef RINGPILOT_WITH_CUDA
  if (cuda_first_ >= 0 && index == cuda_first_) cudaProfilerStart();
#endif
  if (!active() || index != first_) return;
  std::set<prof::ActivityType> activities{prof::ActivityType::CPU};
  if (cuda_) activities.insert(prof::ActivityType::CUDA);
  const prof::ProfilerConfig config(prof::ProfilerState::KINETO);
  torch::autograd::profiler::prepareProfiler(config, activities);
  torch::autograd::profiler::enableProfiler(config, activities);
  running_ = true;
}

std::string KernelProfile::AfterStep(int64_t index) {
#ifdef RINGPILOT_WITH_CUDA
  if (cuda_first_ >= 0 && index == cuda_first_ + cuda_count_ - 1) {
    SynchronizeDevice(cuda_);  // the steps' kernels are launched; let them finish inside
    cudaProfilerStop();
  }
#endif
  if (!running_ || index != first_ + count_ - 1) return "";
  SynchronizeDevice(cuda_);
  running_ = false;
  auto result = torch::autograd::profiler::disableProfiler();
  const std::string path = prefix_ + ".rank-" + std::to_string(rank_) + ".json";
  result->save(path);
  return path;
}

}  // namespace ringpilot::trainer::telemetry
