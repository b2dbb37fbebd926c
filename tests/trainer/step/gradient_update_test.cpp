// trainer/step/gradient_update.h on one in-process rank: the split update leaves the same
// parameters as wait-all-then-step, and it really updates the early buckets' parameters
// before waiting for the last buckets.
#include <functional>
#include <memory>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/options.h"
#include "trainer/step/gradient_update.h"

namespace ringpilot::trainer {
namespace {

// One rank: every collective is complete when issued; Wait() reports which one (in issue
// order, which is bucket order) is being waited for.
class RecordingComm : public comm::Communicator {
 public:
  std::function<void(int)> on_wait;
  int issued = 0;
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "mpi"; }
  std::unique_ptr<comm::Work> AllReduce(const at::Tensor&, comm::ReduceOp) override {
    return std::make_unique<RecordedWork>(this, issued++);
  }
  std::unique_ptr<comm::Work> Broadcast(const at::Tensor&, int) override {
    return std::make_unique<RecordedWork>(nullptr, -1);
  }
  std::unique_ptr<comm::Work> AllGather(const at::Tensor& in, const at::Tensor& out) override {
    out.copy_(in.reshape(out.sizes()));
    return std::make_unique<RecordedWork>(nullptr, -1);
  }
  void Barrier() override {}

 private:
  struct RecordedWork : comm::Work {
    RecordedWork(RecordingComm* c, int i) : comm(c), index(i) {}
    bool Test() override { return true; }
    void Wait() override {
      if (comm && comm->on_wait) comm->on_wait(index);
    }
    RecordingComm* comm;
    int index;
  };
};

struct Mlp : torch::nn::Module {
  Mlp() {
    for (int i = 0; i < 6; ++i) {
      fcs.push_back(register_module("fc" + std::to_string(i), torch::nn::Linear(32, 32)));
    }
  }
  at::Tensor forward(at::Tensor x) {
    for (auto& fc : fcs) x = torch::tanh(fc(x));
    return x.square().mean();
  }
  std::vector<torch::nn::Linear> fcs;
};

std::vector<at::Tensor> Snapshot(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone());
  return out;
}

comm::ReducerOptions SmallBuckets() {
  comm::ReducerOptions o;
  o.first_bucket_bytes = 4 << 10;  // one layer's weight (32x32 floats) per bucket or so
  o.bucket_bytes = 5 << 10;
  return o;
}

// Three steps of each optimizer through step::ReduceAndUpdate (overlap on and off) and through
// FinishBackward + Step: identical parameters.
void ExpectSameAsStepAfterWaitingForAll(config::Optimizer kind) {
  torch::manual_seed(3);
  Mlp a, b, c;
  for (auto* m : {&b, &c}) {
    auto src = a.parameters(), dst = m->parameters();
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
  }
  step::OptimizerOptions oo =
      OptimizerOptionsFor(config::JobConfig{}, 100);  // job defaults, 100 steps
  oo.kind = kind;
  oo.lr = 0.05;
  oo.weight_decay = 0.01;
  RecordingComm ca, cb, cc;
  comm::GradientReducer ra(a.parameters(), ca, SmallBuckets());
  comm::GradientReducer rb(b.parameters(), cb, SmallBuckets());
  comm::GradientReducer rc(c.parameters(), cc, SmallBuckets());
  ASSERT_GT(ra.buckets().size(), step::GradientUpdateOptions::kTailBuckets + 1);
  step::FusedOptimizer oa(a.parameters(), oo), ob(b.parameters(), oo), oc(c.parameters(), oo);
  step::StepPhases pa(-1, nullptr), pb(-1, nullptr);
  step::GradientUpdateOptions overlap, serial;
  serial.overlap = false;
  for (int step = 0; step < 3; ++step) {
    at::Tensor x = torch::randn({8, 32});
    ra.PrepareForBackward();
    a.forward(x).backward();
    step::ReduceAndUpdate(ra, oa, pa, overlap);
    rb.PrepareForBackward();
    b.forward(x).backward();
    step::ReduceAndUpdate(rb, ob, pb, serial);
    rc.PrepareForBackward();
    c.forward(x).backward();
    rc.FinishBackward();
    oc.Step();
  }
  EXPECT_EQ(oa.steps_done(), 3);
  auto pa_ = a.parameters(), pb_ = b.parameters(), pc_ = c.parameters();
  for (size_t i = 0; i < pa_.size(); ++i) {
    EXPECT_TRUE(at::equal(pa_[i], pc_[i])) << "overlap, param " << i;
    EXPECT_TRUE(at::equal(pb_[i], pc_[i])) << "serial, param " << i;
  }
}

