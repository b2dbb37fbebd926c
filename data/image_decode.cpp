#include "data/image_decode.h"

#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "data/jpeg_crop_decode.h"
#include "data/jpeg_frame.h"

namespace ringpilot::data {
namespace {

constexpr uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};

// One decompressor and one compressor per thread, made on first use and kept until the
// thread ends: tjInit* allocates, and the loader decodes thousands of images per second.
// After a failed call the handle is replaced: TurboJPEG 2.1 returns from libjpeg's error
// longjmp without resetting the decompressor, and the next image's error would otherwise
// read the previous one's message.
class TurboHandles {
 public:
  void DropDecompress() {
    if (decompress_) tjDestroy(decompress_);
    decompress_ = nullptr;
  }
  ~TurboHandles() {
    if (decompress_) tjDestroy(decompress_);
    if (compress_) tjDestroy(compress_);
  }
  tjhandle decompress() {
    if (!decompress_) decompress_ = tjInitDecompress();
    return decompress_;
  }
  tjhandle compress() {
    if (!compress_) compress_ = tjInitCompress();
    return compress_;
  }

 private:
  tjhandle decompress_ = nullptr;
  tjhandle compress_ = nullptr;
};

TurboHandles& Handles() {
  thread_local TurboHandles handles;
  return handles;
}

bool SizeOk(int64_t width, int64_t height, std::string* error) {
  if (width <= 0 || height <= 0) {
    *error = "image has no pixels (" + std::to_string(width) + "x" + std::to_string(height) + ")";
    return false;
  }
  // Each side first: a header's 2^32-1 x 2^32-1 would overflow the product (found by
  // tests/fuzz/image_decode_fuzzer under UBSan).
  if (width > kMaxImagePixels || height > kMaxImagePixels || width * height > kMaxImagePixels) {
    *error = "image of " + std::to_string(width) + "x" + std::to_string(height) +
             " pixels is larger than the limit of " + std::to_string(kMaxImagePixels) + " pixels";
    return false;
  }
  return true;
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

bool PngSize(const uint8_t* data, size_t size, int* width, int* height, std::string* error) {
  // Signature (8), IHDR length (4), "IHDR" (4), width (4), height (4).
  if (size < 24 || std::memcmp(data + 12, "IHDR", 4) != 0) {
    *error = "PNG: no IHDR header";
    return false;
  }
  const int64_t w = BigEndian32(data + 16), h = BigEndian32(data + 20);
  if (!SizeOk(w, h, error)) return false;
  *width = static_cast<int>(w);
  *height = static_cast<int>(h);
  return true;
}

bool JpegHeader(tjhandle handle, const uint8_t* data, size_t size, int* width, int* height,
                int* colorspace, std::string* error) {
  int subsamp = 0;
  if (!handle) {
    *error = "JPEG: cannot create a TurboJPEG decompressor";
    return false;
  }
  if (tjDecompressHeader3(handle, data, static_cast<unsigned long>(size), width, height, &subsamp,
                          colorspace) != 0) {
    *error = std::string("JPEG: ") + tjGetErrorStr2(handle);
    Handles().DropDecompress();
    return false;
  }
  return SizeOk(*width, *height, error);
}

// JpegScaleNum's n/8 as TurboJPEG's factor (every n/8 of a power of two is one of its
// scaling factors, and TJSCALED rounds up as libjpeg does).
tjscalingfactor PickScale(int width, int height, int min_width, int min_height) {
  return tjscalingfactor{JpegScaleNum(width, height, min_width, min_height), 8};
}

bool DecodeJpeg(const uint8_t* data, size_t size, DecodedImage* out, std::string* error,
                int min_width, int min_height) {
  tjhandle handle = Handles().decompress();
  int width = 0, height = 0, colorspace = 0;
  if (!JpegHeader(handle, data, size, &width, &height, &colorspace, error)) {
    // TurboJPEG's header reader refuses sampling layouts its own encoder never writes (CMYK
    // with only the first channel subsampled, as Pillow writes CMYK at 4:2:0); libjpeg's
    // API decodes them: the whole image as one crop, at the same DCT scale.
    JpegFrame frame;
    if (!ReadJpegFrame(data, size, &frame)) return false;
    const CropBox whole{0, 0, static_cast<float>(frame.width), static_cast<float>(frame.height)};
    CropBox region;
    return DecodeJpegCrop(data, size, whole, min_width > 0 ? min_width : frame.width,
                          min_height > 0 ? min_height : frame.height, out, &region, error);
  }
  const tjscalingfactor scale = PickScale(width, height, min_width, min_height);
  const int w = TJSCALED(width, scale), h = TJSCALED(height, scale);
  // TurboJPEG converts CMYK/YCCK only to CMYK: decode 4 channels, then to RGB in place.
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  const int channels = cmyk ? 4 : 3;
  out->rgb.resize(static_cast<size_t>(w) * h * channels);
  if (tjDecompress2(handle, data, static_cast<unsigned long>(size), out->rgb.data(), w, 0, h,
                    cmyk ? TJPF_CMYK : TJPF_RGB, TJFLAG_STOPONWARNING) != 0) {
    *error = std::string("JPEG: ") + tjGetErrorStr2(handle);
    Handles().DropDecompress();
    return false;
  }
  if (cmyk) {
    // Adobe's inverted CMYK, as libjpeg stores it: R = C x K / 255 (libjpeg-turbo's own
    // CMYK-to-RGB conversion in its test utilities).
    uint8_t* p = out->rgb.data();
    const size_t pixels = static_cast<size_t>(w) * h;
    for (size_t i = 0; i < pixels; ++i) {
      const unsigned k = p[4 * i + 3];
      for (int c = 0; c < 3; ++c)
        p[3 * i + c] = static_cast<uint8_t>((p[4 * i + c] * k + 127) / 255);
    }
    out->rgb.resize(pixels * 3);
  }
  out->width = w;
  out->height = h;
  return true;
}

bool DecodePng(const uint8_t* data, size_t size, DecodedImage* out, std::string* error) {
  // The PNG specification puts IHDR first; libpng also reads past leading ancillary chunks
  // (and their bad CRCs). Refusing here what ReadImageSize refuses keeps one answer to
  // "is this an image, and of what size" for the crop planner and the decoder.
  int header_width = 0, header_height = 0;
  if (!PngSize(data, size, &header_width, &header_height, error)) return false;
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, data, size)) {
    *error = std::string("PNG: ") + image.message;
    png_image_free(&image);
    return false;
  }
  if (!SizeOk(image.width, image.height, error)) {
    png_image_free(&image);
    return false;
  }
  if (static_cast<int64_t>(image.width) != header_width ||
      static_cast<int64_t>(image.height) != header_height) {
    *error = "PNG: libpng read " + std::to_string(image.width) + "x" +
             std::to_string(image.height) + " pixels, the IHDR header states " +
             std::to_string(header_width) + "x" + std::to_string(header_height);
    png_image_free(&image);
    return false;
  }
  // With alpha, read RGBA (not premultiplied for 8-bit sRGB output) and drop alpha.
  const bool alpha = (image.format & PNG_FORMAT_FLAG_ALPHA) != 0;
  image.format = alpha ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB;
  out->rgb.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, out->rgb.data(), 0, nullptr)) {
    *error = std::string("PNG: ") + image.message;
    png_image_free(&image);
    return false;
  }
  const size_t pixels = static_cast<size_t>(image.width) * image.height;
  if (alpha) {
    uint8_t* p = out->rgb.data();
    for (size_t i = 0; i < pixels; ++i) {
      p[3 * i] = p[4 * i];
      p[3 * i + 1] = p[4 * i + 1];
      p[3 * i + 2] = p[4 * i + 2];
    }
    out->rgb.resize(pixels * 3);
  }
  out->width = static_cast<int>(image.width);
  out->height = static_cast<int>(image.height);
  return true;
}

}  // namespace

