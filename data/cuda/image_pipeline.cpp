#include "data/cuda/image_pipeline.h"

#include <nvjpeg.h>

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "data/cuda/pipeline_state.h"

namespace ringpilot::data::cuda {

bool HasHardwareJpegDecoder(int device) {
  if (cudaSetDevice(device) != cudaSuccess) return false;
  nvjpegHandle_t handle = nullptr;
  if (nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, 0, &handle) !=
      NVJPEG_STATUS_SUCCESS) {
    return false;
  }
  nvjpegDestroy(handle);
  return true;
}

ImagePipeline::ImagePipeline(const ImageSource& source, const ImagePipelineOptions& options,
                             BadSampleLog& bad)
    : source_(source), options_(options), bad_(bad) {
  if (options_.batch < 1 || options_.out_height < 1 || options_.out_width < 1 ||
      options_.prefetch < 1 || options_.threads < 1) {
    throw std::invalid_argument(
        "ImagePipeline: batch, output size, prefetch, threads must be >= 1");
  }
  if (options_.share_threads < 0 || options_.share_nice < 0 || options_.share_nice > 19) {
    throw std::invalid_argument("ImagePipeline: share_threads must be >= 0, share_nice in [0, 19]");
  }
  if (!(options_.host_share >= 0 && options_.host_share <= 1)) {
    throw std::invalid_argument("ImagePipeline: host_share " + std::to_string(options_.host_share) +
                                " is outside [0, 1]");
  }
  PIPELINE_CUDA(cudaSetDevice(options_.device));
  decoder_ = std::make_unique<Decoder>(options_.device);
  Decoder& d = *decoder_;
  // The lowest priority: the step's kernels go first, and the batch's one kernel fills the
  // gaps between them (the decode itself runs on the JPEG engines).
  int least_priority = 0, greatest_priority = 0;
  PIPELINE_CUDA(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority));
  const int priority = options_.high_priority ? greatest_priority : least_priority;
  PIPELINE_CUDA(cudaStreamCreateWithPriority(&d.stream, cudaStreamNonBlocking, priority));
  for (cudaEvent_t& e : d.marks) PIPELINE_CUDA(cudaEventCreate(&e));
  PIPELINE_CUDA(cudaEventCreateWithFlags(&d.arena_ready, cudaEventDisableTiming));
  nvjpegDevAllocatorV2_t device_allocator = NvjpegDeviceAllocator(&d.device_pool);
  nvjpegPinnedAllocatorV2_t pinned_allocator = NvjpegPinnedAllocator(&d.pinned_cache);
  // The hardware engines where the GPU has them; nvJPEG answers NVJPEG_STATUS_ARCH_MISMATCH
  // (or "not supported") elsewhere, and the GPU backend takes over.
  nvjpegStatus_t created = NVJPEG_STATUS_ARCH_MISMATCH;
  if (options_.hardware) {
    created = nvjpegCreateExV2(NVJPEG_BACKEND_HARDWARE, &device_allocator, &pinned_allocator, 0,
                               &d.handle);
  }
  if (created == NVJPEG_STATUS_SUCCESS) {
    backend_name_ = "hardware";
  } else {
    PIPELINE_NVJPEG(nvjpegCreateExV2(NVJPEG_BACKEND_GPU_HYBRID, &device_allocator,
                                     &pinned_allocator, 0, &d.handle));
    backend_name_ = "gpu";
  }
  // The decoder's native planar YCbCr (no conversion kernel per image), else planar RGB.
  d.batch = std::make_unique<BatchedJpegDecoder>(d.handle, NVJPEG_OUTPUT_YUV, options_.batch,
                                                 options_.threads, priority);
  d.batch_format = d.batch->format();
  batch_output_name_ = d.batch_format == NVJPEG_OUTPUT_YUV ? "ycbcr" : "rgb";
  d.streams.resize(options_.threads);
  for (nvjpegJpegStream_t& s : d.streams) PIPELINE_NVJPEG(nvjpegJpegStreamCreate(d.handle, &s));

  PIPELINE_NVJPEG(nvjpegCreateExV2(NVJPEG_BACKEND_DEFAULT, &device_allocator, &pinned_allocator, 0,
                                   &d.odd_handle));
  PIPELINE_NVJPEG(nvjpegDecoderCreate(d.odd_handle, NVJPEG_BACKEND_HYBRID, &d.odd_decoder));
  for (int t = 0; t < options_.threads; ++t) {
    d.odd.push_back(std::make_unique<OddJpegDecoder>(d.odd_handle, d.odd_decoder, device_allocator,
                                                     pinned_allocator, priority));
  }

  d.samples.resize(options_.batch);
  d.share_count = static_cast<int>(std::lround(options_.host_share * options_.batch));
  d.share_options.batch = options_.batch;
  d.share_options.out_height = options_.out_height;
  d.share_options.out_width = options_.out_width;
  d.share_options.transform = options_.train ? ImageTransform::kTrain : ImageTransform::kEval;
  d.share_options.seed = options_.seed;
  const int share_threads = options_.share_threads > 0 ? options_.share_threads : options_.threads;
  if (d.share_count > 0) d.share_scratch.resize(share_threads);
  PIPELINE_CUDA(d.pinned_cache.Allocate(reinterpret_cast<void**>(&d.host_jobs),
                                        sizeof(ResampleJob) * options_.batch));
  PIPELINE_CUDA(d.pinned_cache.Allocate(reinterpret_cast<void**>(&d.host_labels),
                                        sizeof(int64_t) * options_.batch));
  PIPELINE_CUDA(d.device_pool.Allocate(reinterpret_cast<void**>(&d.device_jobs),
                                       sizeof(ResampleJob) * options_.batch, d.stream));
  const size_t pixels =
      static_cast<size_t>(options_.batch) * 3 * options_.out_height * options_.out_width;
  for (int i = 0; i < options_.prefetch; ++i) {
    auto slot = std::make_unique<Slot>();
    PIPELINE_CUDA(cudaMalloc(&slot->pixels, pixels));
    PIPELINE_CUDA(cudaMalloc(&slot->labels, sizeof(int64_t) * options_.batch));
    PIPELINE_CUDA(cudaEventCreateWithFlags(&slot->ready, cudaEventDisableTiming));
    PIPELINE_CUDA(cudaEventCreateWithFlags(&slot->consumed, cudaEventDisableTiming));
    slots_.push_back(std::move(slot));
  }
  PIPELINE_CUDA(cudaStreamSynchronize(d.stream));
  d.pool = std::make_unique<WorkerPool>(options_.threads);
  if (d.share_count > 0) {
    d.share_pool = std::make_unique<WorkerPool>(share_threads, options_.share_nice);
  }
  thread_ = std::thread([this] { Loop(); });
}

