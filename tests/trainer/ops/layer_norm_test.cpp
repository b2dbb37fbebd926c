#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/ops/layer_norm.h"

#ifdef RINGPILOT_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include "tests/trainer/cuda_graph_capture.h"
#endif

namespace ringpilot::trainer::ops {
namespace {

struct Grads {
  at::Tensor y, dx, dw, db;
};

Grads Run(bool ours, const at::Tensor& x0, const at::Tensor& w0, const at::Tensor& b0,
          const at::Tensor& dy) {
  at::Tensor x = x0.detach().clone().requires_grad_();
  at::Tensor w = w0.detach().clone().requires_grad_();
  at::Tensor b = b0.detach().clone().requires_grad_();
  at::Tensor y = ours ? LayerNorm(x, w, b, 1e-12)
                      : at::layer_norm(x.to(at::kFloat), {x.size(-1)}, w, b, 1e-12);
  y.backward(dy);
  return {y.detach(), x.grad(), w.grad(), b.grad()};
}

double RelMaxError(const at::Tensor& a, const at::Tensor& ref) {
  const at::Tensor r = ref.to(at::kDouble).cpu();
  const double mag = r.abs().max().item<double>();
  return (a.to(at::kDouble).cpu() - r).abs().max().item<double>() / (mag > 0 ? mag : 1.0);
}

void CheckAgainstAten(const at::TensorOptions& options) {
  torch::manual_seed(9);
  struct Case {
    std::vector<int64_t> shape;
    at::ScalarType dtype;
  };
  const std::vector<Case> cases = {{{64, 128, 768}, at::kFloat},
                                   {{1229, 768}, at::kBFloat16},
                                   {{7, 130}, at::kFloat},
                                   {{3, 5, 6}, at::kFloat},
                                   {{1, 768}, at::kFloat}};
  for (const Case& c : cases) {
    const int64_t h = c.shape.back();
    const at::Tensor x = (at::randn(c.shape, options) * 3 + 1).to(c.dtype);
    const at::Tensor w = at::randn({h}, options), b = at::randn({h}, options);
    const at::Tensor dy = at::randn(c.shape, options);
    const Grads ours = Run(true, x, w, b, dy), ref = Run(false, x, w, b, dy);
    std::string what = std::string(c10::toString(c.dtype));
    for (int64_t d : c.shape) what += " " + std::to_string(d);
    EXPECT_TRUE(at::equal(ours.y, ref.y)) << what << ": forward differs";
    EXPECT_TRUE(at::equal(ours.dx, ref.dx)) << what << ": input gradient differs";
    EXPECT_EQ(ours.dx.scalar_type(), c.dtype) << what;
    // Float32 sums over up to 8192 rows in another order.
    EXPECT_LE(RelMaxError(ours.dw, ref.dw), 2e-5) << what << " weight gradient";
    EXPECT_LE(RelMaxError(ours.db, ref.db), 2e-5) << what << " bias gradient";
  }
}

TEST(LayerNorm, SameAsAtenLayerNormOnCpu) { CheckAgainstAten(at::TensorOptions()); }

#ifdef RINGPILOT_WITH_CUDA
TEST(LayerNormCuda, SameAsAtenLayerNormWithKernelParameterGradients) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  CheckAgainstAten(at::device(at::kCUDA));
}

TEST(LayerNormCuda, ParameterGradientsAreDeterministicAndReplayInACudaGraph) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(10);
  const auto options = at::device(at::kCUDA);
  const at::Tensor x = at::randn({8192, 768}, options).requires_grad_();
  const at::Tensor w = at::randn({768}, options).requires_grad_();
  const at::Tensor b = at::randn({768}, options).requires_grad_();
  const at::Tensor dy = at::randn({8192, 768}, options);
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  c10::cuda::CUDAStreamGuard guard(side);
  at::Tensor y, dx, dw, db;
  auto step = [&] {
    y = LayerNorm(x, w, b, 1e-12);
    auto g = torch::autograd::grad({y}, {x, w, b}, {dy});
    dx = g[0], dw = g[1], db = g[2];
  };
  step();
  const at::Tensor dw0 = dw.clone(), db0 = db.clone(), dx0 = dx.clone();
  step();
  EXPECT_TRUE(at::equal(dw, dw0) && at::equal(db, db0)) << "not deterministic";
  y = dx = dw = db = at::Tensor();
  at::cuda::CUDAGraph graph;
  CaptureStep(graph, step);
  graph.replay();
  torch::cuda::synchronize();
  EXPECT_TRUE(at::equal(dw, dw0) && at::equal(db, db0) && at::equal(dx, dx0));
}
#endif

}  // namespace
}  // namespace ringpilot::trainer::ops
