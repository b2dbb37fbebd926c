#include "data/image_pack.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>

#include "base/files.h"
#include "data/cifar.h"
#include "data/image_decode.h"
#include "data/image_source.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wsign-conversion"
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#pragma GCC diagnostic ignored "-Wold-style-cast"
#ifndef __clang__  // a GCC-only warning (clang builds it in the sanitizer build)
#pragma GCC diagnostic ignored "-Wuseless-cast"
#endif
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wcast-qual"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#define STB_IMAGE_RESIZE_IMPLEMENTATION
#define STB_IMAGE_RESIZE_STATIC
#include <stb_image_resize.h>
#pragma GCC diagnostic pop

namespace ringpilot::data {
namespace {

constexpr size_t kBlock = 512;
constexpr int64_t kChunk = 256;  // images handed to the threads at a time

// One ustar archive, written to PATH.partial and renamed to PATH by Close.
class TarWriter {
 public:
  explicit TarWriter(std::string path)
      : path_(std::move(path)), out_(path_ + ".partial", std::ios::binary) {
    if (!out_) throw DataError(path_ + ".partial: cannot be written");
  }
  void Add(const std::string& name, const uint8_t* data, size_t size) {
    char h[kBlock];
    std::memset(h, 0, sizeof(h));
    std::snprintf(h, 100, "%s", name.c_str());
    std::snprintf(h + 100, 8, "%07o", 0644);
    std::snprintf(h + 108, 8, "%07o", 0);
    std::snprintf(h + 116, 8, "%07o", 0);
    std::snprintf(h + 124, 12, "%011llo", static_cast<unsigned long long>(size));
    std::snprintf(h + 136, 12, "%011o", 0);
    h[156] = '0';
    std::memcpy(h + 257, "ustar", 6);
    std::memcpy(h + 263, "00", 2);
    std::memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (size_t i = 0; i < kBlock; ++i) sum += static_cast<unsigned char>(h[i]);
    std::snprintf(h + 148, 8, "%06o", sum);
    Write(h, kBlock);
    Write(data, size);
    static const char kZeros[kBlock] = {};
    if (size % kBlock) Write(kZeros, kBlock - size % kBlock);
  }
  size_t bytes() const { return bytes_; }
  void Close() {
    static const char kZeros[2 * kBlock] = {};
    Write(kZeros, sizeof(kZeros));
    out_.close();
    if (!out_) throw DataError(path_ + ".partial: write failed");
    base::Rename(path_ + ".partial", path_);
  }

 private:
  void Write(const void* data, size_t size) {
    out_.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out_) throw DataError(path_ + ".partial: write failed");
    bytes_ += size;
  }
  std::string path_;
  std::ofstream out_;
  size_t bytes_ = 0;
};

struct Packed {
  std::vector<uint8_t> bytes;  // empty: skipped
  std::string ext;
  std::string error;
  bool resized = false;
};

std::string Extension(const std::string& path) {
  std::string ext = path.substr(path.rfind('.') + 1);
  for (char& c : ext) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return ext;
}

void Prepare(const ImageSource& source, int64_t index, const PackOptions& options, Packed* out) {
  std::vector<uint8_t> bytes;
  if (!source.Read(index, &bytes, &out->error)) return;
  const ImageFormat format = SniffImageFormat(bytes.data(), bytes.size());
  if (format == ImageFormat::kUnknown) {
    out->error = "not a JPEG or PNG image";
    return;
  }
  if (options.max_side <= 0) {
    out->bytes = std::move(bytes);
    out->ext = Extension(source.Describe(index));
    return;
  }
  int width = 0, height = 0;
  if (!ReadImageSize(bytes.data(), bytes.size(), &width, &height, &out->error)) return;
  const int short_side = std::min(width, height);
  const double scale =
      short_side > options.max_side ? static_cast<double>(options.max_side) / short_side : 1.0;
  const int w = std::max(1, static_cast<int>(std::lround(width * scale)));
  const int h = std::max(1, static_cast<int>(std::lround(height * scale)));
  DecodedImage image;
  if (!DecodeImage(bytes.data(), bytes.size(), &image, &out->error, w, h)) return;
  const uint8_t* pixels = image.rgb.data();
  std::vector<uint8_t> resized;
  if (image.width != w || image.height != h) {
    resized.resize(static_cast<size_t>(w) * h * 3);
    if (!stbir_resize_uint8(image.rgb.data(), image.width, image.height, 0, resized.data(), w, h, 0,
                            3)) {
      out->error = "resize failed";
      return;
    }
    pixels = resized.data();
    out->resized = true;
  }
  if (!EncodeJpeg(pixels, w, h, options.quality, &out->bytes, &out->error)) {
    out->bytes.clear();
    return;
  }
  out->ext = "jpg";
}

}  // namespace

