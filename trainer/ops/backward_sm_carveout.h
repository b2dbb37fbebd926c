// cuBLAS GEMMs of the backward pass planned for fewer SMs than the GPU has, so the NCCL
// kernels that overlap backward (the gradient all-reduces) do not split a GEMM's last
// wave (comm.backward_sm_carveout).
#pragma once

#include <ATen/core/Tensor.h>

namespace ringpilot::trainer::ops {

/// Leaves `carveout` SMs out of the plans of the cuBLAS and cuBLASLt GEMMs that the
/// backward pass launches; forward GEMMs still plan for the whole GPU.
///
/// How: a hook on the loss runs first in every backward, on autograd's device thread,
/// and sets that thread's cuBLAS handle's SM count target (cublasSetSmCountTarget; the
/// handle is that thread's own, so the main thread's forward GEMMs keep all SMs) and
/// ATen's cuBLASLt carveout (a process-wide setting, cleared again by Disarm()). Under
/// CUDA graphs the plans are fixed at capture, so replays keep them.
///
/// Thread-safety: construct, Arm() and Disarm() on the training loop's thread, Arm()
/// before and Disarm() after each `loss.backward()`; the hook itself runs on autograd's
/// thread while the loop's thread waits in backward().
class BackwardSmCarveout {
 public:
  /// `carveout_sms` 0, or a CPU run: every call does nothing. Throws std::invalid_argument
  /// when the GPU has no more SMs than the carveout.
  BackwardSmCarveout(int carveout_sms, bool cuda);

  /// Registers the hook on `loss` (which must require grad). Call before each backward.
  void Arm(at::Tensor& loss) const;
  /// Clears ATen's cuBLASLt carveout. Call after each backward.
  void Disarm() const;

  bool active() const { return sm_target_ > 0; }
  /// SMs the backward pass's GEMMs are planned for (0: not active).
  int sm_target() const { return sm_target_; }

 private:
  int carveout_ = 0;
  int sm_target_ = 0;
  void* set_sm_count_target_ = nullptr;  // cublasSetSmCountTarget, looked up once
};

}  // namespace ringpilot::trainer::ops
