// One batch of the GPU image pipeline (ImagePipeline::MakeBatch): samples read into pinned
// memory on the workers, JPEGs decoded by nvJPEG (the batch on the engines, odd ones on the
// workers' decoupled decoders, the rest on the host), then one kernel crops them into the
// slot.
#include <nvjpeg.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "data/cifar.h"
#include "data/cuda/image_pipeline.h"
#include "data/cuda/pipeline_state.h"
#include "data/image_transform.h"
#include "data/jpeg_frame.h"

namespace ringpilot::data::cuda {
namespace {

constexpr size_t kAlign = 256;
size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// A truncated JPEG has no end-of-image marker. nvJPEG's engines decode what they get
// without complaint, so such files go to the host decoder, which reports them.
bool EndsWithEndOfImage(const uint8_t* bytes, size_t n) {
  while (n > 2 && bytes[n - 1] == 0) --n;  // some writers pad after the marker
  return n >= 4 && bytes[n - 2] == 0xFF && bytes[n - 1] == 0xD9;
}

// Sample bytes land in the batch's pinned arena; a heap buffer only where pinned memory
// ran out (its copy to the device is then a synchronous, pageable one).
class SampleSink : public ByteSink {
 public:
  SampleSink(PinnedArena& arena, std::vector<uint8_t>& heap) : arena_(arena), heap_(heap) {}
  uint8_t* Room(size_t size) override {
    size_ = size;
    data_ = arena_.Take(size);
    if (data_ == nullptr) {
      heap_.resize(size);
      data_ = heap_.data();
    }
    return data_;
  }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  PinnedArena& arena_;
  std::vector<uint8_t>& heap_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

// Loads the entry whose sample is `wanted` into `s`: the first of wanted, wanted + 1, ...
// (wrapping, data/bad_samples.h's rule) that is usable. A JPEG stays encoded for nvJPEG
// (kBatch where the batch takes it, else kOdd), unless `host_only`; anything else is
// decoded here.
void ImagePipeline::ResolveSample(int thread, int64_t wanted, bool host_only, Sample& s) {
  Decoder& d = *decoder_;
  s.black = false;
  s.retry = false;
  const int64_t index =
      LoadOrSubstitute(wanted, source_.size(), &s.failures, [&](int64_t i, std::string* why) {
        const int32_t label = UsableLabel(source_, i, why);
        if (label < 0) return false;
        SampleSink sink(d.bitstreams, s.heap_bytes);
        if (!source_.ReadInto(i, sink, why)) return false;
        s.bytes = sink.data();
        s.length = sink.size();
        s.label = label;
        const ImageFormat format = SniffImageFormat(s.bytes, s.length);
        unsigned w = 0, h = 0, cw = 0, ch = 0;
        nvjpegJpegStream_t stream = d.streams[thread];
        if (!host_only && format == ImageFormat::kJpeg && EndsWithEndOfImage(s.bytes, s.length) &&
            nvjpegJpegStreamParseHeader(d.handle, s.bytes, s.length, stream) ==
                NVJPEG_STATUS_SUCCESS &&
            nvjpegJpegStreamGetFrameDimensions(stream, &w, &h) == NVJPEG_STATUS_SUCCESS && w > 0 &&
            h > 0 && static_cast<int64_t>(w) * h <= kMaxImagePixels) {
          JpegShape& shape = s.shape;
          shape = JpegShape{};
          shape.width = static_cast<int>(w);
          shape.height = static_cast<int>(h);
          nvjpegJpegStreamGetChromaSubsampling(stream, &shape.css);
          // One component is greyscale whatever its sampling factors say. Some encoders write
          // 2x2 on a lone Y; nvJPEG reports that as greyscale too and its engines decode it
          // wrongly (seen on an H200: mean error 34 levels), so such files go the odd way.
          JpegFrame frame;
          const bool sampled_grey = ReadJpegFrame(s.bytes, s.length, &frame) &&
                                    frame.components == 1 &&
                                    (frame.sampling_h[0] != 1 || frame.sampling_v[0] != 1);
          if (frame.components == 1) shape.css = NVJPEG_CSS_GRAY;
          if (shape.css != NVJPEG_CSS_GRAY && nvjpegJpegStreamGetComponentDimensions(
                                                  stream, 1, &cw, &ch) == NVJPEG_STATUS_SUCCESS) {
            shape.chroma_width = static_cast<int>(cw);
            shape.chroma_height = static_cast<int>(ch);
          }
          // The batch writes one format for all: a JPEG it would have to write otherwise
          // goes the odd way too.
          int unsupported = 1;
          const bool batch_takes =
              nvjpegDecodeBatchedSupported(d.handle, stream, &unsupported) ==
                  NVJPEG_STATUS_SUCCESS &&
              unsupported == 0 && !sampled_grey &&
              (d.batch_format != NVJPEG_OUTPUT_YUV || OutputFormatFor(shape) == NVJPEG_OUTPUT_YUV);
          if (batch_takes || options_.odd_on_gpu) {
            s.route = batch_takes ? Route::kBatch : Route::kOdd;
            s.width = shape.width;
            s.height = shape.height;
            return true;
          }
        }
        if (!DecodeImage(s.bytes, s.length, &s.decoded, why)) return false;
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

// The host share's sample `i` of the batch, made as the CPU loader makes it (the same
// substitute rule for bad samples) into `pixels` (pinned, 3 x out_height x out_width).
void ImagePipeline::MakeHostShareSample(int thread, const BatchRequest& request, int i,
                                        uint8_t* pixels) {
  Decoder& d = *decoder_;
  Sample& s = d.samples[i];
  CropScratch& scratch = d.share_scratch[thread];
  int32_t label = 0;
  const int64_t index = LoadOrSubstitute(
      request.indices[i], source_.size(), &s.failures, [&](int64_t k, std::string* why) {
        label = LoadCroppedSample(source_, k, request.epoch, d.share_options, scratch, pixels, why);
        return label >= 0;
      });
  if (index < 0) {  // a run of bad samples: a black image of class 0 keeps the batch full
    std::memset(pixels, 0,
                static_cast<size_t>(3) * d.share_options.out_height * d.share_options.out_width);
    s.black = true;
    s.index = request.indices[i];
    s.label = 0;
    return;
  }
  s.index = index;
  s.label = label;
}

void ImagePipeline::MakeBatch(const BatchRequest& request, Slot& slot, bool slot_in_use) {
  Decoder& d = *decoder_;
  const int n = options_.batch;

  // 1. Read into pinned memory, sniff and parse every sample on the workers; what no nvJPEG
  //    path takes is decoded there on the host; bad samples are replaced by the handler's
  //    choice.
  std::mutex error_mutex;
  std::exception_ptr worker_error;
  auto on_workers = [&](const std::vector<int>* subset, const std::function<void(int, int)>& fn) {
    const int count = subset ? static_cast<int>(subset->size()) : n;
    d.pool->Run(count, [&](int thread, int k) {
      try {
        fn(thread, subset ? (*subset)[k] : k);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!worker_error) worker_error = std::current_exception();
      }
    });
    if (worker_error) std::rethrow_exception(worker_error);
  };
  d.bitstreams.Reset();  // the last batch's device work is done (it ended synchronised)
  for (Sample& s : d.samples) {
    s.failures.clear();
    s.heap_bytes.clear();
  }
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  double read_s = 0, batch_call_s = 0, odd_s = 0, share_s = 0;
  // The host share (the last share_count samples) is read and made on its own threads in
  // step 4, beside nvJPEG; the rest is read and parsed here.
  const int first_shared = n - d.share_count;
  auto t = Clock::now();
  on_workers(nullptr, [&](int thread, int i) {
    Sample& s = d.samples[i];
    if (i < first_shared) {
      ResolveSample(thread, request.indices[i], /*host_only=*/false, s);
      return;
    }
    s.black = false;
    s.retry = false;
    s.route = Route::kHostShare;
    s.width = 0;
    s.height = 0;
  });
  read_s += seconds_since(t);
  const size_t out_bytes = static_cast<size_t>(3) * options_.out_height * options_.out_width;
  uint8_t* share_pixels = nullptr;  // pinned [share_count,3,H,W], freed in stream order
  if (d.share_count > 0) {
    PIPELINE_CUDA(d.pinned_cache.Allocate(reinterpret_cast<void**>(&share_pixels),
                                          out_bytes * d.share_count));
  }

  ResampleJob* jobs = d.host_jobs;
  int batched = 0, odd = 0;
  // The slot is written last, but waiting for CopyNext's copy out of it first keeps the
  // marks free of that wait (it is normally long done).
  if (slot_in_use) PIPELINE_CUDA(cudaStreamWaitEvent(d.stream, slot.consumed, 0));
  PIPELINE_CUDA(cudaEventRecord(d.marks[0], d.stream));
  bool first_pass = true;
  for (bool decoded = false; !decoded;) {
    // 2. Arena layout: every image gets room for 8-bit RGB at an aligned offset (any
    //    route's layout fits), so a route can change without moving the others.
    size_t arena_bytes = 0;
    size_t staging_bytes = 0;
    d.batch_samples.clear();
    d.odd_samples.clear();
    d.host_samples.clear();
    for (int i = 0; i < n; ++i) {
      const Sample& s = d.samples[i];
      ResampleJob& job = jobs[i];
      job = ResampleJob{};
      if (s.route == Route::kHostShare) {
        job.layout = SourceLayout::kWritten;
        continue;
      }
      const CropBox box =
          s.black          ? CropBox{}
          : options_.train ? TrainCropBox(s.width, s.height, options_.seed, request.epoch, s.index)
                           : EvalCropBox(s.width, s.height);
      job.plane_offset[0] = arena_bytes;
      job.pitch[0] = s.width * 3;
      job.layout = s.black ? SourceLayout::kNone : SourceLayout::kInterleavedRgb;
      job.width = s.width;
      job.height = s.height;
      job.box_x = box.x;
      job.box_y = box.y;
      job.box_width = box.width;
      job.box_height = box.height;
      job.flip = box.flip ? 1 : 0;
      const size_t image_bytes = static_cast<size_t>(s.width) * s.height * 3;
      arena_bytes += AlignUp(image_bytes);
      if (s.black) continue;
      if (s.route == Route::kBatch) d.batch_samples.push_back(i);
      if (s.route == Route::kOdd) d.odd_samples.push_back(i);
      if (s.route == Route::kHost) {
        d.host_samples.push_back(i);
        staging_bytes += image_bytes;
      }
    }
    if (arena_bytes > d.arena_capacity) {
      if (d.arena) PIPELINE_CUDA(d.device_pool.Free(d.arena, d.stream));
      d.arena = nullptr;
      const size_t capacity = arena_bytes + arena_bytes / 4;  // room for larger batches
      PIPELINE_CUDA(d.device_pool.Allocate(reinterpret_cast<void**>(&d.arena), capacity, d.stream));
      d.arena_capacity = capacity;
    }
    PIPELINE_CUDA(cudaEventRecord(d.arena_ready, d.stream));

    // 3. The batch: one nvJPEG call per chroma subsampling on the engines (bitstreams in
    //    pinned memory: their copies are asynchronous).
    d.batch->Clear();
    for (int i : d.batch_samples) {
      const Sample& s = d.samples[i];
      d.batch->Add(s.shape.css, s.bytes, s.length,
                   PlaceImage(d.arena, jobs[i].plane_offset[0], d.batch_format, s.shape, &jobs[i]),
                   int64_t{s.width} * s.height);
    }
    batched = static_cast<int>(d.batch_samples.size());
    std::atomic<bool> batch_failed{false};

    // 4. Meanwhile, JPEGs the batch refused, on the workers' own decoders; one nvJPEG cannot
    //    take either is decoded on the host, and one nobody can decode is replaced below.
    //    Work items -1, -2, ... are the batch's nvJPEG calls (one per subsampling), which
    //    workers make while the others decode (the hybrid decoder's Huffman runs here).
    //    The host share (first pass only) is made on its own threads meanwhile, at a lower
    //    priority where share_nice says so: the threads feeding nvJPEG go first.
    // Its own error slot: on_workers reads worker_error while these threads still run.
    std::mutex share_error_mutex;
    std::exception_ptr share_error;
    std::thread share_runner;
    if (first_pass && d.share_count > 0) {
      share_runner = std::thread([&] {
        const auto start = Clock::now();
        d.share_pool->Run(d.share_count, [&](int thread, int k) {
          try {
            MakeHostShareSample(thread, request, first_shared + k,
                                share_pixels + out_bytes * static_cast<size_t>(k));
          } catch (...) {
            std::lock_guard<std::mutex> lock(share_error_mutex);
            if (!share_error) share_error = std::current_exception();
          }
        });
        share_s = seconds_since(start);
      });
    }
    auto join_share = [&] {
      if (share_runner.joinable()) share_runner.join();
    };
    std::atomic<int> retries{0};
    std::vector<int> work;
    for (int g = 0; g < d.batch->groups(); ++g) work.push_back(-1 - g);
    work.insert(work.end(), d.odd_samples.begin(), d.odd_samples.end());
    first_pass = false;
    std::mutex call_mutex;
    t = Clock::now();
    try {
      on_workers(&work, [&](int thread, int i) {
        if (i < 0) {
          const auto call = Clock::now();
          if (!d.batch->DecodeGroup(-1 - i, d.arena_ready)) batch_failed = true;
          std::lock_guard<std::mutex> lock(call_mutex);
          batch_call_s += seconds_since(call);
          return;
        }
        Sample& s = d.samples[i];
        ResampleJob& job = jobs[i];
        if (d.odd[thread]->Decode(s.bytes, s.length, s.shape, d.arena, job.plane_offset[0],
                                  d.arena_ready, &job)) {
          return;
        }
        std::string why;
        if (DecodeImage(s.bytes, s.length, &s.decoded, &why) && s.decoded.width == s.width &&
            s.decoded.height == s.height) {
          s.route = Route::kHost;
          return;
        }
        s.retry = true;
        ++retries;
      });
    } catch (...) {
      join_share();  // its threads use this frame's state
      throw;
    }
    odd_s += seconds_since(t);
    join_share();
    if (share_error) std::rethrow_exception(share_error);
    PIPELINE_CUDA(d.batch->JoinInto(d.stream));
    odd = 0;
    for (int i : d.odd_samples) {
      if (d.samples[i].route == Route::kOdd) {
        ++odd;
      } else if (d.samples[i].route == Route::kHost) {
        d.host_samples.push_back(i);
        staging_bytes += static_cast<size_t>(d.samples[i].width) * d.samples[i].height * 3;
      }
    }

    // 5. Host-decoded images go up through pinned staging (from the cache: no allocation
    //    once warm; freed in stream order, so reuse waits for these copies).
    if (staging_bytes > 0) {
      uint8_t* staging = nullptr;
      PIPELINE_CUDA(d.pinned_cache.Allocate(reinterpret_cast<void**>(&staging), staging_bytes));
      size_t at = 0;
      for (int i : d.host_samples) {
        const Sample& s = d.samples[i];
        const size_t image_bytes = static_cast<size_t>(s.width) * s.height * 3;
        std::memcpy(staging + at, s.decoded.rgb.data(), image_bytes);
        PIPELINE_CUDA(cudaMemcpyAsync(d.arena + jobs[i].plane_offset[0], staging + at, image_bytes,
                                      cudaMemcpyHostToDevice, d.stream));
        jobs[i].layout = SourceLayout::kInterleavedRgb;
        jobs[i].pitch[0] = s.width * 3;
        at += image_bytes;
      }
      PIPELINE_CUDA(d.pinned_cache.Free(staging, d.stream));
    }

    if (!batch_failed && retries.load() == 0) {
      decoded = true;
      continue;
    }
    // nvJPEG does not say which image of a failed batch it choked on: that share is decoded
    // on the host instead (bad ones are reported and replaced there); odd images nobody
    // could decode are replaced. Then the batch is laid out again.
    PIPELINE_CUDA(cudaStreamSynchronize(d.stream));  // staging and the arena are rewritten
    std::vector<int> again;
    for (int i : d.odd_samples) {
      if (d.samples[i].retry) again.push_back(i);
    }
    if (batch_failed) {
      again.insert(again.end(), d.batch_samples.begin(), d.batch_samples.end());
    }
    on_workers(&again, [&](int thread, int i) {
      Sample& s = d.samples[i];
      const bool was_odd_failure = s.retry;
      // The sample that failed counts as bad; its substitute is looked for from the next.
      if (was_odd_failure) {
        s.failures.push_back(BadSample{s.index, "nvJPEG and the host decoder both failed"});
      }
      const int64_t wanted = was_odd_failure ? (s.index + 1) % source_.size() : s.index;
      ResolveSample(thread, wanted, /*host_only=*/true, s);
    });
  }

  std::vector<BadSample> failures;
  int64_t replaced = 0;
  for (const Sample& s : d.samples) {
    if (s.failures.empty()) continue;
    ++replaced;
    failures.insert(failures.end(), s.failures.begin(), s.failures.end());
  }
  if (!bad_.Record(n, replaced, failures)) throw DataError(bad_.fatal());

  // 6. Colour, crop, resize, flip into the slot: one kernel for the batch (it leaves the host
  //    share's rows alone: they are copied in whole).
  for (int i = 0; i < n; ++i) d.host_labels[i] = d.samples[i].label;
  if (d.share_count > 0) {
    PIPELINE_CUDA(cudaMemcpyAsync(slot.pixels + out_bytes * static_cast<size_t>(first_shared),
                                  share_pixels, out_bytes * d.share_count, cudaMemcpyHostToDevice,
                                  d.stream));
    PIPELINE_CUDA(d.pinned_cache.Free(share_pixels, d.stream));
  }
  PIPELINE_CUDA(cudaEventRecord(d.marks[1], d.stream));
  PIPELINE_CUDA(cudaMemcpyAsync(d.device_jobs, jobs, sizeof(ResampleJob) * n,
                                cudaMemcpyHostToDevice, d.stream));
  PIPELINE_CUDA(cudaMemcpyAsync(slot.labels, d.host_labels, sizeof(int64_t) * n,
                                cudaMemcpyHostToDevice, d.stream));
  PIPELINE_CUDA(LaunchResampleCrops(d.arena, d.device_jobs, n, options_.out_height,
                                    options_.out_width, slot.pixels, d.stream));
  PIPELINE_CUDA(cudaEventRecord(slot.ready, d.stream));
  PIPELINE_CUDA(cudaEventRecord(d.marks[2], d.stream));
  // The host buffers (bitstreams, jobs, labels) are reused by the next batch: wait here, on
  // the pipeline's thread, never on the training stream.
  t = Clock::now();
  PIPELINE_CUDA(cudaStreamSynchronize(d.stream));
  const double finish_s = seconds_since(t);

  float decode_ms = 0, resample_ms = 0;
  PIPELINE_CUDA(cudaEventElapsedTime(&decode_ms, d.marks[0], d.marks[1]));
  PIPELINE_CUDA(cudaEventElapsedTime(&resample_ms, d.marks[1], d.marks[2]));
  std::lock_guard<std::mutex> lock(mutex_);
  counters_.read_seconds += read_s;
  counters_.batch_call_seconds += batch_call_s;
  counters_.odd_seconds += odd_s;
  counters_.share_seconds += share_s;
  counters_.finish_seconds += finish_s;
  counters_.decode_gpu_seconds += decode_ms * 1e-3;
  counters_.resample_gpu_seconds += resample_ms * 1e-3;
  counters_.images += n;
  counters_.hardware_images += batched;
  counters_.odd_gpu_images += odd;
  counters_.host_images += n - batched - odd - d.share_count;
  counters_.host_share_images += d.share_count;
}

}  // namespace ringpilot::data::cuda
