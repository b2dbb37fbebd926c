// The GPU image pipeline alone (data/cuda/image_pipeline.h): decode + crop + resize + flip
// of an image folder (or shards: a .tar path, list or glob) into model-ready batches on one
// GPU, with no training step, as fast as it goes. Prints one JSON line: img_per_s, the
// nvJPEG backend and output, images decoded in nvJPEG's batch, by its decoupled decoder and
// on the host, the resample kernel's share, the pixels' agreement with the host decoder,
// and the allocations made after the warm-up (0 when the pipeline's memory is reused).
//
//   ringpilot-bench-image-pipeline ROOT|SHARDS [--batch 256] [--batches 60] [--warmup 5]
//       [--threads 8] [--prefetch 3] [--side 224] [--no-hardware] [--high-priority] [--odd-on-host]
//       [--host-share F] [--share-threads T] [--share-nice N]
//       [--contend none|sm|hbm|cpu:N|cpu-nice:N] [--host-wait auto|spin|yield|block]
//
// --contend runs a load beside the pipeline in this process (bench/gpu_contention.h): which
// of SM time, HBM bandwidth or host cores slows the decode beside a training step.
// --host-wait sets how the process's host threads (nvJPEG's included) wait for the GPU
// (cudaDeviceSchedule*). Ranks keep CUDA's auto: blocking or yielding changed nothing in
// training (bench/results/2026-11-30-nvidia-h200-host-wait.md).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/gpu_contention.h"
#include "data/bad_samples.h"
#include "data/cuda/image_pipeline.h"
#include "data/image_decode.h"
#include "data/image_source.h"
#include "data/image_transform.h"
#include "data/sampler.h"

namespace {

// The value after `name` (its first occurrence), or `fallback`.
const char* TextArg(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return fallback;
}

int Arg(int argc, char** argv, const char* name, int fallback) {
  const char* value = TextArg(argc, argv, name, nullptr);
  return value ? std::atoi(value) : fallback;
}

bool Flag(int argc, char** argv, const char* name) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return true;
  }
  return false;
}

