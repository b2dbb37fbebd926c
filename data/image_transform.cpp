#include "data/image_transform.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ringpilot::data {
namespace {

// splitmix64's finaliser and stream (as data/sampler.cpp): fixed arithmetic, so a crop is the
// same on every machine and library version.
uint64_t Hash(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

class Stream {
 public:
  Stream(uint64_t seed, int64_t epoch, int64_t sample)
      : state_(Hash(Hash(seed ^ 0x5EEDC809ULL) ^ Hash(static_cast<uint64_t>(epoch) + 1) ^
                    static_cast<uint64_t>(sample))) {}
  uint64_t Next() { return Hash(state_ += 0x9E3779B97F4A7C15ULL); }
  /// Uniform in [lo, hi).
  double Uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(Next() >> 11) * 0x1.0p-53;
  }
  /// Uniform integer in [0, n], n < 2^32.
  int UpTo(int n) {
    return static_cast<int>(((Next() >> 32) * (static_cast<uint64_t>(n) + 1)) >> 32);
  }

 private:
  uint64_t state_;
};

// Python's round(): halves to even, as std::nearbyint in the default rounding mode.
int Round(double x) { return static_cast<int>(std::nearbyint(x)); }

}  // namespace

CropBox TrainCropBox(int width, int height, uint64_t seed, int64_t epoch, int64_t sample) {
  constexpr double kMinScale = 0.08, kMaxScale = 1.0;
  constexpr double kMinRatio = 3.0 / 4.0, kMaxRatio = 4.0 / 3.0;
  constexpr int kTries = 10;
  Stream rng(seed, epoch, sample);
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(kMinRatio), log_hi = std::log(kMaxRatio);
  CropBox box;
  bool found = false;
  for (int i = 0; i < kTries && !found; ++i) {
    const double target = area * rng.Uniform(kMinScale, kMaxScale);
    const double ratio = std::exp(rng.Uniform(log_lo, log_hi));
    const int w = Round(std::sqrt(target * ratio));
    const int h = Round(std::sqrt(target / ratio));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      box.y = static_cast<float>(rng.UpTo(height - h));
      box.x = static_cast<float>(rng.UpTo(width - w));
      box.width = static_cast<float>(w);
      box.height = static_cast<float>(h);
      found = true;
    }
  }
  if (!found) {  // torchvision's fallback: the centre crop of the clamped aspect ratio
    const double in_ratio = static_cast<double>(width) / height;
    int w = width, h = height;
    if (in_ratio < kMinRatio) {
      h = Round(w / kMinRatio);
    } else if (in_ratio > kMaxRatio) {
      w = Round(h * kMaxRatio);
    }
    box.x = static_cast<float>((width - w) / 2);
    box.y = static_cast<float>((height - h) / 2);
    box.width = static_cast<float>(w);
    box.height = static_cast<float>(h);
  }
  box.flip = rng.Uniform(0, 1) < 0.5;
  return box;
}

CropBox EvalCropBox(int width, int height) {
  constexpr double kCropFraction = 0.875;  // 224 / 256
  const double side = kCropFraction * std::min(width, height);
  CropBox box;
  box.x = static_cast<float>((width - side) / 2);
  box.y = static_cast<float>((height - side) / 2);
  box.width = static_cast<float>(side);
  box.height = static_cast<float>(side);
  return box;
}

void ResampleCrop(const uint8_t* rgb, int width, int height, const CropBox& box, int out_height,
                  int out_width, uint8_t* out) {
  // Column taps once per call, in per-thread tables (no allocation once they are large enough).
  thread_local std::vector<int> left, right;
  thread_local std::vector<float> weight;
  left.resize(out_width);
  right.resize(out_width);
  weight.resize(out_width);
  const float sx = box.width / static_cast<float>(out_width);
  const float sy = box.height / static_cast<float>(out_height);
  for (int x = 0; x < out_width; ++x) {
    const int from = box.flip ? out_width - 1 - x : x;
    const float fx = std::clamp(box.x + (static_cast<float>(from) + 0.5f) * sx - 0.5f, 0.0f,
                                static_cast<float>(width - 1));
    const int x0 = static_cast<int>(fx);
    left[x] = 3 * x0;
    right[x] = 3 * std::min(x0 + 1, width - 1);
    weight[x] = fx - static_cast<float>(x0);
  }
  const size_t plane = static_cast<size_t>(out_height) * out_width;
  for (int y = 0; y < out_height; ++y) {
    const float fy = std::clamp(box.y + (static_cast<float>(y) + 0.5f) * sy - 0.5f, 0.0f,
                                static_cast<float>(height - 1));
    const int y0 = static_cast<int>(fy);
    const float wy = fy - static_cast<float>(y0);
    const uint8_t* top = rgb + static_cast<size_t>(y0) * width * 3;
    const uint8_t* bottom = rgb + static_cast<size_t>(std::min(y0 + 1, height - 1)) * width * 3;
    uint8_t* row = out + static_cast<size_t>(y) * out_width;
    for (int x = 0; x < out_width; ++x) {
      const float wx = weight[x];
      const int l = left[x], r = right[x];
      for (int c = 0; c < 3; ++c) {
        const float t = top[l + c] + wx * (top[r + c] - top[l + c]);
        const float b = bottom[l + c] + wx * (bottom[r + c] - bottom[l + c]);
        row[c * plane + x] = static_cast<uint8_t>(t + wy * (b - t) + 0.5f);
      }
    }
  }
}

}  // namespace ringpilot::data
