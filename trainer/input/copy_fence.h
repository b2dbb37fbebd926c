// The fence between a pinned host buffer and the asynchronous copy that reads it: the
// input's double buffers are refilled only once the copy that last read them is done.
#pragma once

namespace ringpilot::trainer::input {

/// Orders reuse of pinned host buffers: Record(slot) after queueing a host-to-device
/// copy from buffer `slot` (0 or 1) on the current CUDA stream, Wait(slot) before writing
/// that buffer again. No-ops on CPU. Not thread-safe.
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

}  // namespace ringpilot::trainer::input
