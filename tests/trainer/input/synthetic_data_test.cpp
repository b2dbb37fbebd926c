#include "trainer/input/synthetic_data.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace ringpilot::trainer::input {
namespace {

Batch Images(int batch, int64_t first, uint64_t seed = 3) {
  Batch b{at::empty({batch, 3, 32, 32}, at::kByte), at::empty({batch}, at::kLong), {}};
  FillImages(seed, first, ImageSpec{}, b);
  return b;
}

Batch Tokens(int batch, int64_t first, int len = 32) {
  Batch b{at::empty({batch, len}, at::kLong), at::empty({batch, len}, at::kLong), {}};
  const TokenSpec spec = SyntheticTokenSpec(config::kSyntheticVocabSize, len);
  FillTokens(5, first, spec, b);
  return b;
}

TEST(SyntheticData, SampleIndexLayoutSplitsAGlobalBatch) {
  // World 2 x batch 4 covers what world 1 x batch 8 covers, step by step.
  for (int64_t step = 0; step < 3; ++step) {
    EXPECT_EQ(FirstSampleIndex(step, 0, 2, 4), FirstSampleIndex(step, 0, 1, 8));
    EXPECT_EQ(FirstSampleIndex(step, 1, 2, 4), FirstSampleIndex(step, 0, 1, 8) + 4);
  }
}

TEST(SyntheticData, ImagesArePerSampleDeterministic) {
  Batch whole = Images(8, 100);
  Batch a = Images(4, 100), b = Images(4, 104);
  EXPECT_TRUE(at::equal(whole.input, at::cat({a.input, b.input})));
  EXPECT_TRUE(at::equal(whole.target, at::cat({a.target, b.target})));
  EXPECT_FALSE(at::equal(Images(8, 100, 4).input, whole.input));  // the seed matters
  EXPECT_GE(whole.target.min().item<int64_t>(), 0);
  EXPECT_LT(whole.target.max().item<int64_t>(), 10);
  // Not constant: a learnable pattern plus noise.
  EXPECT_GT(whole.input.to(at::kFloat).std().item<float>(), 20.f);
}

TEST(SyntheticData, TokensHaveAFixedMaskCountPerRow) {
  Batch t = Tokens(6, 0);
  const int masked = static_cast<int>(std::lround(0.15 * 30));
  for (int r = 0; r < 6; ++r) {
    at::Tensor labels = t.target[r];
    EXPECT_EQ(labels.ne(TokenSpec::kIgnore).sum().item<int64_t>(), masked);
    EXPECT_EQ(t.input[r].eq(kSyntheticMask).sum().item<int64_t>(), masked);
    EXPECT_EQ(t.input[r][0].item<int64_t>(), kSyntheticCls);
    EXPECT_EQ(t.input[r][31].item<int64_t>(), kSyntheticSep);
  }
  EXPECT_LT(t.input.max().item<int64_t>(), config::kSyntheticVocabSize);
  Batch whole = Tokens(6, 10), part = Tokens(3, 13);
  EXPECT_TRUE(at::equal(whole.input.narrow(0, 3, 3), part.input));
}

TEST(SyntheticData, RejectsWrongBuffers) {
  Batch bad{at::empty({2, 3, 32, 32}, at::kFloat), at::empty({2}, at::kLong), {}};
  EXPECT_THROW(FillImages(0, 0, ImageSpec{}, bad), std::invalid_argument);
}

}  // namespace
}  // namespace ringpilot::trainer::input
