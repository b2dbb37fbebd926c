// Host decode of training crops, the CPU loader's work per sample: whole-image decode (at
// the crop's DCT scale) then resample, against the crop-only decode the loader uses
// (DecodeImageCrop: the crop's rows and column band), on the same files, crops and
// threads. Reads every file into memory first, so only decoding and resampling are timed.
//   ringpilot-bench-host-decode FOLDER|SHARDS [--threads N] [--size 224] [--passes 3]
// Prints one JSON line: img/s of each path (best pass), the speed-up, and the mean
// absolute difference of their output pixels.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "data/image_decode.h"
#include "data/image_source.h"
#include "data/image_transform.h"

namespace {

using ringpilot::data::CropBox;
using ringpilot::data::DecodedImage;

struct Args {
  std::string set;
  int threads = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  int size = 224;
  int passes = 3;
};

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "ringpilot-bench-host-decode: %s\nusage: ringpilot-bench-host-decode "
               "FOLDER|SHARD.tar[,SHARD.tar...] [--threads N] [--size 224] [--passes 3]\n",
               why);
  std::exit(2);
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) Usage(("missing value for " + arg).c_str());
      return std::atoi(argv[++i]);
    };
    if (arg == "--threads") {
      a.threads = value();
    } else if (arg == "--size") {
      a.size = value();
    } else if (arg == "--passes") {
      a.passes = value();
    } else if (a.set.empty() && arg.rfind("--", 0) != 0) {
      a.set = arg;
    } else {
      Usage(("unknown argument " + arg).c_str());
    }
  }
  if (a.set.empty()) Usage("no image set");
  if (a.threads < 1 || a.size < 1 || a.passes < 1)
    Usage("--threads, --size, --passes must be >= 1");
  return a;
}

std::unique_ptr<ringpilot::data::ImageSource> Open(const std::string& set) {
  if (set.find(".tar") == std::string::npos) return ringpilot::data::OpenImageFolder(set);
  std::vector<std::string> shards;
  size_t at = 0;
  while (at <= set.size()) {
    const size_t comma = std::min(set.find(',', at), set.size());
    if (comma > at) shards.push_back(set.substr(at, comma - at));
    at = comma + 1;
  }
  return ringpilot::data::OpenImageShards(shards);
}

// One pass over every file with `threads` threads; returns img/s. `out` gets each sample's
// output (size x size x 3).
template <typename DecodeFn>
double Pass(const std::vector<std::vector<uint8_t>>& files, int threads, int size,
            std::vector<uint8_t>* out, DecodeFn decode) {
  std::atomic<size_t> next{0};
  std::atomic<int> failures{0};
  const size_t image_bytes = static_cast<size_t>(size) * static_cast<size_t>(size) * 3;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      DecodedImage image;
      for (size_t i = next++; i < files.size(); i = next++) {
        if (!decode(static_cast<int64_t>(i), files[i], &image, out->data() + i * image_bytes)) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& t : pool) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (failures > 0)
    std::fprintf(stderr, "ringpilot-bench-host-decode: %d files failed\n", failures.load());
  return static_cast<double>(files.size()) / seconds;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  std::vector<std::vector<uint8_t>> files;
  std::vector<CropBox> boxes;
  try {
    const auto source = Open(args.set);
    std::string error;
    for (int64_t i = 0; i < source->size(); ++i) {
      std::vector<uint8_t> bytes;
      int w = 0, h = 0;
      if (!source->Read(i, &bytes, &error) ||
          !ringpilot::data::ReadImageSize(bytes.data(), bytes.size(), &w, &h, &error)) {
        continue;
      }
      boxes.push_back(ringpilot::data::TrainCropBox(w, h, 0, 0, i));
      files.push_back(std::move(bytes));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringpilot-bench-host-decode: %s\n", e.what());
    return 1;
  }
  if (files.empty()) Usage("no readable images in the set");
  const int size = args.size;
  const size_t image_bytes = static_cast<size_t>(size) * static_cast<size_t>(size) * 3;
  std::vector<uint8_t> whole_out(files.size() * image_bytes), crop_out(whole_out.size());

  auto whole = [&](int64_t i, const std::vector<uint8_t>& bytes, DecodedImage* image,
                   uint8_t* out) {
    std::string error;
    CropBox box;
    if (!ringpilot::data::DecodeWholeImageForCrop(bytes.data(), bytes.size(),
                                                  boxes[static_cast<size_t>(i)], size, size, image,
                                                  &box, &error)) {
      return false;
    }
    ringpilot::data::ResampleCrop(image->rgb.data(), image->width, image->height, box, size, size,
                                  out);
    return true;
  };
  auto crop = [&](int64_t i, const std::vector<uint8_t>& bytes, DecodedImage* image, uint8_t* out) {
    std::string error;
    int w = 0, h = 0;  // the loader reads the size first too (the box needs it)
    if (!ringpilot::data::ReadImageSize(bytes.data(), bytes.size(), &w, &h, &error)) return false;
    CropBox region_box;
    if (!ringpilot::data::DecodeImageCrop(bytes.data(), bytes.size(), boxes[static_cast<size_t>(i)],
                                          size, size, image, &region_box, &error)) {
      return false;
    }
    ringpilot::data::ResampleCrop(image->rgb.data(), image->width, image->height, region_box, size,
                                  size, out);
    return true;
  };
  double whole_best = 0, crop_best = 0;
  for (int p = 0; p < args.passes; ++p) {
    whole_best = std::max(whole_best, Pass(files, args.threads, size, &whole_out, whole));
    crop_best = std::max(crop_best, Pass(files, args.threads, size, &crop_out, crop));
  }
  double diff = 0;
  for (size_t i = 0; i < whole_out.size(); ++i)
    diff += std::abs(int{whole_out[i]} - int{crop_out[i]});
  std::printf(
      "{\"what\": \"host_decode\", \"images\": %zu, \"threads\": %d, \"size\": %d, "
      "\"whole_img_s\": %.0f, \"crop_img_s\": %.0f, \"speedup\": %.3f, \"mean_abs_diff\": %.4f}\n",
      files.size(), args.threads, size, whole_best, crop_best, crop_best / whole_best,
      diff / static_cast<double>(whole_out.size()));
  return 0;
}
