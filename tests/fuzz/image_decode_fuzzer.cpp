// libFuzzer target: JPEG/PNG decoding of the image pipelines' CPU path (data/image_decode.h:
// libjpeg-turbo and libpng behind ringpilot's checks). Input: the encoded image. Contract
// checked: ReadImageSize and DecodeImage succeed or return false with a one-line error;
// a decoded image has the size its header states (DCT-scaled decodes at least the asked
// minimum, never more than full size) and width x height x 3 bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/image_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringpilot::data;
  int width = 0, height = 0;
  std::string error;
  if (!ReadImageSize(data, size, &width, &height, &error)) {
    if (error.empty() || error.find('\n') != std::string::npos) __builtin_trap();
    DecodedImage out;
    std::string decode_error;
    if (DecodeImage(data, size, &out, &decode_error)) __builtin_trap();  // no header, no image
    return 0;
  }
  if (width <= 0 || height <= 0) __builtin_trap();
  // Images up to 16 Mpixel: larger headers take the same paths and only slow the search.
  if (static_cast<int64_t>(width) * height > (int64_t{1} << 24)) return 0;
  static DecodedImage out;  // reused, as each decode thread of a rank does
  for (const int min_side : {0, 16}) {
    error.clear();
    if (!DecodeImage(data, size, &out, &error, min_side, min_side)) {
      if (error.empty() || error.find('\n') != std::string::npos) __builtin_trap();
      continue;
    }
    if (out.width <= 0 || out.height <= 0 || out.width > width || out.height > height) {
      __builtin_trap();
    }
    if (min_side == 0 && (out.width != width || out.height != height)) __builtin_trap();
    if (out.rgb.size() != static_cast<size_t>(out.width) * out.height * 3) __builtin_trap();
  }
  return 0;
}
