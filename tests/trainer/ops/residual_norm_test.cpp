#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/ops/residual_norm.h"

#ifdef RINGPILOT_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include "tests/trainer/cuda_graph_capture.h"
#endif

namespace ringpilot::trainer::ops {
namespace {

constexpr double kEps = 1e-12;

struct Result {
  at::Tensor out, out_low, keep, d_branch, d_residual, d_weight, d_bias;
};

struct Inputs {
  at::Tensor branch, residual, weight, bias, grad_out, grad_low;
};

Inputs MakeInputs(const std::vector<int64_t>& shape, at::ScalarType dtype,
                  const at::TensorOptions& options) {
  const int64_t h = shape.back();
  Inputs in;
  in.branch = (at::randn(shape, options) * 2).to(dtype);
  in.residual = at::randn(shape, options) * 3 + 0.5;
  in.weight = at::randn({h}, options);
  in.bias = at::randn({h}, options);
  in.grad_out = at::randn(shape, options);
  in.grad_low = at::randn(shape, options).to(dtype);
  return in;
}

// ResidualLayerNorm, with gradients from both outputs; `preset` (when defined) is the
// parameters' .grad before backward, to check accumulation.
Result RunOurs(const Inputs& in, double p, bool accumulate, const at::Tensor& preset = {}) {
  at::Tensor branch = in.branch.detach().clone().requires_grad_();
  at::Tensor residual = in.residual.detach().clone().requires_grad_();
  at::Tensor weight = in.weight.detach().clone().requires_grad_();
  at::Tensor bias = in.bias.detach().clone().requires_grad_();
  if (preset.defined()) {
    weight.mutable_grad() = preset.clone();
    bias.mutable_grad() = preset.clone();
  }
  const ResidualNorm r = ResidualLayerNorm(branch, residual, weight, bias, kEps, p, accumulate);
  torch::autograd::backward({r.out, r.out_low}, {in.grad_out, in.grad_low});
  return {r.out.detach(),  r.out_low.detach(), r.keep,     branch.grad(),
          residual.grad(), weight.grad(),      bias.grad()};
}

// The block in float64 with the given keep mask (undefined: no dropout).
Result RunReference(const Inputs& in, double p, const at::Tensor& keep) {
  const auto d = [](const at::Tensor& t) {
    return t.detach().to(at::kDouble).cpu().requires_grad_();
  };
  at::Tensor branch = d(in.branch), residual = d(in.residual), weight = d(in.weight),
             bias = d(in.bias);
  at::Tensor kept = branch;
  if (keep.defined()) kept = branch * keep.to(at::kDouble).cpu() * (1.0 / (1.0 - p));
  const at::Tensor out = at::layer_norm(kept + residual, {residual.size(-1)}, weight, bias, kEps);
  out.backward(in.grad_out.to(at::kDouble).cpu() + in.grad_low.to(at::kDouble).cpu());
  return {out.detach(), {}, {}, branch.grad(), residual.grad(), weight.grad(), bias.grad()};
}

double RelMaxError(const at::Tensor& a, const at::Tensor& ref) {
  const at::Tensor r = ref.to(at::kDouble).cpu();
  const double mag = r.abs().max().item<double>();
  return (a.to(at::kDouble).cpu() - r).abs().max().item<double>() / (mag > 0 ? mag : 1.0);
}

struct Case {
  std::vector<int64_t> shape;
  at::ScalarType dtype;
  double p;
};

std::string Describe(const Case& c) {
  std::string what = std::string(c10::toString(c.dtype)) + " p=" + std::to_string(c.p);
  for (int64_t n : c.shape) what += " " + std::to_string(n);
  return what;
}

void CheckAgainstReference(const at::TensorOptions& options, const std::vector<Case>& cases) {
  torch::manual_seed(21);
  for (const Case& c : cases) {
    const std::string what = Describe(c);
    const Inputs in = MakeInputs(c.shape, c.dtype, options);
    const Result ours = RunOurs(in, c.p, /*accumulate=*/false);
    ASSERT_EQ(ours.keep.defined(), c.p > 0) << what;
    const Result ref = RunReference(in, c.p, ours.keep);
    EXPECT_EQ(ours.out.scalar_type(), at::kFloat) << what;
    EXPECT_EQ(ours.out_low.scalar_type(), c.dtype) << what;
    EXPECT_LE(RelMaxError(ours.out, ref.out), 2e-6) << what << ": out";
    EXPECT_TRUE(at::equal(ours.out_low, ours.out.to(c.dtype))) << what << ": out_low";
    EXPECT_LE(RelMaxError(ours.d_residual, ref.d_residual), 5e-5) << what << ": residual grad";
    EXPECT_EQ(ours.d_branch.scalar_type(), c.dtype) << what;
    // Rounded to the branch's dtype: bf16 keeps 8 significant bits.
    const double branch_tol = c.dtype == at::kFloat ? 5e-5 : (c.dtype == at::kHalf ? 2e-3 : 8e-3);
    EXPECT_LE(RelMaxError(ours.d_branch, ref.d_branch), branch_tol) << what << ": branch grad";
    EXPECT_LE(RelMaxError(ours.d_weight, ref.d_weight), 5e-5) << what << ": weight grad";
    EXPECT_LE(RelMaxError(ours.d_bias, ref.d_bias), 5e-5) << what << ": bias grad";
    if (c.p > 0) {
      const double kept = ours.keep.to(at::kDouble).mean().item<double>();
      const double n = static_cast<double>(ours.keep.numel());
      // Five standard deviations of a binomial fraction.
      EXPECT_NEAR(kept, 1.0 - c.p, 5.0 * std::sqrt(c.p * (1.0 - c.p) / n) + 1e-12) << what;
    }
  }
}

TEST(ResidualLayerNorm, MatchesFloat64ReferenceOnCpu) {
  CheckAgainstReference(at::TensorOptions(), {{{4, 32, 128}, at::kFloat, 0.1},
                                              {{64, 128}, at::kBFloat16, 0.1},
                                              {{9, 130}, at::kFloat, 0.0}});
}

TEST(ResidualLayerNorm, AccumulatesParameterGradientsOnCpuThroughAutograd) {
  torch::manual_seed(22);
  const Inputs in = MakeInputs({16, 64}, at::kFloat, at::TensorOptions());
  const at::Tensor preset = at::full({64}, 0.25);
  const Result plain = RunOurs(in, 0.0, false);
  const Result acc = RunOurs(in, 0.0, true, preset);
  EXPECT_LE(RelMaxError(acc.d_weight, plain.d_weight + preset), 1e-6);
  EXPECT_LE(RelMaxError(acc.d_bias, plain.d_bias + preset), 1e-6);
}

TEST(ResidualLayerNorm, RejectsADropoutProbabilityOutsideItsRange) {
  const Inputs in = MakeInputs({2, 8}, at::kFloat, at::TensorOptions());
  EXPECT_THROW(ResidualLayerNorm(in.branch, in.residual, in.weight, in.bias, kEps, 1.0),
               c10::Error);
  EXPECT_THROW(ResidualLayerNorm(in.branch, in.residual, in.weight, in.bias, kEps, -0.1),
               c10::Error);
}

#ifdef RINGPILOT_WITH_CUDA
TEST(ResidualLayerNormCuda, KernelsMatchFloat64Reference) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // BERT-base's shape; one group of 4 per lane for some lanes only (100); 6 groups per
  // lane with the last partial (520); the widest (1024, fp16); not a multiple of 4 and a
  // float32 branch (the ATen composition on CUDA).
  CheckAgainstReference(at::device(at::kCUDA), {{{8192, 768}, at::kBFloat16, 0.1},
                                                {{8192, 768}, at::kBFloat16, 0.0},
                                                {{7, 100}, at::kBFloat16, 0.1},
                                                {{33, 520}, at::kBFloat16, 0.3},
                                                {{5, 3, 1024}, at::kHalf, 0.1},
                                                {{6, 770}, at::kBFloat16, 0.1},
                                                {{64, 768}, at::kFloat, 0.1}});
}

TEST(ResidualLayerNormCuda, AccumulatesIntoParameterGradientsAndIsDeterministic) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(23);
  const Inputs in = MakeInputs({2048, 768}, at::kBFloat16, at::device(at::kCUDA));
  const at::Tensor preset = at::full({768}, 0.25, at::device(at::kCUDA));
  torch::manual_seed(5);
  const Result plain = RunOurs(in, 0.1, false);
  torch::manual_seed(5);
  const Result again = RunOurs(in, 0.1, false);
  for (const auto& [a, b, name] : std::vector<std::tuple<at::Tensor, at::Tensor, std::string>>{
           {plain.out, again.out, "out"},
           {plain.keep, again.keep, "keep"},
           {plain.d_branch, again.d_branch, "branch grad"},
           {plain.d_weight, again.d_weight, "weight grad"},
           {plain.d_bias, again.d_bias, "bias grad"}}) {
    EXPECT_TRUE(at::equal(a, b)) << name << " differs between two runs from one seed";
  }
  torch::manual_seed(5);
  const Result acc = RunOurs(in, 0.1, true, preset);
  EXPECT_TRUE(at::equal(acc.keep, plain.keep));
  EXPECT_LE(RelMaxError(acc.d_weight, plain.d_weight + preset), 1e-6);
  EXPECT_LE(RelMaxError(acc.d_bias, plain.d_bias + preset), 1e-6);
}