TEST(ReduceAndUpdate, SgdSameParametersAsWaitAllThenStep) {
  ExpectSameAsStepAfterWaitingForAll(config::Optimizer::kSgd);
}

TEST(ReduceAndUpdate, AdamWSameParametersAsWaitAllThenStep) {
  ExpectSameAsStepAfterWaitingForAll(config::Optimizer::kAdamW);
}

// When the first tail bucket is waited for, the other buckets' parameters have moved
// (overlap) or not (serial); the tail's own parameters have not moved yet in either.
TEST(ReduceAndUpdate, EarlyBucketsAreUpdatedBeforeTheTailIsWaitedFor) {
  for (bool overlap : {true, false}) {
    torch::manual_seed(5);
    Mlp m;
    RecordingComm c;
    comm::GradientReducer r(m.parameters(), c, SmallBuckets());
    step::OptimizerOptions oo =
        OptimizerOptionsFor(config::JobConfig{}, 100);  // job defaults, 100 steps
    oo.lr = 0.1;
    step::FusedOptimizer opt(m.parameters(), oo);
    step::StepPhases phases(-1, nullptr);
    const size_t n = r.buckets().size();
    const size_t split = n - step::GradientUpdateOptions::kTailBuckets;
    const auto before = Snapshot(m.parameters());
    int early_moved = -1, tail_moved = -1;
    c.on_wait = [&](int index) {
      if (index != static_cast<int>(split) || early_moved >= 0) return;
      const auto now = m.parameters();
      early_moved = tail_moved = 0;
      for (size_t b = 0; b < n; ++b) {
        for (size_t p : r.buckets()[b].params) {
          const bool moved = !at::equal(now[p], before[p]);
          (b < split ? early_moved : tail_moved) += moved ? 1 : 0;
        }
      }
    };
    step::GradientUpdateOptions o;
    o.overlap = overlap;
    r.PrepareForBackward();
    m.forward(torch::randn({8, 32})).backward();
    step::ReduceAndUpdate(r, opt, phases, o);
    ASSERT_GE(early_moved, 0) << "the tail was never waited for";
    size_t early_params = step::BucketParams(r, 0, split).size();
    EXPECT_EQ(early_moved, overlap ? static_cast<int>(early_params) : 0) << overlap;
    EXPECT_EQ(tail_moved, 0) << overlap;
    EXPECT_EQ(opt.steps_done(), 1);
    const auto after = m.parameters();
    for (size_t i = 0; i < after.size(); ++i) EXPECT_FALSE(at::equal(after[i], before[i])) << i;
  }
}

TEST(ReduceAndUpdate, BucketParamsCoverEveryParameterOnce) {
  Mlp m;
  RecordingComm c;
  comm::GradientReducer r(m.parameters(), c, SmallBuckets());
  std::vector<size_t> all = step::BucketParams(r, 0, r.buckets().size());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), m.parameters().size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], i);
  EXPECT_TRUE(step::BucketParams(r, 2, 2).empty());
}

