#include "trainer/input/image_options.h"

#include <algorithm>

namespace ringpilot::trainer::input {

data::ImageLoaderOptions ImageLoaderOptionsFor(const config::JobConfig& job, int batch,
                                               const models::ImageSpec& image,
                                               data::ImageTransform transform, int workers) {
  data::ImageLoaderOptions o;
  o.batch = batch;
  o.out_height = image.height;
  o.out_width = image.width;
  o.transform = transform;
  o.seed = job.train.seed;
  o.workers = workers;
  o.max_bad_fraction = job.data.max_bad_fraction;
  o.worker_nice = job.data.worker_nice;
  return o;
}

int DecodeWorkersFor(const config::DataConfig& data, int bound_cores, bool cuda) {
  if (data.workers > 0) return data.workers;
  return std::max(1, cuda ? bound_cores - 1 : bound_cores / 4);
}

int GpuDecodeThreadsFor(const config::DataConfig& data) {
  // nvJPEG's engines do most decoding; the threads read files into pinned memory, parse
  // headers, make the batch's nvJPEG calls and run the Huffman stage of progressive JPEGs
  // (about 2.7 ms each). 8 kept the pipeline at 27k img/s on an H200
  // (bench/results/2026-11-28-nvidia-h200-image-input.md).
  return data.workers > 0 ? data.workers : 8;
}

#ifdef RINGPILOT_WITH_NVJPEG
data::cuda::ImagePipelineOptions GpuImagePipelineOptionsFor(const config::JobConfig& job,
                                                            const models::ImageSpec& image,
                                                            int device) {
  data::cuda::ImagePipelineOptions o;
  o.batch = job.data.batch_per_rank;
  o.out_height = image.height;
  o.out_width = image.width;
  o.prefetch = job.data.prefetch;
  o.threads = GpuDecodeThreadsFor(job.data);
  o.device = device;
  o.train = true;
  o.seed = job.train.seed;
  return o;
}
#endif

}  // namespace ringpilot::trainer::input
