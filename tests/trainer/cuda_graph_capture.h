// Test helper: capture one call of a training-step function in a CUDA graph.
#pragma once

#include <ATen/cuda/CUDAGraph.h>
#include <torch/cuda.h>

#include <functional>

namespace ringpilot::trainer {

/// Runs `step` once as warm-up, then captures one call of it into `graph`, on the current
/// stream, which must not be the default stream (make it current, with a
/// c10::cuda::CUDAStreamGuard, before the test's first eager step too: autograd nodes
/// created on the default stream and still alive make a capture depend on that stream).
/// Synchronises the device before and after. Replay with graph.replay().
inline void CaptureStep(at::cuda::CUDAGraph& graph, const std::function<void()>& step) {
  torch::cuda::synchronize();
  step();
  graph.capture_begin();
  step();
  graph.capture_end();
  torch::cuda::synchronize();
}

}  // namespace ringpilot::trainer
