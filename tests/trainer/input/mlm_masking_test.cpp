// trainer/input/mlm_masking.h: the masking equals its written definition (a scalar reference here,
// so any device running the same integer ops agrees), BERT's 15% / 80-10-10 statistics,
// special tokens left alone, and determinism in (seed, epoch, sample).
#include "trainer/input/mlm_masking.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#ifdef RINGPILOT_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace ringpilot::trainer::input {
namespace {

models::TokenSpec Spec(int seq_len, int64_t vocab = 2000) {
  models::TokenSpec s;
  s.vocab = vocab;
  s.pad = 0;
  s.cls = 1;
  s.sep = 2;
  s.mask = 3;
  s.seq_len = seq_len;
  return s;
}

// docs/data.md's definition, one scalar at a time.
uint64_t H(uint64_t x) {
  x = ((x ^ (x >> 16)) * 0x45d9f3bULL) & 0xFFFFFFFFULL;
  x = ((x ^ (x >> 16)) * 0x45d9f3bULL) & 0xFFFFFFFFULL;
  return x ^ (x >> 16);
}
uint64_t U(uint64_t key, int64_t j, int salt) { return H(key ^ H(4 * j + salt)); }

void Reference(const std::vector<int64_t>& row, int64_t key, const models::TokenSpec& spec,
               std::vector<int64_t>* input, std::vector<int64_t>* target) {
  const int64_t n = static_cast<int64_t>(row.size());
  std::vector<std::pair<uint64_t, int64_t>> priority;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t t = row[j];
    const bool special = t == spec.cls || t == spec.sep || t == spec.mask || t == spec.pad;
    priority.push_back({(special ? (1ULL << 45) : 0) + (U(key, j, 1) << 13) + j, j});
  }
  std::sort(priority.begin(), priority.end());
  *input = row;
  target->assign(n, models::TokenSpec::kIgnore);
  for (int64_t m = 0; m < spec.masked_per_row(); ++m) {
    const int64_t j = priority[m].second;
    const uint64_t a = U(key, j, 2) % 10;
    (*target)[j] = row[j];
    if (a < 8) {
      (*input)[j] = spec.mask;
    } else if (a == 8) {
      (*input)[j] = static_cast<int64_t>(U(key, j, 3) % spec.vocab);
    }
  }
}

// Packed-looking rows: [CLS], words, a [SEP] every `doc` tokens.
at::Tensor Rows(int rows, int len, int doc, uint64_t seed) {
  at::Tensor t = at::empty({rows, len}, at::kLong);
  auto a = t.accessor<int64_t, 2>();
  uint64_t s = seed;
  for (int r = 0; r < rows; ++r) {
    a[r][0] = 1;
    for (int j = 1; j < len; ++j) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      a[r][j] = j % doc == 0 ? 2 : 4 + static_cast<int64_t>((s >> 33) % 1996);
    }
  }
  return t;
}

at::Tensor Keys(int rows, uint64_t seed, int64_t epoch) {
  at::Tensor k = at::empty({rows}, at::kLong);
  for (int r = 0; r < rows; ++r) k.data_ptr<int64_t>()[r] = SequenceKey(seed, epoch, r);
  return k;
}

TEST(MlmMasking, EqualsItsDefinition) {
  const models::TokenSpec spec = Spec(64);
  const at::Tensor tokens = Rows(32, 64, 9, 1);
  const at::Tensor keys = Keys(32, 7, 0);
  const MaskedTokens m = MaskTokens(tokens, keys, spec);
  ASSERT_EQ(m.input.sizes(), tokens.sizes());
  ASSERT_EQ(m.target.sizes(), tokens.sizes());
  for (int r = 0; r < 32; ++r) {
    std::vector<int64_t> row(tokens[r].data_ptr<int64_t>(), tokens[r].data_ptr<int64_t>() + 64);
    std::vector<int64_t> input, target;
    Reference(row, keys[r].item<int64_t>(), spec, &input, &target);
    const at::Tensor in = m.input[r].contiguous(), tg = m.target[r].contiguous();
    EXPECT_EQ(std::vector<int64_t>(in.data_ptr<int64_t>(), in.data_ptr<int64_t>() + 64), input)
        << "row " << r;
    EXPECT_EQ(std::vector<int64_t>(tg.data_ptr<int64_t>(), tg.data_ptr<int64_t>() + 64), target)
        << "row " << r;
  }
}

