#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/models/resnet.h"
#include "trainer/ops/batch_norm.h"
#include "trainer/ops/fused_batch_norm.h"

#ifdef RINGPILOT_WITH_CUDA
#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace ringpilot::trainer::ops {
namespace {

constexpr double kMomentum = 0.1;
constexpr double kEps = 1e-5;

struct Inputs {
  at::Tensor x, weight, bias, running_mean, running_var, residual, dy;
};

struct Outputs {
  at::Tensor y, running_mean, running_var, dx, dweight, dbias, dresidual;
};

// x and the residual in `dtype` and `format`; parameters and statistics float32.
Inputs MakeInputs(at::IntArrayRef shape, bool residual, at::ScalarType dtype, at::Device device,
                  at::MemoryFormat format, double offset = 0.0) {
  const int64_t c = shape[1];
  auto f32 = at::TensorOptions().dtype(at::kFloat);
  Inputs in;
  in.x = (at::randn(shape, f32) * 2 + offset).to(device, dtype).contiguous(format);
  in.weight = (at::rand({c}, f32) + 0.5).to(device);
  in.bias = (at::randn({c}, f32) * 0.5).to(device);
  in.running_mean = (at::randn({c}, f32) * 0.1).to(device);
  in.running_var = (at::rand({c}, f32) + 0.5).to(device);
  if (residual) in.residual = at::randn(shape, f32).to(device, dtype).contiguous(format);
  in.dy = at::randn(shape, f32).to(device, dtype).contiguous(format);
  return in;
}

// A fresh leaf on the same storage (a clone would realign the misaligned test input).
at::Tensor Leaf(const at::Tensor& t) {
  return t.defined() ? t.detach().requires_grad_() : at::Tensor();
}

at::Tensor GradOf(const at::Tensor& t) { return t.defined() ? t.grad() : at::Tensor(); }

Outputs RunFused(const Inputs& in, bool relu) {
  Outputs out;
  at::Tensor x = Leaf(in.x), w = Leaf(in.weight), b = Leaf(in.bias), z = Leaf(in.residual);
  out.running_mean = in.running_mean.clone();
  out.running_var = in.running_var.clone();
  out.y = FusedBatchNormAct(x, w, b, out.running_mean, out.running_var, kMomentum, kEps,
                            z.defined() ? c10::optional<at::Tensor>(z) : c10::nullopt, relu);
  out.y.backward(in.dy);
  out.dx = x.grad();
  out.dweight = w.grad();
  out.dbias = b.grad();
  out.dresidual = GradOf(z);
  return out;
}

// ATen's batch_norm + add + relu in float32 (from the same, possibly bf16, values). The
// ReLU mask comes from `mask_from` (the fused output): an element within rounding of 0
// could otherwise flip sides between the two computations.
Outputs RunAten(const Inputs& in, bool relu, const at::Tensor& mask_from) {
  Outputs out;
  at::Tensor x = in.x.to(at::kFloat).detach().requires_grad_();
  at::Tensor w = Leaf(in.weight), b = Leaf(in.bias);
  at::Tensor z =
      in.residual.defined() ? in.residual.to(at::kFloat).detach().requires_grad_() : at::Tensor();
  out.running_mean = in.running_mean.clone();
  out.running_var = in.running_var.clone();
  at::Tensor pre = at::batch_norm(x, w, b, out.running_mean, out.running_var, true, kMomentum, kEps,
                                  /*cudnn_enabled=*/true);
  if (z.defined()) pre = pre + z;
  at::Tensor g = in.dy.to(at::kFloat);
  if (relu) g = g * (mask_from > 0).to(at::kFloat);
  pre.backward(g);
  out.y = relu ? pre.detach().relu() : pre.detach();
  out.dx = x.grad();
  out.dweight = w.grad();
  out.dbias = b.grad();
  out.dresidual = GradOf(z);
  return out;
}

// max |a - b| <= atol + rtol * max |b|: a scale-aware bound (sums of many terms).
void ExpectClose(const at::Tensor& a, const at::Tensor& b, double rtol, double atol,
                 const std::string& what) {
  ASSERT_EQ(a.defined(), b.defined()) << what;
  if (!a.defined()) return;
  at::Tensor af = a.detach().to(at::kCPU, at::kFloat), bf = b.detach().to(at::kCPU, at::kFloat);
  ASSERT_EQ(af.sizes(), bf.sizes()) << what;
  const double err = (af - bf).abs().max().item<double>();
  const double scale = bf.abs().max().item<double>();
  EXPECT_LE(err, atol + rtol * scale) << what << ": max error " << err << ", max |ref| " << scale;
}

void ExpectMatches(const Outputs& got, const Outputs& want, double tol, double stats_tol,
                   const std::string& label) {
  ExpectClose(got.y, want.y, tol, tol, label + " y");
  ExpectClose(got.running_mean, want.running_mean, stats_tol, stats_tol, label + " running_mean");
  ExpectClose(got.running_var, want.running_var, stats_tol, stats_tol, label + " running_var");
  ExpectClose(got.dx, want.dx, tol, tol, label + " dx");
  ExpectClose(got.dweight, want.dweight, stats_tol, stats_tol, label + " dweight");
  ExpectClose(got.dbias, want.dbias, stats_tol, stats_tol, label + " dbias");
  ExpectClose(got.dresidual, want.dresidual, tol, tol, label + " dresidual");
}

std::string Label(at::IntArrayRef shape, bool residual, bool relu, at::ScalarType dtype) {
  std::string s = c10::toString(dtype);
  for (int64_t d : shape) s += " " + std::to_string(d);
  return s + (residual ? " +residual" : "") + (relu ? " relu" : "");
}

struct Case {
  std::vector<int64_t> shape;
  bool residual;
  bool relu;
};

void CompareWithAten(const std::vector<Case>& cases, at::ScalarType dtype, at::Device device,
                     double tol, double stats_tol) {
  for (const Case& c : cases) {
    const std::string label = Label(c.shape, c.residual, c.relu, dtype);
    Inputs in = MakeInputs(c.shape, c.residual, dtype, device, at::MemoryFormat::ChannelsLast);
    Outputs fused = RunFused(in, c.relu);
    EXPECT_EQ(fused.y.scalar_type(), dtype) << label;
    EXPECT_EQ(fused.dx.scalar_type(), dtype) << label;
    EXPECT_EQ(fused.dweight.scalar_type(), at::kFloat) << label;
    ExpectMatches(fused, RunAten(in, c.relu, fused.y), tol, stats_tol, label);
  }
}

// --- CPU: the ATen reference path and the autograd wiring ------------------------------

TEST(FusedBatchNorm, CpuReferenceMatchesAtenBatchNormAddRelu) {
  torch::manual_seed(0);
  const std::vector<Case> cases = {
      {{4, 8, 5, 5}, true, true},  {{4, 8, 5, 5}, false, true}, {{4, 8, 5, 5}, true, false},
      {{3, 5, 4, 3}, false, true}, {{3, 5, 4, 3}, true, true},  {{2, 13, 3, 3}, false, false},
      {{16, 3, 1, 1}, true, true}, {{1, 24, 6, 7}, true, true},
  };
  CompareWithAten(cases, at::kFloat, at::kCPU, 1e-5, 1e-5);
}

TEST(FusedBatchNorm, CpuAcceptsContiguousNchwInput) {
  torch::manual_seed(1);
  Inputs in = MakeInputs({4, 6, 3, 5}, true, at::kFloat, at::kCPU, at::MemoryFormat::Contiguous);
  Outputs fused = RunFused(in, true);
  ExpectMatches(fused, RunAten(in, true, fused.y), 1e-5, 1e-5, "nchw");
}

TEST(FusedBatchNorm, ReluMaskFollowsTheOutput) {
  // Bias -100 puts every output below zero: no gradient reaches x, weight or residual,
  // and grad_bias is zero.
  at::Tensor x = at::randn({2, 4, 3, 3}).requires_grad_();
  at::Tensor w = at::ones({4}).requires_grad_();
  at::Tensor b = at::full({4}, -100.0f).requires_grad_();
  at::Tensor z = at::randn({2, 4, 3, 3}).requires_grad_();
  at::Tensor y = FusedBatchNormAct(x, w, b, at::Tensor(), at::Tensor(), kMomentum, kEps, z, true);
  EXPECT_EQ(y.abs().max().item<float>(), 0.0f);
  y.sum().backward();
  EXPECT_EQ(x.grad().abs().max().item<float>(), 0.0f);
  EXPECT_EQ(w.grad().abs().max().item<float>(), 0.0f);
  EXPECT_EQ(b.grad().abs().max().item<float>(), 0.0f);
  EXPECT_EQ(z.grad().abs().max().item<float>(), 0.0f);
}

TEST(FusedBatchNorm, ReluMaskWithoutResidualComesFromTheInput) {
  // No residual: backward recomputes the mask from x; bias -100 masks every element.
  at::Tensor x = at::randn({2, 4, 3, 3}).requires_grad_();
  at::Tensor w = at::ones({4}).requires_grad_();
  at::Tensor b = at::full({4}, -100.0f).requires_grad_();
  FusedBatchNormAct(x, w, b, at::Tensor(), at::Tensor(), kMomentum, kEps, c10::nullopt, true)
      .sum()
      .backward();
  for (const at::Tensor& g : {x.grad(), w.grad(), b.grad()}) {
    EXPECT_EQ(g.abs().max().item<float>(), 0.0f);
  }
}

TEST(FusedBatchNorm, BiasChangedBeforeBackwardIsRefused) {
  // Without a residual backward recomputes the mask with the forward's bias: a bias changed
  // in place in between must fail loudly, not give another mask.
  at::Tensor x = at::randn({2, 4, 3, 3}).requires_grad_();
  at::Tensor w = at::ones({4}).requires_grad_();
  at::Tensor b = at::zeros({4}).requires_grad_();
  at::Tensor y =
      FusedBatchNormAct(x, w, b, at::Tensor(), at::Tensor(), kMomentum, kEps, c10::nullopt, true);
  {
    at::NoGradGuard no_grad;
    b.add_(1.0);
  }
  EXPECT_THROW(y.sum().backward(), c10::Error);
}

TEST(FusedBatchNorm, ResidualWithoutGradAndNoRunningStatistics) {
  torch::manual_seed(12);
  at::Tensor x = at::randn({3, 4, 2, 5}).requires_grad_();
  at::Tensor w = at::rand({4}) + 0.5, b = at::randn({4}), z = at::randn({3, 4, 2, 5});
  at::Tensor y = FusedBatchNormAct(x, w, b, at::Tensor(), at::Tensor(), kMomentum, kEps, z, true);
  at::Tensor dy = at::randn_like(y);
  y.backward(dy);
  at::Tensor xr = x.detach().clone().requires_grad_();
  at::Tensor pre =
      at::batch_norm(xr, w, b, at::Tensor(), at::Tensor(), true, kMomentum, kEps, true) + z;
  pre.backward(dy * (y > 0).to(at::kFloat));
  ExpectClose(y, pre.detach().relu(), 1e-5, 1e-5, "y");
  ExpectClose(x.grad(), xr.grad(), 1e-5, 1e-5, "dx");
}

TEST(FusedBatchNorm, RejectsOneValuePerChannelAndWrongShapes) {
  at::Tensor w = at::ones({3}), b = at::zeros({3});
  EXPECT_THROW(FusedBatchNormAct(at::randn({1, 3, 1, 1}), w, b, at::Tensor(), at::Tensor(),
                                 kMomentum, kEps, c10::nullopt, true),
               c10::Error);
  EXPECT_THROW(FusedBatchNormAct(at::randn({2, 3, 4}), w, b, at::Tensor(), at::Tensor(), kMomentum,
                                 kEps, c10::nullopt, true),
               c10::Error);
  EXPECT_THROW(FusedBatchNormAct(at::randn({2, 3, 2, 2}), w, b, at::Tensor(), at::Tensor(),
                                 kMomentum, kEps, at::randn({2, 3, 2, 1}), true),
               c10::Error);
}

TEST(FusedBatchNorm, NotSupportedOnCpuTensors) {
  EXPECT_FALSE(
      FusedBatchNormSupported(at::randn({2, 8, 3, 3}).contiguous(at::MemoryFormat::ChannelsLast)));
}

TEST(FusedBatchNorm, ModuleForwardActFallsBackToBatchNormAddRelu) {
  torch::manual_seed(2);
  BatchNormOptions options;
  options.channels = 6;
  BatchNorm2d bn(options, nullptr);
  at::Tensor x = at::randn({3, 6, 4, 4}), z = at::randn({3, 6, 4, 4});
  at::Tensor rm = bn->running_mean.clone(), rv = bn->running_var.clone();
  at::Tensor y = bn->forward_act(x, &z, true);
  at::Tensor want =
      (at::batch_norm(x, bn->weight, bn->bias, rm, rv, true, kMomentum, kEps, true) + z).relu();
  ExpectClose(y, want, 1e-6, 1e-6, "forward_act");
  ExpectClose(bn->running_mean, rm, 1e-6, 1e-6, "running_mean");
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 1);
  bn->eval();
  at::Tensor eval = bn->forward_act(x, nullptr, true);
  ExpectClose(eval,
              at::batch_norm(x, bn->weight, bn->bias, rm, rv, false, kMomentum, kEps, true).relu(),
              1e-6, 1e-6, "eval");
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 1);
}

