// Runs under mpirun with 2..4 ranks: every rank feeds different data, and the reducer
// must leave the world-average gradient in .grad.
#include <algorithm>
#include <climits>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "comm/gradient_reducer.h"
#include "comm/mpi_communicator.h"
#include "comm/status.h"

namespace ringpilot::comm {
namespace {

// The job's default caps (config/job.h: comm.bucket_mb 25, comm.first_bucket_mb 1).
ReducerOptions DefaultBuckets() {
  ReducerOptions o;
  o.bucket_bytes = 25 << 20;
  o.first_bucket_bytes = 1 << 20;
  return o;
}

// A stack of linear layers: deep enough that backward produces gradients over time.
struct Mlp : torch::nn::Module {
  explicit Mlp(int layers, int width, bool with_unused = false) {
    for (int i = 0; i < layers; ++i) {
      fcs.push_back(register_module("fc" + std::to_string(i), torch::nn::Linear(width, width)));
    }
    if (with_unused) unused = register_parameter("unused", torch::ones({17}));
  }
  at::Tensor forward(at::Tensor x) {
    for (auto& fc : fcs) x = torch::tanh(fc(x));
    return x.square().mean();
  }
  std::vector<torch::nn::Linear> fcs;
  at::Tensor unused;
};

// Reference: each rank's gradient without the reducer, averaged with a plain all-reduce.
std::vector<at::Tensor> ReferenceGradients(Mlp& model, const at::Tensor& x, MpiCommunicator& c) {
  auto params = model.parameters();
  std::vector<at::Tensor> needed;
  for (auto& p : params) needed.push_back(p);
  auto grads = torch::autograd::grad({model.forward(x)}, needed, {}, false, false,
                                     /*allow_unused=*/true);
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) grads[i] = at::zeros_like(params[i]);
    grads[i] = grads[i].contiguous();
    c.AllReduce(grads[i], ReduceOp::kAvg)->Wait();
  }
  return grads;
}

class GradientReducerTest : public ::testing::Test {
 protected:
  void SetUp() override { torch::manual_seed(7); }
  MpiCommunicator comm{MPI_COMM_WORLD};
  at::Tensor Input(int step, int width = 64) {
    return at::randn({8, width}, at::TensorOptions().dtype(at::kFloat))
        .mul_(1.0 + comm.rank())
        .add_(step);
  }
};

TEST_F(GradientReducerTest, AveragesGradientsAcrossRanksOverSeveralSteps) {
  Mlp model(6, 64);
  BroadcastCoalesced(comm, model.parameters(), 0);
  ReducerOptions o;
  o.first_bucket_bytes = 20 << 10;  // several buckets, uneven last one
  o.bucket_bytes = 40 << 10;
  GradientReducer reducer(model.parameters(), comm, o);
  ASSERT_GE(reducer.buckets().size(), 3u);
  for (int step = 0; step < 3; ++step) {  // step 1 rebuilds buckets from observed order
    at::Tensor x = Input(step);
    auto ref = ReferenceGradients(model, x, comm);
    reducer.PrepareForBackward();
    model.forward(x).backward();
    reducer.FinishBackward();
    auto params = model.parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(at::allclose(params[i].grad(), ref[i], 1e-5, 1e-7))
          << "param " << i << " step " << step;
    }
  }
}

// FinishBackward in pieces (LaunchRemaining, WaitBuckets over ranges, EndBackward), as
// trainer/step/gradient_update.h uses it: the same averages; misuse is an error.
TEST_F(GradientReducerTest, WaitingInRangesGivesTheSameAverages) {
  Mlp model(6, 64, /*with_unused=*/true);
  BroadcastCoalesced(comm, model.parameters(), 0);
  ReducerOptions o;
  o.first_bucket_bytes = 20 << 10;
  o.bucket_bytes = 40 << 10;
  GradientReducer reducer(model.parameters(), comm, o);
  ASSERT_GE(reducer.buckets().size(), 3u);
  for (int step = 0; step < 3; ++step) {  // step 1 rebuilds the buckets
    at::Tensor x = Input(step);
    auto ref = ReferenceGradients(model, x, comm);
    reducer.PrepareForBackward();
    model.forward(x).backward();
    const size_t n = reducer.buckets().size();
    // The unused parameter's bucket (first, then last after the rebuild) holds back the
    // last bucket until LaunchRemaining.
    EXPECT_THROW(reducer.WaitBuckets(n - 1, n), CommError) << "before LaunchRemaining";
    reducer.LaunchRemaining();
    EXPECT_THROW(reducer.WaitBuckets(0, n + 1), CommError);
    reducer.WaitBuckets(0, 1);
    reducer.WaitBuckets(1, n - 1);
    reducer.WaitBuckets(n - 1, n);
    reducer.EndBackward();
    auto params = model.parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(at::allclose(params[i].grad(), ref[i], 1e-5, 1e-7))
          << "param " << i << " step " << step;
    }
  }
  EXPECT_THROW(reducer.LaunchRemaining(), CommError) << "outside a backward";
}