TEST(ResidualLayerNormCuda, MisalignedViewsGiveTheSameResultsAsAlignedCopies) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(25);
  const auto options = at::device(at::kCUDA);
  const int64_t rows = 64, h = 768, n = rows * h;
  // Contiguous views starting one element into their storage: 2 bytes off for bf16, 4 for
  // float32, off the kernels' 8- and 16-byte vectors.
  const at::Tensor branch_store = at::randn({n + 1}, options).to(at::kBFloat16).requires_grad_();
  const at::Tensor residual_store = at::randn({n + 1}, options).requires_grad_();
  const Inputs in = MakeInputs({rows, h}, at::kBFloat16, options);
  const at::Tensor weight = in.weight.clone().requires_grad_();
  const at::Tensor bias = in.bias.clone().requires_grad_();
  auto run = [&](const at::Tensor& branch, const at::Tensor& residual) {
    const ResidualNorm r = ResidualLayerNorm(branch, residual, weight, bias, kEps, 0.0);
    auto g =
        torch::autograd::grad({r.out, r.out_low}, {branch, weight}, {in.grad_out, in.grad_low});
    return std::vector<at::Tensor>{r.out, g[0], g[1]};
  };
  const std::vector<at::Tensor> shifted = run(branch_store.narrow(0, 1, n).view({rows, h}),
                                              residual_store.narrow(0, 1, n).view({rows, h}));
  const std::vector<at::Tensor> aligned =
      run(branch_store.detach().narrow(0, 1, n).view({rows, h}).clone().requires_grad_(),
          residual_store.detach().narrow(0, 1, n).view({rows, h}).clone().requires_grad_());
  EXPECT_TRUE(at::equal(shifted[0], aligned[0])) << "out";
  EXPECT_TRUE(at::equal(shifted[1], aligned[1])) << "branch gradient";
  EXPECT_TRUE(at::equal(shifted[2], aligned[2])) << "weight gradient";
}