ImagePipeline::~ImagePipeline() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
  decoder_.reset();
  for (auto& slot : slots_) {
    cudaEventSynchronize(slot->consumed);
    cudaFree(slot->pixels);
    cudaFree(slot->labels);
    cudaEventDestroy(slot->ready);
    cudaEventDestroy(slot->consumed);
  }
}

void ImagePipeline::Enqueue(BatchRequest request) {
  if (static_cast<int>(request.indices.size()) != options_.batch) {
    throw std::invalid_argument("ImagePipeline::Enqueue: batch of " +
                                std::to_string(request.indices.size()) + " samples, expected " +
                                std::to_string(options_.batch));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    requests_.push_back(std::move(request));
  }
  changed_.notify_all();
}

double ImagePipeline::WaitNext() {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return error_ || made_ > taken_; });
  if (made_ <= taken_ && error_) std::rethrow_exception(error_);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double ImagePipeline::CopyNext(uint8_t* pixels, int64_t* labels, cudaStream_t stream) {
  const double waited = WaitNext();
  Slot* slot;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    slot = slots_[taken_ % options_.prefetch].get();
  }
  // Hot path: enqueue only. A failure here is a broken device; the training step's own
  // checks report it on the same stream.
  const size_t bytes =
      static_cast<size_t>(options_.batch) * 3 * options_.out_height * options_.out_width;
  cudaStreamWaitEvent(stream, slot->ready, 0);
  cudaMemcpyAsync(pixels, slot->pixels, bytes, cudaMemcpyDeviceToDevice, stream);
  cudaMemcpyAsync(labels, slot->labels, sizeof(int64_t) * options_.batch, cudaMemcpyDeviceToDevice,
                  stream);
  cudaEventRecord(slot->consumed, stream);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    slot->consumed_pending = true;
    ++taken_;
    --counters_.ready_batches;
  }
  changed_.notify_all();
  return waited;
}

ImagePipelineCounters ImagePipeline::counters() const {
  ImagePipelineCounters c;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    c = counters_;
  }
  c.pinned_allocations =
      decoder_->pinned_cache.system_allocations() + decoder_->bitstreams.system_allocations();
  c.device_pool_bytes = static_cast<int64_t>(decoder_->device_pool.reserved_bytes());
  return c;
}

void ImagePipeline::Loop() {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  try {
    PIPELINE_CUDA(cudaSetDevice(options_.device));
    for (;;) {
      BatchRequest request;
      Slot* slot;
      bool slot_in_use;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        // A free slot: at most `prefetch` batches made and not taken.
        changed_.wait(lock, [this] {
          return stopping_ || (!requests_.empty() && made_ - taken_ < options_.prefetch);
        });
        if (stopping_) return;
        request = std::move(requests_.front());
        requests_.pop_front();
        slot = slots_[made_ % options_.prefetch].get();
        slot_in_use = slot->consumed_pending;
      }
      const auto t0 = std::chrono::steady_clock::now();
      MakeBatch(request, *slot, slot_in_use);
      const double busy =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++made_;
        ++counters_.ready_batches;
        counters_.busy_seconds += busy;
      }
      changed_.notify_all();
    }
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
    }
    changed_.notify_all();
  }
}

}  // namespace ringpilot::data::cuda
