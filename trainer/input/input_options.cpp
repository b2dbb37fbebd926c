#include "trainer/input/input_options.h"

#include <algorithm>

namespace ringpilot::trainer::input {

int DecodeWorkersFor(const ImageDecodeOptions& images, int bound_cores, bool cuda) {
  if (images.workers > 0) return images.workers;
  return std::max(1, cuda ? bound_cores - 1 : bound_cores / 4);
}

data::ImageLoaderOptions ImageLoaderOptionsFor(const InputOptions& options, int batch,
                                               const models::ImageSpec& image,
                                               data::ImageTransform transform, int workers) {
  data::ImageLoaderOptions o;
  o.batch = batch;
  o.out_height = image.height;
  o.out_width = image.width;
  o.transform = transform;
  o.seed = options.seed;
  o.workers = workers;
  o.max_bad_fraction = options.images.max_bad_fraction;
  o.worker_nice = options.images.worker_nice;
  return o;
}

#ifdef RINGPILOT_WITH_NVJPEG
data::cuda::ImagePipelineOptions GpuImagePipelineOptionsFor(const InputOptions& options,
                                                            const models::ImageSpec& image,
                                                            int device) {
  data::cuda::ImagePipelineOptions o;
  o.batch = options.batch_per_rank;
  o.out_height = image.height;
  o.out_width = image.width;
  o.prefetch = options.images.prefetch;
  o.threads = options.images.gpu_threads;
  o.device = device;
  o.train = true;
  o.seed = options.seed;
  return o;
}
#endif

}  // namespace ringpilot::trainer::input
