#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/trainer/accumulate_grad_probe.h"
#include "tests/trainer/ops/linear_test_util.h"
#include "trainer/ops/linear_cross_entropy.h"
#include "trainer/ops/mixed_linear.h"

#ifdef RINGPILOT_WITH_CUDA
#include <ATen/autocast_mode.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include "tests/trainer/cuda_graph_capture.h"
#include "trainer/ops/column_sum_kernels.h"
#endif

namespace ringpilot::trainer::ops {
namespace {

// Reference gradients in float64 from the low-precision operands MixedLinear uses:
// y = xl wl^T + bl; dW = dy^T xl, db = sum(dy), dx = dy wl.
struct Reference {
  at::Tensor y, dx, dw, db;
};

Reference ReferenceOf(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                      const at::Tensor& dy, at::ScalarType low) {
  const at::Tensor xl = x.detach().to(low).to(at::kDouble);
  const at::Tensor wl = w.detach().to(low).to(at::kDouble);
  const at::Tensor bl = b.detach().to(low).to(at::kDouble);
  const at::Tensor g = dy.to(at::kDouble);
  return {at::addmm(bl, xl, wl.t()), g.mm(wl), g.t().mm(xl), g.sum(0)};
}

struct Outcome {
  at::Tensor y, dx;
  std::vector<at::Tensor> dw, db;
};

// Group `layers` in a ShadowWeights of `low`, one forward and backward with dy.
Outcome RunGroup(const std::vector<Layer>& layers, const at::Tensor& x0, const at::Tensor& dy,
                 at::ScalarType low) {
  ShadowWeights shadows;
  std::vector<at::Tensor> w, b;
  for (const Layer& l : layers) {
    w.push_back(l.weight);
    b.push_back(l.bias);
    if (l.weight.grad().defined()) l.weight.mutable_grad().zero_();
    if (l.bias.grad().defined()) l.bias.mutable_grad().zero_();
  }
  const int group = shadows.AddGroup(w, b);
  shadows.Refresh(low);
  at::Tensor x = x0.detach().clone().requires_grad_();
  at::Tensor y = shadows.Forward(group, x);
  y.backward(dy);
  Outcome o{y.detach(), x.grad(), {}, {}};
  for (const Layer& l : layers) {
    o.dw.push_back(l.weight.grad().clone());
    o.db.push_back(l.bias.grad().clone());
  }
  return o;
}

void CheckGroupAgainstReference(const at::TensorOptions& options, at::ScalarType low, double tol) {
  torch::manual_seed(3);
  const int64_t rows = 37, in = 24;
  const std::vector<Layer> layers = {MakeLayer(16, in, options), MakeLayer(8, in, options),
                                     MakeLayer(24, in, options)};
  const at::Tensor x = at::randn({rows, in}, options);
  const at::Tensor dy = at::randn({rows, 48}, options).to(low);
  const Outcome o = RunGroup(layers, x, dy, low);
  EXPECT_EQ(o.y.scalar_type(), low);
  EXPECT_EQ(o.dx.scalar_type(), at::kFloat) << "x is float32, so is its gradient";
  int64_t offset = 0;
  at::Tensor dx_ref = at::zeros({rows, in}, at::kDouble);
  for (size_t i = 0; i < layers.size(); ++i) {
    const int64_t n = layers[i].weight.size(0);
    const at::Tensor dyi = dy.narrow(1, offset, n).cpu();
    const Reference r =
        ReferenceOf(x.cpu(), layers[i].weight.cpu(), layers[i].bias.cpu(), dyi, low);
    const std::string what = "layer " + std::to_string(i);
    // The forward output is rounded to `low` once.
    EXPECT_LE(RelMaxError(o.y.narrow(1, offset, n), r.y), 1e-2) << what << " y";
    EXPECT_EQ(o.dw[i].scalar_type(), at::kFloat);
    EXPECT_LE(RelMaxError(o.dw[i], r.dw), tol) << what << " dweight";
    EXPECT_LE(RelMaxError(o.db[i], r.db), tol) << what << " dbias";
    dx_ref += r.dx;
    offset += n;
  }
  EXPECT_LE(RelMaxError(o.dx, dx_ref), tol) << "dx";
}

TEST(MixedLinear, GroupGradientsMatchFloat64ReferenceOnCpu) {
  CheckGroupAgainstReference(at::TensorOptions().dtype(at::kFloat), at::kBFloat16, 1e-5);
}

TEST(MixedLinear, LowPrecisionInputKeepsItsDtypeForItsGradient) {
  torch::manual_seed(4);
  const Layer l = MakeLayer(6, 10, at::TensorOptions());
  const at::Tensor x = at::randn({5, 10}).to(at::kBFloat16);
  const Outcome o = RunGroup({l}, x, at::randn({5, 6}).to(at::kBFloat16), at::kBFloat16);
  EXPECT_EQ(o.dx.scalar_type(), at::kBFloat16);
  EXPECT_EQ(o.dw[0].scalar_type(), at::kFloat);
}

TEST(ShadowWeights, RefreshFollowsTheMastersWithoutHistory) {
  torch::manual_seed(5);
  const Layer a = MakeLayer(4, 3, at::TensorOptions()), b = MakeLayer(5, 3, at::TensorOptions());
  ShadowWeights shadows;
  const int g = shadows.AddGroup({a.weight, b.weight}, {a.bias, b.bias});
  EXPECT_FALSE(shadows.Ready(at::kBFloat16, at::Device(at::kCPU)));
  shadows.Refresh(at::kBFloat16);
  EXPECT_TRUE(shadows.Ready(at::kBFloat16, at::Device(at::kCPU)));
  const at::Tensor x = at::randn({2, 3});
  auto expected = [&] {
    return at::cat({at::linear(x.to(at::kBFloat16), a.weight.detach().to(at::kBFloat16),
                               a.bias.detach().to(at::kBFloat16)),
                    at::linear(x.to(at::kBFloat16), b.weight.detach().to(at::kBFloat16),
                               b.bias.detach().to(at::kBFloat16))},
                   1);
  };
  {
    const at::NoGradGuard no_grad;
    EXPECT_TRUE(at::equal(shadows.Forward(g, x), expected()));
    a.weight.mul_(2.0);  // what an optimizer step does to a master
    b.bias.add_(1.0);
  }
  shadows.Refresh(at::kBFloat16);
  const at::NoGradGuard no_grad;
  EXPECT_TRUE(at::equal(shadows.Forward(g, x), expected()));
}

// The MLM decoder's layout: logits padded with -inf columns to an aligned width give the
// same loss and the same gradients as the unpadded group.
// `tol`: 0 where both widths run the same GEMM code (the CPU); on CUDA the two widths get
// different cuBLAS kernels, whose bf16 logits may differ by a rounding.
void CheckPaddedOutputs(const at::TensorOptions& options, int64_t rows, int64_t in, int64_t vocab,
                        int64_t pad_to, double tol) {
  torch::manual_seed(6);
  const Layer decoder = MakeLayer(vocab, in, options);
  const at::Tensor x0 = at::randn({rows, in}, options);
  const at::Tensor labels = at::randint(0, vocab, {rows}, options.dtype(at::kLong));
  struct Run {
    at::Tensor logits, loss, dx, dw, db;
  };
  auto run = [&](int64_t pad_to) {
    ShadowWeights shadows;
    ShadowGroupOptions layout;
    layout.pad_outputs_to = pad_to;
    const int g = shadows.AddGroup({decoder.weight}, {decoder.bias}, layout);
    shadows.Refresh(at::kBFloat16);
    for (const at::Tensor& p : {decoder.weight, decoder.bias}) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
    at::Tensor x = x0.clone().requires_grad_();
    Run r;
    r.logits = shadows.Forward(g, x);
    EXPECT_EQ(r.logits.size(1), shadows.OutputWidth(g));
    r.loss = CrossEntropyFloat(r.logits, labels);
    r.loss.backward();
    r.logits = r.logits.detach();
    r.dx = x.grad().clone();
    r.dw = decoder.weight.grad().clone();
    r.db = decoder.bias.grad().clone();
    return r;
  };
  const Run plain = run(1), padded = run(pad_to);
  const int64_t width = (vocab + pad_to - 1) / pad_to * pad_to;
  ASSERT_EQ(plain.logits.size(1), vocab);
  ASSERT_EQ(padded.logits.size(1), width);
  EXPECT_LE(RelMaxError(padded.logits.narrow(1, 0, vocab), plain.logits), tol);
  const at::Tensor pad = padded.logits.narrow(1, vocab, width - vocab).to(at::kFloat);
  EXPECT_TRUE(at::all(at::isinf(pad) & pad.lt(0)).item<bool>()) << pad;
  const double grad_tol = std::max(tol, 1e-6);
  EXPECT_NEAR(padded.loss.item<double>(), plain.loss.item<double>(),
              grad_tol * std::abs(plain.loss.item<double>()));
  EXPECT_LE(RelMaxError(padded.dx, plain.dx), grad_tol);
  EXPECT_LE(RelMaxError(padded.dw, plain.dw), grad_tol);
  EXPECT_LE(RelMaxError(padded.db, plain.db), grad_tol);
  EXPECT_TRUE(at::all(at::isfinite(padded.dw)).item<bool>());
}

TEST(ShadowWeights, PaddedOutputsLeaveTheSoftmaxLossAndGradientsUnchanged) {
  CheckPaddedOutputs(at::TensorOptions(), 37, 24, 13, 16, 0.0);
  const Layer decoder = MakeLayer(13, 24, at::TensorOptions());
  ShadowWeights bad;
  ShadowGroupOptions zero;
  zero.pad_outputs_to = 0;
  EXPECT_THROW(bad.AddGroup({decoder.weight}, {decoder.bias}, zero), c10::Error);
}

// HandOverRefresh: ShadowOf names each master's view, and Refresh stops copying (whoever
// took the views writes them); a Refresh of another dtype is then an error.
TEST(ShadowWeights, HandedOverShadowsAreNoLongerRefreshed) {
  const Layer a = MakeLayer(4, 3, at::TensorOptions()), b = MakeLayer(5, 3, at::TensorOptions());
  ShadowWeights shadows;
  shadows.AddGroup({a.weight, b.weight}, {a.bias, b.bias});
  EXPECT_FALSE(shadows.ShadowOf(a.weight).defined()) << "no shadows before the first Refresh";
  EXPECT_THROW(shadows.HandOverRefresh(), c10::Error);
  shadows.Refresh(at::kBFloat16);
  const at::Tensor wa = shadows.ShadowOf(a.weight), bb = shadows.ShadowOf(b.bias);
  ASSERT_TRUE(wa.defined() && bb.defined());
  EXPECT_TRUE(at::equal(wa, a.weight.detach().to(at::kBFloat16)));
  EXPECT_TRUE(at::equal(bb, b.bias.detach().to(at::kBFloat16)));
  EXPECT_FALSE(shadows.ShadowOf(a.weight.detach().clone()).defined()) << "not a master";
  shadows.HandOverRefresh();
  const at::Tensor before = wa.clone();
  {
    const at::NoGradGuard no_grad;
    a.weight.mul_(2.0);
  }
  shadows.Refresh(at::kBFloat16);
  EXPECT_TRUE(at::equal(wa, before)) << "a handed-over shadow was refreshed";
  EXPECT_THROW(shadows.Refresh(at::kHalf), c10::Error);
}

TEST(ShadowWeights, RejectsLayersThatCannotShareAnInput) {
  const Layer a = MakeLayer(4, 3, at::TensorOptions()), b = MakeLayer(4, 5, at::TensorOptions());
  ShadowWeights shadows;
  EXPECT_THROW(shadows.AddGroup({a.weight, b.weight}, {a.bias, b.bias}), c10::Error);
  EXPECT_THROW(shadows.AddGroup({a.weight}, {}), c10::Error);
  EXPECT_THROW(shadows.AddGroup({a.weight}, {b.weight}), c10::Error);
  shadows.AddGroup({a.weight}, {a.bias});
  shadows.Refresh(at::kBFloat16);
  EXPECT_THROW(shadows.AddGroup({b.weight}, {b.bias}), c10::Error);
}

// Gradient buffers as the gradient reducer sets them up: views into one float32 bucket
// holding earlier gradients, and a post-hook on each weight's AccumulateGrad node.
struct Buckets {
  at::Tensor storage;
  std::vector<at::Tensor> grads;  // the views, as set
  std::vector<int> hook_calls;
  std::vector<int> incoming_defined;
  // Owned here as by the reducer: a tensor holds its accumulator node only weakly.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
};

void AttachBuckets(Buckets& b, const std::vector<at::Tensor>& params) {
  int64_t numel = 0;
  for (const at::Tensor& p : params) numel += p.numel();
  b.storage = at::rand({numel}, params.front().options().requires_grad(false));
  b.hook_calls.assign(params.size(), 0);
  b.incoming_defined.assign(params.size(), -1);
  int64_t offset = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor view = b.storage.narrow(0, offset, params[i].numel()).view(params[i].sizes());
    params[i].mutable_grad() = view;
    b.grads.push_back(view);
    offset += params[i].numel();
    b.accumulators.push_back(
        ProbeAccumulateGrad(params[i], &b.hook_calls[i], &b.incoming_defined[i]));
  }
}

void CheckAccumulateIntoGrad(const at::TensorOptions& options) {
  torch::manual_seed(15);
  const int64_t rows = 33, in = 16;
  const std::vector<Layer> layers = {MakeLayer(8, in, options), MakeLayer(12, in, options)};
  // The first weight is also used by an embedding lookup, as BERT's tied word embeddings.
  const std::vector<at::Tensor> params = {layers[0].weight, layers[1].weight, layers[0].bias,
                                          layers[1].bias};
  Buckets buckets;
  AttachBuckets(buckets, params);
  const at::Tensor before = buckets.storage.clone();
  ShadowWeights shadows(ShadowWeightsOptions{/*accumulate_into_grad=*/true});
  const int g =
      shadows.AddGroup({layers[0].weight, layers[1].weight}, {layers[0].bias, layers[1].bias});
  shadows.Refresh(at::kBFloat16);
  const at::Tensor x = at::randn({rows, in}, options).requires_grad_();
  const at::Tensor ids = at::randint(0, 8, {5}, options.dtype(at::kLong));
  const at::Tensor dy = at::randn({rows, 20}, options).to(at::kBFloat16);
  const at::Tensor demb = at::randn({5, in}, options);
  at::Tensor y = shadows.Forward(g, x);
  at::Tensor emb = at::embedding(layers[0].weight, ids);
  torch::autograd::backward({y, emb}, {dy, demb});

  int64_t offset = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string what = "parameter " + std::to_string(i);
    EXPECT_EQ(buckets.hook_calls[i], 1) << what << ": the reducer's hook must fire once";
    EXPECT_EQ(params[i].grad().data_ptr(), buckets.grads[i].data_ptr()) << what << " moved";
    // The second weight's gradient was added by the GEMM and the biases' by the column
    // sum: nothing reaches their accumulators. The first weight's embedding gradient does.
    EXPECT_EQ(buckets.incoming_defined[i], i == 0 ? 1 : 0) << what;
    offset += params[i].numel();
  }
  // Expected: the earlier contents plus this backward's gradients, in float64.
  offset = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    const int64_t n = layers[l].weight.size(0);
    const Reference r = ReferenceOf(x.cpu(), layers[l].weight.cpu(), layers[l].bias.cpu(),
                                    dy.narrow(1, offset, n).cpu(), at::kBFloat16);
    at::Tensor dw = r.dw;
    if (l == 0) {
      dw = dw.index_add(0, ids.cpu(), demb.cpu().to(at::kDouble));
    }
    const at::Tensor w_before =
        before.narrow(0, l == 0 ? 0 : layers[0].weight.numel(), layers[l].weight.numel())
            .view(layers[l].weight.sizes());
    EXPECT_LE(RelMaxError(layers[l].weight.grad(), w_before.to(at::kDouble).cpu() + dw), 1e-5)
        << "layer " << l << " weight gradient";
    const int64_t bias_at =
        layers[0].weight.numel() + layers[1].weight.numel() + (l == 0 ? 0 : layers[0].bias.numel());
    const at::Tensor b_before = before.narrow(0, bias_at, n);
    EXPECT_LE(RelMaxError(layers[l].bias.grad(), b_before.to(at::kDouble).cpu() + r.db), 1e-5)
        << "layer " << l << " bias gradient";
    offset += n;
  }
}

