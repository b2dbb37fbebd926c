#include "trainer/input/synthetic_data.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <vector>

namespace ringpilot::trainer::input {

namespace {

// SplitMix64: a counter-based generator, so sample i needs no state from sample i-1.
inline uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

struct Stream {
  uint64_t state;
  Stream(uint64_t seed, uint64_t index, uint64_t salt)
      : state(Mix(seed * 0x632be59bd9b4e019ULL ^ Mix(index ^ Mix(salt)))) {}
  uint64_t Next() { return state = Mix(state); }
  double Uniform() { return (Next() >> 11) * (1.0 / 9007199254740992.0); }
};

void CheckBatch(const Batch& out, at::ScalarType in_type, const char* what) {
  if (!out.input.defined() || out.input.scalar_type() != in_type || !out.input.is_contiguous() ||
      !out.input.device().is_cpu()) {
    throw std::invalid_argument(std::string(what) + ": input buffer has the wrong type/layout");
  }
}

// The smooth class pattern depends only on (seed, label, size): computed once per
// class and reused, so a sample costs one random word per four pixels.
class PatternCache {
 public:
  // Computes every class's pattern up front, in parallel, so no training step pays for
  // it (a 224x224 pattern costs ~3 ms; ImageNet-sized jobs have 1000 classes).
  void Warm(uint64_t seed, int classes, int h, int w, int workers);

  const std::vector<uint8_t>& Get(uint64_t seed, int label, int h, int w) {
    std::lock_guard<std::mutex> lock(mu_);
    if (seed != seed_ || h != h_ || w != w_) {
      patterns_.clear();
      seed_ = seed;
      h_ = h;
      w_ = w;
    }
    auto& p = patterns_[label];
    if (p.empty()) p = Compute(seed, label, h, w);
    return p;
  }

  static std::vector<uint8_t> Compute(uint64_t seed, int label, int h, int w) {
    std::vector<uint8_t> p(static_cast<size_t>(3) * h * w);
    Stream cls(seed, static_cast<uint64_t>(label), 2);
    for (int c = 0; c < 3; ++c) {
      const double fx = 0.05 + 0.4 * cls.Uniform(), fy = 0.05 + 0.4 * cls.Uniform();
      const double phase = 6.283185307179586 * cls.Uniform();
      for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
          p[(static_cast<size_t>(c) * h + y) * w + x] =
              static_cast<uint8_t>(128.0 + 70.0 * std::sin(fx * x + fy * y + phase));
        }
      }
    }
    return p;
  }

 private:
  std::mutex mu_;
  uint64_t seed_ = 0;
  int h_ = 0, w_ = 0;
  std::unordered_map<int, std::vector<uint8_t>> patterns_;
};

// Splits [0, n) over `workers` std::threads. Data generation uses its own threads, not
// ATen's intra-op pool: on the GPU machine that pool ran these loops on one core (one
// ResNet-50 batch took 95 ms, longer than the GPU step).
template <class Fn>
void ParallelSamples(int64_t n, int workers, const Fn& fn) {
  workers = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(workers, n)));
  if (workers == 1) {
    fn(0, n);
    return;
  }
  std::vector<std::thread> threads;
  threads.reserve(workers - 1);
  const int64_t chunk = (n + workers - 1) / workers;
  for (int w = 1; w < workers; ++w) {
    const int64_t b = w * chunk, e = std::min(n, b + chunk);
    if (b < e) threads.emplace_back([&fn, b, e] { fn(b, e); });
  }
  fn(0, std::min(n, chunk));
  for (auto& t : threads) t.join();
}

PatternCache& Patterns() {
  static PatternCache cache;
  return cache;
}

}  // namespace

void PatternCache::Warm(uint64_t seed, int classes, int h, int w, int workers) {
  std::vector<std::vector<uint8_t>> computed(classes);
  ParallelSamples(classes, workers, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      computed[c] = Compute(seed, static_cast<int>(c), h, w);
    }
  });
  std::lock_guard<std::mutex> lock(mu_);
  if (seed != seed_ || h != h_ || w != w_) {
    patterns_.clear();
    seed_ = seed;
    h_ = h;
    w_ = w;
  }
  for (int c = 0; c < classes; ++c) patterns_[c] = std::move(computed[c]);
}