TEST(MlmMasking, FifteenPercentOfWordsAsEightyTenTen) {
  const int rows = 4000, len = 128;
  const models::TokenSpec spec = Spec(len);
  const at::Tensor tokens = Rows(rows, len, 40, 2);
  const MaskedTokens m = MaskTokens(tokens, Keys(rows, 3, 1), spec);
  const at::Tensor chosen = m.target.ne(models::TokenSpec::kIgnore);
  // A fixed count per row: round(0.15 x 126) = 19, never a special token.
  EXPECT_TRUE(chosen.sum(1).eq(spec.masked_per_row()).all().item<bool>());
  EXPECT_EQ(spec.masked_per_row(), 19);
  const at::Tensor special = tokens.le(3);
  EXPECT_FALSE(chosen.logical_and(special).any().item<bool>());
  EXPECT_TRUE(m.target.masked_select(chosen).equal(tokens.masked_select(chosen)));
  EXPECT_TRUE(m.input.masked_select(chosen.logical_not())
                  .equal(tokens.masked_select(chosen.logical_not())));
  const double n = chosen.sum().item<double>();
  const at::Tensor in = m.input.masked_select(chosen), orig = tokens.masked_select(chosen);
  const double masked = in.eq(spec.mask).sum().item<double>() / n;
  const double kept = in.eq(orig).sum().item<double>() / n;
  const double random = 1.0 - masked - kept;
  // 76000 draws: a standard error of 0.0015 on 0.8, 0.0011 on 0.1.
  EXPECT_NEAR(masked, 0.8, 0.01);
  EXPECT_NEAR(kept, 0.1 + 0.1 / 2000, 0.008);  // a random id may equal the original
  EXPECT_NEAR(random, 0.1, 0.008);
  EXPECT_GE(m.input.min().item<int64_t>(), 0);
  EXPECT_LT(m.input.max().item<int64_t>(), spec.vocab);
  // Positions are uniform over the row's words: every quarter of the row gets its share.
  const at::Tensor per_position = chosen.sum(0).to(at::kDouble);
  for (int q = 0; q < 4; ++q) {
    const double share = per_position.narrow(0, q * 32, 32).sum().item<double>() / n;
    EXPECT_NEAR(share, 0.25, 0.02) << "quarter " << q;
  }
}

TEST(MlmMasking, DeterministicInSeedEpochAndSample) {
  const models::TokenSpec spec = Spec(64);
  const at::Tensor tokens = Rows(8, 64, 13, 5);
  const MaskedTokens a = MaskTokens(tokens, Keys(8, 1, 0), spec);
  const MaskedTokens b = MaskTokens(tokens, Keys(8, 1, 0), spec);
  EXPECT_TRUE(a.input.equal(b.input));
  EXPECT_TRUE(a.target.equal(b.target));
  EXPECT_FALSE(MaskTokens(tokens, Keys(8, 2, 0), spec).target.equal(a.target));  // seed
  EXPECT_FALSE(MaskTokens(tokens, Keys(8, 1, 1), spec).target.equal(a.target));  // epoch
  // A row's masking depends on its own key only, not on its batch neighbours.
  const MaskedTokens row3 = MaskTokens(tokens.narrow(0, 3, 1), Keys(8, 1, 0).narrow(0, 3, 1), spec);
  EXPECT_TRUE(row3.input.equal(a.input.narrow(0, 3, 1)));
  EXPECT_NE(SequenceKey(1, 0, 0), SequenceKey(1, 0, 1));
  EXPECT_GE(SequenceKey(~0ULL, 5, 123), 0);
  EXPECT_LT(SequenceKey(~0ULL, 5, 123), int64_t{1} << 32);
}

TEST(MlmMasking, SpecialTokensOnlyWhenARowHasTooFewWords) {
  const models::TokenSpec spec = Spec(16);  // masks round(0.15 x 14) = 2
  at::Tensor tokens = at::full({1, 16}, spec.sep, at::kLong);
  tokens[0][0] = spec.cls;
  tokens[0][5] = 100;  // one word only
  const MaskedTokens m = MaskTokens(tokens, Keys(1, 0, 0), spec);
  EXPECT_EQ(m.target.ne(models::TokenSpec::kIgnore).sum().item<int64_t>(), 2);
  EXPECT_EQ(m.target[0][5].item<int64_t>(), 100);  // the word first
}

#ifdef RINGPILOT_WITH_CUDA
// The same masks on a GPU, eager and replayed from a CUDA graph that reads new tokens and
// keys from its static inputs (as the graphed training step does).
TEST(MlmMasking, CudaEagerAndGraphEqualTheCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const models::TokenSpec spec = Spec(128);
  const at::Tensor tokens = Rows(64, 128, 17, 9), keys = Keys(64, 11, 2);
  const MaskedTokens cpu = MaskTokens(tokens, keys, spec);
  const MaskedTokens eager = MaskTokens(tokens.cuda(), keys.cuda(), spec);
  EXPECT_TRUE(eager.input.cpu().equal(cpu.input));
  EXPECT_TRUE(eager.target.cpu().equal(cpu.target));

  at::Tensor static_tokens = at::zeros_like(tokens).cuda(), static_keys = keys.cuda().zero_();
  MaskedTokens graphed;
  torch::cuda::synchronize();
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  at::cuda::CUDAGraph graph;
  {
    c10::cuda::CUDAStreamGuard guard(side);
    graphed = MaskTokens(static_tokens, static_keys, spec);  // warm-up outside capture
    graph.capture_begin();
    graphed = MaskTokens(static_tokens, static_keys, spec);
    graph.capture_end();
  }
  torch::cuda::synchronize();
  for (uint64_t seed : {11, 12}) {
    const at::Tensor k = Keys(64, seed, 2);
    static_tokens.copy_(tokens);
    static_keys.copy_(k);
    graph.replay();
    torch::cuda::synchronize();
    const MaskedTokens want = MaskTokens(tokens, k, spec);
    EXPECT_TRUE(graphed.input.cpu().equal(want.input)) << "seed " << seed;
    EXPECT_TRUE(graphed.target.cpu().equal(want.target)) << "seed " << seed;
  }
}
#endif  // RINGPILOT_WITH_CUDA

}  // namespace
}  // namespace ringpilot::trainer::input
