// data.* as the image loaders' options: the training and evaluation loaders on host
// threads (data/image_loader.h) and the GPU pipeline (data/cuda/image_pipeline.h). The
// input room maps these keys itself; every other component's options come from
// trainer/options.cpp.
#pragma once

#include "config/job.h"
#include "data/image_loader.h"
#include "trainer/models/model.h"

#ifdef RINGPILOT_WITH_NVJPEG
#include "data/cuda/image_pipeline.h"
#endif

namespace ringpilot::trainer::input {

/// data.* and train.seed for an image batch loader: `batch` samples per slot, the model's
/// image size, decode threads `workers` (DecodeWorkersFor).
data::ImageLoaderOptions ImageLoaderOptionsFor(const config::JobConfig& job, int batch,
                                               const models::ImageSpec& image,
                                               data::ImageTransform transform, int workers);

/// data.workers, 0 resolved from the cores the rank is bound to: GPU ranks all but one
/// (the training thread's), CPU ranks a quarter (the compute threads take the rest).
int DecodeWorkersFor(const config::DataConfig& data, int bound_cores, bool cuda);
/// Host threads of the GPU image pipeline (data.gpu_decode): data.workers, else 8.
int GpuDecodeThreadsFor(const config::DataConfig& data);

#ifdef RINGPILOT_WITH_NVJPEG
/// The GPU image pipeline of a training set on CUDA device `device`: data.batch_per_rank,
/// data.prefetch, GpuDecodeThreadsFor's threads, train crops from train.seed. No host
/// share: beside a ResNet-50 step every share lost to host decode
/// (bench/results/2026-11-29-nvidia-h200-decode-contention.md).
data::cuda::ImagePipelineOptions GpuImagePipelineOptionsFor(const config::JobConfig& job,
                                                            const models::ImageSpec& image,
                                                            int device);
#endif

}  // namespace ringpilot::trainer::input
