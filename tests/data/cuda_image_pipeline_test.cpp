// The GPU image pipeline (data/cuda/image_pipeline.h) on real photographs of every kind a
// real image set holds (tests/data/make_jpeg_kinds.py): each JPEG decoded on the GPU and in
// agreement with libjpeg-turbo, bad files skipped and counted, and no allocation once warm.
// Needs a CUDA device (skips without one) and, to make its images, python3 with Pillow and
// scikit-image; RINGPILOT_JPEG_KINDS names a folder made already (its -bad twin beside it).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "data/bad_samples.h"
#include "data/cuda/image_pipeline.h"
#include "data/image_decode.h"
#include "data/image_loader.h"
#include "data/image_source.h"
#include "data/image_transform.h"

namespace ringpilot::data::cuda {
namespace {

bool HaveDevice() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// The kinds folder: RINGPILOT_JPEG_KINDS, else made once per process in the test's temp dir.
std::string KindsFolder() {
  static std::string folder;
  if (!folder.empty()) return folder;
  if (const char* given = std::getenv("RINGPILOT_JPEG_KINDS")) return folder = given;
  const char* source = std::getenv("RINGPILOT_SOURCE_DIR");
  const std::string out = ::testing::TempDir() + "/jpeg-kinds";
  const std::string command = std::string("python3 ") + (source ? source : ".") +
                              "/tests/data/make_jpeg_kinds.py " + out + " --bad >/dev/null";
  if (std::system(command.c_str()) != 0) return "";
  return folder = out;
}

struct DeviceBatch {
  uint8_t* pixels = nullptr;
  int64_t* labels = nullptr;
  cudaStream_t stream = nullptr;
  DeviceBatch(int batch, int side) {
    cudaMalloc(&pixels, static_cast<size_t>(batch) * 3 * side * side);
    cudaMalloc(&labels, sizeof(int64_t) * batch);
    cudaStreamCreate(&stream);
  }
  ~DeviceBatch() {
    cudaStreamSynchronize(stream);
    cudaFree(pixels);
    cudaFree(labels);
    cudaStreamDestroy(stream);
  }
};

// One batch of `request` through a pipeline of `options`, read back to the host.
struct HostBatch {
  std::vector<uint8_t> pixels;  // [batch, 3, out_height, out_width]
  std::vector<int64_t> labels;
  ImagePipelineCounters counters;
  std::string backend, batch_output;
};

void DecodeOneBatch(const ImageSource& source, const ImagePipelineOptions& options,
                    BadSampleLog& bad, const BatchRequest& request, HostBatch* got) {
  ImagePipeline pipeline(source, options, bad);
  pipeline.Enqueue(request);
  const int n = options.batch;
  DeviceBatch out(n, options.out_height);
  pipeline.CopyNext(out.pixels, out.labels, out.stream);
  ASSERT_EQ(cudaStreamSynchronize(out.stream), cudaSuccess);
  got->pixels.resize(static_cast<size_t>(n) * 3 * options.out_height * options.out_width);
  ASSERT_EQ(cudaMemcpy(got->pixels.data(), out.pixels, got->pixels.size(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  got->labels.resize(n);
  ASSERT_EQ(cudaMemcpy(got->labels.data(), out.labels, sizeof(int64_t) * n, cudaMemcpyDeviceToHost),
            cudaSuccess);
  got->counters = pipeline.counters();
  got->backend = pipeline.backend();
  got->batch_output = pipeline.batch_output();
}

class CudaImagePipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
    kinds_ = KindsFolder();
    ASSERT_FALSE(kinds_.empty()) << "make_jpeg_kinds.py failed (needs Pillow, scikit-image)";
  }
  std::string kinds_;
};

TEST_F(CudaImagePipelineTest, EveryJpegKindDecodesOnTheGpuAsLibjpegTurboDoes) {
  const auto source = OpenImageFolder(kinds_);
  const int n = static_cast<int>(source->size());
  constexpr int kSide = 224;
  ImagePipelineOptions options;
  options.batch = n;
  options.out_height = options.out_width = kSide;
  options.prefetch = 1;
  options.threads = 4;
  options.train = false;  // centre crops: the reference needs no random draw
  BadSampleLog bad(*source, 1.0);
  BatchRequest request;
  for (int i = 0; i < n; ++i) request.indices.push_back(i);
  HostBatch batch;
  ASSERT_NO_FATAL_FAILURE(DecodeOneBatch(*source, options, bad, request, &batch));
  const size_t image = static_cast<size_t>(3) * kSide * kSide;
  const std::vector<uint8_t>& got = batch.pixels;
  const std::vector<int64_t>& labels = batch.labels;
  std::vector<uint8_t> want(image);

  const ImagePipelineCounters& c = batch.counters;
  int pngs = 0, cmyk = 0;
  std::map<std::string, std::pair<double, int64_t>> diff;  // kind -> (sum, count)
  std::vector<uint8_t> bytes;
  DecodedImage decoded;
  std::string error;
  for (int i = 0; i < n; ++i) {
    const std::string path = source->Describe(i);
    const std::string kind =
        path.substr(kinds_.size() + 1, path.find('/', kinds_.size() + 1) - kinds_.size() - 1);
    pngs += kind == "k9_png";
    cmyk += kind == "k8_cmyk";
    EXPECT_EQ(labels[i], source->label(i)) << path;
    ASSERT_TRUE(source->Read(i, &bytes, &error)) << error;
    ASSERT_TRUE(DecodeImage(bytes.data(), bytes.size(), &decoded, &error)) << path << ": " << error;
    ResampleCrop(decoded.rgb.data(), decoded.width, decoded.height,
                 EvalCropBox(decoded.width, decoded.height), kSide, kSide, want.data());
    auto& [sum, count] = diff[kind];
    for (size_t k = 0; k < image; ++k) sum += std::abs(int{got[i * image + k]} - int{want[k]});
    count += static_cast<int64_t>(image);
  }
  EXPECT_EQ(bad.replaced(), 0);
  EXPECT_EQ(c.images, n);
  // nvJPEG's decoupled decoder refuses CMYK (0.002% of ImageNet): the host decodes those.
  EXPECT_EQ(c.host_images, pngs + cmyk) << "every other JPEG is decoded on the GPU";
  EXPECT_GE(c.odd_gpu_images, 12) << "progressive JPEGs go to nvJPEG's decoupled decoder";
  for (const auto& [kind, sc] : diff) {
    const double mean = sc.first / static_cast<double>(sc.second);
    std::printf("[ kinds    ] %-20s mean abs diff vs libjpeg-turbo %.3f levels\n", kind.c_str(),
                mean);
    // CMYK has no single conversion to RGB (nvJPEG's is a plain subtractive one): decoded,
    // its pixels are only reported.
    if (kind != "k8_cmyk") {
      EXPECT_LE(mean, 0.5) << kind;
    }
  }
  std::printf(
      "[ kinds    ] backend %s, batch output %s, %lld in the batch, %lld odd on the GPU, "
      "%lld on the host\n",
      batch.backend.c_str(), batch.batch_output.c_str(), static_cast<long long>(c.hardware_images),
      static_cast<long long>(c.odd_gpu_images), static_cast<long long>(c.host_images));
}

// data.host_decode_share: the last share of the batch is made on the host exactly as the
// CPU loader makes it (same crops, same bytes), the rest on the GPU as before.
TEST_F(CudaImagePipelineTest, HostShareIsTheCpuLoadersOwnSamples) {
  const auto source = OpenImageFolder(kinds_);
  const int n = static_cast<int>(source->size());
  constexpr int kSide = 96;
  ImagePipelineOptions options;
  options.batch = n;
  options.out_height = options.out_width = kSide;
  options.prefetch = 1;
  options.threads = 4;
  options.train = true;
  options.seed = 7;
  options.host_share = 0.5;
  options.share_threads = 3;  // its own threads, at a lower priority: the same samples
  options.share_nice = 5;
  BadSampleLog bad(*source, 1.0);
  BatchRequest request;
  request.epoch = 3;
  for (int i = 0; i < n; ++i) request.indices.push_back((i * 5) % n);
  HostBatch batch;
  ASSERT_NO_FATAL_FAILURE(DecodeOneBatch(*source, options, bad, request, &batch));
  const size_t image = static_cast<size_t>(3) * kSide * kSide;
  const std::vector<uint8_t>& got = batch.pixels;
  const std::vector<int64_t>& labels = batch.labels;
  std::vector<uint8_t> want(image);
  const int shared = static_cast<int>(std::lround(0.5 * n));
  const ImagePipelineCounters& c = batch.counters;
  EXPECT_EQ(c.host_share_images, shared);
  EXPECT_EQ(c.images, n);
  EXPECT_GT(c.share_seconds, 0);
  ImageLoaderOptions loader;
  loader.batch = n;
  loader.out_height = loader.out_width = kSide;
  loader.transform = ImageTransform::kTrain;
  loader.seed = 7;
  CropScratch scratch;
  std::vector<uint8_t> bytes;
  DecodedImage decoded;
  std::string error;
  double gpu_diff = 0;
  int64_t gpu_pixels = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t index = request.indices[i];
    EXPECT_EQ(labels[i], source->label(index)) << source->Describe(index);
    ASSERT_EQ(LoadCroppedSample(*source, index, 3, loader, scratch, want.data(), &error),
              source->label(index))
        << error;
    if (i >= n - shared) {
      EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin() + i * image))
          << "host share sample " << i << " (" << source->Describe(index) << ")";
      continue;
    }
    // The GPU half: the same crop of the whole image decoded by libjpeg-turbo, as above.
    if (source->Describe(index).find("/k8_cmyk/") != std::string::npos) continue;
    ASSERT_TRUE(source->Read(index, &bytes, &error)) << error;
    ASSERT_TRUE(DecodeImage(bytes.data(), bytes.size(), &decoded, &error)) << error;
    ResampleCrop(decoded.rgb.data(), decoded.width, decoded.height,
                 TrainCropBox(decoded.width, decoded.height, 7, 3, index), kSide, kSide,
                 want.data());
    for (size_t k = 0; k < image; ++k) gpu_diff += std::abs(int{got[i * image + k]} - want[k]);
    gpu_pixels += static_cast<int64_t>(image);
  }
  ASSERT_GT(gpu_pixels, 0);
  const double mean = gpu_diff / static_cast<double>(gpu_pixels);
  std::printf("[ share    ] %d of %d on the host; GPU half mean abs diff %.3f levels\n", shared, n,
              mean);
  EXPECT_LE(mean, 0.5);
}

