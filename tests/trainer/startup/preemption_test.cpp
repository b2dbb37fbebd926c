// SIGUSR1 checkpoint-and-stop: the handler only sets a flag, the ranks agree on it by a
// MAX all-reduce, and the previous disposition comes back.
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "base/exit_status.h"
#include "tests/trainer/completed_work.h"
#include "trainer/startup/preemption.h"

namespace ringpilot::trainer {
namespace {

// One rank of a world whose other ranks contribute `peer_flag`; records the ops.
class FakeComm : public comm::Communicator {
 public:
  explicit FakeComm(int peer_flag) : peer_flag_(peer_flag) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string backend() const override { return "fake"; }
  std::unique_ptr<comm::Work> AllReduce(const at::Tensor& t, comm::ReduceOp op) override {
    ++calls;
    last_op = op;
    last_dtype = t.scalar_type();
    if (op == comm::ReduceOp::kMax) t.clamp_min_(peer_flag_);
    return std::make_unique<CompletedWork>();
  }
  std::unique_ptr<comm::Work> Broadcast(const at::Tensor&, int) override {
    return std::make_unique<CompletedWork>();
  }
  std::unique_ptr<comm::Work> AllGather(const at::Tensor&, const at::Tensor&) override {
    return std::make_unique<CompletedWork>();
  }
  void Barrier() override {}

  int calls = 0;
  comm::ReduceOp last_op = comm::ReduceOp::kSum;
  at::ScalarType last_dtype = at::kFloat;

 private:
  int peer_flag_;
};

TEST(Preemption, Usr1SetsTheFlagInsteadOfKilling) {
  startup::PreemptionWatch watch;
  EXPECT_FALSE(watch.requested());
  ASSERT_EQ(std::raise(SIGUSR1), 0);  // default action would end the test process
  EXPECT_TRUE(watch.requested());
}

TEST(Preemption, RanksAgreeByMaxAllReduce) {
  startup::PreemptionWatch watch;
  FakeComm quiet(0);
  EXPECT_FALSE(watch.AgreeToStop(quiet));
  EXPECT_EQ(quiet.calls, 1);
  EXPECT_EQ(quiet.last_op, comm::ReduceOp::kMax);
  EXPECT_EQ(quiet.last_dtype, at::kInt);
  // Another rank got the signal first: this one stops at the same step.
  FakeComm signalled_peer(1);
  EXPECT_TRUE(watch.AgreeToStop(signalled_peer));
  // This rank got it: true whatever the others say.
  std::raise(SIGUSR1);
  EXPECT_TRUE(watch.AgreeToStop(quiet));
}

TEST(Preemption, PreviousDispositionRestoredAndFlagReset) {
  struct sigaction before {};
  ::sigaction(SIGUSR1, nullptr, &before);
  {
    startup::PreemptionWatch watch;
    std::raise(SIGUSR1);
    EXPECT_TRUE(watch.requested());
  }
  struct sigaction after {};
  ::sigaction(SIGUSR1, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
  startup::PreemptionWatch again;  // a new watch starts clear
  EXPECT_FALSE(again.requested());
}

TEST(Preemption, SignalsBeforeTheWatchAreKeptOrIgnored) {
  struct sigaction usr1_before {
  }, usr2_before{};
  ::sigaction(SIGUSR1, nullptr, &usr1_before);
  ::sigaction(SIGUSR2, nullptr, &usr2_before);
  startup::CatchSignalsEarly();
  ASSERT_EQ(std::raise(SIGUSR2), 0);  // default action would end the test process
  ASSERT_EQ(std::raise(SIGUSR1), 0);
  {
    startup::PreemptionWatch watch;  // sees the SIGUSR1 that came before it
    EXPECT_TRUE(watch.requested());
  }
  startup::PreemptionWatch later;  // only the first watch inherits it
  EXPECT_FALSE(later.requested());
  ::sigaction(SIGUSR1, &usr1_before, nullptr);
  ::sigaction(SIGUSR2, &usr2_before, nullptr);
}

TEST(Preemption, StopLogsTheStepAndReturnsThePreemptedStatus) {
  const std::string path = ::testing::TempDir() + "/preemption_rank.log";
  std::remove(path.c_str());
  startup::PreemptionWatch watch;
  {
    telemetry::RankLog log(path, 0, false);
    EXPECT_EQ(watch.Stop(log, 12), base::kExitPreempted);
  }
  std::FILE* f = std::fopen(path.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char buf[512] = {};
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  const std::string text(buf, n);
  EXPECT_NE(text.find("preempted: SIGUSR1 received; checkpoint of step 12 written, stopping with "
                      "exit status 75"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace ringpilot::trainer
