#include "trainer/fused_batch_norm.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

#include "trainer/batch_norm.h"
#include "trainer/resnet.h"

#ifdef RINGPILOT_WITH_CUDA
#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace ringpilot::trainer {
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
  std::shared_ptr<Model> fused, unfused;
};

ModelPair MakeModelPair(at::Device device) {
  ResNetConfig cfg;
  ModelPair pair{MakeResNet(cfg, nullptr), nullptr};
  cfg.fused_batchnorm = false;
  pair.unfused = MakeResNet(cfg, nullptr);
  torch::NoGradGuard no_grad;
  auto from = pair.fused->named_parameters();
  for (auto& p : pair.unfused->named_parameters()) p.value().copy_(from[p.key()]);
  auto from_buffers = pair.fused->named_buffers();
  for (auto& b : pair.unfused->named_buffers()) b.value().copy_(from_buffers[b.key()]);
  for (auto* m : {&pair.fused, &pair.unfused}) {
    (*m)->to(device);
    (*m)->train();
  }
  return pair;
}

// ||a - b|| <= tol * ||b||: the whole-tensor error of a deep network's gradients.
void ExpectRelativeL2(const at::Tensor& a, const at::Tensor& b, double tol,
                      const std::string& what) {
  ASSERT_TRUE(a.defined() && b.defined()) << what;
  at::Tensor af = a.detach().to(at::kCPU, at::kDouble), bf = b.detach().to(at::kCPU, at::kDouble);
  const double err = (af - bf).norm().item<double>();
  const double scale = bf.norm().item<double>();
  EXPECT_LE(err, tol * std::max(scale, 1e-12)) << what << ": |a-b| " << err << ", |b| " << scale;
}

// One training forward and backward of both models; compares the loss, every gradient
// and every buffer (running statistics, num_batches_tracked).
void CompareModelPair(ModelPair& pair, const at::Tensor& input, const at::Tensor& target,
                      double tol) {
  at::Tensor loss_fused = pair.fused->Loss(input, target);
  at::Tensor loss_unfused = pair.unfused->Loss(input, target);
  loss_fused.backward();
  loss_unfused.backward();
  ExpectRelativeL2(loss_fused, loss_unfused, tol, "loss");
  auto unfused_params = pair.unfused->named_parameters();
  for (auto& p : pair.fused->named_parameters()) {
    ExpectRelativeL2(p.value().grad(), unfused_params[p.key()].grad(), tol, p.key() + " grad");
  }
  auto unfused_buffers = pair.unfused->named_buffers();
  for (auto& b : pair.fused->named_buffers()) {
    ExpectRelativeL2(b.value(), unfused_buffers[b.key()], tol, b.key());
  }
}

TEST(FusedBatchNorm, ResNetWithForwardActMatchesUnfusedOnCpu) {
  torch::manual_seed(10);
  ModelPair pair = MakeModelPair(at::kCPU);
  CompareModelPair(pair, at::randn({2, 3, 32, 32}), at::randint(0, 10, {2}), 1e-6);
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

TEST(FusedBatchNormCuda, ForwardBackwardReplayInACudaGraph) {
  if (!HaveCuda()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(8);
  Inputs in =
      MakeInputs({8, 256, 14, 14}, true, at::kBFloat16, at::kCUDA, at::MemoryFormat::ChannelsLast);
  const Outputs eager = RunFused(in, true);

  at::Tensor x = Leaf(in.x), w = Leaf(in.weight), b = Leaf(in.bias), z = Leaf(in.residual);
  at::Tensor rm = in.running_mean.clone(), rv = in.running_var.clone();
  at::Tensor y, dx, dw, db, dz;
  auto step = [&] {
    y = FusedBatchNormAct(x, w, b, rm, rv, kMomentum, kEps, z, true);
    auto grads = torch::autograd::grad({y}, {x, w, b, z}, {in.dy});
    dx = grads[0];
    dw = grads[1];
    db = grads[2];
    dz = grads[3];
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
    const std::string label = "replay " + std::to_string(replay);
    ExpectClose(y, eager.y, 0, 0, label + " y");
    ExpectClose(dx, eager.dx, 0, 0, label + " dx");
    ExpectClose(dw, eager.dweight, 0, 0, label + " dweight");
    ExpectClose(db, eager.dbias, 0, 0, label + " dbias");
    ExpectClose(dz, eager.dresidual, 0, 0, label + " dresidual");
    ExpectClose(rm, eager.running_mean, 0, 0, label + " running_mean");
    ExpectClose(rv, eager.running_var, 0, 0, label + " running_var");
  }
}

TEST(FusedBatchNormCuda, ResNetMatchesUnfusedInFloat32AndBf16Autocast) {
  if (!HaveCuda()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(11);
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16 autocast" : "float32");
    ModelPair pair = MakeModelPair(at::kCUDA);
    at::Tensor input =
        at::randn({16, 3, 32, 32}).to(at::kCUDA).contiguous(at::MemoryFormat::ChannelsLast);
    at::Tensor target = at::randint(0, 10, {16}).to(at::kCUDA);
    if (bf16) {
      at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
      at::autocast::set_autocast_enabled(at::kCUDA, true);
    }
    // bf16: the unfused graph rounds bn's output before the add; the fused one does not.
    CompareModelPair(pair, input, target, bf16 ? 5e-2 : 1e-3);
    if (bf16) {
      at::autocast::set_autocast_enabled(at::kCUDA, false);
      at::autocast::clear_cache();
    }
  }
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
}  // namespace ringpilot::trainer
