#include "trainer/run_util.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include "base/files.h"

#ifdef RINGPILOT_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime.h>
#endif

namespace ringpilot::trainer {

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string HostName() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double pos = q * (v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}

std::string FormatDuration(double s) {
  char buf[32];
  if (s < 120) {
    std::snprintf(buf, sizeof(buf), "%.0fs", s);
  } else if (s < 7200) {
    std::snprintf(buf, sizeof(buf), "%.0fm%02.0fs", std::floor(s / 60), std::fmod(s, 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%.1fh", s / 3600);
  }
  return buf;
}

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void SynchronizeDevice(bool cuda) {
#ifdef RINGPILOT_WITH_CUDA
  if (cuda) cudaDeviceSynchronize();
#endif
  (void)cuda;
}

// Peak bytes allocated by LibTorch's caching allocator on this rank's device (what
// torch.cuda.max_memory_allocated reports), 0 on the CPU.
double PeakDeviceMemoryBytes(bool cuda) {
#ifdef RINGPILOT_WITH_CUDA
  if (cuda) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device());
    return static_cast<double>(
        stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
            .peak);
  }
#endif
  (void)cuda;
  return 0.0;
}

void WriteJsonAtomically(const std::string& path, const nlohmann::json& j) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(2) << "\n";
    out.flush();
    if (!out) throw std::runtime_error(tmp + ": write failed");
  }
  Rename(tmp, path);
}

}  // namespace ringpilot::trainer
