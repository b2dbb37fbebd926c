// EmbeddingLookup: ATen's lookup forward; backward either ATen's dense gradient or, on CUDA
// with accumulate_into_grad, the rows' gradients added into the reducer's bucket views.
#include "trainer/ops/embedding.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "tests/trainer/accumulate_grad_probe.h"
#include "tests/trainer/ops/linear_test_util.h"

#ifdef RINGPILOT_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "tests/trainer/cuda_graph_capture.h"
#endif

namespace ringpilot::trainer::ops {
namespace {

// A table, ids with many repeats (as a batch of tokens has), and an upstream gradient.
struct Case {
  at::Tensor weight, ids, dy;
};

Case MakeCase(const at::TensorOptions& options, int64_t vocab, int64_t hidden,
              std::vector<int64_t> ids_shape) {
  Case c;
  c.weight = at::randn({vocab, hidden}, options).requires_grad_();
  c.ids = at::randint(0, vocab / 3 + 1, ids_shape, options.dtype(at::kLong));
  std::vector<int64_t> out_shape = ids_shape;
  out_shape.push_back(hidden);
  c.dy = at::randn(out_shape, options);
  return c;
}

// The table's gradient in float64: each id's rows of dy summed.
at::Tensor ReferenceGrad(const Case& c) {
  const int64_t h = c.weight.size(1);
  return at::zeros(c.weight.sizes(), at::kDouble)
      .index_add_(0, c.ids.reshape({-1}).cpu(), c.dy.reshape({-1, h}).to(at::kDouble).cpu());
}

void CheckSameAsAtenEmbedding(const at::TensorOptions& options, bool accumulate) {
  torch::manual_seed(3);
  const Case c = MakeCase(options, 40, 24, {4, 9});
  const at::Tensor ours = EmbeddingLookup(c.weight, c.ids, accumulate);
  EXPECT_TRUE(at::equal(ours, at::embedding(c.weight, c.ids)));
  ours.backward(c.dy);
  const at::Tensor grad = c.weight.grad().clone();
  c.weight.mutable_grad() = at::Tensor();
  at::embedding(c.weight, c.ids).backward(c.dy);
  // No .grad buffer before the backward: ATen's dense gradient either way, the same bits.
  EXPECT_TRUE(at::equal(grad, c.weight.grad()));
  EXPECT_LE(RelMaxError(grad, ReferenceGrad(c)), 1e-6);
}

TEST(EmbeddingLookup, SameAsAtenEmbeddingOnCpu) {
  CheckSameAsAtenEmbedding(at::TensorOptions(), /*accumulate=*/false);
  // On the CPU the flag changes nothing.
  CheckSameAsAtenEmbedding(at::TensorOptions(), /*accumulate=*/true);
}

TEST(EmbeddingLookup, RefusesWhatIsNoTableOrNoIds) {
  const at::Tensor w = at::randn({5, 3});
  EXPECT_THROW(EmbeddingLookup(at::randn({5}), at::zeros({2}, at::kLong), true), c10::Error);
  EXPECT_THROW(EmbeddingLookup(w, at::zeros({2}, at::kInt), true), c10::Error);
}

// With a bucket view as .grad: where `in_place` the gradient is added there by the op and
// autograd hands the accumulator nothing, else autograd adds the dense gradient; either way
// the reducer's post-hook runs once and the view stays the gradient.
void CheckIntoBucketView(const at::TensorOptions& options, bool in_place) {
  torch::manual_seed(4);
  const Case c = MakeCase(options, 50, 32, {6, 16});
  const at::Tensor bucket = at::rand({c.weight.numel()}, options);
  const at::Tensor before = bucket.clone();
  c.weight.mutable_grad() = bucket.view(c.weight.sizes());
  int hook_calls = 0, incoming_defined = -1;
  const auto accumulator = ProbeAccumulateGrad(c.weight, &hook_calls, &incoming_defined);
  EmbeddingLookup(c.weight, c.ids, /*accumulate_into_grad=*/true).backward(c.dy);
  EXPECT_EQ(hook_calls, 1);
  EXPECT_EQ(incoming_defined, in_place ? 0 : 1);
  EXPECT_EQ(c.weight.grad().data_ptr(), bucket.data_ptr());
  const at::Tensor expected =
      before.view(c.weight.sizes()).to(at::kDouble).cpu() + ReferenceGrad(c);
  EXPECT_LE(RelMaxError(c.weight.grad(), expected), 1e-6);
}

TEST(EmbeddingLookup, CpuLeavesTheAddToAutograd) {
  CheckIntoBucketView(at::TensorOptions(), /*in_place=*/false);
}

#ifdef RINGPILOT_WITH_CUDA
class EmbeddingLookupCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(EmbeddingLookupCuda, SameAsAtenEmbeddingWithoutAGradientBuffer) {
  CheckSameAsAtenEmbedding(at::device(at::kCUDA), /*accumulate=*/false);
  CheckSameAsAtenEmbedding(at::device(at::kCUDA), /*accumulate=*/true);
}

TEST_F(EmbeddingLookupCuda, AddsIntoTheBucketViewItself) {
  CheckIntoBucketView(at::device(at::kCUDA), /*in_place=*/true);
}

// BERT-base's shape: 30522 x 768 words, 64 x 128 ids; two runs give the same bits, and a
// captured step replays with a fresh gradient each time (no host synchronisation).
TEST_F(EmbeddingLookupCuda, DeterministicAndReplaysInACudaGraph) {
  torch::manual_seed(5);
  const Case c = MakeCase(at::device(at::kCUDA), 30522, 768, {64, 128});
  const at::Tensor bucket = at::zeros({c.weight.numel()}, c.weight.options().requires_grad(false));
  c.weight.mutable_grad() = bucket.view(c.weight.sizes());
  std::vector<at::Tensor> runs;
  for (int run = 0; run < 2; ++run) {
    bucket.zero_();
    EmbeddingLookup(c.weight, c.ids, true).backward(c.dy);
    runs.push_back(bucket.clone());
  }
  EXPECT_TRUE(at::equal(runs[0], runs[1])) << "two backward passes differ";
  EXPECT_LE(RelMaxError(runs[0].view(c.weight.sizes()), ReferenceGrad(c)), 1e-6);

  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  c10::cuda::CUDAStreamGuard guard(side);
  const at::Tensor dy = c.dy.clone();
  auto step = [&] {
    bucket.zero_();
    EmbeddingLookup(c.weight, c.ids, true).backward(dy);
  };
  at::cuda::CUDAGraph graph;
  CaptureStep(graph, step);
  dy.mul_(2);  // the replay reads the new upstream gradient
  graph.replay();
  torch::cuda::synchronize();
  EXPECT_LE(RelMaxError(bucket.view(c.weight.sizes()), 2 * ReferenceGrad(c)), 1e-6);
}
// Runs of one id far longer than the kernel's chunks of sorted positions (half the batch is
// one id, as [MASK] or padding can be), runs across chunk borders, a last chunk that is not
// full, a single id, and a width that allows no 16-byte vectors; onto a non-zero buffer.
TEST_F(EmbeddingLookupCuda, LongRunsShortBatchesAndOddWidths) {
  torch::manual_seed(6);
  const at::TensorOptions cuda = at::device(at::kCUDA);
  struct Shape {
    int64_t vocab, hidden;
    std::vector<int64_t> ids;
  };
  const Shape shapes[] = {
      {1000, 768, {64, 128}}, {300, 30, {40, 33}}, {50, 64, {17}}, {50, 64, {1}}, {8, 12, {5, 7}}};
  for (const Shape& sh : shapes) {
    Case c = MakeCase(cuda, sh.vocab, sh.hidden, sh.ids);
    at::Tensor flat = c.ids.view({-1});
    const int64_t n = flat.numel();
    flat.narrow(0, 0, n / 2).fill_(7 % sh.vocab);  // one long run
    // Few distinct ids in the rest: runs of 10-40 that cross chunk borders.
    if (n > 4) flat.narrow(0, n / 2, n - n / 2).random_(0, std::min<int64_t>(sh.vocab, 5));
    const at::Tensor bucket = at::rand({c.weight.numel()}, cuda);
    const at::Tensor before = bucket.clone();
    c.weight.mutable_grad() = bucket.view(c.weight.sizes());
    std::vector<at::Tensor> runs;
    for (int run = 0; run < 2; ++run) {
      bucket.copy_(before);
      EmbeddingLookup(c.weight, c.ids, true).backward(c.dy);
      runs.push_back(bucket.clone());
    }
    const std::string what =
        "vocab " + std::to_string(sh.vocab) + " hidden " + std::to_string(sh.hidden);
    EXPECT_TRUE(at::equal(runs[0], runs[1])) << what << ": two backward passes differ";
    const at::Tensor expected =
        before.view(c.weight.sizes()).to(at::kDouble).cpu() + ReferenceGrad(c);
    EXPECT_LE(RelMaxError(runs[0].view(c.weight.sizes()), expected), 1e-6) << what;
  }
}
#endif

}  // namespace
}  // namespace ringpilot::trainer::ops
