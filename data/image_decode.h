// CPU decoding of the images in image datasets: JPEG through libjpeg-turbo (TurboJPEG API),
// PNG through libpng. Used by CPU ranks and as the GPU pipeline's fallback for what nvJPEG
// cannot decode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

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

/// Decodes a JPEG or PNG to 8-bit RGB (greyscale, CMYK, palette and alpha converted).
/// Returns false and sets `*error` for a non-image, an undecodable or a truncated image
/// (libjpeg-turbo's "premature end of data" warning counts as an error). Thread-safe (each
/// call uses its own decoder state); `out`'s buffer is reused across calls.
bool DecodeImage(const uint8_t* data, size_t size, DecodedImage* out, std::string* error);

}  // namespace ringpilot::data