ImageFormat SniffImageFormat(const uint8_t* data, size_t size) {
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return ImageFormat::kJpeg;
  if (size >= sizeof(kPngSignature) && std::memcmp(data, kPngSignature, sizeof(kPngSignature)) == 0)
    return ImageFormat::kPng;
  return ImageFormat::kUnknown;
}

bool ReadImageSize(const uint8_t* data, size_t size, int* width, int* height, std::string* error) {
  switch (SniffImageFormat(data, size)) {
    case ImageFormat::kJpeg: {
      // The frame header alone (no decompressor): what the crop is drawn from. TurboJPEG's
      // header reader would also refuse sampling layouts libjpeg decodes (DecodeJpeg).
      JpegFrame frame;
      if (ReadJpegFrame(data, size, &frame)) {
        *width = frame.width;
        *height = frame.height;
        return SizeOk(frame.width, frame.height, error);
      }
      int colorspace = 0;
      return JpegHeader(Handles().decompress(), data, size, width, height, &colorspace, error);
    }
    case ImageFormat::kPng:
      return PngSize(data, size, width, height, error);
    case ImageFormat::kUnknown:
      break;
  }
  *error = "not a JPEG or PNG image";
  return false;
}

bool DecodeImageCrop(const uint8_t* data, size_t size, const CropBox& box, int out_width,
                     int out_height, DecodedImage* out, CropBox* region_box, std::string* error) {
  if (SniffImageFormat(data, size) == ImageFormat::kJpeg) {
    return DecodeJpegCrop(data, size, box, out_width, out_height, out, region_box, error);
  }
  *region_box = box;
  return DecodeImage(data, size, out, error);
}

