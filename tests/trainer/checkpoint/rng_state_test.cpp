#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/trainer/completed_work.h"
#include "trainer/checkpoint/rng_state.h"

namespace ringpilot::trainer::checkpoint {
namespace {

// One rank: AllGather fills row 0, Broadcast from rank 0 leaves the tensor as it is.
class SingleRankComm : public comm::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "single"; }
  std::unique_ptr<comm::Work> AllReduce(const at::Tensor&, comm::ReduceOp) override {
    return std::make_unique<CompletedWork>();
  }
  std::unique_ptr<comm::Work> Broadcast(const at::Tensor&, int) override {
    ++broadcasts;
    return std::make_unique<CompletedWork>();
  }
  std::unique_ptr<comm::Work> AllGather(const at::Tensor& in, const at::Tensor& out) override {
    out[0].copy_(in);
    return std::make_unique<CompletedWork>();
  }
  void Barrier() override {}
  int broadcasts = 0;
};

std::vector<std::string> Names(const std::vector<NamedTensor>& entries) {
  std::vector<std::string> names;
  for (const auto& e : entries) names.push_back(e.name);
  return names;
}

TEST(RankRngState, RestoreRewindsTheCpuGeneratorToTheGatheredState) {
  SingleRankComm comm;
  RankRngState rng(/*seed=*/5, /*rank=*/0, /*world=*/1, /*cuda=*/false);
  EXPECT_EQ(Names(rng.Entries()), std::vector<std::string>{RankRngState::kCpuEntry});
  (void)at::rand({3});
  rng.Gather(comm);
  const at::Tensor after_checkpoint = at::rand({16});
  (void)at::rand({100});  // the run goes on, then a restart resumes from the checkpoint
  rng.Restore(comm, /*cuda_loaded=*/false);
  EXPECT_TRUE(at::equal(at::rand({16}), after_checkpoint));
}

TEST(RankRngState, RanksAndSeedsDrawDifferently) {
  RankRngState rank0(5, 0, 2, false);
  const at::Tensor a = at::rand({8});
  RankRngState rank1(5, 1, 2, false);
  const at::Tensor b = at::rand({8});
  RankRngState other_seed(6, 0, 2, false);
  const at::Tensor c = at::rand({8});
  RankRngState rank0_again(5, 0, 2, false);
  EXPECT_FALSE(at::equal(a, b));
  EXPECT_FALSE(at::equal(a, c));
  EXPECT_TRUE(at::equal(a, at::rand({8})));
  EXPECT_EQ(rank0.Entries().front().tensor.size(0), 2);  // one row per rank
}

#ifdef RINGPILOT_WITH_CUDA
TEST(RankRngStateCuda, RestoreRewindsTheCudaGeneratorWhenTheCheckpointHadIt) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  SingleRankComm comm;
  RankRngState rng(5, 0, 1, /*cuda=*/true);
  const std::vector<NamedTensor> entries = rng.Entries();
  ASSERT_EQ(Names(entries),
            (std::vector<std::string>{RankRngState::kCpuEntry, RankRngState::kCudaEntry}));
  EXPECT_TRUE(entries[1].optional);
  const auto cuda = at::device(at::kCUDA);
  (void)at::rand({3}, cuda);
  rng.Gather(comm);
  const at::Tensor after_checkpoint = at::rand({16}, cuda);
  (void)at::rand({100}, cuda);
  rng.Restore(comm, /*cuda_loaded=*/true);
  EXPECT_TRUE(at::equal(at::rand({16}, cuda), after_checkpoint));
  // A checkpoint without CUDA states leaves the CUDA generator where it is.
  const at::Tensor next = at::rand({16}, cuda);
  rng.Restore(comm, /*cuda_loaded=*/false);
  EXPECT_FALSE(at::equal(at::rand({16}, cuda), next));
}
#endif

}  // namespace
}  // namespace ringpilot::trainer::checkpoint