TEST(MixedLinear, AccumulatesIntoBucketViewsAndStillFiresTheReducerHooks) {
  CheckAccumulateIntoGrad(at::TensorOptions());
}

TEST(MixedLinear, AccumulateFallsBackWhereThereIsNoGradientBuffer) {
  torch::manual_seed(16);
  const Layer l = MakeLayer(6, 10, at::TensorOptions());
  ShadowWeights shadows(ShadowWeightsOptions{/*accumulate_into_grad=*/true});
  const int g = shadows.AddGroup({l.weight}, {l.bias});
  shadows.Refresh(at::kBFloat16);
  const at::Tensor x = at::randn({5, 10});
  const at::Tensor dy = at::randn({5, 6}).to(at::kBFloat16);
  shadows.Forward(g, x).backward(dy);
  ASSERT_TRUE(l.weight.grad().defined());
  const Reference r = ReferenceOf(x, l.weight, l.bias, dy, at::kBFloat16);
  EXPECT_LE(RelMaxError(l.weight.grad(), r.dw), 1e-5);
  ASSERT_TRUE(l.bias.grad().defined());
  EXPECT_LE(RelMaxError(l.bias.grad(), r.db), 1e-5);
  // A second backward accumulates, in place now that the buffers exist.
  const at::Tensor first = l.weight.grad(), first_bias = l.bias.grad();
  shadows.Refresh(at::kBFloat16);
  shadows.Forward(g, x).backward(dy);
  EXPECT_EQ(l.weight.grad().data_ptr(), first.data_ptr());
  EXPECT_LE(RelMaxError(l.weight.grad(), 2 * r.dw), 1e-5);
  EXPECT_EQ(l.bias.grad().data_ptr(), first_bias.data_ptr());
  EXPECT_LE(RelMaxError(l.bias.grad(), 2 * r.db), 1e-5);
}

