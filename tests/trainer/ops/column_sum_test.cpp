// The column-sum kernels (trainer/ops/column_sum_kernels.h): the one-kernel finish gives
// the bits of the two-kernel reference, into several outputs, added or written, again and
// again and in CUDA-graph replays (its arrival counters reset themselves).
#include <string>
#include <vector>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/trainer/cuda_graph_capture.h"
#include "trainer/ops/column_sum_kernels.h"
#include "trainer/ops/tensor_element_type.h"

namespace ringpilot::trainer::ops {
namespace {

namespace cs = column_sum;

cudaStream_t Stream() { return at::cuda::getCurrentCUDAStream().stream(); }

// A column sum of x (2-D, unit column stride) into `out`, through the kernels.
void Sum(const at::Tensor& x, const at::Tensor& out, bool second_kernel) {
  cs::Args a;
  a.in = x.data_ptr();
  a.dtype = ElementTypeOf(x.scalar_type());
  a.rows = x.size(0);
  a.cols = x.size(1);
  a.ld = x.stride(0);
  a.out = out.data_ptr<float>();
  a.second_kernel = second_kernel;
  const at::Tensor workspace = at::empty({cs::WorkspaceFloats(a)}, out.options());
  a.workspace = workspace.numel() > 0 ? workspace.data_ptr<float>() : nullptr;
  const char* error = cs::ColumnSum(a, Stream());
  ASSERT_EQ(error, nullptr) << error;
}

at::Tensor Sum(const at::Tensor& x, bool second_kernel) {
  at::Tensor out = at::full({x.size(1)}, 7.0, x.options().dtype(at::kFloat));
  Sum(x, out, second_kernel);
  return out;
}

class ColumnSumCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    torch::manual_seed(21);
  }
};

struct Case {
  int64_t rows, cols;
  at::ScalarType dtype;
  int64_t skip;  // leading columns dropped: misaligned starts, ld > cols
};

std::string Name(const Case& c) {
  return std::to_string(c.rows) + "x" + std::to_string(c.cols) + " " +
         std::string(c10::toString(c.dtype)) + " skip " + std::to_string(c.skip);
}

// Chunk counts from 1 to 256 (groups of 16 full, partial, single), one column tile or
// hundreds, every load width.
const std::vector<Case> kCases = {{8192, 768, at::kBFloat16, 0},   {8192, 2304, at::kBFloat16, 0},
                                  {8192, 3072, at::kBFloat16, 0},  {1216, 30522, at::kBFloat16, 0},
                                  {1229, 30522, at::kBFloat16, 1}, {1216, 768, at::kBFloat16, 0},
                                  {300, 96, at::kFloat, 0},        {300, 96, at::kFloat, 3},
                                  {513, 40, at::kHalf, 0},         {513, 40, at::kHalf, 2},
                                  {7, 5, at::kBFloat16, 0},        {1, 768, at::kBFloat16, 0},
                                  {5000, 1, at::kFloat, 0},        {130, 256, at::kBFloat16, 0},
                                  {17 * 8, 2048, at::kFloat, 0},   {4096, 4104, at::kFloat, 0},
                                  {100000, 8, at::kBFloat16, 0}};

TEST_F(ColumnSumCuda, OneKernelGivesTheTwoKernelBits) {
  for (const Case& c : kCases) {
    const at::Tensor full = at::randn({c.rows, c.cols + c.skip}, at::device(at::kCUDA)).to(c.dtype);
    const at::Tensor x = full.narrow(1, c.skip, c.cols);
    const at::Tensor one = Sum(x, false), two = Sum(x, true);
    EXPECT_TRUE(at::equal(one, two))
        << Name(c) << ": " << (one - two).abs().max().item<float>() << " apart";
    const at::Tensor ref = x.to(at::kDouble).sum(0);
    const double bound = 1e-5 * std::max<double>(1.0, static_cast<double>(c.rows));
    EXPECT_LE((one.to(at::kDouble) - ref).abs().max().item<double>(), bound) << Name(c);
  }
}