// Two ResNet-18 (CIFAR) models with the same weights, fused BatchNorm on and off.
struct ModelPair {
  std::shared_ptr<models::Model> fused, unfused;
};

// `dtype` float32 or float64. With `fused_reference`, the fused model's BatchNorms take
// FusedBatchNormAct's path even where the kernels cannot run (its ATen reference on CPU).
ModelPair MakeModelPair(at::Device device, at::ScalarType dtype = at::kFloat,
                        bool fused_reference = false) {
  models::ResNetConfig cfg;
  ModelPair pair{models::MakeResNet(cfg, nullptr), nullptr};
  cfg.fused_batchnorm = false;
  pair.unfused = models::MakeResNet(cfg, nullptr);
  torch::NoGradGuard no_grad;
  auto from = pair.fused->named_parameters();
  for (auto& p : pair.unfused->named_parameters()) p.value().copy_(from[p.key()]);
  auto from_buffers = pair.fused->named_buffers();
  for (auto& b : pair.unfused->named_buffers()) b.value().copy_(from_buffers[b.key()]);
  for (auto* m : {&pair.fused, &pair.unfused}) {
    (*m)->to(device, dtype);
    (*m)->train();
  }
  for (auto& m : pair.fused->modules()) {
    if (auto* bn = m->as<BatchNorm2dImpl>()) bn->options().fused_reference = fused_reference;
  }
  return pair;
}

