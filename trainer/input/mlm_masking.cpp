#include "trainer/input/mlm_masking.h"

#include <ATen/ATen.h>

namespace ringpilot::trainer::input {
namespace {

constexpr int64_t kLow32 = 0xFFFFFFFFLL;
constexpr int64_t kHashMultiplier = 0x45d9f3b;  // < 2^27: x * it stays below 2^59, no overflow
constexpr int64_t kPositionBits = 13;
constexpr int64_t kSpecialPriority = int64_t{1} << 45;  // above every 2^13 U + j
static_assert((int64_t{1} << kPositionBits) == kMaxMaskedSeqLen);
enum Salt : int64_t { kSelect = 1, kAction = 2, kRandomId = 3 };

// H on int64 tensors holding values in [0, 2^32).
at::Tensor Hash(at::Tensor x) {
  x = x.bitwise_xor(at::bitwise_right_shift(x, 16)).mul_(kHashMultiplier).bitwise_and_(kLow32);
  x = x.bitwise_xor(at::bitwise_right_shift(x, 16)).mul_(kHashMultiplier).bitwise_and_(kLow32);
  return x.bitwise_xor(at::bitwise_right_shift(x, 16));
}

// U(k, j, s) for keys [B, 1] and positions [1 or B, n].
at::Tensor Uniform32(const at::Tensor& keys, const at::Tensor& positions, Salt salt) {
  return Hash(keys.bitwise_xor(Hash(positions.mul(4).add_(static_cast<int64_t>(salt)))));
}

uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

int64_t SequenceKey(uint64_t seed, int64_t epoch, int64_t sample) {
  const uint64_t k = Mix64(seed ^ Mix64(static_cast<uint64_t>(epoch) * 0xD1B54A32D192ED03ULL ^
                                        Mix64(static_cast<uint64_t>(sample))));
  return static_cast<int64_t>(k & 0xFFFFFFFFULL);
}

MaskedTokens MaskTokens(const at::Tensor& tokens, const at::Tensor& keys,
                        const models::TokenSpec& spec) {
  const int64_t length = tokens.size(1);
  const int64_t masked = spec.masked_per_row();
  const at::Tensor k = keys.view({-1, 1});
  const at::Tensor positions = at::arange(length, tokens.options()).view({1, length});
  const at::Tensor special = tokens.eq(spec.cls)
                                 .logical_or_(tokens.eq(spec.sep))
                                 .logical_or_(tokens.eq(spec.mask))
                                 .logical_or_(tokens.eq(spec.pad));
  const at::Tensor priority = Uniform32(k, positions, kSelect)
                                  .mul_(int64_t{1} << kPositionBits)
                                  .add_(positions)
                                  .add_(special.to(at::kLong).mul_(kSpecialPriority));
  const at::Tensor chosen =
      std::get<1>(priority.topk(masked, /*dim=*/1, /*largest=*/false, /*sorted=*/false));
  const at::Tensor original = tokens.gather(1, chosen);
  const at::Tensor action = Uniform32(k, chosen, kAction).remainder_(10);
  const at::Tensor random_id = Uniform32(k, chosen, kRandomId).remainder_(spec.vocab);
  const at::Tensor replaced = at::where(action.lt(8), at::full_like(original, spec.mask),
                                        at::where(action.eq(8), random_id, original));
  MaskedTokens out;
  out.input = tokens.clone().scatter_(1, chosen, replaced);
  out.target = at::full_like(tokens, models::TokenSpec::kIgnore).scatter_(1, chosen, original);
  return out;
}

}  // namespace ringpilot::trainer::input
