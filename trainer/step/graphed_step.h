// Whole-step CUDA graph: capture forward, backward (with the NCCL all-reduces the
// gradient hooks issue) and the optimizer once, then replay it each step. Replays cost
// one launch instead of thousands, which is what removes the host-side bound of
// eager BERT-base.
#pragma once

#include <functional>
#include <memory>

namespace ringpilot::trainer::step {

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

}  // namespace ringpilot::trainer::step
