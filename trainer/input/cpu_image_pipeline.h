// The CPU image pipeline: data::ImageBatchLoader's worker threads decode and crop the next
// data.prefetch batches into pinned host slots while the device trains; each step's slot
// is then copied (asynchronously) into the device batch, or on CPU ranks becomes it.
#pragma once

#include <memory>
#include <vector>

#include "data/image_loader.h"
#include "trainer/input/copy_fence.h"
#include "trainer/input/image_pipeline.h"

namespace ringpilot::trainer::input {

class CpuImagePipeline : public ImagePipeline {
 public:
  /// `workers` decode threads (DecodeWorkersFor). Allocates images.prefetch + 2 slots.
  CpuImagePipeline(const InputOptions& options, const data::ImageSource& source,
                   const models::ImageSpec& image, const PipelineTarget& target, int workers);
  ~CpuImagePipeline() override;

  void Resume(int64_t step, data::SamplePosition position) override;
  data::SamplePosition PositionOf(int64_t step) const override;
  double Fill(int64_t step) override;
  void CopyToDevice(int64_t step, Batch& device) override;
  ImageInputCounts counts() const override;
  std::vector<std::string> TakeWarnings() override;
  std::vector<int64_t> bad_files() const override;

 private:
  class SamplerPlan;

  const data::ImageSource& source_;
  const bool cuda_;
  const int64_t end_step_;
  const data::ImageLoaderOptions options_;
  std::vector<Batch> slots_;
  std::unique_ptr<SamplerPlan> plan_;
  std::unique_ptr<data::ImageBatchLoader> loader_;  // made at the first Fill (after Resume)
  int slot_of_[2] = {0, 0};                         // slot of step s at [s % 2]
  CopyFence copied_;
};

}  // namespace ringpilot::trainer::input
