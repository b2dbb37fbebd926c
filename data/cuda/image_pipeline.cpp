#include "data/cuda/image_pipeline.h"

#include <nvjpeg.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <utility>

#include "data/cifar.h"
#include "data/cuda/resample_kernels.h"
#include "data/image_decode.h"
#include "data/image_transform.h"

namespace ringpilot::data::cuda {
namespace {

[[noreturn]] void ThrowCall(const char* call, const std::string& why, const char* file, int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call +
                           " failed: " + why);
}

#define PIPELINE_CUDA(call)                                                              \
  do {                                                                                   \
    const cudaError_t e_ = (call);                                                       \
    if (e_ != cudaSuccess) ThrowCall(#call, cudaGetErrorString(e_), __FILE__, __LINE__); \
  } while (0)

#define PIPELINE_NVJPEG(call)                                                              \
  do {                                                                                     \
    const nvjpegStatus_t s_ = (call);                                                      \
    if (s_ != NVJPEG_STATUS_SUCCESS) {                                                     \
      ThrowCall(#call, "nvjpegStatus_t " + std::to_string(static_cast<int>(s_)), __FILE__, \
                __LINE__);                                                                 \
    }                                                                                      \
  } while (0)

constexpr size_t kAlign = 256;
size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// A truncated JPEG has no end-of-image marker. nvJPEG's engines decode what they get
// without complaint, so such files go to the host decoder, which reports them.
bool EndsWithEndOfImage(const std::vector<uint8_t>& bytes) {
  size_t n = bytes.size();
  while (n > 2 && bytes[n - 1] == 0) --n;  // some writers pad after the marker
  return n >= 4 && bytes[n - 2] == 0xFF && bytes[n - 1] == 0xD9;
}

// A fixed set of threads that run one function over [0, n) and return when all are done.
// The pipeline thread is the only caller.
class WorkerPool {
 public:
  explicit WorkerPool(int threads) {
    for (int t = 0; t < threads; ++t) workers_.emplace_back([this, t] { Work(t); });
  }
  ~WorkerPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& w : workers_) w.join();
  }
  int size() const { return static_cast<int>(workers_.size()); }

  // fn(thread, item) for every item; returns after all ran.
  void Run(int n, const std::function<void(int, int)>& fn) {
    std::unique_lock<std::mutex> lock(mutex_);
    fn_ = &fn;
    n_ = n;
    next_.store(0);
    running_ = static_cast<int>(workers_.size());
    ++generation_;
    wake_.notify_all();
    done_.wait(lock, [this] { return running_ == 0; });
    fn_ = nullptr;
  }

 private:
  void Work(int thread) {
    // Graph capture on the training thread must not see this thread's CUDA calls.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int, int)>* fn;
      int n;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        fn = fn_;
        n = n_;
      }
      for (int i = next_.fetch_add(1); i < n; i = next_.fetch_add(1)) (*fn)(thread, i);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--running_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int, int)>* fn_ = nullptr;
  int n_ = 0;
  std::atomic<int> next_{0};
  int running_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
};

// Pinned host memory that grows (rarely: the first batches, or a larger image).
struct PinnedBuffer {
  uint8_t* data = nullptr;
  size_t capacity = 0;
  ~PinnedBuffer() {
    if (data) cudaFreeHost(data);
  }
  void Reserve(size_t bytes) {
    if (bytes <= capacity) return;
    if (data) PIPELINE_CUDA(cudaFreeHost(data));
    data = nullptr;
    capacity = 0;
    PIPELINE_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&data), bytes, cudaHostAllocDefault));
    capacity = bytes;
  }
};

enum class Route { kDevice, kHost };

}  // namespace

// What the workers find out about one sample of the batch.
struct ImagePipeline::Sample {
  int64_t index = 0;
  int64_t label = 0;
  int width = 0;
  int height = 0;
  Route route = Route::kDevice;
  bool black = false;               // no usable sample within kMaxSubstituteTries
  std::vector<BadSample> failures;  // samples tried for this entry that were bad
  std::vector<uint8_t> bytes;
  DecodedImage decoded;  // Route::kHost
};

struct ImagePipeline::Slot {
  uint8_t* pixels = nullptr;  // device [batch,3,H,W]
  int64_t* labels = nullptr;  // device [batch]
  cudaEvent_t ready = nullptr;
  cudaEvent_t consumed = nullptr;
  bool consumed_pending = false;  // a CopyNext copy from this slot was enqueued
};

