// The GPU image pipeline of GPU ranks (data/cuda/image_pipeline.h: nvJPEG on the hardware
// JPEG engines, one crop-resize kernel per batch) behind InputFeed's ImagePipeline
// interface: the training thread queues the next data.prefetch steps' samples (from the
// same EpochSampler as the CPU pipeline), waits for its step's batch in Fill (the input
// wait) and enqueues a device-to-device copy into the step's batch in CopyToDevice.
#pragma once

#include <memory>

#include "data/bad_samples.h"
#include "data/cuda/image_pipeline.h"
#include "trainer/input/image_pipeline.h"

namespace ringpilot::trainer::input {

class GpuImagePipeline : public ImagePipeline {
 public:
  /// Options from GpuImagePipelineOptionsFor. Throws std::runtime_error when nvJPEG cannot
  /// start on the rank's device.
  GpuImagePipeline(const InputOptions& options, const data::ImageSource& source,
                   const models::ImageSpec& image, const PipelineTarget& target);

  void Resume(int64_t step, data::SamplePosition position) override;
  data::SamplePosition PositionOf(int64_t step) const override;
  double Fill(int64_t step) override;
  void CopyToDevice(int64_t step, Batch& device) override;
  ImageInputCounts counts() const override;
  std::vector<std::string> TakeWarnings() override;
  std::vector<int64_t> bad_files() const override;
  /// Per batch: the pipeline thread's time and its parts (reading, nvJPEG's calls, the
  /// workers' decode, the wait for the GPU), the GPU's decode and resample time, and where
  /// the images were decoded.
  std::string TimeReport() const override;
  /// "hardware" or "gpu": the nvJPEG backend in use.
  const std::string& backend() const { return pipeline_->backend(); }

 private:
  const int rank_;
  const int64_t end_step_;
  const int prefetch_;
  data::EpochSampler sampler_;
  data::BadSampleLog bad_;
  std::unique_ptr<data::cuda::ImagePipeline> pipeline_;
  int64_t next_queued_ = -1;  // first step not yet queued; -1 before the first Fill
};

}  // namespace ringpilot::trainer::input
