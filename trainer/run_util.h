// Small helpers of the training loop: time, percentiles, versions, device memory.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ringpilot::trainer {

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b);
std::string HostName();
/// Linear-interpolated percentile, q in [0, 1]; 0 for an empty list.
double Percentile(std::vector<double> v, double q);
/// "42s", "3m05s", "1.5h".
std::string FormatDuration(double seconds);
double UnixNow();
/// Waits for all work on the device (no-op on the CPU).
void SynchronizeDevice(bool cuda);
/// Peak bytes LibTorch's caching allocator handed out on this device; 0 on the CPU.
double PeakDeviceMemoryBytes(bool cuda);
/// Writes `j` to `path` through a temporary file and rename.
void WriteJsonAtomically(const std::string& path, const nlohmann::json& j);

}  // namespace ringpilot::trainer
