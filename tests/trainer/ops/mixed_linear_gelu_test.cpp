// MixedLinear with LinearActivation::kGelu against gelu of the plain MixedLinear, and the
// fused GELU backward + bias column sums (trainer/ops/gelu_kernels.h) against
// at::gelu_backward and ColumnSum.
#include <iostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/trainer/ops/linear_test_util.h"
#include "trainer/ops/mixed_linear.h"

#ifdef RINGPILOT_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "tests/trainer/cuda_graph_capture.h"
#include "trainer/ops/gelu_kernels.h"
#endif

namespace ringpilot::trainer::ops {
namespace {

struct Grads {
  at::Tensor y, dx, dw, db;
};

// One forward and backward of a one-layer group with dy; `fused`: GELU inside MixedLinear,
// else at::gelu of its output. `accumulate`: the layer's .grad preset (ones) and
// accumulated into in place.
Grads RunLayer(const Layer& l, const at::Tensor& x0, const at::Tensor& dy, bool fused,
               bool accumulate) {
  ShadowWeights shadows(ShadowWeightsOptions{accumulate});
  const int g = shadows.AddGroup({l.weight}, {l.bias});
  shadows.Refresh(at::kBFloat16);
  for (const at::Tensor& p : {l.weight, l.bias}) {
    p.mutable_grad() = accumulate ? at::ones_like(p) : at::Tensor();
  }
  at::Tensor x = x0.detach().clone().requires_grad_();
  const at::Tensor y =
      fused ? shadows.Forward(g, x, LinearActivation::kGelu) : at::gelu(shadows.Forward(g, x));
  y.backward(dy);
  return {y.detach(), x.grad(), l.weight.grad().clone(), l.bias.grad().clone()};
}

void ExpectSame(const Grads& a, const Grads& b, double tol, const std::string& what) {
  EXPECT_TRUE(at::equal(a.y, b.y)) << what << ": y";
  EXPECT_LE(RelMaxError(a.dx, b.dx), tol) << what << ": dx";
  EXPECT_LE(RelMaxError(a.dw, b.dw), tol) << what << ": dweight";
  EXPECT_LE(RelMaxError(a.db, b.db), tol) << what << ": dbias";
}

// On the CPU both run at::gelu_backward and the same sums: the same bits.
TEST(MixedLinearGelu, SameAsGeluOfTheLinearOnCpu) {
  torch::manual_seed(21);
  const Layer l = MakeLayer(40, 24, at::TensorOptions());
  const at::Tensor x = at::randn({37, 24});
  const at::Tensor dy = at::randn({37, 40}).to(at::kBFloat16);
  for (const bool accumulate : {false, true}) {
    const std::string what = accumulate ? "accumulating" : "returned";
    ExpectSame(RunLayer(l, x, dy, true, accumulate), RunLayer(l, x, dy, false, accumulate), 0.0,
               what);
  }
}

TEST(MixedLinearGelu, RefusedOnPaddedOutputs) {
  const Layer l = MakeLayer(13, 8, at::TensorOptions());
  ShadowWeights shadows;
  ShadowGroupOptions layout;
  layout.pad_outputs_to = 16;
  const int g = shadows.AddGroup({l.weight}, {l.bias}, layout);
  shadows.Refresh(at::kBFloat16);
  const at::Tensor x = at::randn({4, 8});
  EXPECT_THROW(shadows.Forward(g, x, LinearActivation::kGelu), c10::Error);
  EXPECT_EQ(shadows.Forward(g, x).size(1), 16);
}

#ifdef RINGPILOT_WITH_CUDA
class MixedLinearGeluCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// grad_input as at::gelu_backward writes it (ATen's float formula, rounded once), and the
// column sums of those values with ColumnSum's bits, into an added and an overwritten
// range; 16-byte and scalar paths, bf16 and fp16.
TEST_F(MixedLinearGeluCuda, BackwardKernelMatchesAtenAndColumnSumBits) {
  torch::manual_seed(22);
  struct Case {
    int64_t rows, cols;
    at::ScalarType dtype;
  };
  const std::vector<Case> cases = {{8192, 3072, at::kBFloat16},
                                   {1229, 768, at::kBFloat16},
                                   {37, 40, at::kHalf},
                                   {5, 6, at::kBFloat16},
                                   {300, 3, at::kHalf}};
  const auto options = at::device(at::kCUDA);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  for (const Case& c : cases) {
    const std::string what = std::to_string(c.rows) + "x" + std::to_string(c.cols) + " " +
                             std::string(c10::toString(c.dtype));
    const at::Tensor h = at::randn({c.rows, c.cols}, options).mul_(3).to(c.dtype);
    const at::Tensor dy = at::randn({c.rows, c.cols}, options).to(c.dtype);
    const at::Tensor grad_in = at::empty_like(h);
    const int64_t split = c.cols / 2 > 0 ? c.cols / 2 : 1;
    const at::Tensor preset = at::randn({split}, options);
    const at::Tensor added = preset.clone();
    const at::Tensor written = at::full({c.cols - split}, 3.0f, options);
    std::vector<column_sum::ColumnRange> ranges = {{added.data_ptr<float>(), 0, split, true}};
    if (c.cols > split) ranges.push_back({written.data_ptr<float>(), split, c.cols, false});
    gelu::BackwardArgs a;
    a.grad_out = dy.data_ptr();
    a.input = h.data_ptr();
    a.grad_input = grad_in.data_ptr();
    a.dtype = c.dtype == at::kHalf ? ElementType::kFloat16 : ElementType::kBFloat16;
    a.rows = c.rows;
    a.cols = c.cols;
    a.ranges = ranges.data();
    a.range_count = static_cast<int>(ranges.size());
    const at::Tensor workspace = at::empty({gelu::WorkspaceFloats(a)}, options);
    a.workspace = workspace.data_ptr<float>();
    ASSERT_EQ(gelu::Backward(a, stream), nullptr) << what;

    // The same float formula, rounded once: equal bits expected. Allowed: a rounding step
    // (relative 2^-7) on one element in 10^4, should nvcc contract ATen's copy differently.
    const at::Tensor ref = at::gelu_backward(dy, h);
    const int64_t differing = grad_in.ne(ref).sum().item<int64_t>();
    const at::Tensor ref_f = ref.to(at::kFloat);
    const bool within_a_rounding = (grad_in.to(at::kFloat) - ref_f)
                                       .abs()
                                       .le(ref_f.abs() * (1.0 / 128) + 1e-30)
                                       .all()
                                       .item<bool>();
    std::cout << what << ": " << differing << " of " << grad_in.numel()
              << " elements differ from at::gelu_backward\n";
    EXPECT_TRUE(within_a_rounding) << what;
    EXPECT_LE(differing, grad_in.numel() / 10000) << what;
    const at::Tensor sums = ColumnSumFloat(grad_in);
    EXPECT_TRUE(at::equal(added, preset + sums.narrow(0, 0, split))) << what << ": added range";
    if (c.cols > split) {
      EXPECT_TRUE(at::equal(written, sums.narrow(0, split, c.cols - split)))
          << what << ": overwritten range";
    }
  }
}

TEST_F(MixedLinearGeluCuda, GradientsMatchTheUnfusedComposition) {
  torch::manual_seed(23);
  const auto options = at::device(at::kCUDA);
  const Layer l = MakeLayer(3072, 768, options);
  const at::Tensor x = at::randn({512, 768}, options);
  const at::Tensor dy = at::randn({512, 3072}, options).to(at::kBFloat16);
  for (const bool accumulate : {false, true}) {
    const std::string what = accumulate ? "accumulating" : "returned";
    // The GELU gradient of the previous test (ATen's bits, or a rounding off in a few
    // elements) into the same GEMMs and sums.
    ExpectSame(RunLayer(l, x, dy, true, accumulate), RunLayer(l, x, dy, false, accumulate), 1e-4,
               what);
  }
}

TEST_F(MixedLinearGeluCuda, ForwardBackwardReplayInACudaGraph) {
  torch::manual_seed(24);
  const auto options = at::device(at::kCUDA);
  const Layer l = MakeLayer(256, 64, options);
  ShadowWeights shadows;
  const int g = shadows.AddGroup({l.weight}, {l.bias});
  const at::Tensor x = at::randn({128, 64}, options).requires_grad_();
  const at::Tensor dy = at::randn({128, 256}, options).to(at::kBFloat16);
  at::Tensor y, dx, db;
  auto step = [&] {
    shadows.Refresh(at::kBFloat16);
    y = shadows.Forward(g, x, LinearActivation::kGelu);
    auto grads = torch::autograd::grad({y}, {x, l.bias}, {dy});
    dx = grads[0];
    db = grads[1];
  };
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  c10::cuda::CUDAStreamGuard guard(side);
  step();
  const at::Tensor y0 = y.clone(), dx0 = dx.clone(), db0 = db.clone();
  y = dx = db = at::Tensor();
  at::cuda::CUDAGraph graph;
  CaptureStep(graph, step);
  graph.replay();
  torch::cuda::synchronize();
  EXPECT_TRUE(at::equal(y, y0) && at::equal(dx, dx0) && at::equal(db, db0));
}
#endif

}  // namespace
}  // namespace ringpilot::trainer::ops
