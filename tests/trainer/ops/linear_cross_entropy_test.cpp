#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <ATen/autocast_mode.h>
#include <c10/cuda/CUDAGuard.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/trainer/cuda_graph_capture.h"
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

// CrossEntropyFloat and the reference it replaces: loss and the logits' gradient.
struct LossAndLogitsGrad {
  at::Tensor loss, grad;
};

LossAndLogitsGrad CrossEntropyOf(bool ours, const at::Tensor& logits0, const at::Tensor& labels) {
  at::Tensor logits = logits0.detach().clone().requires_grad_();
  at::Tensor loss = ours ? CrossEntropyFloat(logits, labels)
                         : at::cross_entropy_loss(logits.to(at::kFloat), labels);
  loss.backward();
  return {loss.detach(), logits.grad()};
}

TEST(CrossEntropyFloat, SameAsCrossEntropyOfFloatLogitsOnCpu) {
  torch::manual_seed(17);
  const at::Tensor logits = at::randn({40, 1000}) * 4;
  at::Tensor labels = at::randint(0, 1000, {40}, at::kLong);
  labels[3] = -100;  // ignored, as by at::cross_entropy_loss
  const LossAndLogitsGrad f = CrossEntropyOf(true, logits, labels);
  const LossAndLogitsGrad r = CrossEntropyOf(false, logits, labels);
  EXPECT_TRUE(at::equal(f.loss, r.loss));
  EXPECT_TRUE(at::equal(f.grad, r.grad));
  EXPECT_TRUE(at::equal(f.grad[3], at::zeros({1000})));
}

TEST(CrossEntropyFloat, Bfloat16LogitsOnCudaWithinRoundingOfTheFloatCopy) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(18);
  const at::TensorOptions cuda = at::TensorOptions().device(at::kCUDA);
  // The MLM head's shape: 64 rows x 19 masked positions over BERT's vocabulary.
  const at::Tensor logits = (at::randn({1216, 30522}, cuda) * 3).to(at::kBFloat16);
  const at::Tensor labels = at::randint(0, 30522, {1216}, cuda.dtype(at::kLong));
  for (bool autocast : {false, true}) {
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    at::autocast::set_autocast_enabled(at::kCUDA, autocast);
    const LossAndLogitsGrad f = CrossEntropyOf(true, logits, labels);
    const LossAndLogitsGrad r = CrossEntropyOf(false, logits, labels);
    at::autocast::set_autocast_enabled(at::kCUDA, false);
    at::autocast::clear_cache();
    const std::string what = autocast ? "autocast" : "no autocast";
    EXPECT_EQ(f.loss.scalar_type(), at::kFloat) << what;
    EXPECT_EQ(f.grad.scalar_type(), at::kBFloat16) << what;
    // Float32 log-softmax of the same values (another reduction order at most).
    EXPECT_NEAR(f.loss.item<double>(), r.loss.item<double>(), 1e-5 * r.loss.abs().item<double>())
        << what;
    // The float32 gradient rounded once to bfloat16 on both sides: at most one bf16 step
    // (up to 2^-7 relative) apart, plus float32 noise near zero.
    const at::Tensor a = f.grad.to(at::kDouble), b = r.grad.to(at::kDouble);
    const double excess = ((a - b).abs() - b.abs() * (1.0 / 128) - 1e-9).max().item<double>();
    EXPECT_LE(excess, 0.0) << what;
  }
}

// The reference: ATen's cross-entropy of the float32 copy, loss * scale, logits' gradient.
LossAndLogitsGrad ReferenceOf(const at::Tensor& logits0, const at::Tensor& labels, double scale) {
  at::Tensor logits = logits0.detach().clone().requires_grad_();
  at::Tensor loss = at::cross_entropy_loss(logits.to(at::kFloat), labels);
  (loss * scale).backward();
  return {loss.detach(), logits.grad()};
}

// Both gradients rounded once from float32 to the same 16-bit type: at most one step of it
// apart (2^-7 relative for bf16, 2^-10 for fp16; fp16's subnormals: steps of 2^-24), plus
// float32 noise near zero.
void ExpectWithinOneStep(const at::Tensor& got, const at::Tensor& ref, const std::string& what) {
  const bool half = ref.scalar_type() == at::kHalf;
  const double step = half ? 1.0 / 1024 : 1.0 / 128, tiny = half ? 0x1p-24 : 1e-9;
  const at::Tensor a = got.to(at::kDouble), b = ref.to(at::kDouble);
  const at::Tensor excess = (a - b).abs() - b.abs() * step - tiny;
  const int64_t worst = excess.argmax().item<int64_t>();
  EXPECT_LE(excess.max().item<double>(), 0.0)
      << what << ": " << a.flatten()[worst].item<double>() << " against "
      << b.flatten()[worst].item<double>() << " at flat index " << worst;
}

