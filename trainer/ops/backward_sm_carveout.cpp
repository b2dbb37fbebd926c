#include "trainer/ops/backward_sm_carveout.h"

#include <stdexcept>
#include <string>

#include <ATen/Context.h>

#ifdef RINGPILOT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>
#include <dlfcn.h>
#endif

namespace ringpilot::trainer::ops {
namespace {

#ifdef RINGPILOT_WITH_CUDA
using SetSmCountTarget = cublasStatus_t (*)(cublasHandle_t, int);

// The cuBLAS that LibTorch loaded (the wheel's), not a second one linked from the
// toolkit under the same soname: the handle is LibTorch's.
void* FindSetSmCountTarget() {
  void* f = dlsym(RTLD_DEFAULT, "cublasSetSmCountTarget");
  if (f == nullptr) {
    throw std::runtime_error(
        "comm.backward_sm_carveout: cublasSetSmCountTarget not found in the loaded cuBLAS");
  }
  return f;
}
#endif

}  // namespace

BackwardSmCarveout::BackwardSmCarveout(int carveout_sms, bool cuda) {
#ifdef RINGPILOT_WITH_CUDA
  if (!cuda || carveout_sms <= 0) return;
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  if (carveout_sms >= sms) {
    throw std::invalid_argument("comm.backward_sm_carveout: " + std::to_string(carveout_sms) +
                                " SMs, but the GPU has " + std::to_string(sms));
  }
  set_sm_count_target_ = FindSetSmCountTarget();
  carveout_ = carveout_sms;
  sm_target_ = sms - carveout_sms;
#else
  (void)carveout_sms;
  (void)cuda;
#endif
}

void BackwardSmCarveout::Arm(at::Tensor& loss) const {
#ifdef RINGPILOT_WITH_CUDA
  if (!active()) return;
  const int target = sm_target_, carveout = carveout_;
  const auto set_target = reinterpret_cast<SetSmCountTarget>(set_sm_count_target_);
  loss.register_hook([target, carveout, set_target](const at::Tensor& grad) {
    // Autograd's device thread: its cuBLAS handle serves only backward kernels. Setting
    // the target every step costs a handle lookup and keeps it right should the pool
    // hand this thread a different handle.
    set_target(at::cuda::getCurrentCUDABlasHandle(), target);
    at::globalContext()._setSMCarveout_EXPERIMENTAL(carveout);
    return grad;
  });
#else
  (void)loss;
#endif
}

void BackwardSmCarveout::Disarm() const {
  if (active()) at::globalContext()._setSMCarveout_EXPERIMENTAL(std::nullopt);
}

}  // namespace ringpilot::trainer::ops
