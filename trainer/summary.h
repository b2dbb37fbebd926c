// RUN_DIR/summary.json, written by rank 0 at the end of a run: final loss, throughput,
// step-time percentiles, and a fingerprint of the final weights to compare runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/TensorBody.h>

#include "comm/communicator.h"
#include "config/job.h"
#include "trainer/evaluation.h"

namespace ringpilot::trainer {

/// What the loop measured in this attempt.
struct RunTotals {
  int64_t start_step = 0;    ///< resumed from (0: from scratch)
  int64_t timed_steps = 0;   ///< steps in the timed window
  double timed_seconds = 0;  ///< wall time of the timed window, without checkpoints
  double first_step_s = 0;   ///< launch to end of the first step
  double checkpoint_seconds = 0;
  double eval_seconds = 0;           ///< evaluations inside the timed window
  int64_t epochs = 0;                ///< dataset kinds: epochs started (0: synthetic)
  std::optional<EvalResult> eval;    ///< the last evaluation
  std::vector<double> step_seconds;  ///< timed steps
  std::vector<double> data_seconds;  ///< host time generating each batch
  int restarts = 0;                  ///< restarts before this attempt (attempt - 1)
  int attempt = 1;                   ///< this attempt's number (RINGPILOT_ATTEMPT, 1 = first)
  std::optional<int64_t> bad_files;  ///< image kinds: distinct files skipped, all ranks
  double final_lr = 0;               ///< learning rate of the last step
  std::optional<double> grad_norm;   ///< train.max_grad_norm: last step's pre-clip norm
};

/// Fingerprint of the weights: L2 norm, sum of |x| (both in float64) and SHA-256 of the
/// raw bytes in parameter order, to tell bit-identical runs from close ones.
struct ParamFingerprint {
  double norm = 0;
  double abs_sum = 0;
  std::string sha256;
};
ParamFingerprint FingerprintParams(const std::vector<at::Tensor>& params);

/// Collective over `host`: averages the final `loss` (undefined when this attempt ran no
/// step) over the world; rank 0 then writes RUN_DIR/summary.json atomically.
/// `peak_device_bytes`: this rank's peak device memory (allocator plus NCCL buffers).
void WriteSummary(const config::JobConfig& job, const std::string& run_dir, int rank, int world,
                  bool cuda, const RunTotals& totals, const at::Tensor& loss,
                  const std::vector<at::Tensor>& params, double peak_device_bytes,
                  comm::Communicator& host);

}  // namespace ringpilot::trainer
