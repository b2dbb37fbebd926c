// What the input room reads of the job, as one options struct that trainer/options.cpp's
// InputOptionsFor fills (the one mapping from the job; its defaults live in config/job.h
// only), and the image loaders' options the room derives from it with the rank's runtime
// facts: the cores it is bound to, the model's image size, its device.
#pragma once

#include <cstdint>
#include <string>

#include "config/job.h"  // the job's enums (DataKind, GpuDecode), defined there once
#include "data/cifar.h"
#include "data/image_loader.h"
#include "trainer/models/model.h"

#ifdef RINGPILOT_WITH_NVJPEG
#include "data/cuda/image_pipeline.h"
#endif

namespace ringpilot::trainer::input {

/// How the image kinds (image_folder, image_shards) decode: the training pipeline on host
/// threads or nvJPEG, and the held-out set's loader.
struct ImageDecodeOptions {
  config::GpuDecode gpu_decode = config::GpuDecode::kAuto;  ///< data.gpu_decode (GPU ranks)
  int prefetch = 0;  ///< data.prefetch: batches decoded ahead of the training step
  /// data.workers: host decode threads per rank; 0 = from the rank's cores (DecodeWorkersFor).
  int workers = 0;
  /// The GPU pipeline's host threads (reading, parsing, odd JPEGs): data.workers, or the
  /// count InputOptionsFor gives when that is 0. At least 1 where the GPU pipeline runs.
  int gpu_threads = 0;
  int worker_nice = 0;          ///< data.worker_nice: the host decode threads' nice (0: the rank's)
  double max_bad_fraction = 0;  ///< data.max_bad_fraction: bad samples tolerated per sample read
};

/// Everything trainer/input reads of the job. Neutral defaults, no job defaults: every field
/// is set by InputOptionsFor (trainer/options.h), or by a test. Copied into what keeps it
/// (datasets, held-out sets), so it need not outlive them.
struct InputOptions {
  config::DataKind kind = config::DataKind::kSynthetic;  ///< data.kind (decided by OpenDataset)
  /// data.train: cifar: a batch file or the distribution's folder; image_folder:
  /// ROOT/<class>/<image>; image_shards: tar files or glob patterns; tokens: a shard prefix.
  std::string train;
  std::string val;         ///< data.val, as train; "" = no held-out set
  int batch_per_rank = 0;  ///< data.batch_per_rank
  /// train.seed: the sampling order, CIFAR's and the image crops' augmentation, synthetic
  /// samples, the token sequences' masking keys.
  uint64_t seed = 0;
  /// What model.name reads (config::IsImageModel): images, or token sequences.
  models::InputKind model_input = models::InputKind::kImages;
  int num_classes = 0;  ///< model.num_classes: an image set may hold no more classes
  /// data.kind cifar: the distribution model.num_classes names (100: CIFAR-100, else -10).
  data::CifarVariant cifar = data::CifarVariant::kCifar10;
  int seq_len = 0;  ///< model.seq_len: the token models' sequences
  /// model.vocab_size as written: data.kind tokens: the rows, 0 = the shards' vocabulary;
  /// synthetic sequences: their ids, 0 = config::kSyntheticVocabSize (TokenSpecFor).
  int vocab_size = 0;
  ImageDecodeOptions images;  ///< data.* of the image kinds
};

/// Host decode threads of a rank bound to `bound_cores` cores: images.workers, else GPU ranks
/// all cores but one (the training thread's), CPU ranks a quarter (the compute threads take
/// the rest); at least 1.
int DecodeWorkersFor(const ImageDecodeOptions& images, int bound_cores, bool cuda);

/// An image batch loader's options (data/image_loader.h): `batch` samples per slot, the
/// model's `image` size, `transform`, `workers` decode threads (DecodeWorkersFor), the
/// options' seed, bad-sample limit and decode threads' nice value.
data::ImageLoaderOptions ImageLoaderOptionsFor(const InputOptions& options, int batch,
                                               const models::ImageSpec& image,
                                               data::ImageTransform transform, int workers);

#ifdef RINGPILOT_WITH_NVJPEG
/// The GPU image pipeline of a training set on CUDA device `device`: batch_per_rank at the
/// model's `image` size, images.prefetch, images.gpu_threads, train crops from the seed. No
/// host share: beside a ResNet-50 step every share lost to host decode
/// (bench/results/2026-11-29-nvidia-h200-decode-contention.md).
data::cuda::ImagePipelineOptions GpuImagePipelineOptionsFor(const InputOptions& options,
                                                            const models::ImageSpec& image,
                                                            int device);
#endif

}  // namespace ringpilot::trainer::input
