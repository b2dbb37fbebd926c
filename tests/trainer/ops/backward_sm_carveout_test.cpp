#include <optional>
#include <stdexcept>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/ops/backward_sm_carveout.h"

#ifdef RINGPILOT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>
#include <dlfcn.h>
#endif

namespace ringpilot::trainer::ops {
namespace {

// A CPU run, or carveout 0, arms nothing: backward runs as before and ATen's cuBLASLt
// carveout stays unset.
TEST(BackwardSmCarveout, InactiveOnCpuAndAtZero) {
  for (const auto& [carveout, cuda] : {std::pair{16, false}, std::pair{0, true}}) {
    BackwardSmCarveout c(carveout, cuda);
    EXPECT_FALSE(c.active());
    EXPECT_EQ(c.sm_target(), 0);
    at::Tensor w = torch::randn({8, 8}, torch::requires_grad());
    at::Tensor loss = torch::mm(torch::randn({4, 8}), w).sum();
    c.Arm(loss);
    loss.backward();
    c.Disarm();
    ASSERT_TRUE(w.grad().defined());
    EXPECT_FALSE(at::globalContext()._SMCarveout_EXPERIMENTAL().has_value());
  }
}

#ifdef RINGPILOT_WITH_CUDA
int SmCountTarget(cublasHandle_t handle) {
  using Get = cublasStatus_t (*)(cublasHandle_t, int*);
  auto get = reinterpret_cast<Get>(dlsym(RTLD_DEFAULT, "cublasGetSmCountTarget"));
  int target = -1;
  if (get == nullptr || get(handle, &target) != CUBLAS_STATUS_SUCCESS) return -1;
  return target;
}

// During backward (seen from a hook on an intermediate, which runs after the loss's
// hook on the same autograd thread) that thread's cuBLAS handle targets SMs - carveout
// and ATen's cuBLASLt carveout is set; the main thread's handle, which forward uses,
// keeps targeting every SM, and Disarm() clears the carveout again. Gradients match an
// unarmed backward.
TEST(BackwardSmCarveoutCuda, BackwardGemmsTargetFewerSms) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  constexpr int kCarveout = 20;
  BackwardSmCarveout c(kCarveout, /*cuda=*/true);
  ASSERT_TRUE(c.active());
  EXPECT_EQ(c.sm_target(), sms - kCarveout);

  const auto opts = torch::TensorOptions().device(torch::kCUDA);
  at::Tensor x = torch::randn({256, 512}, opts);
  at::Tensor w = torch::randn({512, 512}, opts.requires_grad(true));
  auto gradient = [&](bool armed) {
    w.mutable_grad() = at::Tensor();
    at::Tensor h = torch::mm(x, w);
    int seen_target = -2;
    std::optional<int32_t> seen_carveout;
    h.register_hook([&](const at::Tensor& g) {
      seen_target = SmCountTarget(at::cuda::getCurrentCUDABlasHandle());
      seen_carveout = at::globalContext()._SMCarveout_EXPERIMENTAL();
      return g;
    });
    at::Tensor loss = torch::mm(h, w).square().mean();
    if (armed) c.Arm(loss);
    loss.backward();
    if (armed) c.Disarm();
    if (armed) {
      EXPECT_EQ(seen_target, sms - kCarveout);
      EXPECT_EQ(seen_carveout, std::optional<int32_t>(kCarveout));
    }
    return w.grad().clone();
  };
  at::Tensor plain = gradient(false);
  at::Tensor armed = gradient(true);
  EXPECT_FALSE(at::globalContext()._SMCarveout_EXPERIMENTAL().has_value());
  EXPECT_EQ(SmCountTarget(at::cuda::getCurrentCUDABlasHandle()), 0);  // this thread: untouched
  EXPECT_TRUE(torch::allclose(armed, plain, 1e-3, 1e-3));
}

TEST(BackwardSmCarveoutCuda, RejectsACarveoutOfEverySm) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  EXPECT_THROW(BackwardSmCarveout(sms, /*cuda=*/true), std::invalid_argument);
}
#endif

}  // namespace
}  // namespace ringpilot::trainer::ops
