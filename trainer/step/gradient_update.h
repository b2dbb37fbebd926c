// The end of a training step: the gradient all-reduces still running after backward, and
// the optimizer update, overlapped where the buckets allow it.
#pragma once

#include <cstddef>
#include <vector>

#include "comm/gradient_reducer.h"
#include "trainer/step/gradient_clipping.h"
#include "trainer/step/optimizer.h"
#include "trainer/step/step_phases.h"

namespace ringpilot::trainer::step {

struct GradientUpdateOptions {
  /// Buckets left for after the early update: the last ones backward fills are the ones
  /// still on the wire when it ends (BERT's tied word embedding, 94 MB in BERT-base, is the
  /// last gradient backward produces; the position and type embeddings come after it).
  static constexpr size_t kTailBuckets = 2;
  /// Update the parameters of buckets [0, n - kTailBuckets) as soon as they are reduced,
  /// then wait for the tail (comm.overlap_optimizer). Off: wait for every bucket, then one
  /// update. Per element the parameters are the same either way.
  bool overlap = true;
};

/// Parameter indices of buckets [begin, end), bucket by bucket.
std::vector<size_t> BucketParams(const comm::GradientReducer& reducer, size_t begin, size_t end);

/// Called after loss.backward() and phases.BackwardDone(): issues the buckets still
/// unissued, waits for them and updates the parameters, stamping EarlyUpdateDone (when it
/// overlaps), CommDone and OptimizerDone. `reducer` and `optimizer` hold the same
/// parameters in the same order. With `clipper` (train.max_grad_norm) every bucket is
/// waited for, the gradients are clipped to the global norm, then one update (no overlap:
/// the norm needs every gradient). Host-sync free on CUDA (stream waits), so capturable.
void ReduceAndUpdate(comm::GradientReducer& reducer, FusedOptimizer& optimizer, StepPhases& phases,
                     const GradientUpdateOptions& options, GradientClipper* clipper = nullptr);

}  // namespace ringpilot::trainer::step
