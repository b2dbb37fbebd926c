#include "trainer/ops/fast_dropout.h"

#include <algorithm>
#include <mutex>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

namespace ringpilot::trainer::ops {
namespace {

// murmur3's 32-bit finaliser: cheap, vectorisable (32-bit multiplies), and its output bits
// pass avalanche tests, which is all a dropout mask needs.
inline uint32_t Mix(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

// Runs on every core of a rank's step: AVX2 where the CPU has it (32-bit multiplies eight
// at a time), chosen at load time; the file is built with -O3 for the vectoriser.
__attribute__((target_clones("avx2", "default"))) void FillMask(float* out, int64_t begin,
                                                                int64_t end, uint64_t seed,
                                                                uint32_t keep_below, float scale) {
  const uint32_t lo = static_cast<uint32_t>(seed), hi = static_cast<uint32_t>(seed >> 32);
  // Elements 2^32 apart differ through the second key, constant within a 2^32 block.
  for (int64_t base = begin; base < end;) {
    const int64_t stop = std::min<int64_t>(end, (base | 0xffffffffLL) + 1);
    const uint32_t key = hi + static_cast<uint32_t>(base >> 32) * 0x7f4a7c15u;
    const uint32_t first = static_cast<uint32_t>(base);
    float* o = out + base;
    const int64_t n = stop - base;
    for (int64_t j = 0; j < n; ++j) {
      const uint32_t x = (first + static_cast<uint32_t>(j)) * 0x9e3779b9u + lo;
      const uint32_t h = Mix(Mix(x) ^ key);
      o[j] = (h >> 8) < keep_below ? scale : 0.0f;
    }
    base = stop;
  }
}

uint64_t DrawSeed() {
  auto* gen = at::check_generator<at::CPUGeneratorImpl>(at::detail::getDefaultCPUGenerator());
  std::lock_guard<std::mutex> lock(gen->mutex_);
  return gen->random64();
}

}  // namespace

at::Tensor DropoutMask(const at::IntArrayRef sizes, double p, uint64_t seed) {
  if (!(p >= 0.0 && p < 1.0)) throw std::invalid_argument("dropout probability must be in [0, 1)");
  at::Tensor mask = at::empty(sizes, at::TensorOptions().dtype(at::kFloat));
  const auto keep_below = static_cast<uint32_t>((1.0 - p) * static_cast<double>(1u << 24));
  const auto scale = static_cast<float>(1.0 / (1.0 - p));
  float* out = mask.data_ptr<float>();
  at::parallel_for(0, mask.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
    FillMask(out, begin, end, seed, keep_below, scale);
  });
  return mask;
}

at::Tensor Dropout(const at::Tensor& x, double p) {
  if (p == 0.0) return x;
  if (!x.is_cpu() || x.scalar_type() != at::kFloat) return at::dropout(x, p, /*train=*/true);
  // Autograd saves the mask for the gradient, as at::dropout saves its noise.
  return x * DropoutMask(x.sizes(), p, DrawSeed());
}

}  // namespace ringpilot::trainer::ops
