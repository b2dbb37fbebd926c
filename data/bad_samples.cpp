#include "data/bad_samples.h"

#include <algorithm>

namespace ringpilot::data {

int32_t UsableLabel(const ImageSource& source, int64_t index, std::string* why) {
  const int32_t label = source.label(index);
  if (label >= 0 && label < source.num_classes()) return label;
  *why = "no usable class label (.cls member)";
  return -1;
}

BadSampleLog::BadSampleLog(const ImageSource& source, double max_fraction)
    : source_(source), max_fraction_(max_fraction), seen_(static_cast<size_t>(source.size()), 0) {}

bool BadSampleLog::Record(int64_t entries, int64_t replaced,
                          const std::vector<BadSample>& failures) {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_ += entries;
  replaced_ += replaced;
  for (const BadSample& bad : failures) {
    if (bad.index < 0 || bad.index >= static_cast<int64_t>(seen_.size()) || seen_[bad.index]) {
      continue;
    }
    seen_[bad.index] = 1;
    files_.push_back(bad.index);
    warnings_.push_back("skipping bad sample " + source_.Describe(bad.index) + ": " + bad.why);
  }
  // The floor keeps one bad file among the first few batches from failing a job whose
  // limit is meant for the whole set.
  const double denominator = static_cast<double>(std::max(entries_, kBadFractionFloor));
  if (fatal_.empty() && static_cast<double>(replaced_) > max_fraction_ * denominator) {
    const BadSample& last = failures.empty() ? BadSample{} : failures.back();
    fatal_ = "bad samples: " + std::to_string(replaced_) + " of " + std::to_string(entries_) +
             " read exceed data.max_bad_fraction " + std::to_string(max_fraction_) +
             (failures.empty() ? std::string()
                               : " (last: " + source_.Describe(last.index) + ": " + last.why + ")");
  }
  return fatal_.empty();
}

std::string BadSampleLog::fatal() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return fatal_;
}

std::vector<std::string> BadSampleLog::TakeWarnings() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(warnings_, {});
}

std::vector<int64_t> BadSampleLog::files() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return files_;
}

int64_t BadSampleLog::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_;
}

int64_t BadSampleLog::replaced() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return replaced_;
}

}  // namespace ringpilot::data
