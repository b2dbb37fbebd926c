#include "trainer/step/gradient_update.h"

namespace ringpilot::trainer::step {

std::vector<size_t> BucketParams(const comm::GradientReducer& reducer, size_t begin, size_t end) {
  std::vector<size_t> out;
  const auto& buckets = reducer.buckets();
  for (size_t b = begin; b < end && b < buckets.size(); ++b) {
    out.insert(out.end(), buckets[b].params.begin(), buckets[b].params.end());
  }
  return out;
}

void ReduceAndUpdate(comm::GradientReducer& reducer, FusedOptimizer& optimizer, StepPhases& phases,
                     const GradientUpdateOptions& options, GradientClipper* clipper) {
  const size_t n = reducer.buckets().size();
  if (clipper != nullptr || !options.overlap || n <= GradientUpdateOptions::kTailBuckets) {
    reducer.FinishBackward();
    phases.CommDone();
    if (clipper != nullptr) clipper->Clip();
    optimizer.Step();
    phases.OptimizerDone();
    return;
  }
  // Buckets are reduced in bucket order on one stream (NCCL) or in issue order (MPI), so
  // the early ones are done or nearly so; their update runs while the tail is on the wire.
  const size_t split = n - GradientUpdateOptions::kTailBuckets;
  reducer.LaunchRemaining();
  reducer.WaitBuckets(0, split);
  optimizer.StepParams(BucketParams(reducer, 0, split));
  phases.EarlyUpdateDone();
  reducer.WaitBuckets(split, n);
  reducer.EndBackward();
  phases.CommDone();
  optimizer.StepParams(BucketParams(reducer, split, n));
  optimizer.EndStep();
  phases.OptimizerDone();
}

}  // namespace ringpilot::trainer::step
