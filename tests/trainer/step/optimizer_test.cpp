#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/options.h"
#include "trainer/step/optimizer.h"

namespace ringpilot::trainer {
namespace {

step::OptimizerOptions WithDecay(config::Optimizer kind) {
  step::OptimizerOptions o =
      OptimizerOptionsFor(config::JobConfig{}, 100);  // job defaults, 100 steps
  o.kind = kind;
  o.lr = 0.05;
  o.weight_decay = 0.1;
  return o;
}

void ExpectSameState(const step::FusedOptimizer& a, const step::FusedOptimizer& b) {
  const auto sa = a.StateTensors(), sb = b.StateTensors();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) EXPECT_TRUE(at::equal(sa[i], sb[i])) << "state " << i;
}

TEST(FusedOptimizer, SgdMomentumMatchesTheTorchOptimFormula) {
  at::Tensor p = at::tensor({1.0f, -2.0f, 3.0f}).requires_grad_();
  step::OptimizerOptions o =
      OptimizerOptionsFor(config::JobConfig{}, 100);  // job defaults, 100 steps
  o.lr = 0.1;
  o.momentum = 0.9;
  o.weight_decay = 0.01;
  step::FusedOptimizer opt({p}, o);
  at::Tensor ref = p.detach().clone(), buf;
  for (int step = 0; step < 3; ++step) {
    at::Tensor g = at::tensor({0.5f, 0.25f, -1.0f}) * (step + 1);
    p.mutable_grad() = g.clone();
    opt.Step();
    at::Tensor d = g + 0.01 * ref;  // torch.optim.SGD: d_p = g + wd*p; buf = m*buf + d_p
    buf = step == 0 ? d.clone() : buf * 0.9 + d;
    ref = ref - 0.1 * buf;
    EXPECT_TRUE(at::allclose(p.detach(), ref, 1e-6, 1e-7)) << "step " << step;
  }
  EXPECT_EQ(opt.steps_done(), 3);
  EXPECT_EQ(opt.StateTensors().size(), 1u);
}

TEST(FusedOptimizer, AdamWMatchesTheTorchOptimFormula) {
  at::Tensor p = at::tensor({0.5f, -1.0f}).requires_grad_();
  step::OptimizerOptions o =
      OptimizerOptionsFor(config::JobConfig{}, 100);  // job defaults, 100 steps
  o.kind = config::Optimizer::kAdamW;
  o.lr = 0.01;
  o.weight_decay = 0.1;
  step::FusedOptimizer opt({p}, o);
  at::Tensor ref = p.detach().clone().to(at::kDouble);
  at::Tensor m = at::zeros({2}, at::kDouble), v = at::zeros({2}, at::kDouble);
  for (int t = 1; t <= 3; ++t) {
    at::Tensor g = at::tensor({0.3f, -0.7f}) * t;
    p.mutable_grad() = g.clone();
    opt.Step();
    at::Tensor gd = g.to(at::kDouble);
    ref = ref * (1 - 0.01 * 0.1);
    m = 0.9 * m + 0.1 * gd;
    v = 0.999 * v + 0.001 * gd * gd;
    const double bc1 = 1 - std::pow(0.9, t), bc2 = 1 - std::pow(0.999, t);
    ref = ref - 0.01 / bc1 * m / ((v / bc2).sqrt() + 1e-8);
    EXPECT_TRUE(at::allclose(p.detach().to(at::kDouble), ref, 1e-5, 1e-7))
        << "step " << t << ": " << p.detach() << " vs " << ref;
  }
  ASSERT_EQ(opt.StateNames().size(), 3u);
  EXPECT_EQ(opt.StateNames()[0], "exp_avg/0");
}

// A step split over disjoint parameter subsets (StepParams, EndStep) is Step(), element
// for element, for both optimizers and over several steps (SGD's first-step momentum and
// AdamW's step counts included).
TEST(FusedOptimizer, SplitStepEqualsOneStep) {
  for (auto kind : {config::Optimizer::kSgd, config::Optimizer::kAdamW}) {
    const step::OptimizerOptions o = WithDecay(kind);
    std::vector<at::Tensor> a, b;
    for (int i = 0; i < 5; ++i) {
      at::Tensor t = at::randn({3 + i});
      a.push_back(t.clone().requires_grad_());
      b.push_back(t.clone().requires_grad_());
    }
    step::FusedOptimizer whole(a, o), split(b, o);
    for (int step = 0; step < 3; ++step) {
      for (int i = 0; i < 5; ++i) {
        at::Tensor g = at::randn({3 + i});
        a[i].mutable_grad() = g.clone();
        b[i].mutable_grad() = g.clone();
      }
      whole.Step();
      split.StepParams({4, 0, 2});
      split.StepParams({});
      split.StepParams({1, 3});
      split.EndStep();
    }
    EXPECT_EQ(split.steps_done(), 3);
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(at::equal(a[i], b[i])) << "param " << i;
    ExpectSameState(whole, split);
  }
}

TEST(FusedOptimizer, ChannelsLastParametersUpdateLikeContiguousOnes) {
  // CPU channels_last weights go through flat views of their storage (no copies); the
  // update must be the same elementwise, including for a gradient in another layout.
  for (auto kind : {config::Optimizer::kSgd, config::Optimizer::kAdamW}) {
    const step::OptimizerOptions o = WithDecay(kind);
    torch::manual_seed(3);
    const at::Tensor w0 = at::randn({8, 4, 3, 3});
    at::Tensor cl = w0.contiguous(at::MemoryFormat::ChannelsLast).requires_grad_();
    at::Tensor plain = w0.clone().requires_grad_();
    at::Tensor mixed = w0.contiguous(at::MemoryFormat::ChannelsLast).requires_grad_();
    ASSERT_FALSE(cl.is_contiguous());
    step::FusedOptimizer a({cl}, o), b({plain}, o), c({mixed}, o);
    for (int step = 0; step < 3; ++step) {
      const at::Tensor g = at::randn({8, 4, 3, 3});
      cl.mutable_grad() = g.contiguous(at::MemoryFormat::ChannelsLast);
      plain.mutable_grad() = g.clone();
      mixed.mutable_grad() = g.clone();  // layout differs from the parameter's: not flattened
      a.Step();
      b.Step();
      c.Step();
    }
    EXPECT_TRUE(cl.is_contiguous(at::MemoryFormat::ChannelsLast));
    EXPECT_TRUE(at::equal(cl, plain)) << static_cast<int>(kind);
    EXPECT_TRUE(at::equal(mixed, plain)) << static_cast<int>(kind);
    ExpectSameState(a, b);
  }
}

// train.decay_norm_and_bias false: the 1-D parameters (bias, norm weights) are updated as by
// an optimizer without weight decay, the others as with it; bit for bit, whole step or split.
void ExpectOneDimensionalParametersUndecayed(config::Optimizer kind) {
  torch::manual_seed(11);
  const at::Tensor w0 = torch::randn({4, 3}), b0 = torch::randn({3}), n0 = torch::randn({4});
  auto clone = [](const at::Tensor& t) { return t.clone().requires_grad_(); };
  at::Tensor w = clone(w0), b = clone(b0), n = clone(n0);     // exempting, Step()
  at::Tensor ws = clone(w0), bs = clone(b0), ns = clone(n0);  // exempting, StepParams
  at::Tensor wr = clone(w0), br = clone(b0), nr = clone(n0);  // references
  step::OptimizerOptions o = WithDecay(kind);
  o.exempt_1d_from_decay = true;
  step::FusedOptimizer opt({w, b, n}, o), split({ws, bs, ns}, o);
  step::OptimizerOptions plain = WithDecay(kind);
  step::FusedOptimizer decayed({wr}, plain);
  plain.weight_decay = 0;
  step::FusedOptimizer undecayed({br, nr}, plain);
  for (int step = 0; step < 3; ++step) {
    const at::Tensor gw = torch::randn({4, 3}), gb = torch::randn({3}), gn = torch::randn({4});
    for (auto* set : {&w, &ws, &wr}) set->mutable_grad() = gw.clone();
    for (auto* set : {&b, &bs, &br}) set->mutable_grad() = gb.clone();
    for (auto* set : {&n, &ns, &nr}) set->mutable_grad() = gn.clone();
    opt.Step();
    split.StepParams({1, 0});
    split.StepParams({2});
    split.EndStep();
    decayed.Step();
    undecayed.Step();
  }
  EXPECT_TRUE(at::equal(w, wr));
  EXPECT_TRUE(at::equal(b, br));
  EXPECT_TRUE(at::equal(n, nr));
  EXPECT_TRUE(at::equal(ws, wr));
  EXPECT_TRUE(at::equal(bs, br));
  EXPECT_TRUE(at::equal(ns, nr));
  EXPECT_FALSE(at::equal(b, b0));
}

TEST(FusedOptimizer, SgdLeavesOneDimensionalParametersUndecayedWhenAsked) {
  ExpectOneDimensionalParametersUndecayed(config::Optimizer::kSgd);
}

TEST(FusedOptimizer, AdamWLeavesOneDimensionalParametersUndecayedWhenAsked) {
  ExpectOneDimensionalParametersUndecayed(config::Optimizer::kAdamW);
}

// SetLowPrecisionCopies: after every step (whole or split, both optimizers, with decay
// exemptions) each copy is its parameter rounded, and the parameters are what they would
// be without copies.
TEST(FusedOptimizer, LowPrecisionCopiesFollowTheirParameters) {
  for (auto kind : {config::Optimizer::kSgd, config::Optimizer::kAdamW}) {
    for (const bool split : {false, true}) {
      step::OptimizerOptions o = WithDecay(kind);
      o.exempt_1d_from_decay = true;
      std::vector<at::Tensor> a, b;
      for (const auto& shape :
           {std::vector<int64_t>{4, 3}, std::vector<int64_t>{3}, std::vector<int64_t>{2, 2}}) {
        a.push_back(at::randn(shape).requires_grad_());
        b.push_back(a.back().detach().clone().requires_grad_());
      }
      step::FusedOptimizer with(a, o), without(b, o);
      // Copies of the first and the last parameter only, as bf16 views of one buffer.
      const at::Tensor buffer = at::zeros({16}, at::kBFloat16);
      std::vector<at::Tensor> copies = {buffer.narrow(0, 0, 12).view({4, 3}), at::Tensor(),
                                        buffer.narrow(0, 12, 4).view({2, 2})};
      with.SetLowPrecisionCopies(copies);
      for (int t = 0; t < 3; ++t) {
        for (size_t i = 0; i < a.size(); ++i) {
          const at::Tensor g = at::randn(a[i].sizes());
          a[i].mutable_grad() = g.clone();
          b[i].mutable_grad() = g.clone();
        }
        if (split) {
          with.StepParams({2});
          with.StepParams({0, 1});
          with.EndStep();
        } else {
          with.Step();
        }
        without.Step();
        const std::string what = std::string(kind == config::Optimizer::kSgd ? "sgd" : "adamw") +
                                 (split ? " split" : "") + " step " + std::to_string(t);
        for (size_t i = 0; i < a.size(); ++i) {
          EXPECT_TRUE(at::equal(a[i], b[i])) << what << ": parameter " << i;
        }
        EXPECT_TRUE(at::equal(copies[0], a[0].detach().to(at::kBFloat16))) << what;
        EXPECT_TRUE(at::equal(copies[2], a[2].detach().to(at::kBFloat16))) << what;
      }
    }
  }
}

TEST(FusedOptimizer, LowPrecisionCopiesMustMatchTheirParameters) {
  at::Tensor p = at::randn({4, 3}).requires_grad_();
  step::FusedOptimizer opt({p}, WithDecay(config::Optimizer::kAdamW));
  EXPECT_THROW(opt.SetLowPrecisionCopies({at::zeros({3, 4}, at::kBFloat16)}), c10::Error);
  EXPECT_THROW(opt.SetLowPrecisionCopies({at::zeros({4, 3}, at::kFloat)}), c10::Error);
  EXPECT_THROW(opt.SetLowPrecisionCopies({at::zeros({3, 4}, at::kBFloat16).t()}), c10::Error);
  EXPECT_THROW(opt.SetLowPrecisionCopies({at::Tensor(), at::Tensor()}), c10::Error);
  opt.SetLowPrecisionCopies({at::zeros({4, 3}, at::kBFloat16)});
}

// set_lr (train.lr_schedule): each step uses the rate set before it, in the momentum formula.
TEST(FusedOptimizer, SetLrAppliesToTheFollowingSteps) {
  for (bool on_device : {false, true}) {
    at::Tensor p = at::tensor({1.0f, -2.0f, 3.0f}).requires_grad_();
    step::OptimizerOptions o =
        OptimizerOptionsFor(config::JobConfig{}, 100);  // job defaults, 100 steps
    o.lr = 0.1;
    o.momentum = 0.9;
    o.lr_on_device = on_device;  // CPU: the scalar path either way
    step::FusedOptimizer opt({p}, o);
    at::Tensor ref = p.detach().clone(), buf;
    const double rates[] = {0.0, 0.05, 0.2};
    for (int step = 0; step < 3; ++step) {
      const at::Tensor g = at::tensor({0.5f, 0.25f, -1.0f}) * (step + 1);
      p.mutable_grad() = g.clone();
      opt.set_lr(rates[step]);
      EXPECT_DOUBLE_EQ(opt.lr(), rates[step]);
      opt.Step();
      buf = step == 0 ? g.clone() : buf * 0.9 + g;
      ref = ref - rates[step] * buf;
      EXPECT_TRUE(at::allclose(p.detach(), ref, 1e-6, 1e-7)) << "step " << step;
    }
  }
}

}  // namespace
}  // namespace ringpilot::trainer
