// Data-parallel gradient averaging with bucketing and backward/communication overlap,
// the scheme of PyTorch DDP's C++ reducer (Li et al., VLDB 2020), over our Communicator.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>

#include "comm/communicator.h"

namespace ringpilot::comm {

/// No job defaults here (config/job.h holds them): the caller sets both bucket caps; the
/// constructor throws CommError when either is not positive.
struct ReducerOptions {
  /// Cap of every bucket but the first.
  int64_t bucket_bytes = 0;
  /// Cap of the first bucket (the last gradients of backward), small so the first
  /// all-reduce starts early.
  int64_t first_bucket_bytes = 0;
  /// dtype on the wire; gradients accumulate in the parameters' dtype either way.
  at::ScalarType comm_dtype = at::kFloat;
  /// After the first backward, re-bucket in the order gradients actually became
  /// ready (rank 0's order, broadcast), so buckets fill in one sweep.
  bool rebuild_from_observed_order = true;
  /// Called each step just before the first bucket's all-reduce is issued, on the thread
  /// issuing it (an autograd thread on CUDA, with the gradients' stream current): when
  /// this rank's first gradients were ready. Must be cheap, host-sync free, capturable.
  std::function<void()> on_first_launch;
};

/// Per-step facts, for metrics and tests.
struct ReducerStepStats {
  int buckets = 0;
  /// Buckets whose all-reduce was issued from a gradient hook, i.e. while backward
  /// was still running.
  int buckets_launched_during_backward = 0;
  /// Gradient hooks that had fired when the first bucket was issued, out of
  /// `hooks_total` for the step. Less than `hooks_total` means overlap.
  int hooks_before_first_launch = -1;
  int hooks_total = 0;
  /// Host time FinishBackward spent waiting for collectives (CPU); on CUDA it only
  /// enqueues stream waits and this stays near zero.
  double finish_wait_seconds = 0.0;
  /// Host time spent inside gradient hooks issuing and progressing collectives (on
  /// MPI this is where the reduction work happens during backward).
  double hook_comm_seconds = 0.0;
  int64_t bytes = 0;
};

/// One bucket: a flat tensor whose slices are the `.grad` of its parameters.
struct BucketLayout {
  std::vector<size_t> params;  ///< indices into the reducer's parameter list
  int64_t numel = 0;
};

/// Averages gradients across `comm` as backward produces them.
///
/// Gradients live as views into bucket storage (so they are never copied and their
/// addresses are stable, which CUDA graph capture needs). Buckets are filled in
/// reverse registration order (first bucket capped at `first_bucket_bytes`) and
/// issued strictly in bucket order, so every rank issues the same collective sequence
/// whatever order its hooks fire in.
///
/// Per step: PrepareForBackward(), loss.backward(), FinishBackward(). Accumulating a step
/// over several backward passes (micro-batches): ZeroGradients(), the earlier backward
/// passes (the hooks stay idle, autograd only adds into `.grad`), ArmForBackward(), the last
/// backward, FinishBackward(): one all-reduce of the sum per step. Not thread-safe: hooks
/// run on the autograd thread, which for CPU tensors is the caller's thread.
class GradientReducer {
 public:
  /// `params` must be unique leaf tensors requiring grad, on one device, in
  /// registration order, identical in shape and order on every rank.
  /// Each bucket's storage starts on this boundary of one shared buffer.
  static constexpr int64_t kBucketAlignBytes = 256;

  GradientReducer(std::vector<at::Tensor> params, Communicator& comm, ReducerOptions options);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  /// Zeroes the gradient buckets and re-arms the hooks. Rebuilds buckets first when
  /// the observed order from the first step is pending. Same as ZeroGradients(),
  /// ArmForBackward().
  void PrepareForBackward();
  /// Zeroes the gradient buckets (rebuilding them first when pending), hooks left idle.
  void ZeroGradients();
  /// Re-arms the hooks without touching the gradients: the next backward adds to them
  /// and its hooks issue the buckets' all-reduces.
  void ArmForBackward();

  /// Issues every bucket not yet issued (parameters without a gradient contribute
  /// zeros), waits for all of them and leaves the world-average gradient in `.grad`.
  /// Same as LaunchRemaining(), WaitBuckets(0, buckets().size()), EndBackward().
  void FinishBackward();

  /// The pieces of FinishBackward, for callers that update the parameters of reduced
  /// buckets while later buckets are still on the wire. In this order, once per step:
  /// LaunchRemaining(); WaitBuckets over consecutive ranges covering every bucket;
  /// EndBackward().
  void LaunchRemaining();
  /// Waits for buckets [begin, end) (on CUDA: the current stream waits, no host sync) and
  /// leaves their world-average gradient in the parameters' `.grad`.
  void WaitBuckets(size_t begin, size_t end);
  void EndBackward();

  const std::vector<BucketLayout>& buckets() const { return layouts_; }
  const ReducerStepStats& last_step() const { return stats_; }
  const std::vector<at::Tensor>& params() const { return params_; }

 private:
  struct Bucket;
  void BuildBuckets(const std::vector<size_t>& order);
  void OnGradReady(size_t param_index);
  void LaunchReadyBuckets();
  void Launch(size_t bucket_index);
  void RebuildFromObservedOrder();

  std::vector<at::Tensor> params_;
  Communicator& comm_;
  ReducerOptions options_;
  std::vector<BucketLayout> layouts_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  at::Tensor flat_;  // every bucket's storage, from Communicator::AllocateCollectiveBuffer
  std::vector<std::pair<size_t, int64_t>> locator_;  // param -> (bucket, offset)
  std::vector<std::shared_ptr<torch::autograd::Node>> grad_accumulators_;
  std::vector<char> ready_;
  size_t next_to_launch_ = 0;
  bool in_backward_ = false;
  int hooks_fired_ = 0;
  bool record_order_ = true;
  bool rebuild_pending_ = false;
  std::vector<size_t> observed_order_;
  ReducerStepStats stats_;
};

}  // namespace ringpilot::comm