TEST(ResidualLayerNormCuda, EachCudaGraphReplayDrawsAFreshMask) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(24);
  const double p = 0.1;
  const Inputs in = MakeInputs({512, 768}, at::kBFloat16, at::device(at::kCUDA));
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  c10::cuda::CUDAStreamGuard guard(side);
  at::Tensor branch = in.branch.detach().clone().requires_grad_();
  at::Tensor residual = in.residual.detach().clone().requires_grad_();
  at::Tensor weight = in.weight.detach().clone().requires_grad_();
  at::Tensor bias = in.bias.detach().clone().requires_grad_();
  at::Tensor out, keep, d_residual, d_weight;
  auto step = [&] {
    const ResidualNorm r = ResidualLayerNorm(branch, residual, weight, bias, kEps, p);
    out = r.out, keep = r.keep;
    auto g =
        torch::autograd::grad({r.out, r.out_low}, {residual, weight}, {in.grad_out, in.grad_low});
    d_residual = g[0], d_weight = g[1];
  };
  at::cuda::CUDAGraph graph;
  CaptureStep(graph, step);
  std::vector<at::Tensor> masks;
  for (int replay = 0; replay < 2; ++replay) {
    graph.replay();
    torch::cuda::synchronize();
    const Result ref = RunReference(in, p, keep);
    EXPECT_LE(RelMaxError(out, ref.out), 2e-6) << "replay " << replay;
    EXPECT_LE(RelMaxError(d_residual, ref.d_residual), 5e-5) << "replay " << replay;
    EXPECT_LE(RelMaxError(d_weight, ref.d_weight), 5e-5) << "replay " << replay;
    masks.push_back(keep.clone());
  }
  EXPECT_FALSE(at::equal(masks[0], masks[1])) << "two replays drew the same dropout mask";
}
#endif

}  // namespace
}  // namespace ringpilot::trainer::ops