void PrepareImages(uint64_t seed, const ImageSpec& spec) {
  Patterns().Warm(seed, spec.num_classes, spec.height, spec.width, spec.workers);
}

void FillImages(uint64_t seed, int64_t first_index, const ImageSpec& spec, Batch& out) {
  CheckBatch(out, at::kByte, "FillImages");
  const int64_t batch = out.input.size(0);
  const int h = spec.height, w = spec.width;
  const int64_t pixels = 3LL * h * w;
  uint8_t* data = out.input.data_ptr<uint8_t>();
  int64_t* labels = out.target.data_ptr<int64_t>();
  ParallelSamples(batch, spec.workers, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      Stream rng(seed, static_cast<uint64_t>(first_index + b), 1);
      const int label = static_cast<int>(rng.Next() % spec.num_classes);
      labels[b] = label;
      const uint8_t* pattern = Patterns().Get(seed, label, h, w).data();
      uint8_t* img = data + b * pixels;
      for (int64_t i = 0; i < pixels; i += 4) {
        uint64_t r = rng.Next();
        for (int64_t j = i; j < std::min(i + 4, pixels); ++j, r >>= 16) {
          // Sum of two bytes: centred, triangular noise of +-50 grey levels.
          const int noise =
              ((static_cast<int>(r & 0xff) + static_cast<int>((r >> 8) & 0xff) - 255) * 50) / 255;
          const int v = pattern[j] + noise;
          img[j] = static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
        }
      }
    }
  });
}

TokenSpec SyntheticTokenSpec(int64_t vocab, int seq_len) {
  TokenSpec spec;
  spec.vocab = vocab;
  spec.cls = kSyntheticCls;
  spec.sep = kSyntheticSep;
  spec.mask = kSyntheticMask;
  spec.pad = kSyntheticPad;
  spec.seq_len = seq_len;
  return spec;
}

void FillTokens(uint64_t seed, int64_t first_index, const TokenSpec& spec, Batch& out) {
  CheckBatch(out, at::kLong, "FillTokens");
  const int64_t batch = out.input.size(0);
  const int len = spec.seq_len;
  const int body = len - 2;
  const int masked = static_cast<int>(spec.masked_per_row());
  int64_t* ids = out.input.data_ptr<int64_t>();
  int64_t* labels = out.target.data_ptr<int64_t>();
  constexpr int64_t kFirstWord = kSyntheticFirstWord;
  const int64_t range = spec.vocab - kFirstWord;
  if (range < 1) throw std::invalid_argument("FillTokens: vocabulary too small");
  at::parallel_for(0, batch, 1, [&](int64_t begin, int64_t end) {
    std::vector<int> positions(body);
    for (int64_t b = begin; b < end; ++b) {
      Stream rng(seed, static_cast<uint64_t>(first_index + b), 3);
      const int64_t start = static_cast<int64_t>(rng.Next() % range);
      const int64_t stride = 1 + static_cast<int64_t>(rng.Next() % 7);
      int64_t* row = ids + b * len;
      int64_t* lab = labels + b * len;
      row[0] = spec.cls;
      row[len - 1] = spec.sep;
      for (int i = 0; i < body; ++i) row[1 + i] = kFirstWord + (start + i * stride) % range;
      for (int i = 0; i < len; ++i) lab[i] = TokenSpec::kIgnore;
      // Partial Fisher-Yates: the first `masked` entries are a uniform sample.
      for (int i = 0; i < body; ++i) positions[i] = 1 + i;
      for (int i = 0; i < masked; ++i) {
        const int j = i + static_cast<int>(rng.Next() % (body - i));
        std::swap(positions[i], positions[j]);
        const int p = positions[i];
        lab[p] = row[p];
        row[p] = spec.mask;
      }
    }
  });
}

at::Tensor NormalizeImages(const at::Tensor& uint8_images, at::ScalarType dtype) {
  // Pixel values are centred on 128 with spread ~60: map to about N(0, 1).
  return uint8_images.to(dtype).sub_(128.0).mul_(1.0 / 64.0);
}

}  // namespace ringpilot::trainer::input