// Bad files are skipped, counted and named whichever path decodes them: nvJPEG's (share 0)
// or the host share's (share 1).
TEST_F(CudaImagePipelineTest, BadFilesAreSkippedAndCounted) {
  const auto source = OpenImageFolder(kinds_ + "-bad");
  const int n = static_cast<int>(source->size());  // 2 bad + 6 good
  for (const double share : {0.0, 1.0}) {
    SCOPED_TRACE("host_share " + std::to_string(share));
    ImagePipelineOptions options;
    options.batch = n;
    options.out_height = options.out_width = 64;
    options.prefetch = 1;
    options.threads = 2;
    options.host_share = share;
    BadSampleLog bad(*source, 1.0);
    BatchRequest request;
    for (int i = 0; i < n; ++i) request.indices.push_back(i);
    HostBatch batch;
    ASSERT_NO_FATAL_FAILURE(DecodeOneBatch(*source, options, bad, request, &batch));
    EXPECT_EQ(bad.replaced(), 2);
    EXPECT_EQ(bad.files().size(), 2u);
    EXPECT_EQ(batch.counters.host_share_images, share > 0 ? n : 0);
    const std::vector<std::string> warnings = bad.TakeWarnings();
    ASSERT_EQ(warnings.size(), 2u);
    for (const std::string& w : warnings) EXPECT_NE(w.find("/bad/"), std::string::npos) << w;
  }
}

