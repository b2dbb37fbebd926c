#include "trainer/input/cpu_image_pipeline.h"

#include <algorithm>
#include <chrono>

#include "base/time.h"
#include "data/cifar.h"
#include "topology/affinity.h"
#ifdef RINGPILOT_WITH_NVJPEG
#include "trainer/input/gpu_image_pipeline.h"
#endif

namespace ringpilot::trainer::input {

// The loader's plan for training: the rank's slice of each step's global batch.
class CpuImagePipeline::SamplerPlan : public data::StepPlan {
 public:
  SamplerPlan(int64_t size, int rank, int world, int batch, uint64_t seed)
      : sampler_(size, world, batch, seed), rank_(rank) {}
  int64_t Indices(int64_t step, std::vector<int64_t>* indices) override {
    return sampler_.Batch(step, rank_, indices).epoch;
  }
  data::EpochSampler& sampler() { return sampler_; }
  const data::EpochSampler& sampler() const { return sampler_; }

 private:
  data::EpochSampler sampler_;
  const int rank_;
};

CpuImagePipeline::CpuImagePipeline(const InputOptions& options, const data::ImageSource& source,
                                   const models::ImageSpec& image, const PipelineTarget& target,
                                   int workers)
    : source_(source),
      cuda_(target.device.is_cuda()),
      end_step_(target.batches),  // input batches, not steps
      options_(ImageLoaderOptionsFor(options, options.batch_per_rank, image,
                                     data::ImageTransform::kTrain, workers)),
      plan_(std::make_unique<SamplerPlan>(source.size(), target.rank, target.world,
                                          options.batch_per_rank, options.seed)),
      copied_(cuda_) {
  const auto pin = at::TensorOptions().pinned_memory(cuda_);
  const int batch = options.batch_per_rank;
  slots_.resize(static_cast<size_t>(options.images.prefetch) + 2);
  for (Batch& s : slots_) {
    s.input = at::empty({batch, 3, image.height, image.width}, pin.dtype(at::kByte));
    s.target = at::empty({batch}, pin.dtype(at::kLong));
  }
}

CpuImagePipeline::~CpuImagePipeline() = default;

void CpuImagePipeline::Resume(int64_t step, data::SamplePosition position) {
  plan_->sampler().Resume(step, position);
}

data::SamplePosition CpuImagePipeline::PositionOf(int64_t step) const {
  return plan_->sampler().PositionOf(step);
}

double CpuImagePipeline::Fill(int64_t step) {
  if (!loader_) {
    std::vector<data::BatchSlot> buffers;
    for (Batch& s : slots_) {
      buffers.push_back({s.input.data_ptr<uint8_t>(), s.target.data_ptr<int64_t>()});
    }
    loader_ =
        std::make_unique<data::ImageBatchLoader>(source_, *plan_, std::move(buffers), options_);
    loader_->Start(step, end_step_);
  } else {
    // The copy that last read step - 2's slot is done: the loader may reuse it.
    copied_.Wait(static_cast<int>(step % 2));
    loader_->Release(step - 2);
  }
  const auto t0 = std::chrono::steady_clock::now();
  int count = 0;
  std::string fatal;
  const int slot = loader_->Wait(step, &count, &fatal);
  if (slot < 0) throw data::DataError(fatal);
  slot_of_[step % 2] = slot;
  return base::Seconds(t0, std::chrono::steady_clock::now());
}

void CpuImagePipeline::CopyToDevice(int64_t step, Batch& device) {
  const Batch& host = slots_[static_cast<size_t>(slot_of_[step % 2])];
  if (!cuda_) {  // the device batch is the host slot: no copy
    device = host;
    return;
  }
  device.input.copy_(host.input, /*non_blocking=*/true);
  device.target.copy_(host.target, /*non_blocking=*/true);
  copied_.Record(static_cast<int>(step % 2));
}

ImageInputCounts CpuImagePipeline::counts() const {
  if (!loader_) return {};
  const data::LoaderCounts c = loader_->counts();
  return {c.samples, c.decoded, c.bad_samples, c.ready_batches};
}

std::vector<std::string> CpuImagePipeline::TakeWarnings() {
  return loader_ ? loader_->TakeWarnings() : std::vector<std::string>{};
}

std::vector<int64_t> CpuImagePipeline::bad_files() const {
  return loader_ ? loader_->bad_files() : std::vector<int64_t>{};
}

std::unique_ptr<ImagePipeline> MakeImagePipeline(const InputOptions& options,
                                                 const data::ImageSource& source,
                                                 const models::ImageSpec& image,
                                                 const PipelineTarget& target,
                                                 history::ImageDecode* route) {
  const bool cuda = target.device.is_cuda();
  const config::GpuDecode mode = options.images.gpu_decode;
  const std::string key = std::string("data.gpu_decode ") + config::ToString(mode);
  const int cores = topology::BoundCpuCount();
  if (!cuda) {
    route->decision = "decoding images on host threads (a CPU rank)";
  } else {
#ifdef RINGPILOT_WITH_NVJPEG
    const bool hardware = data::cuda::HasHardwareJpegDecoder(target.device.index());
    const bool few_cores = cores < kHostDecodeMinCores;
    if (mode == config::GpuDecode::kOn ||
        (mode == config::GpuDecode::kAuto && hardware && few_cores)) {
      const int threads = options.images.gpu_threads;
      route->decision =
          std::string("decoding JPEGs on the GPU with nvJPEG (") +
          (hardware ? "hardware JPEG engines" : "its CUDA backend: no hardware engines") + ", " +
          std::to_string(threads) + " reader threads; " + key +
          (mode == config::GpuDecode::kAuto
               ? ": " + std::to_string(cores) + " cores for this rank, fewer than " +
                     std::to_string(kHostDecodeMinCores)
               : std::string()) +
          ")";
      route->where = history::kDecodeOnGpu;
      route->threads = threads;
      return std::make_unique<GpuImagePipeline>(options, source, image, target);
    }
    if (mode == config::GpuDecode::kAuto) {
      route->decision = "decoding images on host threads (" + key + ": " +
                        (hardware ? std::to_string(cores) + " cores for this rank, at least " +
                                        std::to_string(kHostDecodeMinCores)
                                  : std::string("this GPU has no hardware JPEG engines")) +
                        ")";
    } else {
      route->decision = "decoding images on host threads (" + key + ")";
    }
#else
    route->decision = std::string("decoding images on host threads (") + key +
                      (mode == config::GpuDecode::kOff ? ")" : ": this build has no nvJPEG)");
#endif
  }
  const int workers = DecodeWorkersFor(options.images, cores, cuda);
  const int nice = options.images.worker_nice;
  route->where = history::kDecodeOnHost;
  route->threads = workers;
  route->decision += ", " + std::to_string(workers) + " threads" +
                     (nice > 0 ? " at nice " + std::to_string(nice) : std::string());
  return std::make_unique<CpuImagePipeline>(options, source, image, target, workers);
}

}  // namespace ringpilot::trainer::input