PackResult PackImageFolder(const std::string& folder, const std::string& out_dir,
                           const PackOptions& options,
                           const std::function<void(const std::string&)>& warn) {
  if ((options.shard_samples > 0) == (options.shard_bytes > 0)) {
    throw DataError("pack: give the shard size in samples or in bytes");
  }
  const std::unique_ptr<ImageSource> source = OpenImageFolder(folder);
  try {
    base::MakeDirs(out_dir);
  } catch (const base::FileError& e) {
    throw DataError(e.what());
  }
  PackResult result;
  std::unique_ptr<TarWriter> shard;
  int64_t in_shard = 0;
  auto next_shard = [&] {
    if (shard) {
      shard->Close();
      shard.reset();
    }
    char name[32];
    std::snprintf(name, sizeof(name), "shard-%06zu.tar", result.shards.size());
    result.shards.push_back(out_dir + "/" + name);
    shard = std::make_unique<TarWriter>(result.shards.back());
    in_shard = 0;
  };
  const int threads = std::max(1, options.threads);
  std::vector<Packed> chunk;
  for (int64_t first = 0; first < source->size(); first += kChunk) {
    const int64_t count = std::min(kChunk, source->size() - first);
    chunk.assign(static_cast<size_t>(count), Packed{});
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (int64_t i = t; i < count; i += threads)
          Prepare(*source, first + i, options, &chunk[i]);
      });
    }
    for (std::thread& t : pool) t.join();
    for (int64_t i = 0; i < count; ++i) {
      Packed& p = chunk[i];
      const int64_t index = first + i;
      if (p.bytes.empty()) {
        warn("skipping " + source->Describe(index) + ": " +
             (p.error.empty() ? std::string("empty file") : p.error));
        ++result.skipped;
        continue;
      }
      const size_t member = 2 * kBlock + p.bytes.size() + kBlock;
      if (!shard || (options.shard_samples > 0 && in_shard >= options.shard_samples) ||
          (options.shard_bytes > 0 && in_shard > 0 &&
           shard->bytes() + member + 2 * kBlock > static_cast<size_t>(options.shard_bytes))) {
        next_shard();
      }
      char key[16];
      std::snprintf(key, sizeof(key), "%09lld", static_cast<long long>(index));
      const std::string label = std::to_string(source->label(index));
      shard->Add(std::string(key) + "." + p.ext, p.bytes.data(), p.bytes.size());
      shard->Add(std::string(key) + ".cls", reinterpret_cast<const uint8_t*>(label.data()),
                 label.size());
      ++in_shard;
      ++result.samples;
      if (p.resized) ++result.resized;
    }
  }
  if (shard) shard->Close();
  if (result.samples == 0) throw DataError(folder + ": no loadable image to pack");
  // Class names in index order: the folders, as OpenImageFolder sorted them.
  std::string classes;
  for (const std::string& name : base::ListDir(folder)) {
    if (base::IsDirectory(folder + "/" + name)) classes += name + "\n";
  }
  base::WriteFileAtomically(out_dir + "/classes.txt", classes);
  return result;
}

}  // namespace ringpilot::data