TEST(ColumnSumFloat, MatchesFloat64SumsOnCpu) {
  const at::Tensor x = at::randn({33, 7}).to(at::kBFloat16);
  EXPECT_LE(RelMaxError(ColumnSumFloat(x), x.to(at::kDouble).sum(0)), 1e-6);
  EXPECT_THROW(ColumnSumFloat(at::randn({3})), c10::Error);
}

#ifdef RINGPILOT_WITH_CUDA
class MixedLinearCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(MixedLinearCuda, ColumnSumKernelMatchesFloat64AtEveryAlignment) {
  torch::manual_seed(6);
  struct Case {
    int64_t rows, cols;
    at::ScalarType dtype;
    int64_t skip;  // leading columns dropped: misaligned starts, ld > cols
  };
  const std::vector<Case> cases = {{8192, 768, at::kBFloat16, 0},   {8192, 3072, at::kBFloat16, 0},
                                   {1229, 30522, at::kBFloat16, 0}, {1229, 30522, at::kBFloat16, 1},
                                   {7, 5, at::kBFloat16, 0},        {1, 768, at::kBFloat16, 0},
                                   {300, 96, at::kFloat, 0},        {300, 96, at::kFloat, 3},
                                   {513, 40, at::kHalf, 0},         {513, 40, at::kHalf, 2},
                                   {0, 16, at::kBFloat16, 0},       {5000, 1, at::kFloat, 0}};
  for (const Case& c : cases) {
    const at::Tensor full = at::randn({c.rows, c.cols + c.skip}, at::device(at::kCUDA)).to(c.dtype);
    const at::Tensor x = full.narrow(1, c.skip, c.cols);
    const at::Tensor got = ColumnSumFloat(x);
    const at::Tensor ref = x.to(at::kDouble).sum(0);
    const std::string what = std::to_string(c.rows) + "x" + std::to_string(c.cols) + " " +
                             std::string(c10::toString(c.dtype)) + " skip " +
                             std::to_string(c.skip);
    ASSERT_EQ(got.scalar_type(), at::kFloat) << what;
    // float32 accumulation of up to 8192 terms of magnitude ~1.
    const double bound = 1e-5 * std::max<double>(1.0, static_cast<double>(c.rows));
    EXPECT_LE((got.to(at::kDouble) - ref).abs().max().item<double>(), bound) << what;
    EXPECT_TRUE(at::equal(got, ColumnSumFloat(x))) << what << ": not deterministic";
  }
}