// Checks ||a - b|| <= tol * ||b|| and prints the error (so passing margins are visible);
// returns the relative error.
double ExpectRelativeL2(const at::Tensor& a, const at::Tensor& b, double tol,
                        const std::string& what) {
  EXPECT_TRUE(a.defined() && b.defined()) << what;
  if (!a.defined() || !b.defined()) return 0;
  at::Tensor af = a.detach().to(at::kCPU, at::kDouble), bf = b.detach().to(at::kCPU, at::kDouble);
  const double err = (af - bf).norm().item<double>();
  const double scale = bf.norm().item<double>();
  const double rel = err / std::max(scale, 1e-300);
  std::printf("[resnet]   %-36s rel %.3e (tol %.0e)%s\n", what.c_str(), rel, tol,
              err <= tol * std::max(scale, 1e-12) ? "" : "  FAIL");
  EXPECT_LE(err, tol * std::max(scale, 1e-12)) << what << ": |a-b| " << err << ", |b| " << scale;
  return rel;
}

// One training forward and backward of both models; compares the loss and every buffer
// (running statistics, num_batches_tracked) with `forward_tol` and every gradient with
// `grad_tol`, printing each error and the largest.
void CompareModelPair(ModelPair& pair, const at::Tensor& input, const at::Tensor& target,
                      double forward_tol, double grad_tol, const std::string& label) {
  std::printf("[resnet] %s\n", label.c_str());
  at::Tensor loss_fused = pair.fused->Loss(input, target);
  at::Tensor loss_unfused = pair.unfused->Loss(input, target);
  loss_fused.backward();
  loss_unfused.backward();
  ExpectRelativeL2(loss_fused, loss_unfused, forward_tol, "loss");
  double worst = 0;
  std::string worst_name;
  auto unfused_params = pair.unfused->named_parameters();
  for (auto& p : pair.fused->named_parameters()) {
    const double rel = ExpectRelativeL2(p.value().grad(), unfused_params[p.key()].grad(), grad_tol,
                                        p.key() + " grad");
    if (rel >= worst) {
      worst = rel;
      worst_name = p.key() + " grad";
    }
  }
  auto unfused_buffers = pair.unfused->named_buffers();
  for (auto& b : pair.fused->named_buffers()) {
    ExpectRelativeL2(b.value(), unfused_buffers[b.key()], forward_tol, b.key());
  }
  std::printf("[resnet] %s: largest gradient error %.3e (%s), tolerance %.0e\n", label.c_str(),
              worst, worst_name.c_str(), grad_tol);
}