TEST_F(GradientReducerTest, GradientsAreViewsIntoBucketStorageInReverseOrder) {
  Mlp model(4, 32);
  ReducerOptions o;
  o.first_bucket_bytes = 1;  // first bucket: one parameter
  o.bucket_bytes = 8 << 10;
  GradientReducer reducer(model.parameters(), comm, o);
  const auto& buckets = reducer.buckets();
  const size_t n = model.parameters().size();
  ASSERT_EQ(buckets.front().params.size(), 1u);
  EXPECT_EQ(buckets.front().params[0], n - 1);  // the last registered parameter
  int64_t previous_end = 0;
  const auto& first = reducer.params()[buckets.front().params[0]].grad();
  for (const auto& b : buckets) {
    // A bucket's gradients tile one aligned range of the shared buffer, in bucket order.
    int64_t begin = INT64_MAX, end = 0;
    for (size_t idx : b.params) {
      const auto& g = reducer.params()[idx].grad();
      ASSERT_TRUE(g.defined());
      EXPECT_TRUE(g.is_alias_of(first)) << "grad of " << idx << " is not in the bucket buffer";
      EXPECT_EQ(g.sizes(), reducer.params()[idx].sizes());
      begin = std::min(begin, g.storage_offset());
      end = std::max(end, g.storage_offset() + g.numel());
    }
    EXPECT_EQ(end - begin, b.numel) << "bucket gradients are not contiguous";
    EXPECT_EQ(begin * 4 % GradientReducer::kBucketAlignBytes, 0) << "bucket not aligned";
    EXPECT_GE(begin, previous_end) << "buckets overlap";
    previous_end = end;
  }
}

// The communicator supplies the bucket memory (NCCL may register it): one buffer, asked
// for once, big enough for every bucket, and kept when the buckets are rebuilt.
class CountingCommunicator : public MpiCommunicator {
 public:
  using MpiCommunicator::MpiCommunicator;
  at::Tensor AllocateCollectiveBuffer(int64_t numel, const at::TensorOptions& options) override {
    ++calls;
    buffer = MpiCommunicator::AllocateCollectiveBuffer(numel, options);
    return buffer;
  }
  int calls = 0;
  at::Tensor buffer;
};

TEST_F(GradientReducerTest, BucketsLiveInOneCommunicatorBufferAcrossRebuilds) {
  CountingCommunicator counting{MPI_COMM_WORLD};
  Mlp model(5, 48);
  ReducerOptions o;
  o.first_bucket_bytes = 10 << 10;
  o.bucket_bytes = 20 << 10;
  GradientReducer reducer(model.parameters(), counting, o);
  ASSERT_EQ(counting.calls, 1);
  int64_t total = 0;
  for (const auto& p : model.parameters()) total += p.numel();
  EXPECT_GE(counting.buffer.numel(), total);
  for (int step = 0; step < 3; ++step) {  // step 1 rebuilds the buckets
    reducer.PrepareForBackward();
    model.forward(Input(step, 48)).backward();
    reducer.FinishBackward();
    for (const auto& p : model.parameters()) {
      EXPECT_TRUE(p.grad().is_alias_of(counting.buffer)) << "step " << step;
    }
  }
  EXPECT_EQ(counting.calls, 1);
}

TEST_F(GradientReducerTest, FirstBucketIsIssuedBeforeBackwardFinishes) {
  Mlp model(8, 128);
  ReducerOptions o;
  o.first_bucket_bytes = 70 << 10;  // one layer (64 KiB weight + bias)
  o.bucket_bytes = 140 << 10;
  GradientReducer reducer(model.parameters(), comm, o);
  reducer.PrepareForBackward();
  model.forward(Input(0, 128)).backward();
  reducer.FinishBackward();
  const auto& s = reducer.last_step();
  EXPECT_EQ(s.hooks_total, static_cast<int>(model.parameters().size()));
  EXPECT_GE(s.buckets_launched_during_backward, 1);
  // Overlap: the first all-reduce went out while gradients were still being computed.
  EXPECT_GE(s.hooks_before_first_launch, 1);
  EXPECT_LT(s.hooks_before_first_launch, s.hooks_total / 2);
  EXPECT_EQ(s.bytes, static_cast<int64_t>([&] {
              int64_t n = 0;
              for (auto& p : model.parameters()) n += p.numel();
              return n;
            }() * 4));
}

TEST_F(GradientReducerTest, UnusedParameterGetsZeroGradientAndDoesNotHang) {
  Mlp model(3, 16, /*with_unused=*/true);
  GradientReducer reducer(model.parameters(), comm, DefaultBuckets());
  for (int step = 0; step < 2; ++step) {
    reducer.PrepareForBackward();
    model.forward(Input(step, 16)).backward();
    reducer.FinishBackward();
    EXPECT_TRUE(at::equal(model.unused.grad(), at::zeros({17})));
  }
}

TEST_F(GradientReducerTest, BFloat16WireFormatIsCloseToFloat32) {
  Mlp model(3, 64);
  BroadcastCoalesced(comm, model.parameters(), 0);
  ReducerOptions o = DefaultBuckets();
  o.comm_dtype = at::kBFloat16;
  GradientReducer reducer(model.parameters(), comm, o);
  at::Tensor x = Input(0);
  auto ref = ReferenceGradients(model, x, comm);
  reducer.PrepareForBackward();
  model.forward(x).backward();
  reducer.FinishBackward();
  auto params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(at::allclose(params[i].grad(), ref[i], 2e-2, 1e-4)) << "param " << i;
  }
}

TEST_F(GradientReducerTest, RejectsBadParameters) {
  std::vector<at::Tensor> none;
  EXPECT_THROW(GradientReducer(none, comm, DefaultBuckets()), CommError);
  std::vector<at::Tensor> frozen = {at::ones({3})};
  EXPECT_THROW(GradientReducer(frozen, comm, DefaultBuckets()), CommError);
}

}  // namespace
}  // namespace ringpilot::comm