// ColumnSumTo: each range's sums where it says (added or overwritten), columns outside
// every range untouched, the sums bit for bit ColumnSum's, one chunk or many.
TEST_F(MixedLinearCuda, ColumnSumToRangesAddOrOverwriteWithColumnSumsBits) {
  torch::manual_seed(9);
  const auto options = at::device(at::kCUDA);
  for (const int64_t rows : {int64_t{8192}, int64_t{6}, int64_t{0}}) {
    const int64_t cols = 2304 + 8;  // three ranges of 768 and padding after them
    const at::Tensor x = at::randn({rows, cols}, options).to(at::kBFloat16);
    const at::Tensor sums = ColumnSumFloat(x);
    const at::Tensor a0 = at::randn({768}, options), a2 = at::randn({768}, options);
    const at::Tensor dst0 = a0.clone(), dst2 = a2.clone();
    const at::Tensor dst1 = at::full({768}, 7.0f, options);
    const at::Tensor guard = at::full({4}, 5.0f, options);  // never a destination
    const column_sum::ColumnRange ranges[3] = {{dst0.data_ptr<float>(), 0, 768, true},
                                               {dst1.data_ptr<float>(), 768, 1536, false},
                                               {dst2.data_ptr<float>(), 1536, 2304, true}};
    column_sum::Args a;
    a.in = x.data_ptr();
    a.dtype = ElementType::kBFloat16;
    a.rows = rows;
    a.cols = cols;
    a.ld = cols;
    const at::Tensor workspace =
        at::empty({std::max<int64_t>(1, column_sum::WorkspaceFloatsTo(a))}, options);
    a.workspace = workspace.data_ptr<float>();
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    ASSERT_EQ(column_sum::ColumnSumTo(a, ranges, 3, stream), nullptr);
    const std::string what = std::to_string(rows) + " rows";
    EXPECT_TRUE(at::equal(dst0, a0 + sums.narrow(0, 0, 768))) << what << ": added range";
    EXPECT_TRUE(at::equal(dst1, sums.narrow(0, 768, 768))) << what << ": overwritten range";
    EXPECT_TRUE(at::equal(dst2, a2 + sums.narrow(0, 1536, 768))) << what << ": added range";
    EXPECT_TRUE(at::equal(guard, at::full({4}, 5.0f, options))) << what;
  }
  // Ranges out of order, overlapping or past the columns are refused.
  const at::Tensor x = at::zeros({4, 16}, options);
  const at::Tensor out = at::zeros({16}, options);
  column_sum::Args a;
  a.in = x.data_ptr();
  a.dtype = ElementType::kFloat32;
  a.rows = 4;
  a.cols = 16;
  a.ld = 16;
  a.workspace = out.data_ptr<float>();
  const column_sum::ColumnRange overlapping[2] = {{out.data_ptr<float>(), 0, 8, false},
                                                  {out.data_ptr<float>(), 4, 12, false}};
  const column_sum::ColumnRange past[1] = {{out.data_ptr<float>(), 8, 17, false}};
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  EXPECT_NE(column_sum::ColumnSumTo(a, overlapping, 2, stream), nullptr);
  EXPECT_NE(column_sum::ColumnSumTo(a, past, 1, stream), nullptr);
}

