// trainer/ops/fused_adamw.h: AdamW that writes the parameters' low-precision copies, against
// at::_fused_adamw_ followed by a copy (the CPU fallback, and on CUDA the one-sweep kernel of
// trainer/ops/adamw_kernels.h bit for bit).
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/ops/fused_adamw.h"

#ifdef RINGPILOT_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "tests/trainer/cuda_graph_capture.h"
#endif

namespace ringpilot::trainer::ops {
namespace {

// One optimizer's tensors: parameters, gradients, moments, step counts and copies.
struct State {
  std::vector<at::Tensor> params, grads, m, v, steps, copies;

  State Clone() const {
    State s;
    auto clone = [](const std::vector<at::Tensor>& from) {
      std::vector<at::Tensor> out;
      for (const at::Tensor& t : from) out.push_back(t.defined() ? t.clone() : t);
      return out;
    };
    s.params = clone(params), s.grads = clone(grads), s.m = clone(m), s.v = clone(v);
    s.steps = clone(steps), s.copies = clone(copies);
    return s;
  }
};

// Parameters of the given sizes (a flat buffer's views, the first `offset` floats in: an
// offset of 1 misaligns them all), moments after a few steps' worth of history, and a copy
// of `copy_dtype` for every parameter but the second.
State MakeState(const std::vector<std::vector<int64_t>>& sizes, int64_t offset,
                at::ScalarType copy_dtype, const at::TensorOptions& options) {
  int64_t numel = offset;
  for (const auto& s : sizes) numel += c10::multiply_integers(s);
  const at::Tensor flat = at::randn({numel}, options);
  State st;
  int64_t at_ = offset;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t n = c10::multiply_integers(sizes[i]);
    st.params.push_back(flat.narrow(0, at_, n).view(sizes[i]));
    at_ += n;
    st.grads.push_back(at::randn(sizes[i], options));
    st.m.push_back(at::randn(sizes[i], options).mul_(0.1));
    st.v.push_back(at::rand(sizes[i], options).mul_(0.01));
    st.steps.push_back(at::full({}, 3.0f, options));
    st.copies.push_back(i == 1 ? at::Tensor() : at::empty(sizes[i], options.dtype(copy_dtype)));
  }
  return st;
}

AdamWHyper Hyper(double weight_decay, const at::Tensor& lr_tensor) {
  AdamWHyper h;
  h.lr_tensor = lr_tensor;
  h.lr = 1e-3;
  h.beta1 = 0.9;
  h.beta2 = 0.999;
  h.weight_decay = weight_decay;
  h.eps = 1e-8;
  return h;
}

// What FusedAdamWWithCopies must equal: ATen's fused AdamW, then the copies.
void Reference(State& s, const AdamWHyper& h) {
  if (h.lr_tensor.defined()) {
    at::_fused_adamw_(s.params, s.grads, s.m, s.v, {}, s.steps, h.lr_tensor, h.beta1, h.beta2,
                      h.weight_decay, h.eps, false, false);
  } else {
    at::_fused_adamw_(s.params, s.grads, s.m, s.v, {}, s.steps, h.lr, h.beta1, h.beta2,
                      h.weight_decay, h.eps, false, false);
  }
  for (size_t i = 0; i < s.copies.size(); ++i) {
    if (s.copies[i].defined()) s.copies[i].copy_(s.params[i]);
  }
}

void ExpectEqual(const State& a, const State& b, const std::string& what) {
  for (size_t i = 0; i < a.params.size(); ++i) {
    const std::string w = what + " tensor " + std::to_string(i);
    EXPECT_TRUE(at::equal(a.params[i], b.params[i])) << w << ": param";
    EXPECT_TRUE(at::equal(a.m[i], b.m[i])) << w << ": exp_avg";
    EXPECT_TRUE(at::equal(a.v[i], b.v[i])) << w << ": exp_avg_sq";
    if (a.copies[i].defined()) {
      EXPECT_TRUE(at::equal(a.copies[i], b.copies[i])) << w << ": copy";
    }
  }
}

void CheckAgainstAten(const at::TensorOptions& options) {
  torch::manual_seed(31);
  const std::vector<std::vector<int64_t>> sizes = {{96, 64}, {3072}, {7}, {5, 3}};
  for (const int64_t offset : {int64_t{0}, int64_t{1}}) {
    for (const double wd : {0.0, 0.01}) {
      for (const bool on_device : {false, true}) {
        for (const at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
          const std::string what = "offset " + std::to_string(offset) + " wd " +
                                   std::to_string(wd) + (on_device ? " lr tensor " : " lr ") +
                                   std::string(c10::toString(dtype));
          State ours = MakeState(sizes, offset, dtype, options);
          State ref = ours.Clone();
          const at::Tensor lr = on_device ? at::full({}, 2e-3f, options) : at::Tensor();
          for (int step = 0; step < 3; ++step) {
            for (State* s : {&ours, &ref}) {
              for (at::Tensor& t : s->steps) t.add_(1);
            }
            FusedAdamWWithCopies(ours.params, ours.grads, ours.m, ours.v, ours.steps, ours.copies,
                                 Hyper(wd, lr));
            Reference(ref, Hyper(wd, lr));
          }
          ExpectEqual(ours, ref, what);
        }
      }
    }
  }
}

TEST(FusedAdamWWithCopies, SameAsFusedAdamWThenACopyOnCpu) { CheckAgainstAten({}); }

TEST(FusedAdamWWithCopies, ListsMustBeParallel) {
  State s = MakeState({{4}, {2}}, 0, at::kBFloat16, {});
  std::vector<at::Tensor> one_grad = {s.grads[0]};
  EXPECT_THROW(
      FusedAdamWWithCopies(s.params, one_grad, s.m, s.v, s.steps, s.copies, Hyper(0.0, {})),
      c10::Error);
}

// The copies are views other backward nodes saved: writing them must not trip autograd's
// check that saved tensors are unchanged.
TEST(WriteLowPrecisionCopies, WritesValuesWithoutBumpingVersions) {
  const at::Tensor buffer = at::zeros({10}, at::kBFloat16);
  const at::Tensor copy = buffer.narrow(0, 2, 6).view({2, 3});
  const at::Tensor param = at::randn({2, 3});
  const auto version = buffer._version();
  WriteLowPrecisionCopies({param}, {copy});
  EXPECT_TRUE(at::equal(copy, param.to(at::kBFloat16)));
  EXPECT_EQ(buffer._version(), version);
  EXPECT_EQ(buffer.narrow(0, 0, 2).count_nonzero().item<int64_t>(), 0);  // only the view
}

#ifdef RINGPILOT_WITH_CUDA
class FusedAdamWCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// The kernel against ATen's CUDA fused AdamW and copy: 16-byte and scalar paths (offset 1),
// with and without decay, lr as a value and on the device, bf16 and fp16 copies.
TEST_F(FusedAdamWCuda, KernelMatchesFusedAdamWBitForBit) {
  CheckAgainstAten(at::device(at::kCUDA));
}

// BERT-base's size class: more than one launch's worth of tensors, some of millions of
// elements.
TEST_F(FusedAdamWCuda, ManyLargeTensorsMatchFusedAdamW) {
  torch::manual_seed(32);
  std::vector<std::vector<int64_t>> sizes;
  for (int i = 0; i < 60; ++i)
    sizes.push_back(i % 3 == 0 ? std::vector<int64_t>{768, 3072} : std::vector<int64_t>{768});
  State ours = MakeState(sizes, 0, at::kBFloat16, at::device(at::kCUDA));
  State ref = ours.Clone();
  for (State* s : {&ours, &ref}) {
    for (at::Tensor& t : s->steps) t.add_(1);
  }
  FusedAdamWWithCopies(ours.params, ours.grads, ours.m, ours.v, ours.steps, ours.copies,
                       Hyper(0.01, {}));
  Reference(ref, Hyper(0.01, {}));
  ExpectEqual(ours, ref, "60 tensors");
}

TEST_F(FusedAdamWCuda, StepReplaysInACudaGraph) {
  torch::manual_seed(33);
  const auto options = at::device(at::kCUDA);
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  c10::cuda::CUDAStreamGuard guard(side);
  State ours = MakeState({{256, 64}, {64}, {33}}, 0, at::kBFloat16, options);
  const at::Tensor lr = at::full({}, 1e-3f, options);
  State ref = ours.Clone();
  auto step = [&] {
    for (at::Tensor& t : ours.steps) t.add_(1);
    FusedAdamWWithCopies(ours.params, ours.grads, ours.m, ours.v, ours.steps, ours.copies,
                         Hyper(0.01, lr));
  };
  at::cuda::CUDAGraph graph;
  CaptureStep(graph, step);  // one eager step, then the captured one
  graph.replay();
  torch::cuda::synchronize();
  for (int i = 0; i < 2; ++i) {  // the eager step and the replay (capture runs nothing)
    for (at::Tensor& t : ref.steps) t.add_(1);
    Reference(ref, Hyper(0.01, lr));
  }
  ExpectEqual(ours, ref, "after a replay");
}
#endif

}  // namespace
}  // namespace ringpilot::trainer::ops