// "baseline 500x375 3c 2x2,1x1,1x1" from a JPEG's frame header, for the report of images
// that disagree with the host decoder.
std::string JpegInfo(const std::vector<uint8_t>& b) {
  for (size_t i = 2; i + 9 < b.size();) {
    if (b[i] != 0xFF) return "no marker";
    const int marker = b[i + 1];
    const size_t length = (size_t{b[i + 2]} << 8) | b[i + 3];
    if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) {
      const int h = (b[i + 5] << 8) | b[i + 6], w = (b[i + 7] << 8) | b[i + 8], n = b[i + 9];
      std::string info = marker == 0xC2 ? "progressive" : marker == 0xC0 ? "baseline" : "sof";
      info += " " + std::to_string(w) + "x" + std::to_string(h) + " " + std::to_string(n) + "c";
      for (int c = 0; c < n && i + 12 + 3 * c < b.size(); ++c) {
        const int f = b[i + 11 + 3 * c];
        info += (c ? "," : " ") + std::to_string(f >> 4) + "x" + std::to_string(f & 15);
      }
      return info;
    }
    i += 2 + length;
  }
  return "no frame header";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ringpilot;
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr,
                 "usage: %s ROOT|SHARDS [--batch B] [--batches N] [--warmup W] [--threads T] "
                 "[--prefetch P] [--side S] [--no-hardware] [--high-priority] [--odd-on-host] "
                 "[--host-share F] [--share-threads T] [--share-nice N] "
                 "[--contend none|sm|hbm|cpu:N|cpu-nice:N] [--host-wait auto|spin|yield|block]\n",
                 argv[0]);
    return 2;
  }
  try {
    const std::string host_wait = TextArg(argc, argv, "--host-wait", "auto");
    const unsigned int wait_flag = host_wait == "spin"    ? cudaDeviceScheduleSpin
                                   : host_wait == "yield" ? cudaDeviceScheduleYield
                                   : host_wait == "block" ? cudaDeviceScheduleBlockingSync
                                                          : cudaDeviceScheduleAuto;
    if (wait_flag == cudaDeviceScheduleAuto && host_wait != "auto") {
      std::fprintf(stderr,
                   "ringpilot-bench-image-pipeline: --host-wait %s is not one of auto, "
                   "spin, yield, block\n",
                   host_wait.c_str());
      return 2;
    }
    if (cudaSetDevice(0) != cudaSuccess || cudaSetDeviceFlags(wait_flag) != cudaSuccess) {
      std::fprintf(stderr, "ringpilot-bench-image-pipeline: cudaSetDeviceFlags failed\n");
      return 1;
    }
    const std::string where = argv[1];
    const bool shards = where.find(".tar") != std::string::npos;
    const auto source =
        shards ? data::OpenImageShards(data::ExpandShardList(where)) : data::OpenImageFolder(where);
    data::cuda::ImagePipelineOptions options;
    options.batch = Arg(argc, argv, "--batch", 256);
    options.out_height = options.out_width = Arg(argc, argv, "--side", 224);
    options.threads = Arg(argc, argv, "--threads", 8);
    options.prefetch = Arg(argc, argv, "--prefetch", 3);
    options.hardware = !Flag(argc, argv, "--no-hardware");
    options.high_priority = Flag(argc, argv, "--high-priority");
    options.odd_on_gpu = !Flag(argc, argv, "--odd-on-host");
    options.host_share = std::atof(TextArg(argc, argv, "--host-share", "0"));
    options.share_threads = Arg(argc, argv, "--share-threads", 0);
    options.share_nice = Arg(argc, argv, "--share-nice", 0);
    const std::string contend = TextArg(argc, argv, "--contend", "none");
    const int batches = Arg(argc, argv, "--batches", 60);
    const int warmup = Arg(argc, argv, "--warmup", 5);
    data::BadSampleLog bad(*source, /*max_fraction=*/1.0);
    data::cuda::ImagePipeline pipeline(*source, options, bad);
    data::EpochSampler sampler(source->size(), 1, options.batch, 0);
    uint8_t* pixels = nullptr;
    int64_t* labels = nullptr;
    cudaMalloc(&pixels,
               static_cast<size_t>(options.batch) * 3 * options.out_height * options.out_width);
    cudaMalloc(&labels, sizeof(int64_t) * options.batch);
    cudaStream_t stream;
    cudaStreamCreate(&stream);
    int64_t queued = 0;
    auto enqueue = [&] {
      data::cuda::BatchRequest request;
      request.epoch = sampler.Batch(queued, 0, &request.indices).epoch;
      pipeline.Enqueue(std::move(request));
      ++queued;
    };
    for (int i = 0; i < options.prefetch; ++i) enqueue();
    // Agreement with the host path (libjpeg-turbo + data::ResampleCrop) on the first batch:
    // JPEG decoders may differ by a few levels (IDCT, chroma upsampling), crops must not.
    double mean_abs_diff = 0;
    int max_abs_diff = 0;
    std::vector<int64_t> first_indices;
    const int64_t first_epoch = sampler.Batch(0, 0, &first_indices).epoch;
    auto check_first = [&] {
      const size_t image = static_cast<size_t>(3) * options.out_height * options.out_width;
      std::vector<uint8_t> got(image * options.batch), want(image);
      cudaStreamSynchronize(stream);
      cudaMemcpy(got.data(), pixels, got.size(), cudaMemcpyDeviceToHost);
      std::vector<uint8_t> bytes;
      data::DecodedImage decoded;
      std::string error;
      double sum = 0;
      int64_t count = 0;
      for (int i = 0; i < options.batch; ++i) {
        if (!source->Read(first_indices[i], &bytes, &error) ||
            !data::DecodeImage(bytes.data(), bytes.size(), &decoded, &error)) {
          continue;  // a bad sample: the pipeline substituted it
        }
        const data::CropBox box = data::TrainCropBox(decoded.width, decoded.height, options.seed,
                                                     first_epoch, first_indices[i]);
        data::ResampleCrop(decoded.rgb.data(), decoded.width, decoded.height, box,
                           options.out_height, options.out_width, want.data());
        double image_sum = 0;
        for (size_t k = 0; k < image; ++k) {
          const int d = std::abs(static_cast<int>(got[i * image + k]) - want[k]);
          image_sum += d;
          max_abs_diff = std::max(max_abs_diff, d);
        }
        sum += image_sum;
        count += static_cast<int64_t>(image);
        if (image_sum / static_cast<double>(image) > 1.0) {
          std::fprintf(stderr, "differs from the host decoder: %s (%s): mean abs diff %.2f\n",
                       source->Describe(first_indices[i]).c_str(), JpegInfo(bytes).c_str(),
                       image_sum / static_cast<double>(image));
        }
      }
      mean_abs_diff = count ? sum / static_cast<double>(count) : -1;
    };
    // Started once the pipeline is warm, so its set-up is not measured against the load.
    std::unique_ptr<bench::GpuContention> load;
    double waited = 0;
    auto start = std::chrono::steady_clock::now();
    data::cuda::ImagePipelineCounters at_start;
    for (int b = 0; b < warmup + batches; ++b) {
      if (b == warmup) {
        load = std::make_unique<bench::GpuContention>(contend, options.device);
        cudaStreamSynchronize(stream);
        start = std::chrono::steady_clock::now();
        at_start = pipeline.counters();
        waited = 0;
      }
      waited += pipeline.CopyNext(pixels, labels, stream);
      for (const std::string& line : bad.TakeWarnings()) std::fprintf(stderr, "%s\n", line.c_str());
      if (b == 0) check_first();
      enqueue();
    }
    cudaStreamSynchronize(stream);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const long long load_launches = load ? load->launches() : 0;
    load.reset();
    const data::cuda::ImagePipelineCounters end = pipeline.counters();
    std::printf(
        "{\"what\": \"pipeline\", \"images\": %lld, \"batch\": %d, \"side\": %d, \"threads\": %d, "
        "\"backend\": \"%s\", \"output\": \"%s\", \"source\": \"%s\", \"img_per_s\": %.1f, "
        "\"device_decoded\": %lld, \"odd_gpu_decoded\": %lld, "
        "\"host_decoded\": %lld, \"host_share\": %.2f, \"host_share_decoded\": %lld, "
        "\"bad_samples\": %lld, \"wait_share\": %.3f, "
        "\"pinned_allocations_after_warmup\": %lld, \"device_pool_growth_after_warmup\": %lld, "
        "\"mean_abs_diff_vs_host\": %.3f, \"max_abs_diff_vs_host\": %d, "
        "\"decode_gpu_ms_per_batch\": %.3f, \"resample_gpu_ms_per_batch\": %.3f, "
        "\"busy_ms_per_batch\": %.2f, \"read_ms\": %.2f, \"batch_call_ms\": %.2f, "
        "\"odd_ms\": %.2f, \"share_ms\": %.2f, \"finish_ms\": %.2f, \"contend\": \"%s\", "
        "\"contend_launches_per_s\": %.1f, \"host_wait\": \"%s\"}\n",
        static_cast<long long>(source->size()), options.batch, options.out_height, options.threads,
        pipeline.backend().c_str(), pipeline.batch_output().c_str(), shards ? "shards" : "folder",
        batches * options.batch / wall,
        static_cast<long long>(end.hardware_images - at_start.hardware_images),
        static_cast<long long>(end.odd_gpu_images - at_start.odd_gpu_images),
        static_cast<long long>(end.host_images - at_start.host_images), options.host_share,
        static_cast<long long>(end.host_share_images - at_start.host_share_images),
        static_cast<long long>(bad.replaced()), waited / wall,
        static_cast<long long>(end.pinned_allocations - at_start.pinned_allocations),
        static_cast<long long>(end.device_pool_bytes - at_start.device_pool_bytes), mean_abs_diff,
        max_abs_diff, (end.decode_gpu_seconds - at_start.decode_gpu_seconds) * 1e3 / batches,
        (end.resample_gpu_seconds - at_start.resample_gpu_seconds) * 1e3 / batches,
        (end.busy_seconds - at_start.busy_seconds) * 1e3 / batches,
        (end.read_seconds - at_start.read_seconds) * 1e3 / batches,
        (end.batch_call_seconds - at_start.batch_call_seconds) * 1e3 / batches,
        (end.odd_seconds - at_start.odd_seconds) * 1e3 / batches,
        (end.share_seconds - at_start.share_seconds) * 1e3 / batches,
        (end.finish_seconds - at_start.finish_seconds) * 1e3 / batches, contend.c_str(),
        static_cast<double>(load_launches) / wall, host_wait.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringpilot-bench-image-pipeline: %s\n", e.what());
    return 1;
  }
}