int JpegScaleNum(int width, int height, int min_width, int min_height) {
  if (min_width <= 0 || min_height <= 0) return 8;
  for (int n = 1; n < 8; n *= 2) {
    // libjpeg's scaled size: ceil(side * n / 8).
    const int64_t w = (int64_t{width} * n + 7) / 8, h = (int64_t{height} * n + 7) / 8;
    if (w >= min_width && h >= min_height) return n;
  }
  return 8;
}

void CropDecodeMinimum(int width, int height, const CropBox& box, int out_width, int out_height,
                       int* min_width, int* min_height) {
  *min_width = static_cast<int>(std::ceil(static_cast<double>(out_width) * width /
                                          std::max(1.0, static_cast<double>(box.width))));
  *min_height = static_cast<int>(std::ceil(static_cast<double>(out_height) * height /
                                           std::max(1.0, static_cast<double>(box.height))));
}

bool DecodeWholeImageForCrop(const uint8_t* data, size_t size, const CropBox& box, int out_width,
                             int out_height, DecodedImage* out, CropBox* region_box,
                             std::string* error) {
  int width = 0, height = 0, min_width = 0, min_height = 0;
  if (!ReadImageSize(data, size, &width, &height, error)) return false;
  CropDecodeMinimum(width, height, box, out_width, out_height, &min_width, &min_height);
  if (!DecodeImage(data, size, out, error, min_width, min_height)) return false;
  const float fx = static_cast<float>(out->width) / static_cast<float>(width);
  const float fy = static_cast<float>(out->height) / static_cast<float>(height);
  *region_box = box;
  region_box->x *= fx;
  region_box->width *= fx;
  region_box->y *= fy;
  region_box->height *= fy;
  return true;
}

bool DecodeImage(const uint8_t* data, size_t size, DecodedImage* out, std::string* error,
                 int min_width, int min_height) {
  switch (SniffImageFormat(data, size)) {
    case ImageFormat::kJpeg:
      return DecodeJpeg(data, size, out, error, min_width, min_height);
    case ImageFormat::kPng:
      return DecodePng(data, size, out, error);
    case ImageFormat::kUnknown:
      break;
  }
  *error = "not a JPEG or PNG image";
  return false;
}

bool EncodeJpeg(const uint8_t* rgb, int width, int height, int quality, std::vector<uint8_t>* out,
                std::string* error) {
  tjhandle handle = Handles().compress();
  if (!handle) {
    *error = "JPEG: cannot create a TurboJPEG compressor";
    return false;
  }
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  if (tjCompress2(handle, rgb, width, 0, height, TJPF_RGB, &buffer, &size, TJSAMP_420, quality,
                  0) != 0) {
    *error = std::string("JPEG: ") + tjGetErrorStr2(handle);
    tjFree(buffer);
    return false;
  }
  out->assign(buffer, buffer + size);
  tjFree(buffer);
  return true;
}

bool EncodePng(const uint8_t* pixels, int width, int height, int channels,
               std::vector<uint8_t>* out, std::string* error) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  switch (channels) {
    case 1:
      image.format = PNG_FORMAT_GRAY;
      break;
    case 3:
      image.format = PNG_FORMAT_RGB;
      break;
    case 4:
      image.format = PNG_FORMAT_RGBA;
      break;
    default:
      *error = "PNG: " + std::to_string(channels) + " channels (1, 3 or 4)";
      return false;
  }
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&image, nullptr, &size, 0, pixels, 0, nullptr)) {
    *error = std::string("PNG: ") + image.message;
    return false;
  }
  out->resize(size);
  if (!png_image_write_to_memory(&image, out->data(), &size, 0, pixels, 0, nullptr)) {
    *error = std::string("PNG: ") + image.message;
    return false;
  }
  out->resize(size);
  return true;
}

}  // namespace ringpilot::data
