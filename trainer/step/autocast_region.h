// Forward passes under the job's autocast (train.precision): the training step and the
// evaluation enter it the same way.
#pragma once

#include <ATen/autocast_mode.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <optional>

namespace ringpilot::trainer::step {

/// Enables autocast on `device` for its lifetime when `dtype` is set (the dtype itself is
/// set once, by TrainStep's constructor); on leaving, disables it and clears the cast
/// cache. Nothing happens without a dtype (fp32). Not thread-safe: autocast state is per
/// thread.
class AutocastRegion {
 public:
  AutocastRegion(c10::DeviceType device, std::optional<c10::ScalarType> dtype)
      : device_(device), active_(dtype.has_value()) {
    if (active_) at::autocast::set_autocast_enabled(device_, true);
  }
  ~AutocastRegion() {
    if (!active_) return;
    at::autocast::set_autocast_enabled(device_, false);
    at::autocast::clear_cache();
  }
  AutocastRegion(const AutocastRegion&) = delete;
  AutocastRegion& operator=(const AutocastRegion&) = delete;

 private:
  const c10::DeviceType device_;
  const bool active_;
};

}  // namespace ringpilot::trainer::step
