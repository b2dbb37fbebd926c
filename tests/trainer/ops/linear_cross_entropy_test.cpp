#include <stdexcept>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/ops/linear_cross_entropy.h"

namespace ringpilot::trainer::ops {
namespace {

struct Grads {
  at::Tensor loss, x, w, b;
};

// loss * scale through `fused` or ATen's linear + cross_entropy, and the gradients.
Grads LossAndGrads(bool fused, const at::Tensor& x0, const at::Tensor& w0, const at::Tensor& b0,
                   const at::Tensor& labels, double scale, int64_t chunk = 0) {
  at::Tensor x = x0.clone().requires_grad_();
  at::Tensor w = w0.clone().requires_grad_();
  at::Tensor b = b0.clone().requires_grad_();
  LinearCrossEntropyOptions options;
  options.cpu_chunk_columns = chunk;
  at::Tensor loss = fused ? LinearCrossEntropy(x, w, b, labels, options)
                          : at::cross_entropy_loss(at::linear(x, w, b), labels);
  (loss * scale).backward();
  return {loss.detach(), x.grad(), w.grad(), b.grad()};
}

void ExpectClose(const at::Tensor& a, const at::Tensor& ref, const char* what) {
  const double err = (a - ref).abs().max().item<double>();
  const double mag = ref.abs().max().item<double>();
  EXPECT_LE(err, 1e-5 * mag + 1e-7) << what << ": max error " << err << " of " << mag;
}

TEST(LinearCrossEntropy, SameLossAndGradientsAsLinearThenCrossEntropy) {
  torch::manual_seed(11);
  for (int64_t n : {1, 7, 64}) {
    for (double scale : {1.0, 3.5}) {
      at::Tensor x = at::randn({n, 24});
      at::Tensor w = at::randn({1000, 24}) * 0.5;
      at::Tensor b = at::randn({1000}) * 0.1;
      at::Tensor labels = at::randint(0, 1000, {n}, at::kLong);
      if (n > 2) labels[1] = labels[0];  // a repeated label
      const Grads f = LossAndGrads(true, x, w, b, labels, scale);
      const Grads r = LossAndGrads(false, x, w, b, labels, scale);
      ExpectClose(f.loss, r.loss, "loss");
      ExpectClose(f.x, r.x, "grad x");
      ExpectClose(f.w, r.w, "grad weight");
      ExpectClose(f.b, r.b, "grad bias");
    }
  }
}

TEST(LinearCrossEntropy, AnyCpuChunkingGivesTheSameResult) {
  // Uneven last chunks, chunks no label falls in, one chunk, a chunk wider than V; rows
  // whose largest logit sits in different chunks (the per-chunk softmax shifts must agree).
  torch::manual_seed(12);
  at::Tensor x = at::randn({37, 16});
  at::Tensor w = at::randn({1000, 16}) * 0.7;
  at::Tensor b = at::randn({1000}) * 0.1;
  b.narrow(0, 990, 10).add_(4.0);  // the last, partial chunk holds some rows' maxima
  at::Tensor labels = at::randint(0, 1000, {37}, at::kLong);
  labels[0] = 0;
  labels[1] = 999;
  const Grads r = LossAndGrads(false, x, w, b, labels, 1.0);
  for (int64_t chunk : {1, 64, 333, 999, 1000, 4096}) {
    SCOPED_TRACE(chunk);
    const Grads f = LossAndGrads(true, x, w, b, labels, 1.0, chunk);
    ExpectClose(f.loss, r.loss, "loss");
    ExpectClose(f.x, r.x, "grad x");
    ExpectClose(f.w, r.w, "grad weight");
    ExpectClose(f.b, r.b, "grad bias");
  }
}

TEST(LinearCrossEntropy, CudaMatchesLinearThenCrossEntropy) {
  // The whole-vocabulary path (CUDA, float32, no autocast); skipped without a GPU.
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const bool tf32 = at::globalContext().allowTF32CuBLAS();
  at::globalContext().setAllowTF32CuBLAS(false);  // float32 GEMMs on both sides
  torch::manual_seed(13);
  const at::TensorOptions cuda = at::TensorOptions().device(at::kCUDA);
  at::Tensor x = at::randn({300, 128}, cuda);
  at::Tensor w = at::randn({30522, 128}, cuda) * 0.05;
  at::Tensor b = at::randn({30522}, cuda) * 0.01;
  at::Tensor labels = at::randint(0, 30522, {300}, cuda.dtype(at::kLong));
  for (double scale : {1.0, 0.25}) {
    const Grads f = LossAndGrads(true, x, w, b, labels, scale);
    const Grads r = LossAndGrads(false, x, w, b, labels, scale);
    ExpectClose(f.loss.cpu(), r.loss.cpu(), "loss");
    ExpectClose(f.x.cpu(), r.x.cpu(), "grad x");
    ExpectClose(f.w.cpu(), r.w.cpu(), "grad weight");
    ExpectClose(f.b.cpu(), r.b.cpu(), "grad bias");
  }
  at::globalContext().setAllowTF32CuBLAS(tf32);
}

TEST(LinearCrossEntropy, LargeLogitsStayFinite) {
  at::Tensor x = at::full({3, 4}, 50.0);
  at::Tensor w = at::randn({10, 4});
  at::Tensor b = at::zeros({10});
  at::Tensor labels = at::tensor({0, 5, 9}, at::kLong);
  const Grads f = LossAndGrads(true, x, w, b, labels, 1.0);
  const Grads r = LossAndGrads(false, x, w, b, labels, 1.0);
  EXPECT_TRUE(std::isfinite(f.loss.item<double>()));
  ExpectClose(f.loss, r.loss, "loss");
  ExpectClose(f.w, r.w, "grad weight");
}

TEST(LinearCrossEntropy, RejectsMismatchedShapesAndTypes) {
  at::Tensor x = at::randn({4, 8}), w = at::randn({16, 8}), b = at::zeros({16});
  at::Tensor labels = at::zeros({4}, at::kLong);
  EXPECT_THROW(LinearCrossEntropy(x, at::randn({16, 9}), b, labels), std::invalid_argument);
  EXPECT_THROW(LinearCrossEntropy(x, w, at::zeros({15}), labels), std::invalid_argument);
  EXPECT_THROW(LinearCrossEntropy(x, w, b, at::zeros({3}, at::kLong)), std::invalid_argument);
  EXPECT_THROW(LinearCrossEntropy(x.to(at::kDouble), w, b, labels), std::invalid_argument);
  EXPECT_THROW(LinearCrossEntropy(x, w, b, labels.to(at::kInt)), std::invalid_argument);
  LinearCrossEntropyOptions negative;
  negative.cpu_chunk_columns = -1;
  EXPECT_THROW(LinearCrossEntropy(x, w, b, labels, negative), std::invalid_argument);
  // Bad data: a label past the vocabulary names the row.
  at::Tensor bad = labels.clone();
  bad[2] = 16;
  try {
    LinearCrossEntropy(x, w, b, bad);
    ADD_FAILURE() << "no error for label 16 of 16 words";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("label 16 of row 2 is outside [0, 16)"), std::string::npos)
        << e.what();
  }
  bad[2] = -1;
  EXPECT_THROW(LinearCrossEntropy(x, w, b, bad), std::invalid_argument);
}

}  // namespace
}  // namespace ringpilot::trainer::ops