struct ImagePipeline::Decoder {
  nvjpegHandle_t handle = nullptr;
  nvjpegJpegState_t state = nullptr;
  std::vector<nvjpegJpegStream_t> streams;  // one per worker, for header parsing
  int initialized_batch = -1;
  cudaStream_t stream = nullptr;
  // Marks around the batch's GPU work, read back once the batch is done (the pipeline
  // thread waits for it anyway): decode start, resample start, end.
  cudaEvent_t marks[3] = {nullptr, nullptr, nullptr};
  std::unique_ptr<WorkerPool> pool;
  std::vector<Sample> samples;
  // Device arena of decoded images, grown stream-ordered (no device-wide synchronisation).
  uint8_t* arena = nullptr;
  size_t arena_capacity = 0;
  ResampleJob* device_jobs = nullptr;
  PinnedBuffer host_jobs;
  PinnedBuffer host_labels;
  PinnedBuffer staging;  // host-decoded images on their way to the arena
  std::vector<const unsigned char*> bitstreams;
  std::vector<size_t> lengths;
  std::vector<nvjpegImage_t> outputs;
  std::vector<int> device_samples;

  ~Decoder() {
    if (stream) cudaStreamSynchronize(stream);
    if (arena) cudaFree(arena);
    if (device_jobs) cudaFree(device_jobs);
    for (nvjpegJpegStream_t s : streams) nvjpegJpegStreamDestroy(s);
    for (cudaEvent_t e : marks) {
      if (e) cudaEventDestroy(e);
    }
    if (state) nvjpegJpegStateDestroy(state);
    if (handle) nvjpegDestroy(handle);
    if (stream) cudaStreamDestroy(stream);
  }
};

ImagePipeline::ImagePipeline(const ImageSource& source, const ImagePipelineOptions& options,
                             BadSampleLog& bad)
    : source_(source), options_(options), bad_(bad) {
  if (options_.batch < 1 || options_.out_height < 1 || options_.out_width < 1 ||
      options_.prefetch < 1 || options_.threads < 1) {
    throw std::invalid_argument(
        "ImagePipeline: batch, output size, prefetch, threads must be >= 1");
  }
  PIPELINE_CUDA(cudaSetDevice(options_.device));
  decoder_ = std::make_unique<Decoder>();
  Decoder& d = *decoder_;
  // The highest priority: the decode's own kernels (nvJPEG's colour conversion, the crop
  // kernel) are small, and at the training stream's priority they would queue behind a
  // whole graphed step's kernels, starving the next batch (H100, ResNet-50: 4.7k img/s
  // instead of the step's 5.3k).
  int least_priority = 0, greatest_priority = 0;
  PIPELINE_CUDA(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority));
  PIPELINE_CUDA(cudaStreamCreateWithPriority(&d.stream, cudaStreamNonBlocking, greatest_priority));
  for (cudaEvent_t& e : d.marks) PIPELINE_CUDA(cudaEventCreate(&e));
  // The hardware engines where the GPU has them; nvJPEG answers NVJPEG_STATUS_ARCH_MISMATCH
  // (or "not supported") elsewhere, and the GPU backend takes over.
  nvjpegStatus_t created = NVJPEG_STATUS_ARCH_MISMATCH;
  if (options_.hardware) {
    created = nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, 0, &d.handle);
  }
  if (created == NVJPEG_STATUS_SUCCESS) {
    backend_name_ = "hardware";
  } else {
    PIPELINE_NVJPEG(nvjpegCreateEx(NVJPEG_BACKEND_GPU_HYBRID, nullptr, nullptr, 0, &d.handle));
    backend_name_ = "gpu";
  }
  PIPELINE_NVJPEG(nvjpegJpegStateCreate(d.handle, &d.state));
  d.streams.resize(options_.threads);
  for (nvjpegJpegStream_t& s : d.streams) PIPELINE_NVJPEG(nvjpegJpegStreamCreate(d.handle, &s));
  d.samples.resize(options_.batch);
  d.host_jobs.Reserve(sizeof(ResampleJob) * options_.batch);
  d.host_labels.Reserve(sizeof(int64_t) * options_.batch);
  PIPELINE_CUDA(cudaMalloc(&d.device_jobs, sizeof(ResampleJob) * options_.batch));
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
  d.pool = std::make_unique<WorkerPool>(options_.threads);
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
  std::lock_guard<std::mutex> lock(mutex_);
  return counters_;
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

