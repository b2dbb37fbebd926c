// NVTX ranges name the phases of a step on Nsight Systems' timeline (the step, data,
// forward, backward, reduce+update); nothing without CUDA.
#pragma once

#ifdef RINGPILOT_WITH_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

namespace ringpilot::trainer::telemetry {

/// An NVTX range from construction to destruction, on the calling thread; a no-op without
/// CUDA. Not copyable.
class NvtxRange {
 public:
#ifdef RINGPILOT_WITH_CUDA
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
#else
  explicit NvtxRange(const char* /*name*/) {}
#endif
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace ringpilot::trainer::telemetry