// train.grad_accum_steps: two micro-batches of 8 (ZeroGradients, backward of loss / 2,
// ArmForBackward, backward of loss / 2, FinishBackward) leave the gradient of one batch of
// 16, up to float rounding, and the buckets go on the wire once, during the last backward.
TEST(GradientAccumulation, TwoMicroBatchesGiveTheGradientOfOneBatchOfTwice) {
  torch::manual_seed(9);
  Mlp micro, whole;
  {
    auto src = micro.parameters(), dst = whole.parameters();
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
  }
  RecordingComm cm, cw;
  comm::GradientReducer rm(micro.parameters(), cm, SmallBuckets());
  comm::GradientReducer rw(whole.parameters(), cw, SmallBuckets());
  const size_t buckets = rm.buckets().size();
  for (int step = 0; step < 3; ++step) {  // the first rebuilds the buckets from the order
    const at::Tensor x = torch::randn({16, 32});
    const int issued_before = cm.issued;
    rm.ZeroGradients();
    (micro.forward(x.narrow(0, 0, 8)) * 0.5).backward();
    EXPECT_EQ(cm.issued, issued_before) << "an all-reduce during an idle micro-batch";
    rm.ArmForBackward();
    (micro.forward(x.narrow(0, 8, 8)) * 0.5).backward();
    rm.FinishBackward();
    EXPECT_EQ(cm.issued - issued_before, static_cast<int>(buckets)) << "step " << step;
    rw.PrepareForBackward();
    whole.forward(x).backward();
    rw.FinishBackward();
    const auto pm = micro.parameters(), pw = whole.parameters();
    for (size_t i = 0; i < pm.size(); ++i) {
      EXPECT_TRUE(at::allclose(pm[i].grad(), pw[i].grad(), 1e-5, 1e-7))
          << "step " << step << ", param " << i << ": max diff "
          << (pm[i].grad() - pw[i].grad()).abs().max().item<float>();
    }
  }
}

// train.max_grad_norm through step::ReduceAndUpdate (overlap asked for, and skipped): the same
// parameters as FinishBackward, torch's clip_grad_norm_, Step.
TEST(ReduceAndUpdate, ClipsTheReducedGradientsBeforeTheUpdate) {
  torch::manual_seed(4);
  Mlp a, b;
  {
    auto src = a.parameters(), dst = b.parameters();
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
  }
  RecordingComm ca, cb;
  comm::GradientReducer ra(a.parameters(), ca, SmallBuckets());
  comm::GradientReducer rb(b.parameters(), cb, SmallBuckets());
  step::OptimizerOptions oo =
      OptimizerOptionsFor(config::JobConfig{}, 100);  // job defaults, 100 steps
  oo.lr = 0.1;
  step::FusedOptimizer oa(a.parameters(), oo), ob(b.parameters(), oo);
  step::StepPhases pa(-1, nullptr);
  const double max_norm = 1e-3;  // well below these gradients' norm: every step clips
  step::GradientClipper clipper(a.parameters(), max_norm);
  for (int step = 0; step < 3; ++step) {
    const at::Tensor x = torch::randn({8, 32});
    ra.PrepareForBackward();
    a.forward(x).backward();
    step::ReduceAndUpdate(ra, oa, pa, step::GradientUpdateOptions{}, &clipper);
    rb.PrepareForBackward();
    b.forward(x).backward();
    rb.FinishBackward();
    const double norm = torch::nn::utils::clip_grad_norm_(b.parameters(), max_norm);
    EXPECT_GT(norm, max_norm);
    EXPECT_NEAR(clipper.norm().item<double>(), norm, 1e-6 * norm);
    ob.Step();
  }
  const auto pa_ = a.parameters(), pb_ = b.parameters();
  for (size_t i = 0; i < pa_.size(); ++i) {
    EXPECT_TRUE(at::allclose(pa_[i], pb_[i], 1e-6, 1e-8)) << "param " << i;
  }
}

}  // namespace
}  // namespace ringpilot::trainer
