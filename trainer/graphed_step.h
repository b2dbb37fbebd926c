// Whole-step CUDA graph: capture forward, backward (with the NCCL all-reduces the
// gradient hooks issue) and the optimizer once, then replay it each step. Replays cost
// one launch instead of thousands, which is what removes the host-side bound of
// eager BERT-base.
#pragma once

#include <functional>
#include <memory>

namespace ringpilot::trainer {

/// Not thread-safe. Available only in CUDA builds (RINGPILOT_WITH_CUDA).
class GraphedStep {
 public:
  GraphedStep();
  ~GraphedStep();
  GraphedStep(const GraphedStep&) = delete;
  GraphedStep& operator=(const GraphedStep&) = delete;

  /// Runs `body` under stream capture on a side stream. Tensors `body` reads must have
  /// stable addresses (static inputs), and it must not synchronise with the host.
  /// Throws c10::Error when capture fails.
  void Capture(const std::function<void()>& body);
  /// Replays the captured work on the current stream.
  void Replay();
  bool captured() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Orders reuse of pinned host buffers: Record(slot) after queueing a host-to-device
/// copy from buffer `slot`, Wait(slot) before writing that buffer again. No-ops on CPU.
class CopyFence {
 public:
  explicit CopyFence(bool cuda);
  ~CopyFence();
  CopyFence(const CopyFence&) = delete;
  CopyFence& operator=(const CopyFence&) = delete;
  void Record(int slot);
  void Wait(int slot);

 private:
  bool cuda_;
  void* events_[2] = {nullptr, nullptr};  // cudaEvent_t
};

/// NVTX range for Nsight timelines; a no-op without CUDA.
class NvtxRange {
 public:
  explicit NvtxRange(const char* name);
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace ringpilot::trainer
