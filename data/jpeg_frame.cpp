#include "data/jpeg_frame.h"

namespace ringpilot::data {

bool ReadJpegFrame(const uint8_t* data, size_t size, JpegFrame* frame) {
  if (size < 4 || data[0] != 0xFF || data[1] != 0xD8) return false;
  size_t i = 2;
  while (i + 4 <= size) {
    if (data[i] != 0xFF) return false;
    const int marker = data[i + 1];
    if (marker == 0xFF) {  // fill bytes before a marker
      ++i;
      continue;
    }
    if (marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) {
      i += 2;  // markers without a length
      continue;
    }
    const size_t length = (size_t{data[i + 2]} << 8) | data[i + 3];
    if (length < 2 || i + 2 + length > size) return false;
    if (marker == 0xC0 || marker == 0xC1 || marker == 0xC2) {
      const uint8_t* sof = data + i + 4;  // precision, height, width, components, ...
      if (length < 8) return false;
      frame->progressive = marker == 0xC2;
      frame->height = (sof[1] << 8) | sof[2];
      frame->width = (sof[3] << 8) | sof[4];
      frame->components = sof[5];
      if (length < 8 + 3 * static_cast<size_t>(frame->components)) return false;
      for (int c = 0; c < frame->components && c < 4; ++c) {
        frame->sampling_h[c] = sof[7 + 3 * c] >> 4;
        frame->sampling_v[c] = sof[7 + 3 * c] & 15;
      }
      return true;
    }
    if ((marker >= 0xC3 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) ||
        marker == 0xDA || marker == 0xD9) {
      return false;  // another coding, or scan data before any frame header
    }
    i += 2 + length;
  }
  return false;
}

}  // namespace ringpilot::data