// Loads the entry whose sample is `wanted` into `s`: the first of wanted, wanted + 1, ...
// (wrapping, data/bad_samples.h's rule) that is usable. A JPEG that nvJPEG takes stays
// encoded (Route::kDevice, unless `host_only`); anything else is decoded here.
void ImagePipeline::ResolveSample(int thread, int64_t wanted, bool host_only, Sample& s) {
  Decoder& d = *decoder_;
  s.black = false;
  const int64_t index =
      LoadOrSubstitute(wanted, source_.size(), &s.failures, [&](int64_t i, std::string* why) {
        const int32_t label = UsableLabel(source_, i, why);
        if (label < 0 || !source_.Read(i, &s.bytes, why)) return false;
        s.label = label;
        const ImageFormat format = SniffImageFormat(s.bytes.data(), s.bytes.size());
        unsigned w = 0, h = 0;
        int unsupported = 1;
        nvjpegJpegStream_t stream = d.streams[thread];
        if (!host_only && format == ImageFormat::kJpeg && EndsWithEndOfImage(s.bytes) &&
            nvjpegJpegStreamParseHeader(d.handle, s.bytes.data(), s.bytes.size(), stream) ==
                NVJPEG_STATUS_SUCCESS &&
            nvjpegDecodeBatchedSupported(d.handle, stream, &unsupported) == NVJPEG_STATUS_SUCCESS &&
            unsupported == 0 &&
            nvjpegJpegStreamGetFrameDimensions(stream, &w, &h) == NVJPEG_STATUS_SUCCESS && w > 0 &&
            h > 0 && static_cast<int64_t>(w) * h <= kMaxImagePixels) {
          s.route = Route::kDevice;
          s.width = static_cast<int>(w);
          s.height = static_cast<int>(h);
          return true;
        }
        if (!DecodeImage(s.bytes.data(), s.bytes.size(), &s.decoded, why)) return false;
        s.route = Route::kHost;
        s.width = s.decoded.width;
        s.height = s.decoded.height;
        return true;
      });
  if (index >= 0) {
    s.index = index;
    return;
  }
  // A run of bad samples: a black image of class 0 keeps the batch full.
  s.black = true;
  s.route = Route::kHost;
  s.index = wanted;
  s.label = 0;
  s.width = 0;
  s.height = 0;
}

