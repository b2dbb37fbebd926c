// Runs under mpirun with 2..4 ranks.
#include "comm/mpi_communicator.h"
#include "comm/status.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <torch/torch.h>
#include <cmath>

namespace ringpilot::comm {
namespace {

class MpiCommunicatorTest : public ::testing::Test {
 protected:
  MpiCommunicator comm{MPI_COMM_WORLD};
  int rank() const { return comm.rank(); }
  int size() const { return comm.size(); }
};

TEST_F(MpiCommunicatorTest, AllReduceSumAvgMaxMin) {
  for (auto dtype : {at::kFloat, at::kDouble, at::kLong, at::kInt}) {
    at::Tensor t = at::arange(10, at::TensorOptions().dtype(dtype)) + rank();
    comm.AllReduce(t, ReduceOp::kSum)->Wait();
    const int s = size() * (size() - 1) / 2;
    EXPECT_TRUE(at::equal(t, at::arange(10, t.options()) * size() + s)) << dtype;
    at::Tensor m = at::full({3}, rank(), at::TensorOptions().dtype(dtype));
    comm.AllReduce(m, ReduceOp::kMax)->Wait();
    EXPECT_EQ(m[0].item<double>(), size() - 1);
    comm.AllReduce(m.fill_(rank()), ReduceOp::kMin)->Wait();
    EXPECT_EQ(m[2].item<double>(), 0);
  }
  at::Tensor avg = at::full({5}, static_cast<double>(rank()), at::kDouble);
  comm.AllReduce(avg, ReduceOp::kAvg)->Wait();
  EXPECT_DOUBLE_EQ(avg[4].item<double>(), (size() - 1) / 2.0);
  at::Tensor ints = at::ones({2}, at::kLong);
  EXPECT_THROW(comm.AllReduce(ints, ReduceOp::kAvg), CommError);
}

TEST_F(MpiCommunicatorTest, AllReduceBFloat16SumsThroughFloat) {
  at::Tensor t = at::full({1000}, 0.5 + rank(), at::kBFloat16);
  comm.AllReduce(t, ReduceOp::kSum)->Wait();
  double expect = 0;
  for (int r = 0; r < size(); ++r) expect += 0.5 + r;
  EXPECT_TRUE(at::allclose(t.to(at::kFloat), at::full({1000}, expect)));
}

TEST_F(MpiCommunicatorTest, BroadcastAndAllGather) {
  at::Tensor t = rank() == 1 % size() ? at::arange(7, at::kFloat) : at::zeros({7});
  comm.Broadcast(t, 1 % size())->Wait();
  EXPECT_TRUE(at::equal(t, at::arange(7, at::kFloat)));
  at::Tensor in = at::full({3}, static_cast<int64_t>(rank()), at::kLong);
  at::Tensor out = at::empty({3 * size()}, at::kLong);
  comm.AllGather(in, out)->Wait();
  for (int r = 0; r < size(); ++r) EXPECT_EQ(out[3 * r + 2].item<int64_t>(), r);
  EXPECT_THROW(comm.AllGather(in, at::empty({1}, at::kLong)), CommError);
}

TEST_F(MpiCommunicatorTest, NonBlockingCompletesThroughProgressAndReportsTiming) {
  struct Recorder : CollectiveObserver {
    int calls = 0;
    int64_t bytes = 0;
    void OnCollective(CollectiveOp op, int64_t b, double s, double start_unix) override {
      EXPECT_TRUE(std::isnan(start_unix));  // MPI: ended just now
      EXPECT_EQ(op, CollectiveOp::kAllReduce);
      EXPECT_GE(s, 0.0);
      ++calls;
      bytes += b;
    }
  } recorder;
  comm.set_observer(&recorder);
  at::Tensor t = at::ones({1 << 16});
  auto work = comm.AllReduce(t, ReduceOp::kSum);
  // Progress() alone must be able to finish it: the reducer relies on that.
  for (int i = 0; i < 1000000 && !work->Test(); ++i) comm.Progress();
  EXPECT_TRUE(work->Test());
  work->Wait();
  EXPECT_EQ(recorder.calls, 1);
  EXPECT_EQ(recorder.bytes, (1 << 16) * 4);
  EXPECT_EQ(t[0].item<float>(), size());
  comm.set_observer(nullptr);
}

TEST_F(MpiCommunicatorTest, RejectsNonContiguous) {
  at::Tensor t = at::ones({4, 4}).t();
  EXPECT_THROW(comm.AllReduce(t, ReduceOp::kSum), CommError);
}

TEST(MpiWaitMode, EnvironmentChoosesSpinOrPoliteAndRejectsOthers) {
  ASSERT_EQ(setenv("RINGPILOT_MPI_WAIT", "spin", 1), 0);
  EXPECT_TRUE(MpiCommunicator().spin_waits());
  ASSERT_EQ(setenv("RINGPILOT_MPI_WAIT", "polite", 1), 0);
  EXPECT_FALSE(MpiCommunicator().spin_waits());
  ASSERT_EQ(setenv("RINGPILOT_MPI_WAIT", "busy", 1), 0);
  try {
    MpiCommunicator c;
    ADD_FAILURE() << "RINGPILOT_MPI_WAIT=busy accepted";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("RINGPILOT_MPI_WAIT='busy'"), std::string::npos)
        << e.what();
  }
  unsetenv("RINGPILOT_MPI_WAIT");
}

TEST(BroadcastCoalesced, MixedDtypesFromRoot) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  std::vector<at::Tensor> ts = {at::full({2, 3}, comm.rank(), at::kFloat),
                                at::full({4}, comm.rank() * 10, at::kLong),
                                at::full({5}, comm.rank() + 0.25, at::kFloat)};
  BroadcastCoalesced(comm, ts, 0);
  EXPECT_TRUE(at::equal(ts[0], at::zeros({2, 3})));
  EXPECT_TRUE(at::equal(ts[1], at::zeros({4}, at::kLong)));
  EXPECT_TRUE(at::equal(ts[2], at::full({5}, 0.25)));
}

TEST(BusBandwidth, NcclTestsFactors) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kAllGather, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kBroadcast, 4), 1.0);
}

}  // namespace
}  // namespace ringpilot::comm