// Without fused_reference on CPU both models run ATen's batch_norm: this checks only
// that forward_act's fallback (batch_norm, add, relu_) is the unfused block's maths.
TEST(FusedBatchNorm, ResNetWithForwardActMatchesUnfusedOnCpu) {
  torch::manual_seed(10);
  ModelPair pair = MakeModelPair(at::kCPU);
  CompareModelPair(pair, at::randn({2, 3, 32, 32}), at::randint(0, 10, {2}), 1e-6, 1e-6,
                   "cpu fallback");
}

TEST(FusedBatchNorm, FusedReferenceOptionRoutesThroughTheFusedFunction) {
  torch::manual_seed(13);
  BatchNormOptions options;
  options.channels = 6;
  BatchNorm2d bn(options, nullptr);
  at::Tensor x = at::randn({3, 6, 4, 4}).requires_grad_(), z = at::randn({3, 6, 4, 4});
  at::Tensor y = bn->forward_act(x, &z, true);
  ASSERT_TRUE(y.grad_fn());
  EXPECT_EQ(y.grad_fn()->name().find("FusedBatchNormFn"), std::string::npos);
  bn->options().fused_reference = true;
  y = bn->forward_act(x, &z, true);
  ASSERT_TRUE(y.grad_fn());
  EXPECT_NE(y.grad_fn()->name().find("FusedBatchNormFn"), std::string::npos) << y.grad_fn()->name();
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 2);
}

