#include "trainer/step/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace ringpilot::trainer::step {

double LearningRateAt(const LrScheduleOptions& o, int64_t step) {
  if (step < o.warmup_steps) {
    return o.lr * static_cast<double>(step) / static_cast<double>(o.warmup_steps);
  }
  const int64_t after = step - o.warmup_steps;
  const double span = static_cast<double>(std::max<int64_t>(1, o.total_steps - o.warmup_steps));
  const double progress = std::clamp(static_cast<double>(after) / span, 0.0, 1.0);
  const double m = o.min_ratio;
  switch (o.kind) {
    case config::LrSchedule::kConstant:
      return o.lr;
    case config::LrSchedule::kCosine:
      return o.lr * (m + (1.0 - m) * 0.5 * (1.0 + std::cos(M_PI * progress)));
    case config::LrSchedule::kStep:
      return o.lr *
             std::pow(o.gamma, static_cast<double>(after / std::max<int64_t>(1, o.step_every)));
    case config::LrSchedule::kPolynomial:
      return o.lr * (m + (1.0 - m) * std::pow(1.0 - progress, o.power));
  }
  return o.lr;
}

bool IsConstant(const LrScheduleOptions& o) {
  return o.kind == config::LrSchedule::kConstant && o.warmup_steps == 0;
}

}  // namespace ringpilot::trainer::step
