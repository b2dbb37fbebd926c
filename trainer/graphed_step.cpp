#include "trainer/graphed_step.h"

#ifdef RINGPILOT_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <nvtx3/nvToolsExt.h>
#endif

#include <optional>
#include <stdexcept>

namespace ringpilot::trainer {

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

CopyFence::CopyFence(bool cuda) : cuda_(cuda) {
  if (!cuda_) return;
  for (auto& e : events_) {
    cudaEvent_t ev;
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    e = ev;
  }
}
CopyFence::~CopyFence() {
  for (auto& e : events_) {
    if (e) cudaEventDestroy(static_cast<cudaEvent_t>(e));
  }
}
void CopyFence::Record(int slot) {
  if (cuda_) {
    cudaEventRecord(static_cast<cudaEvent_t>(events_[slot]),
                    c10::cuda::getCurrentCUDAStream().stream());
  }
}
void CopyFence::Wait(int slot) {
  if (cuda_) cudaEventSynchronize(static_cast<cudaEvent_t>(events_[slot]));
}

NvtxRange::NvtxRange(const char* name) { nvtxRangePushA(name); }
NvtxRange::~NvtxRange() { nvtxRangePop(); }
#else
struct GraphedStep::Impl {};
GraphedStep::GraphedStep() = default;
GraphedStep::~GraphedStep() = default;
void GraphedStep::Capture(const std::function<void()>&) {
  throw std::runtime_error("CUDA graphs need a CUDA build of ringpilot");
}
void GraphedStep::Replay() { throw std::runtime_error("CUDA graphs need a CUDA build"); }
bool GraphedStep::captured() const { return false; }
CopyFence::CopyFence(bool) : cuda_(false) {}
CopyFence::~CopyFence() = default;
void CopyFence::Record(int) {}
void CopyFence::Wait(int) {}
NvtxRange::NvtxRange(const char*) {}
NvtxRange::~NvtxRange() = default;
#endif

}  // namespace ringpilot::trainer