TEST(CrossEntropyFloat, CudaKernelOnPaddedStridedIgnoredAndOddRows) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(19);
  const at::TensorOptions cuda = at::TensorOptions().device(at::kCUDA);
  struct Case {
    const char* what;
    int64_t rows, cols, ld;
    at::ScalarType dtype;
  };
  // 16-byte vectors (cols and ld multiples of 8), a strided view of a wider buffer, columns
  // that allow no vectors (the scalar path), float16.
  const Case cases[] = {{"bf16 vectors", 300, 4096, 4096, at::kBFloat16},
                        {"bf16 strided rows", 77, 1000, 1032, at::kBFloat16},
                        {"bf16 odd columns", 33, 1003, 1003, at::kBFloat16},
                        {"fp16 vectors", 64, 2048, 2048, at::kHalf}};
  for (const Case& c : cases) {
    const at::Tensor wide = (at::randn({c.rows, c.ld}, cuda) * 3).to(c.dtype);
    const at::Tensor logits = wide.narrow(1, 0, c.cols);
    // The MLM decoder's padding: -inf columns past the vocabulary.
    logits.narrow(1, c.cols - 5, 5).fill_(-std::numeric_limits<float>::infinity());
    at::Tensor labels = at::randint(0, c.cols - 5, {c.rows}, cuda.dtype(at::kLong));
    labels[1] = -100;
    labels[2] = labels[0];
    for (double scale : {1.0, 0.25}) {
      const std::string what = std::string(c.what) + ", scale " + std::to_string(scale);
      at::Tensor ours = logits.detach().clone().requires_grad_();
      if (c.ld != c.cols) {  // keep the stride: a view into its own wide buffer
        at::Tensor buffer = wide.clone();
        ours = buffer.narrow(1, 0, c.cols).detach().requires_grad_();
      }
      at::Tensor loss = CrossEntropyFloat(ours, labels);
      (loss * scale).backward();
      const LossAndLogitsGrad r = ReferenceOf(logits, labels, scale);
      EXPECT_EQ(loss.scalar_type(), at::kFloat) << what;
      EXPECT_NEAR(loss.item<double>(), r.loss.item<double>(), 2e-6 * r.loss.abs().item<double>())
          << what;
      ASSERT_EQ(ours.grad().sizes(), logits.sizes()) << what;
      EXPECT_EQ(ours.grad().scalar_type(), c.dtype) << what;
      ExpectWithinOneStep(ours.grad(), r.grad, what);
      EXPECT_TRUE(at::equal(ours.grad()[1], at::zeros_like(ours.grad()[1]))) << what;
      EXPECT_TRUE(at::equal(ours.grad().narrow(1, c.cols - 5, 5),
                            at::zeros_like(ours.grad().narrow(1, c.cols - 5, 5))))
          << what << ": padding columns";
    }
  }
}

TEST(CrossEntropyFloat, CudaKernelIsDeterministicAndCapturable) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(20);
  const at::TensorOptions cuda = at::TensorOptions().device(at::kCUDA);
  const at::Tensor logits0 = (at::randn({1216, 30528}, cuda) * 3).to(at::kBFloat16);
  const at::Tensor labels = at::randint(0, 30522, {1216}, cuda.dtype(at::kLong));
  const LossAndLogitsGrad a = CrossEntropyOf(true, logits0, labels);
  const LossAndLogitsGrad b = CrossEntropyOf(true, logits0, labels);
  EXPECT_TRUE(at::equal(a.loss, b.loss));
  EXPECT_TRUE(at::equal(a.grad, b.grad));
  // Inside a CUDA graph, the loss's gradient (3.5) read from the device at replay.
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  c10::cuda::CUDAStreamGuard guard(side);
  at::Tensor logits = logits0.detach().clone().requires_grad_();
  at::Tensor loss, grad;
  auto step = [&] {
    loss = CrossEntropyFloat(logits, labels);
    grad = torch::autograd::grad({loss * 3.5}, {logits})[0];
  };
  at::cuda::CUDAGraph graph;
  CaptureStep(graph, step);
  for (int replay = 0; replay < 2; ++replay) {
    graph.replay();
    torch::cuda::synchronize();
    EXPECT_TRUE(at::equal(loss, a.loss)) << "replay " << replay;
    const LossAndLogitsGrad r = ReferenceOf(logits0, labels, 3.5);
    ExpectWithinOneStep(grad, r.grad, "replay " + std::to_string(replay));
  }
}

TEST(CrossEntropyFloat, CudaKernelBadOrNoLabelsGiveNan) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const at::TensorOptions cuda = at::TensorOptions().device(at::kCUDA);
  const at::Tensor logits = at::randn({4, 64}, cuda).to(at::kBFloat16);
  // A label past the vocabulary (ATen would stop the device): NaN loss and NaN in its row.
  const at::Tensor bad = at::tensor({3, 64, 5, 7}, at::kLong).to(at::kCUDA);
  const LossAndLogitsGrad f = CrossEntropyOf(true, logits, bad);
  EXPECT_TRUE(std::isnan(f.loss.item<double>()));
  EXPECT_TRUE(at::isnan(f.grad[1]).all().item<bool>());
  EXPECT_TRUE(at::isfinite(f.grad[0]).all().item<bool>());
  // Nothing labelled: NaN, as ATen's mean over no rows.
  const at::Tensor none = at::full({4}, -100, cuda.dtype(at::kLong));
  EXPECT_TRUE(std::isnan(CrossEntropyFloat(logits, none).item<double>()));
  EXPECT_TRUE(std::isnan(at::cross_entropy_loss(logits.to(at::kFloat), none).item<double>()));
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
