// The bad samples of an image set on one rank: what both image pipelines (the host loader,
// data/image_loader.h, and the GPU pipeline, data/cuda/image_pipeline.h) report when a
// sample cannot be used (unreadable, not an image, undecodable or truncated, no label), so
// that warnings, the distinct bad-file count and the data.max_bad_fraction limit mean the
// same on CPU and GPU ranks.
//
// The rule both pipelines follow: a batch entry whose sample is bad takes the next sample
// of the set in index order (wrapping) that loads, with that sample's own crop; after
// kMaxSubstituteTries bad ones in a row the entry is a black image of class 0.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "data/image_source.h"

namespace ringpilot::data {

/// Samples whose bad fraction is not judged before: the denominator is at least this.
inline constexpr int64_t kBadFractionFloor = 1000;
/// Substitutes tried for one bad sample before its batch entry is left black (label 0).
inline constexpr int kMaxSubstituteTries = 64;

/// Sample `index`'s class, or -1 with `*why` set when it has no usable one (a shard key
/// without its .cls, a class outside [0, num_classes)): the first check of both pipelines.
int32_t UsableLabel(const ImageSource& source, int64_t index, std::string* why);

/// A sample that could not be used, and one line saying why (no path).
struct BadSample {
  int64_t index = 0;
  std::string why;
};

/// The substitution rule above, the one loop of both pipelines: calls `load(index, &why)`
/// for `wanted`, then wanted + 1, ... (wrapping over the set's `size` samples), at most
/// kMaxSubstituteTries substitutes, until one returns true. `load` returns false with a
/// one-line `why` for a bad sample; each such sample is appended to `failures`. Returns
/// the index that loaded, or -1: the entry is to be a black image of class 0.
template <typename Load>
int64_t LoadOrSubstitute(int64_t wanted, int64_t size, std::vector<BadSample>* failures,
                         Load&& load) {
  for (int64_t t = 0; t <= kMaxSubstituteTries && t < size; ++t) {
    const int64_t index = (wanted + t) % size;
    std::string why;
    if (load(index, &why)) return index;
    failures->push_back({index, std::move(why)});
  }
  return -1;
}

/// Thread-safe.
class BadSampleLog {
 public:
  /// `source` must outlive the log. max_fraction: data.max_bad_fraction.
  BadSampleLog(const ImageSource& source, double max_fraction);

  /// Records `entries` batch entries produced, `replaced` of which needed a substitute, and
  /// the samples that failed for them. Returns false once the bad entries exceed
  /// max_fraction x max(entries so far, kBadFractionFloor): fatal() then says so in one line.
  bool Record(int64_t entries, int64_t replaced, const std::vector<BadSample>& failures);

  /// "" until the limit is passed; then one line naming the counts, the limit and the last
  /// bad file.
  std::string fatal() const;
  /// One line per bad file seen for the first time since the last call ("skipping bad
  /// sample PATH: why").
  std::vector<std::string> TakeWarnings();
  /// Indices of the distinct bad samples (files) seen so far.
  std::vector<int64_t> files() const;
  int64_t entries() const;
  int64_t replaced() const;

 private:
  const ImageSource& source_;
  const double max_fraction_;
  mutable std::mutex mutex_;
  std::vector<uint8_t> seen_;  // per dataset index
  std::vector<int64_t> files_;
  std::vector<std::string> warnings_;
  int64_t entries_ = 0;
  int64_t replaced_ = 0;
  std::string fatal_;
};

}  // namespace ringpilot::data
