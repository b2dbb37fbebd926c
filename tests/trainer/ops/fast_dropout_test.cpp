#include <stdexcept>

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/ops/fast_dropout.h"

namespace ringpilot::trainer::ops {
namespace {

TEST(FastDropout, MaskKeepsTheRightShareWithTheInvertedScale) {
  for (double p : {0.1, 0.5}) {
    const at::Tensor m = DropoutMask({1 << 20}, p, 12345);
    const at::Tensor kept = m.ne(0);
    const double share = kept.to(at::kDouble).mean().item<double>();
    EXPECT_NEAR(share, 1.0 - p, 0.003) << p;  // ~5 standard deviations
    EXPECT_TRUE(at::allclose(m.masked_select(kept), at::full({1}, 1.0 / (1.0 - p))));
    // Neighbours are independent: both kept with probability (1 - p)^2.
    const at::Tensor k = kept.to(at::kDouble);
    const double both =
        (k.narrow(0, 0, k.numel() - 1) * k.narrow(0, 1, k.numel() - 1)).mean().item<double>();
    EXPECT_NEAR(both, (1.0 - p) * (1.0 - p), 0.004) << p;
  }
}

TEST(FastDropout, MaskDependsOnTheSeedOnlyNotOnThreads) {
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const at::Tensor one = DropoutMask({3, 100000}, 0.1, 7);
  at::set_num_threads(2);
  const at::Tensor two = DropoutMask({3, 100000}, 0.1, 7);
  at::set_num_threads(threads);
  EXPECT_TRUE(at::equal(one, two));
  EXPECT_FALSE(at::equal(one, DropoutMask({3, 100000}, 0.1, 8)));
  EXPECT_FALSE(at::equal(one, DropoutMask({3, 100000}, 0.1, 7ull | (1ull << 40))))
      << "the seed's high half counts too";
}

TEST(FastDropout, ReproducedByTheDefaultGeneratorsState) {
  auto gen = at::detail::getDefaultCPUGenerator();
  const at::Tensor x = at::randn({64, 33});
  const at::Tensor state = gen.get_state();
  const at::Tensor a = Dropout(x, 0.2);
  const at::Tensor b = Dropout(x, 0.2);
  gen.set_state(state);
  const at::Tensor again = Dropout(x, 0.2);
  EXPECT_TRUE(at::equal(a, again));
  EXPECT_FALSE(at::equal(a, b)) << "each call draws a fresh seed";
}

TEST(FastDropout, GradientUsesTheSameMask) {
  at::Tensor x = at::ones({1000}).requires_grad_();
  at::Tensor y = Dropout(x, 0.3);
  y.sum().backward();
  EXPECT_TRUE(at::equal(x.grad(), y.detach()));  // d(x * m)/dx = m, and y = m for x = 1
}

TEST(FastDropout, ZeroProbabilityIsTheIdentityAndBadProbabilitiesThrow) {
  const at::Tensor x = at::randn({5});
  EXPECT_TRUE(Dropout(x, 0.0).is_same(x));
  EXPECT_THROW(Dropout(x, 1.0), std::invalid_argument);
  EXPECT_THROW(Dropout(x, -0.1), std::invalid_argument);
}

}  // namespace
}  // namespace ringpilot::trainer::ops