TEST_F(CudaImagePipelineTest, AllocatesNothingOnceWarm) {
  const auto source = OpenImageFolder(kinds_);
  ImagePipelineOptions options;
  options.batch = 32;
  options.out_height = options.out_width = 224;
  options.prefetch = 2;
  options.threads = 4;
  BadSampleLog bad(*source, 1.0);
  ImagePipeline pipeline(*source, options, bad);
  // The same samples every batch (random crops differ): the workload is steady.
  BatchRequest request;
  for (int i = 0; i < options.batch; ++i) {
    request.indices.push_back((i * 7) % source->size());
  }
  DeviceBatch out(options.batch, 224);
  ImagePipelineCounters warm;
  // Warm: each reader thread has met the largest odd JPEG its decoder's buffers must hold
  // (work goes to whichever thread is free, so that takes a few batches).
  for (int b = 0; b < 24; ++b) {
    request.epoch = b;
    pipeline.Enqueue(request);
    pipeline.CopyNext(out.pixels, out.labels, out.stream);
    if (b == 11) warm = pipeline.counters();
  }
  ASSERT_EQ(cudaStreamSynchronize(out.stream), cudaSuccess);
  const ImagePipelineCounters end = pipeline.counters();
  EXPECT_GT(warm.pinned_allocations, 0);
  EXPECT_EQ(end.pinned_allocations, warm.pinned_allocations) << "cudaHostAlloc once warm";
  EXPECT_EQ(end.device_pool_bytes, warm.device_pool_bytes) << "device pool grew once warm";
}

}  // namespace
}  // namespace ringpilot::data::cuda
