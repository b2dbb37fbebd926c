// GPU only: every case skips where no CUDA device is visible (CI); run on a GPU machine.
#include "comm/device_timeline.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <vector>

namespace ringpilot::comm {
namespace {

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

class DeviceTimelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

TEST_F(DeviceTimelineTest, AFinishedStepReadsInOrderOnTheHostClock) {
  DeviceTimeline t(0);
  const int m = t.AllocateMarks(2);
  ASSERT_GT(m, 0);
  const double before = UnixNow();
  t.BeginStep(stream_);
  t.Spin(0.002, stream_);
  t.Mark(m, stream_);
  t.Mark(m + 1, stream_);
  t.EndStep(stream_);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  const double after = UnixNow();
  std::vector<uint64_t> marks;
  ASSERT_TRUE(t.Read(1, &marks));
  EXPECT_GE(marks[m] - marks[0], 2000000u) << "the spin lasts 2 ms of GPU time";
  EXPECT_GE(marks[m + 1], marks[m]);
  EXPECT_EQ(marks[m + 2], 0u) << "never stamped";
  // Calibration error is a kernel launch, not seconds.
  EXPECT_GT(t.ToUnix(marks[0]), before - 0.05);
  EXPECT_LT(t.ToUnix(marks[m + 1]), after + 0.05);
  EXPECT_FALSE(t.Read(2, &marks)) << "step 2 never ran";
}

TEST_F(DeviceTimelineTest, EveryGraphReplayStampsANewRow) {
  DeviceTimeline t(0);
  const int m = t.AllocateMarks(1);
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  t.BeginStep(stream_);
  t.Mark(m, stream_);
  t.EndStep(stream_);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  const int replays = DeviceTimeline::kSlots + 3;  // wraps the rows
  for (int i = 0; i < replays; ++i) ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  std::vector<uint64_t> marks;
  EXPECT_FALSE(t.Read(1, &marks)) << "row reused by a later replay";
  uint64_t previous = 0;
  for (int n = replays - DeviceTimeline::kSlots + 1; n <= replays; ++n) {
    ASSERT_TRUE(t.Read(n, &marks)) << "replay " << n;
    EXPECT_GT(marks[0], previous);
    EXPECT_GE(marks[m], marks[0]);
    previous = marks[0];
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

}  // namespace
}  // namespace ringpilot::comm