// The fused autograd Function inside the whole model: the identity shortcut that is
// also the next convolution's input (its gradient accumulates the Function's dz with
// the convolution's), a saved ReLU output that feeds two consumers, the downsample
// BatchNorm without ReLU, channels_last activations, running statistics. In float64,
// so that the two models' activations agree to ~1e-15 and no ReLU mask can flip
// between them (in float32 a single flipped element of a late layer moves every
// earlier gradient by ~1/sqrt(numel) in relative L2): any wiring error shows.
TEST(FusedBatchNorm, ResNetThroughFusedFunctionMatchesUnfusedInFloat64OnCpu) {
  torch::manual_seed(14);
  ModelPair pair = MakeModelPair(at::kCPU, at::kDouble, /*fused_reference=*/true);
  at::Tensor input = at::randn({4, 3, 32, 32}, at::kDouble);
  at::Tensor target = at::randint(0, 10, {4});
  CompareModelPair(pair, input.contiguous(at::MemoryFormat::ChannelsLast), target, 1e-10, 1e-9,
                   "cpu float64 fused reference, channels_last");
  // NCHW activations take the same Function (FusedBatchNormAct accepts any layout).
  torch::manual_seed(15);
  ModelPair nchw = MakeModelPair(at::kCPU, at::kDouble, /*fused_reference=*/true);
  CompareModelPair(nchw, at::randn({2, 3, 32, 32}, at::kDouble), at::randint(0, 10, {2}), 1e-10,
                   1e-9, "cpu float64 fused reference, nchw");
}

// --- CUDA: the kernels against ATen on the GPU (skipped without a GPU) -----------------

#ifdef RINGPILOT_WITH_CUDA

bool HaveCuda() { return torch::cuda::is_available(); }

const std::vector<Case>& ResNetCases() {
  static const std::vector<Case> cases = {
      {{8, 64, 56, 56}, false, true},   {{8, 256, 56, 56}, true, true},
      {{8, 256, 56, 56}, false, false}, {{8, 2048, 7, 7}, true, true},
      {{8, 512, 28, 28}, false, true},  {{4, 3, 9, 9}, true, true},
      {{4, 12, 5, 5}, true, true},      {{2, 20, 3, 3}, false, true},
      {{5, 1024, 1, 1}, true, false},   {{2, 64, 112, 112}, false, true},
  };
  return cases;
}