TEST_F(ColumnSumCuda, RepeatedCallsAndGraphReplaysGiveTheSameBits) {
  const at::Tensor x = at::randn({8192, 2304}, at::device(at::kCUDA)).to(at::kBFloat16);
  const at::Tensor y = at::randn({8192, 768}, at::device(at::kCUDA)).to(at::kBFloat16);
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  c10::cuda::CUDAStreamGuard guard(side);
  const at::Tensor rx = Sum(x, true), ry = Sum(y, true);
  at::Tensor sx = at::empty_like(rx), sy = at::empty_like(ry);
  // Back to back, the second reusing the first's counters.
  auto step = [&] {
    Sum(x, sx, false);
    Sum(y, sy, false);
  };
  for (int i = 0; i < 3; ++i) {
    step();
    EXPECT_TRUE(at::equal(sx, rx) && at::equal(sy, ry)) << "call " << i;
  }
  at::cuda::CUDAGraph graph;
  CaptureStep(graph, step);
  for (int i = 0; i < 3; ++i) {
    sx.zero_();
    sy.zero_();
    graph.replay();
    torch::cuda::synchronize();
    EXPECT_TRUE(at::equal(sx, rx) && at::equal(sy, ry)) << "replay " << i;
  }
}

TEST_F(ColumnSumCuda, AddsIntoSeveralOutputsWithTheBitsOfASeparateAdd) {
  for (const Case& c : std::vector<Case>{{8192, 2304, at::kBFloat16, 0},
                                         {1216, 30522, at::kBFloat16, 0},
                                         {3, 2304, at::kBFloat16, 0},
                                         {0, 2304, at::kBFloat16, 0}}) {
    const at::Tensor x = at::randn({c.rows, c.cols}, at::device(at::kCUDA)).to(c.dtype);
    const std::vector<int64_t> widths =
        c.cols == 2304 ? std::vector<int64_t>{768, 768, 768} : std::vector<int64_t>{30000, 522};
    std::vector<at::Tensor> grads, expected;
    const at::Tensor sum = Sum(x, true);
    cs::Args a;
    a.in = x.data_ptr();
    a.dtype = ElementTypeOf(x.scalar_type());
    a.rows = c.rows;
    a.cols = c.cols;
    a.ld = c.cols;
    int64_t offset = 0;
    for (int64_t w : widths) {
      grads.push_back(at::randn({w}, x.options().dtype(at::kFloat)));
      expected.push_back(grads.back() + sum.narrow(0, offset, w));
      a.outputs[a.output_count++] = {grads.back().data_ptr<float>(), w};
      offset += w;
    }
    a.accumulate = true;
    const at::Tensor workspace = at::empty({cs::WorkspaceFloats(a)}, sum.options());
    a.workspace = workspace.numel() > 0 ? workspace.data_ptr<float>() : nullptr;
    const char* error = cs::ColumnSum(a, Stream());
    ASSERT_EQ(error, nullptr) << error;
    for (size_t i = 0; i < grads.size(); ++i) {
      EXPECT_TRUE(at::equal(grads[i], expected[i])) << Name(c) << " output " << i;
    }
  }
}

TEST_F(ColumnSumCuda, RejectsOutputsThatDoNotCoverTheColumns) {
  const at::Tensor x = at::randn({16, 10}, at::device(at::kCUDA));
  const at::Tensor out = at::empty({10}, x.options());
  cs::Args a;
  a.in = x.data_ptr();
  a.dtype = ElementType::kFloat32;
  a.rows = 16;
  a.cols = 10;
  a.ld = 10;
  EXPECT_NE(cs::ColumnSum(a, Stream()), nullptr) << "no output";
  a.outputs[0] = {out.data_ptr<float>(), 4};
  a.outputs[1] = {out.data_ptr<float>() + 4, 5};
  a.output_count = 2;
  EXPECT_NE(cs::ColumnSum(a, Stream()), nullptr) << "9 of 10 columns";
  a.outputs[1].cols = 6;
  EXPECT_NE(cs::ColumnSum(a, Stream()), nullptr) << "no workspace for its 2 chunks";
  const at::Tensor workspace = at::empty({cs::WorkspaceFloats(a)}, x.options());
  ASSERT_GT(workspace.numel(), 0);
  a.workspace = workspace.data_ptr<float>();
  EXPECT_EQ(cs::ColumnSum(a, Stream()), nullptr);
  EXPECT_TRUE(at::allclose(out, x.sum(0), 1e-5, 1e-5));
}

