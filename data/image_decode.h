// CPU decoding of the images in image datasets: JPEG through libjpeg-turbo (TurboJPEG API;
// its libjpeg API for the crop-only decode), PNG through libpng. Used by CPU ranks and as
// the GPU pipeline's fallback for what nvJPEG cannot decode. Also the encoders `ringpilot
// data pack` re-encodes with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/image_transform.h"

namespace ringpilot::data {

enum class ImageFormat { kUnknown, kJpeg, kPng };

/// JPEG (FF D8 FF) or PNG (89 50 4E 47 0D 0A 1A 0A) from the leading bytes; kUnknown else.
ImageFormat SniffImageFormat(const uint8_t* data, size_t size);

/// Largest image decoded (width x height): a header claiming more is an error, so a broken
/// or hostile file cannot make a rank allocate gigabytes.
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 27;

struct DecodedImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  ///< height x width x 3, interleaved
};

/// Dimensions from the header alone (what a crop box needs before the image is decoded).
/// Returns false and sets `*error` (one line) for a non-image or a broken header.
bool ReadImageSize(const uint8_t* data, size_t size, int* width, int* height, std::string* error);

/// Decodes a JPEG or PNG to 8-bit RGB (greyscale, CMYK, palette and alpha converted; alpha is
/// dropped, as PIL's convert("RGB")). Returns false and sets `*error` for a non-image, an
/// undecodable or a truncated image (libjpeg-turbo's warnings, "premature end of data"
/// included, count as errors). When `min_width` and `min_height` are both > 0, a JPEG is
/// decoded at the smallest of libjpeg-turbo's DCT scales (n/8, never above 1) whose size is
/// still at least min_width x min_height (out->width/height tell which); PNG and the
/// default decode at full size. Thread-safe: each thread keeps one TurboJPEG handle for
/// all its calls; `out`'s buffer is reused across calls (no allocation once it is large
/// enough).
bool DecodeImage(const uint8_t* data, size_t size, DecodedImage* out, std::string* error,
                 int min_width = 0, int min_height = 0);

/// Decodes what a crop needs of an image, as DALI's fused decode-and-crop: for a JPEG only
/// the rows and the column band that `box` (source pixels, from TrainCropBox or EvalCropBox
/// on ReadImageSize's size) and its bilinear taps cover, through libjpeg-turbo's partial
/// decode (jpeg_crop_scanline, jpeg_skip_scanlines), at the coarsest DCT scale (n/8, never
/// above 1) whose crop is still at least out_width x out_height. `*out` holds that region
/// and `*region_box` the crop in the region's pixels, so that
/// ResampleCrop(out->rgb, out->width, out->height, *region_box, ...) gives what resampling
/// `box` of the whole decoded image gives. PNG decodes whole (region_box = box). Errors as
/// DecodeImage's. Thread-safe: one libjpeg decompressor per thread, reused; `out`'s buffer
/// is reused across calls.
bool DecodeImageCrop(const uint8_t* data, size_t size, const CropBox& box, int out_width,
                     int out_height, DecodedImage* out, CropBox* region_box, std::string* error);

/// The smallest decoded size (*min_width x *min_height) at which `box`, in source pixels of
/// a width x height image, still holds out_width x out_height pixels: what both
/// DecodeImageCrop's DCT scale and DecodeWholeImageForCrop's are chosen from.
void CropDecodeMinimum(int width, int height, const CropBox& box, int out_width, int out_height,
                       int* min_width, int* min_height);

/// The DCT scale n/8 at which a width x height JPEG is decoded to hold at least min_width x
/// min_height pixels: the coarsest of 1/8, 2/8, 4/8 and 8/8 that does (8 where none does
/// or a minimum is 0). DecodeImage, DecodeImageCrop and DecodeWholeImageForCrop all decode
/// at this scale. Powers of two only: libjpeg-turbo has SIMD inverse DCTs for 8x8, 4x4 and
/// 2x2 blocks (1x1 is the DC term alone), while 3/8, 5/8, 6/8 and 7/8 run its scalar C
/// ones; training crops of ImageNet-sized photos mostly need 5/8-7/8, and decoding those
/// at 8/8 instead made crop decode + resample 8-28% faster per core (docs/data.md). The
/// resampler then shrinks by less than 2x.
int JpegScaleNum(int width, int height, int min_width, int min_height);

/// DecodeImageCrop's contract, decoding every pixel: the whole image through DecodeImage at
/// the coarsest DCT scale that CropDecodeMinimum allows, and `*region_box` = `box` scaled
/// to it. The reference that the crop-only decode is tested and benchmarked against (it
/// reads the header twice; the loader does not use it). Thread-safe as DecodeImage.
bool DecodeWholeImageForCrop(const uint8_t* data, size_t size, const CropBox& box, int out_width,
                             int out_height, DecodedImage* out, CropBox* region_box,
                             std::string* error);

/// Encodes `height` x `width` interleaved RGB as a baseline JPEG (4:2:0) of `quality`
/// (1-100) into `*out`. Returns false and sets `*error` on failure. Thread-safe.
bool EncodeJpeg(const uint8_t* rgb, int width, int height, int quality, std::vector<uint8_t>* out,
                std::string* error);

/// Encodes `height` x `width` pixels of `channels` (1 grey, 3 RGB, 4 RGBA) 8-bit samples as a
/// PNG into `*out`. Returns false and sets `*error` on failure. Thread-safe.
bool EncodePng(const uint8_t* pixels, int width, int height, int channels,
               std::vector<uint8_t>* out, std::string* error);

}  // namespace ringpilot::data