// The autocast reference: at::linear on float32 tensors under CUDA bf16 autocast.
struct Autocast {
  at::Tensor y, dx, dw, db;
};

Autocast AutocastLinear(const at::Tensor& x0, const Layer& l, const at::Tensor& dy) {
  at::Tensor x = x0.detach().clone().requires_grad_();
  at::Tensor w = l.weight.detach().clone().requires_grad_();
  at::Tensor b = l.bias.detach().clone().requires_grad_();
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::Tensor y = at::linear(x, w, b);
  at::autocast::set_autocast_enabled(at::kCUDA, false);
  at::autocast::clear_cache();
  y.backward(dy);
  return {y.detach(), x.grad(), w.grad(), b.grad()};
}

TEST_F(MixedLinearCuda, SameForwardAsAutocastAndCloserGradients) {
  torch::manual_seed(7);
  const auto options = at::device(at::kCUDA);
  const int64_t rows = 512, in = 768;
  for (int64_t out : {768, 3072}) {
    const Layer l = MakeLayer(out, in, options);
    const at::Tensor x = at::randn({rows, in}, options);
    const at::Tensor dy = at::randn({rows, out}, options).to(at::kBFloat16);
    const Outcome ours = RunGroup({l}, x, dy, at::kBFloat16);
    const Autocast ac = AutocastLinear(x, l, dy);
    const Reference r = ReferenceOf(x.cpu(), l.weight.cpu(), l.bias.cpu(), dy.cpu(), at::kBFloat16);
    const std::string what = "out " + std::to_string(out);
    EXPECT_TRUE(at::equal(ours.y, ac.y)) << what << ": forward differs from autocast's";
    // Float32 results from the GEMM's accumulator: within float32 rounding of float64.
    EXPECT_LE(RelMaxError(ours.dw[0], r.dw), 3e-5) << what << " dweight";
    EXPECT_LE(RelMaxError(ours.db[0], r.db), 3e-5) << what << " dbias";
    EXPECT_LE(RelMaxError(ours.dx, r.dx), 3e-5) << what << " dx";
    // Autocast's are rounded to bf16 first (relative 2^-8).
    EXPECT_LE(RelMaxError(ours.dw[0], ac.dw), 8e-3) << what << " dweight vs autocast";
    EXPECT_LE(RelMaxError(ours.db[0], ac.db), 8e-3) << what << " dbias vs autocast";
    EXPECT_LE(RelMaxError(ours.dx, ac.dx), 8e-3) << what << " dx vs autocast";
  }
}