TEST_F(ColumnSumCuda, LayerNormParameterGradientsOneKernelGivesTheTwoKernelBits) {
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{8192, 768}, {1216, 768}, {7, 130}, {1, 768}}) {
    const int64_t rows = shape[0], cols = shape[1];
    const auto options = at::device(at::kCUDA);
    const at::Tensor dy = at::randn(shape, options), x = at::randn(shape, options) * 3 + 1;
    const at::Tensor mean = x.mean(1), rstd = (x.var(1, false) + 1e-12).rsqrt();
    auto run = [&](bool second_kernel) {
      std::vector<at::Tensor> g = {at::empty({cols}, options), at::empty({cols}, options)};
      cs::LayerNormArgs a;
      a.dy = dy.data_ptr<float>();
      a.x = x.data_ptr<float>();
      a.mean = mean.data_ptr<float>();
      a.rstd = rstd.data_ptr<float>();
      a.rows = rows;
      a.cols = cols;
      a.grad_weight = g[0].data_ptr<float>();
      a.grad_bias = g[1].data_ptr<float>();
      a.second_kernel = second_kernel;
      const at::Tensor workspace = at::empty({cs::WorkspaceFloats(a)}, options);
      a.workspace = workspace.numel() > 0 ? workspace.data_ptr<float>() : nullptr;
      const char* error = cs::LayerNormParamGrads(a, Stream());
      EXPECT_EQ(error, nullptr) << error;
      return g;
    };
    const std::vector<at::Tensor> one = run(false), two = run(true);
    const std::string what = std::to_string(rows) + "x" + std::to_string(cols);
    EXPECT_TRUE(at::equal(one[0], two[0])) << what << " weight";
    EXPECT_TRUE(at::equal(one[1], two[1])) << what << " bias";
    const at::Tensor xhat = (x - mean.unsqueeze(1)) * rstd.unsqueeze(1);
    EXPECT_TRUE(at::allclose(one[0], (dy * xhat).sum(0), 1e-3, 1e-3)) << what;
    EXPECT_TRUE(at::allclose(one[1], dy.sum(0), 1e-3, 1e-3)) << what;
  }
}

TEST_F(ColumnSumCuda, SumPartialsOfTwoSetsInOneKernelMatchesOneSetAtATime) {
  const auto options = at::device(at::kCUDA);
  const int64_t chunks = 512, cols = 768;
  const at::Tensor partials = at::randn({2, chunks, cols}, options);
  const at::Tensor base = at::randn({2, cols}, options);
  for (bool accumulate : {false, true}) {
    const at::Tensor both = base.clone(), single = base.clone();
    const cs::Partials sets[] = {{partials[0].data_ptr<float>(), both[0].data_ptr<float>()},
                                 {partials[1].data_ptr<float>(), both[1].data_ptr<float>()}};
    ASSERT_EQ(cs::SumPartials(sets, 2, chunks, cols, accumulate, Stream()), nullptr);
    for (int i = 0; i < 2; ++i) {
      const cs::Partials one = {partials[i].data_ptr<float>(), single[i].data_ptr<float>()};
      ASSERT_EQ(cs::SumPartials(&one, 1, chunks, cols, accumulate, Stream()), nullptr);
    }
    EXPECT_TRUE(at::equal(both, single)) << "accumulate " << accumulate;
    at::Tensor ref = partials.to(at::kDouble).sum(1);
    if (accumulate) ref += base.to(at::kDouble);
    EXPECT_LE((both.to(at::kDouble) - ref).abs().max().item<double>(), 1e-3);
  }
}

}  // namespace
}  // namespace ringpilot::trainer::ops
