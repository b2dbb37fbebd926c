// A JPEG's frame header (SOFn) read from its bytes alone, without a decoder: coding,
// size and each component's sampling factors, which nvJPEG does not report (it calls a
// greyscale JPEG with a 2x2-sampled Y "greyscale", and its engines decode that wrongly).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringpilot::data {

struct JpegFrame {
  bool progressive = false;  ///< SOF2 (else baseline or extended sequential)
  int width = 0;
  int height = 0;
  int components = 0;
  int sampling_h[4] = {0, 0, 0, 0};  ///< per component (the first four)
  int sampling_v[4] = {0, 0, 0, 0};
};

/// Walks the markers up to the first frame header. False for a non-JPEG, a truncated header
/// or a frame type other than Huffman DCT (SOF0, SOF1, SOF2). Never reads past `size`.
bool ReadJpegFrame(const uint8_t* data, size_t size, JpegFrame* frame);

}  // namespace ringpilot::data