TEST_F(MixedLinearCuda, AccumulatesIntoBucketViewsAndStillFiresTheReducerHooks) {
  CheckAccumulateIntoGrad(at::device(at::kCUDA));
}

// The MLM decoder's shape class: 1003 words (no multiple of 8) padded to 1024, on the
// GEMMs cuBLAS picks for the aligned width.
TEST_F(MixedLinearCuda, PaddedOutputsLeaveTheSoftmaxLossAndGradientsUnchanged) {
  CheckPaddedOutputs(at::device(at::kCUDA), 256, 128, 1003, 64, 1e-2);
}

TEST_F(MixedLinearCuda, GroupGradientsMatchFloat64Reference) {
  CheckGroupAgainstReference(at::device(at::kCUDA), at::kBFloat16, 1e-5);
  CheckGroupAgainstReference(at::device(at::kCUDA), at::kHalf, 1e-5);
}

TEST_F(MixedLinearCuda, RefreshForwardBackwardReplayInACudaGraph) {
  torch::manual_seed(8);
  const auto options = at::device(at::kCUDA);
  const Layer a = MakeLayer(64, 32, options), b = MakeLayer(32, 32, options);
  ShadowWeights shadows;
  const int g = shadows.AddGroup({a.weight, b.weight}, {a.bias, b.bias});
  const at::Tensor x = at::randn({128, 32}, options).requires_grad_();
  const at::Tensor dy = at::randn({128, 96}, options).to(at::kBFloat16);
  at::Tensor y, dx, dw, db;
  auto step = [&] {
    shadows.Refresh(at::kBFloat16);
    y = shadows.Forward(g, x);
    auto grads = torch::autograd::grad({y}, {x, a.weight, b.bias}, {dy});
    dx = grads[0];
    dw = grads[1];
    db = grads[2];
  };
  // Everything on the capture stream, as the trainer does: autograd nodes created on
  // the default stream and still alive would make the capture depend on it.
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  c10::cuda::CUDAStreamGuard guard(side);
  step();
  const at::Tensor y0 = y.clone(), dx0 = dx.clone(), dw0 = dw.clone(), db0 = db.clone();
  y = dx = dw = db = at::Tensor();
  at::cuda::CUDAGraph graph;
  CaptureStep(graph, step);
  graph.replay();
  torch::cuda::synchronize();
  EXPECT_TRUE(at::equal(y, y0) && at::equal(dx, dx0) && at::equal(dw, dw0) && at::equal(db, db0));
  {
    const at::NoGradGuard no_grad;
    a.weight.mul_(-1.0);  // the replay's Refresh must pick up the new master
  }
  graph.replay();
  torch::cuda::synchronize();
  shadows.Refresh(at::kBFloat16);
  at::Tensor eager;
  {
    const at::NoGradGuard no_grad;
    eager = shadows.Forward(g, x);
  }
  EXPECT_LE(RelMaxError(y, eager), 1e-2) << "the captured Refresh did not read the updated weight";
  EXPECT_GT(RelMaxError(y, y0), 0.5);
}
#endif

}  // namespace
}  // namespace ringpilot::trainer::ops
