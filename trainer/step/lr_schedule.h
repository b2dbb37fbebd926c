// The learning rate of each optimizer step (train.lr_schedule): a closed form of the step
// index, so a resumed run continues the schedule exactly from its checkpoint's step.
#pragma once

#include <cstdint>

#include "config/job.h"

namespace ringpilot::trainer::step {

/// No job defaults here: trainer/options.cpp fills every field from the job.
struct LrScheduleOptions {
  config::LrSchedule kind = config::LrSchedule::kConstant;
  double lr = 0;            ///< the peak (train.lr)
  int64_t total_steps = 0;  ///< optimizer steps of the run (RunPlan::steps)
  int64_t warmup_steps = 0;
  double min_ratio = 0;    ///< cosine, polynomial: the final lr / lr
  int64_t step_every = 0;  ///< step: > 0
  double gamma = 0;        ///< step
  double power = 0;        ///< polynomial
};

/// The learning rate of optimizer step `step` (0-based: the update that completes step
/// step + 1), with W = warmup_steps, T = total_steps and p = clamp((step - W) / max(1, T - W),
/// 0, 1) -- the formulas of Hugging Face's get_*_schedule_with_warmup (torch LambdaLR):
///   step < W:    lr x step / W
///   constant:    lr
///   cosine:      lr x (m + (1 - m) x (1 + cos(pi p)) / 2)
///   step:        lr x gamma ^ floor((step - W) / step_every)
///   polynomial:  lr x (m + (1 - m) x (1 - p) ^ power)
/// Pure; thread-safe.
double LearningRateAt(const LrScheduleOptions& options, int64_t step);

/// Whether every step trains at options.lr (constant, no warm-up): the optimizer then keeps
/// the lr a kernel argument, today's fast path.
bool IsConstant(const LrScheduleOptions& options);

}  // namespace ringpilot::trainer::step
