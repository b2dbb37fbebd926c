// SGD with momentum and AdamW on ATen's fused multi-tensor kernels (_fused_sgd_,
// _fused_adamw_: one kernel sweep over all parameters on CUDA, vectorised on CPU).
#pragma once

#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "config/job.h"

namespace ringpilot::trainer::step {

/// No job defaults here: trainer/options.cpp fills every field from the job (config/job.h).
struct OptimizerOptions {
  config::Optimizer kind = config::Optimizer::kSgd;
  double lr = 0;
  double momentum = 0;      ///< SGD
  double weight_decay = 0;  ///< SGD: L2 term; AdamW: decoupled decay
  double beta1 = 0;         ///< AdamW
  double beta2 = 0;         ///< AdamW
  double eps = 0;           ///< AdamW
  /// No weight decay on parameters of fewer than 2 dimensions (biases, BatchNorm and
  /// LayerNorm weights): their update runs as a second fused call with decay 0. The
  /// parameter order (and so the reducer's buckets) is untouched.
  bool exempt_1d_from_decay = false;
  /// The learning rate lives in a one-element tensor on the parameters' device, which the
  /// fused kernels read when they run: set_lr() between CUDA graph replays takes effect
  /// without re-capture and without a host synchronisation. Off: `lr` is a kernel argument
  /// (baked into a captured graph). CUDA parameters only; on the CPU `lr` is always passed.
  bool lr_on_device = false;
};

/// Updates `params` from their `.grad` (which must be defined and of the same
/// shape). State tensors are allocated up front on the parameters' device, so the
/// optimizer step has stable addresses (CUDA graphs) and the state can be broadcast
/// or checkpointed as a flat list. Not thread-safe.
class FusedOptimizer {
 public:
  FusedOptimizer(std::vector<at::Tensor> params, OptimizerOptions options);

  /// One update; no host synchronisation. Same as StepParams(every index), EndStep().
  void Step();

  /// Updates only the parameters at `indices` (positions in the constructor's list);
  /// a step may be split this way across disjoint index sets, each parameter updated
  /// once, then EndStep(). Per element the result is Step()'s.
  void StepParams(const std::vector<size_t>& indices);
  /// Closes a step made of StepParams calls.
  void EndStep() { ++steps_done_; }

  /// Every state tensor in a fixed order, for checkpoints and broadcast.
  std::vector<at::Tensor> StateTensors() const;
  /// Names matching StateTensors(), e.g. "momentum/3", "exp_avg/0", "step/0".
  std::vector<std::string> StateNames() const;
  /// Sets the learning rate of the following steps. With lr_on_device it queues a fill of
  /// the device tensor on the current stream (call it outside graph capture, before the
  /// replay that should use it); otherwise the next Step() passes the new value.
  void set_lr(double lr);
  double lr() const { return options_.lr; }

  /// From now on every update also writes copies[i] (a bfloat16 or float16 tensor of
  /// parameter i's shape; undefined: none) as parameter i rounded after its update: the
  /// model's low-precision weights (ops::ShadowWeights), which then need no refresh of their
  /// own. `copies` is parallel to the constructor's parameters (or shorter); a parameter
  /// with a copy must be contiguous. AdamW on CUDA writes them in its own sweep
  /// (ops::FusedAdamWWithCopies); otherwise a copy follows the update. Empty: no copies.
  void SetLowPrecisionCopies(std::vector<at::Tensor> copies);

  /// Number of completed steps (SGD needs to know the first one).
  int64_t steps_done() const { return steps_done_; }
  void set_steps_done(int64_t n) { steps_done_ = n; }

 private:
  // The update of the parameters at `indices`: one fused call, or two when some of them
  // are exempt from weight decay.
  void Update(const std::vector<size_t>& indices);
  // One fused update of parallel lists (a subset of the members, or the members).
  void Apply(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& momentum,
             const std::vector<at::Tensor>& exp_avg, const std::vector<at::Tensor>& exp_avg_sq,
             const std::vector<at::Tensor>& step, const std::vector<at::Tensor>& copies,
             double weight_decay);

  std::vector<at::Tensor> params_;
  OptimizerOptions options_;
  std::vector<at::Tensor> momentum_;    // SGD
  std::vector<at::Tensor> exp_avg_;     // AdamW
  std::vector<at::Tensor> exp_avg_sq_;  // AdamW
  std::vector<at::Tensor> step_;        // AdamW, float32 scalars
  std::vector<at::Tensor> copies_;      // SetLowPrecisionCopies: one per parameter, or empty
  std::vector<size_t> all_;             // 0..n-1
  std::vector<char> exempt_;            // per parameter: no weight decay
  bool any_exempt_ = false;
  at::Tensor lr_tensor_;  // lr_on_device on CUDA: float32 scalar on the parameters' device
  int64_t steps_done_ = 0;
};

}  // namespace ringpilot::trainer::step
