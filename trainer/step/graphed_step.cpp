#include "trainer/step/graphed_step.h"

#ifdef RINGPILOT_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <optional>
#include <stdexcept>

namespace ringpilot::trainer::step {

#ifdef RINGPILOT_WITH_CUDA
struct GraphedStep::Impl {
  // Created at capture: constructing a CUDAGraph touches the CUDA runtime, which a
  // CPU-only run must never do.
  std::optional<at::cuda::CUDAGraph> graph;
  bool captured = false;
};

GraphedStep::GraphedStep() : impl_(std::make_unique<Impl>()) {}
GraphedStep::~GraphedStep() = default;

void GraphedStep::Capture(const std::function<void()>& body) {
  // Capture on the caller's stream, which must not be the legacy default stream: the
  // gradient accumulators were created on it, so backward's leaf work joins the
  // capture without cross-stream dependencies.
  auto stream = c10::cuda::getCurrentCUDAStream();
  stream.synchronize();
  // Relaxed: the NCCL watchdog thread keeps querying events while we capture.
  impl_->graph.emplace();
  impl_->graph->capture_begin({0, 0}, cudaStreamCaptureModeRelaxed);
  body();
  impl_->graph->capture_end();
  stream.synchronize();
  impl_->captured = true;
}

void GraphedStep::Replay() {
  if (!impl_->captured) throw std::logic_error("GraphedStep::Replay before Capture");
  impl_->graph->replay();
}

bool GraphedStep::captured() const { return impl_->captured; }

#else
struct GraphedStep::Impl {};
GraphedStep::GraphedStep() = default;
GraphedStep::~GraphedStep() = default;
void GraphedStep::Capture(const std::function<void()>&) {
  throw std::runtime_error("CUDA graphs need a CUDA build of ringpilot");
}
void GraphedStep::Replay() { throw std::runtime_error("CUDA graphs need a CUDA build"); }
bool GraphedStep::captured() const { return false; }
#endif

}  // namespace ringpilot::trainer::step