TEST(FusedBatchNormCuda, Float32MatchesAten) {
  if (!HaveCuda()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(3);
  CompareWithAten(ResNetCases(), at::kFloat, at::kCUDA, 1e-4, 1e-4);
}

TEST(FusedBatchNormCuda, BFloat16MatchesAtenInFloat32) {
  if (!HaveCuda()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(4);
  // Outputs are rounded to bf16 (8 significant bits); statistics and parameter
  // gradients are float32 sums of the same bf16 values.
  CompareWithAten(ResNetCases(), at::kBFloat16, at::kCUDA, 1e-2, 1e-3);
}

TEST(FusedBatchNormCuda, LargeMeanKeepsVarianceAccurate) {
  if (!HaveCuda()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(5);
  // Mean 300 over std 2 over 200k rows: sum-of-squares in float32 would lose the variance.
  Inputs in = MakeInputs({64, 64, 56, 56}, false, at::kFloat, at::kCUDA,
                         at::MemoryFormat::ChannelsLast, 300.0);
  Outputs fused = RunFused(in, true);
  ExpectMatches(fused, RunAten(in, true, fused.y), 1e-3, 1e-4, "large mean");
}

TEST(FusedBatchNormCuda, MisalignedPointersUseTheScalarPath) {
  if (!HaveCuda()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(6);
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    Inputs in = MakeInputs({4, 16, 6, 6}, true, dtype, at::kCUDA, at::MemoryFormat::ChannelsLast);
    // Same values one element into a larger buffer: contiguous channels_last, not
    // 16-byte aligned.
    const int64_t n = in.x.numel();
    at::Tensor buffer = at::empty({n + 1}, in.x.options());
    at::Tensor x = buffer.narrow(0, 1, n).as_strided(in.x.sizes(), in.x.strides());
    x.copy_(in.x);
    ASSERT_TRUE(FusedBatchNormSupported(x));
    ASSERT_NE(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16, 0u);
    Inputs shifted = in;
    shifted.x = x;
    Outputs fused = RunFused(shifted, true);
    const double tol = dtype == at::kFloat ? 1e-4 : 1e-2;
    ExpectMatches(fused, RunAten(in, true, fused.y), tol, dtype == at::kFloat ? 1e-4 : 1e-3,
                  "misaligned " + std::string(c10::toString(dtype)));
  }
}

TEST(FusedBatchNormCuda, NonChannelsLastGradientIsAccepted) {
  if (!HaveCuda()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(7);
  Inputs in =
      MakeInputs({4, 32, 7, 7}, true, at::kFloat, at::kCUDA, at::MemoryFormat::ChannelsLast);
  in.dy = in.dy.contiguous();  // NCHW upstream gradient
  Outputs fused = RunFused(in, true);
  ExpectMatches(fused, RunAten(in, true, fused.y), 1e-4, 1e-4, "nchw dy");
}

// With the residual the ReLU mask comes from the saved output, without it from x.
TEST(FusedBatchNormCuda, ForwardBackwardReplayInACudaGraph) {
  if (!HaveCuda()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(8);
  for (const bool residual : {true, false}) {
    Inputs in = MakeInputs({8, 256, 14, 14}, residual, at::kBFloat16, at::kCUDA,
                           at::MemoryFormat::ChannelsLast);
    const Outputs eager = RunFused(in, true);
    at::Tensor x = Leaf(in.x), w = Leaf(in.weight), b = Leaf(in.bias), z = Leaf(in.residual);
    at::Tensor rm = in.running_mean.clone(), rv = in.running_var.clone();
    at::Tensor count = at::zeros({}, at::TensorOptions().dtype(at::kLong).device(at::kCUDA));
    at::Tensor y, dx, dw, db, dz;
    auto step = [&] {
      y = FusedBatchNormAct(x, w, b, rm, rv, kMomentum, kEps, z, true, false, count);
      std::vector<at::Tensor> inputs = {x, w, b};
      if (residual) inputs.push_back(z);
      auto grads = torch::autograd::grad({y}, inputs, {in.dy});
      dx = grads[0];
      dw = grads[1];
      db = grads[2];
      dz = residual ? grads[3] : at::Tensor();
    };
    torch::cuda::synchronize();
    c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
    at::cuda::CUDAGraph graph;
    {
      c10::cuda::CUDAStreamGuard guard(side);
      step();  // warm-up outside capture (autograd engine, allocator)
      graph.capture_begin();
      step();
      graph.capture_end();
    }
    torch::cuda::synchronize();
    for (int replay = 0; replay < 2; ++replay) {
      // Each replay updates the running statistics once, as one eager step did.
      rm.copy_(in.running_mean);
      rv.copy_(in.running_var);
      graph.replay();
      torch::cuda::synchronize();
      const std::string label =
          std::string(residual ? "+residual" : "") + " replay " + std::to_string(replay);
      ExpectClose(y, eager.y, 0, 0, label + " y");
      ExpectClose(dx, eager.dx, 0, 0, label + " dx");
      ExpectClose(dw, eager.dweight, 0, 0, label + " dweight");
      ExpectClose(db, eager.dbias, 0, 0, label + " dbias");
      ExpectClose(dz, eager.dresidual, 0, 0, label + " dresidual");
      ExpectClose(rm, eager.running_mean, 0, 0, label + " running_mean");
      ExpectClose(rv, eager.running_var, 0, 0, label + " running_var");
    }
    // The warm-up step and two replays: the counter rides on the captured kernels.
    EXPECT_EQ(count.item<int64_t>(), 3);
  }
}

// Turns TF32 off for cuDNN and cuBLAS (PyTorch lets cuDNN convolutions use it by
// default) and restores the previous settings.
class NoTf32 {
 public:
  NoTf32()
      : cudnn_(at::globalContext().allowTF32CuDNN()),
        cublas_(at::globalContext().allowTF32CuBLAS()) {
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
  }
  ~NoTf32() {
    at::globalContext().setAllowTF32CuDNN(cudnn_);
    at::globalContext().setAllowTF32CuBLAS(cublas_);
  }
  NoTf32(const NoTf32&) = delete;
  NoTf32& operator=(const NoTf32&) = delete;

 private:
  bool cudnn_, cublas_;
};

// Gradients of two float32 (or bf16) networks that differ only in rounding are not
// close elementwise: wherever an activation lies within rounding of 0 the two ReLU masks
// differ, and each such element moves every earlier gradient by ~1/sqrt(numel) of the
// layer in relative L2. With TF32 convolutions (activations differing by ~1e-3) that
// is 50-100 flipped masks per layer and ~8% gradient error (reproduced on CPU by
// rounding convolution operands to TF32); without TF32, a few flips and 0.1-0.7% (eight
// seeds on CPU). Hence float32 without TF32 and a 2e-2 gradient tolerance; the loss and
// running statistics stay tight, and the wiring itself is checked to 1e-9 in float64 by
// ResNetThroughFusedFunctionMatchesUnfusedInFloat64OnCpu.
TEST(FusedBatchNormCuda, ResNetMatchesUnfusedInFloat32) {
  if (!HaveCuda()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(11);
  ModelPair pair = MakeModelPair(at::kCUDA);
  at::Tensor input =
      at::randn({16, 3, 32, 32}).to(at::kCUDA).contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor target = at::randint(0, 10, {16}).to(at::kCUDA);
  const NoTf32 no_tf32;
  CompareModelPair(pair, input, target, 1e-4, 2e-2, "cuda float32 (no TF32)");
}

// All of a model's gradients as one float64 vector.
at::Tensor FlatGrads(models::Model& m) {
  std::vector<at::Tensor> parts;
  for (auto& p : m.parameters())
    parts.push_back(p.grad().detach().to(at::kCPU, at::kDouble).flatten());
  return at::cat(parts);
}

// Under bf16 autocast the fused and unfused blocks round at different places (the
// unfused one rounds BatchNorm's output to bf16 before the add and the ReLU), and at
// bf16's precision the ReLU masks of the two differ in many places: their gradients
// differ by tens of percent (measured on an H200: 11-41% per tensor), as two unfused
// runs with slightly different inputs would. What must hold is that the fused model is
// no further from the float32 model with the same weights than the unfused one is.
TEST(FusedBatchNormCuda, ResNetInBf16IsNoFurtherFromFloat32ThanUnfused) {
  if (!HaveCuda()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(12);
  ModelPair pair = MakeModelPair(at::kCUDA);
  torch::manual_seed(12);
  ModelPair reference = MakeModelPair(at::kCUDA);  // same weights
  at::Tensor input =
      at::randn({16, 3, 32, 32}).to(at::kCUDA).contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor target = at::randint(0, 10, {16}).to(at::kCUDA);
  at::Tensor ref_loss;
  {
    const NoTf32 no_tf32;
    ref_loss = reference.unfused->Loss(input, target);
    ref_loss.backward();
  }
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::Tensor fused_loss = pair.fused->Loss(input, target);
  at::Tensor unfused_loss = pair.unfused->Loss(input, target);
  at::autocast::set_autocast_enabled(at::kCUDA, false);
  at::autocast::clear_cache();
  fused_loss.backward();
  unfused_loss.backward();
  const at::Tensor ref = FlatGrads(*reference.unfused);
  auto rel = [&](const at::Tensor& g) { return ((g - ref).norm() / ref.norm()).item<double>(); };
  const double fused_err = rel(FlatGrads(*pair.fused));
  const double unfused_err = rel(FlatGrads(*pair.unfused));
  const double ref_l = ref_loss.item<double>();
  std::printf(
      "[resnet] bf16 vs float32 gradients: fused %.3e, unfused %.3e; loss %.6f %.6f vs %.6f\n",
      fused_err, unfused_err, fused_loss.item<double>(), unfused_loss.item<double>(), ref_l);
  EXPECT_LE(fused_err, 1.5 * unfused_err + 1e-2);
  EXPECT_NEAR(fused_loss.item<double>(), ref_l, 2e-2 * std::abs(ref_l));
  EXPECT_NEAR(unfused_loss.item<double>(), ref_l, 2e-2 * std::abs(ref_l));
}

double MsPerCall(const std::function<void()>& fn, int iters) {
  for (int i = 0; i < 3; ++i) fn();
  torch::cuda::synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) fn();
  torch::cuda::synchronize();
  const std::chrono::duration<double, std::milli> elapsed =
      std::chrono::steady_clock::now() - start;
  return elapsed.count() / iters;
}

// Printed, not asserted: fused vs ATen batch_norm + add + relu for ResNet-50's largest
// bottleneck output, forward and forward + backward.
TEST(FusedBatchNormCuda, BenchmarkBf16) {
  if (!HaveCuda()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(9);
  const std::vector<int64_t> shape = {256, 256, 56, 56};
  Inputs in = MakeInputs(shape, true, at::kBFloat16, at::kCUDA, at::MemoryFormat::ChannelsLast);
  at::Tensor x = Leaf(in.x), w = Leaf(in.weight), b = Leaf(in.bias), z = Leaf(in.residual);
  at::Tensor rm = in.running_mean.clone(), rv = in.running_var.clone();
  auto fused = [&] { return FusedBatchNormAct(x, w, b, rm, rv, kMomentum, kEps, z, true); };
  auto aten = [&] {
    return (at::batch_norm(x, w, b, rm, rv, true, kMomentum, kEps, true) + z).relu_();
  };
  const int iters = 20;
  double ms[4];
  {
    at::NoGradGuard no_grad;
    ms[0] = MsPerCall([&] { fused(); }, iters);
    ms[1] = MsPerCall([&] { aten(); }, iters);
  }
  ms[2] = MsPerCall([&] { torch::autograd::grad({fused()}, {x, w, b, z}, {in.dy}); }, iters);
  ms[3] = MsPerCall([&] { torch::autograd::grad({aten()}, {x, w, b, z}, {in.dy}); }, iters);
  const double gb = static_cast<double>(in.x.numel()) * 2 / 1e9;
  std::printf(
      "[bench] bf16 [256,256,56,56] +residual+relu (%.2f GB per tensor)\n"
      "[bench]   forward:            fused %.3f ms  aten %.3f ms\n"
      "[bench]   forward + backward: fused %.3f ms  aten %.3f ms\n"
      "[bench]   fused forward moves ~4 tensors (%.0f GB/s), fwd+bwd ~11 (%.0f GB/s)\n",
      gb, ms[0], ms[1], ms[2], ms[3], 4 * gb / (ms[0] / 1e3), 11 * gb / (ms[2] / 1e3));
}

#endif  // RINGPILOT_WITH_CUDA

}  // namespace
}  // namespace ringpilot::trainer::ops
