// Device facts the telemetry reports: waiting for the device, and its peak memory.
#pragma once

namespace ringpilot::trainer::telemetry {

/// Waits for all work on the current CUDA device (no-op on the CPU). Setup, first step
/// and end of run only: never on the hot path.
void SynchronizeDevice(bool cuda);

/// Peak bytes LibTorch's caching allocator handed out on the current device (what
/// torch.cuda.max_memory_allocated reports); 0 on the CPU.
double PeakDeviceMemoryBytes(bool cuda);

}  // namespace ringpilot::trainer::telemetry
