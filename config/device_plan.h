// What a job's ranks compute on, on a given host: world.device resolved against the GPUs
// that host can use, and the GPU-only settings as they apply there. A plan beside the job,
// which stays as loaded (its job.yaml still says `auto` and `cuda_graphs: true`).
#pragma once

#include <string>

#include "config/job.h"

namespace ringpilot::config {

struct DevicePlan {
  bool cuda = false;                       ///< the ranks compute on CUDA devices
  bool cuda_graphs = false;                ///< train.cuda_graphs as it applies (false on CPU ranks)
  Precision precision = Precision::kFp32;  ///< train.precision as it applies
  /// "" or one line: the GPU-only settings `world.device: auto` turned off for CPU ranks.
  std::string notice;
};

/// world.device for a host with (`gpu_visible`) or without a usable CUDA device: cuda and
/// auto with a GPU plan CUDA ranks with the job's settings; cpu plans CPU ranks as the job
/// says (bf16 autocast runs on CPUs); auto without a GPU plans CPU ranks with
/// train.cuda_graphs off and train.precision fp32, and a notice naming what changed when
/// the job asked for either. Throws ConfigError (one line naming job.source and `host`)
/// for world.device cuda without a GPU: no attempt on that host can succeed.
DevicePlan PlanDevice(const JobConfig& job, bool gpu_visible, const std::string& host);

}  // namespace ringpilot::config
