#include "trainer/input/gpu_image_pipeline.h"

#include <ATen/cuda/CUDAContext.h>

#include <algorithm>
#include <cstdio>

namespace ringpilot::trainer::input {

GpuImagePipeline::GpuImagePipeline(const InputOptions& options, const data::ImageSource& source,
                                   const models::ImageSpec& image, const PipelineTarget& target)
    : rank_(target.rank),
      end_step_(target.batches),  // input batches, not steps
      prefetch_(options.images.prefetch),
      sampler_(source.size(), target.world, options.batch_per_rank, options.seed),
      bad_(source, options.images.max_bad_fraction) {
  pipeline_ = std::make_unique<data::cuda::ImagePipeline>(
      source, GpuImagePipelineOptionsFor(options, image, target.device.index()), bad_);
}

void GpuImagePipeline::Resume(int64_t step, data::SamplePosition position) {
  sampler_.Resume(step, position);
}

data::SamplePosition GpuImagePipeline::PositionOf(int64_t step) const {
  return sampler_.PositionOf(step);
}

double GpuImagePipeline::Fill(int64_t step) {
  if (next_queued_ < 0) next_queued_ = step;
  // Keep data.prefetch steps queued ahead: the pipeline makes them while the device trains.
  for (; next_queued_ < std::min(end_step_, step + prefetch_); ++next_queued_) {
    data::cuda::BatchRequest request;
    request.epoch = sampler_.Batch(next_queued_, rank_, &request.indices).epoch;
    pipeline_->Enqueue(std::move(request));
  }
  return pipeline_->WaitNext();
}

void GpuImagePipeline::CopyToDevice(int64_t step, Batch& device) {
  pipeline_->CopyNext(device.input.data_ptr<uint8_t>(), device.target.data_ptr<int64_t>(),
                      at::cuda::getCurrentCUDAStream().stream());
}

ImageInputCounts GpuImagePipeline::counts() const {
  const data::cuda::ImagePipelineCounters c = pipeline_->counters();
  return {bad_.entries(), c.images, bad_.replaced(), c.ready_batches};
}

std::vector<std::string> GpuImagePipeline::TakeWarnings() { return bad_.TakeWarnings(); }

std::vector<int64_t> GpuImagePipeline::bad_files() const { return bad_.files(); }

std::string GpuImagePipeline::TimeReport() const {
  const data::cuda::ImagePipelineCounters c = pipeline_->counters();
  const double batches = static_cast<double>(c.images) / pipeline_->batch_size();
  if (batches < 1) return "";
  const double ms = 1e3 / batches;
  char line[512];
  std::snprintf(line, sizeof(line),
                "nvJPEG pipeline, %.0f batches, per batch %.1f ms busy: reading %.1f, nvJPEG "
                "calls %.1f, workers' decode %.1f, host share %.1f, waiting for the GPU %.1f; GPU "
                "decode %.1f ms, "
                "resample %.2f ms; images: %lld nvJPEG batch, %lld decoupled, %lld host",
                batches, c.busy_seconds * ms, c.read_seconds * ms, c.batch_call_seconds * ms,
                c.odd_seconds * ms, c.share_seconds * ms, c.finish_seconds * ms,
                c.decode_gpu_seconds * ms, c.resample_gpu_seconds * ms,
                static_cast<long long>(c.hardware_images), static_cast<long long>(c.odd_gpu_images),
                static_cast<long long>(c.host_images + c.host_share_images));
  return line;
}

}  // namespace ringpilot::trainer::input