void ImagePipeline::MakeBatch(const BatchRequest& request, Slot& slot, bool slot_in_use) {
  Decoder& d = *decoder_;
  const int n = options_.batch;

  // 1. Read, sniff and parse every sample on the workers; what nvJPEG cannot take is
  //    decoded there on the host; bad samples are replaced by the handler's choice.
  std::mutex error_mutex;
  std::exception_ptr worker_error;
  for (Sample& s : d.samples) s.failures.clear();
  auto resolve_all = [&](const std::vector<int>* subset, bool host_only) {
    const int count = subset ? static_cast<int>(subset->size()) : n;
    d.pool->Run(count, [&](int thread, int k) {
      const int i = subset ? (*subset)[k] : k;
      try {
        ResolveSample(thread, subset ? d.samples[i].index : request.indices[i], host_only,
                      d.samples[i]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!worker_error) worker_error = std::current_exception();
      }
    });
    if (worker_error) std::rethrow_exception(worker_error);
  };
  resolve_all(nullptr, /*host_only=*/false);

  auto* jobs = reinterpret_cast<ResampleJob*>(d.host_jobs.data);
  auto* labels = reinterpret_cast<int64_t*>(d.host_labels.data);
  int on_device = 0;
  // The slot is written last, but waiting for CopyNext's copy out of it first keeps the
  // marks free of that wait (it is normally long done).
  if (slot_in_use) PIPELINE_CUDA(cudaStreamWaitEvent(d.stream, slot.consumed, 0));
  PIPELINE_CUDA(cudaEventRecord(d.marks[0], d.stream));
  for (bool decoded = false; !decoded;) {
    // 2. Arena layout: every decoded image at an aligned offset.
    size_t arena_bytes = 0;
    size_t staging_bytes = 0;
    for (int i = 0; i < n; ++i) {
      const Sample& s = d.samples[i];
      const CropBox box =
          s.black          ? CropBox{}
          : options_.train ? TrainCropBox(s.width, s.height, options_.seed, request.epoch, s.index)
                           : EvalCropBox(s.width, s.height);
      jobs[i] = ResampleJob{arena_bytes, s.width,   s.height,   box.x,
                            box.y,       box.width, box.height, box.flip ? 1 : 0};
      labels[i] = s.label;
      const size_t image_bytes = static_cast<size_t>(s.width) * s.height * 3;
      arena_bytes += AlignUp(image_bytes);
      if (s.route == Route::kHost) staging_bytes += image_bytes;
    }
    if (arena_bytes > d.arena_capacity) {
      if (d.arena) PIPELINE_CUDA(cudaFreeAsync(d.arena, d.stream));
      d.arena = nullptr;
      const size_t capacity = arena_bytes + arena_bytes / 4;  // room for larger batches
      PIPELINE_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&d.arena), capacity, d.stream));
      d.arena_capacity = capacity;
    }

    // 3. Host-decoded images go up through pinned staging.
    if (staging_bytes > 0) {
      d.staging.Reserve(staging_bytes);
      size_t at = 0;
      for (int i = 0; i < n; ++i) {
        const Sample& s = d.samples[i];
        if (s.route != Route::kHost || s.black) continue;
        const size_t image_bytes = static_cast<size_t>(s.width) * s.height * 3;
        std::memcpy(d.staging.data + at, s.decoded.rgb.data(), image_bytes);
        PIPELINE_CUDA(cudaMemcpyAsync(d.arena + jobs[i].source_offset, d.staging.data + at,
                                      image_bytes, cudaMemcpyHostToDevice, d.stream));
        at += image_bytes;
      }
    }

    // 4. The rest in one nvJPEG batch.
    d.bitstreams.clear();
    d.lengths.clear();
    d.outputs.clear();
    d.device_samples.clear();
    for (int i = 0; i < n; ++i) {
      const Sample& s = d.samples[i];
      if (s.route != Route::kDevice) continue;
      d.bitstreams.push_back(s.bytes.data());
      d.lengths.push_back(s.bytes.size());
      nvjpegImage_t out{};
      out.channel[0] = d.arena + jobs[i].source_offset;
      out.pitch[0] = static_cast<size_t>(s.width) * 3;
      d.outputs.push_back(out);
      d.device_samples.push_back(i);
    }
    on_device = static_cast<int>(d.device_samples.size());
    if (on_device > 0) {
      if (d.initialized_batch != on_device) {
        PIPELINE_NVJPEG(nvjpegDecodeBatchedInitialize(d.handle, d.state, on_device, d.pool->size(),
                                                      NVJPEG_OUTPUT_RGBI));
        d.initialized_batch = on_device;
      }
      const nvjpegStatus_t status = nvjpegDecodeBatched(
          d.handle, d.state, d.bitstreams.data(), d.lengths.data(), d.outputs.data(), d.stream);
      if (status != NVJPEG_STATUS_SUCCESS) {
        // nvJPEG does not say which image it choked on: this batch's share is decoded on the
        // host instead (bad ones are reported and replaced there), and laid out again.
        d.initialized_batch = -1;
        PIPELINE_CUDA(cudaStreamSynchronize(d.stream));  // staging is rewritten
        resolve_all(&d.device_samples, /*host_only=*/true);
        continue;
      }
    }
    decoded = true;
  }

  std::vector<BadSample> failures;
  int64_t replaced = 0;
  for (const Sample& s : d.samples) {
    if (s.failures.empty()) continue;
    ++replaced;
    failures.insert(failures.end(), s.failures.begin(), s.failures.end());
  }
  if (!bad_.Record(n, replaced, failures)) throw DataError(bad_.fatal());

  // 5. Crop, resize, flip into the slot.
  PIPELINE_CUDA(cudaEventRecord(d.marks[1], d.stream));
  PIPELINE_CUDA(cudaMemcpyAsync(d.device_jobs, jobs, sizeof(ResampleJob) * n,
                                cudaMemcpyHostToDevice, d.stream));
  PIPELINE_CUDA(
      cudaMemcpyAsync(slot.labels, labels, sizeof(int64_t) * n, cudaMemcpyHostToDevice, d.stream));
  PIPELINE_CUDA(LaunchResampleCrops(d.arena, d.device_jobs, n, options_.out_height,
                                    options_.out_width, slot.pixels, d.stream));
  PIPELINE_CUDA(cudaEventRecord(slot.ready, d.stream));
  PIPELINE_CUDA(cudaEventRecord(d.marks[2], d.stream));
  // The host buffers (bitstreams, jobs, staging) are reused by the next batch: wait here,
  // on the pipeline's thread, never on the training stream.
  PIPELINE_CUDA(cudaStreamSynchronize(d.stream));

  float decode_ms = 0, resample_ms = 0;
  PIPELINE_CUDA(cudaEventElapsedTime(&decode_ms, d.marks[0], d.marks[1]));
  PIPELINE_CUDA(cudaEventElapsedTime(&resample_ms, d.marks[1], d.marks[2]));
  std::lock_guard<std::mutex> lock(mutex_);
  counters_.decode_gpu_seconds += decode_ms * 1e-3;
  counters_.resample_gpu_seconds += resample_ms * 1e-3;
  counters_.images += n;
  counters_.hardware_images += on_device;
  counters_.host_images += n - on_device;
}

}  // namespace ringpilot::data::cuda
