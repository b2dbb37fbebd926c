#include "data/jpeg_crop_decode.h"

// jpeglib.h needs FILE and size_t declared first.
#include <cstdio>

#include <jpeglib.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>

namespace ringpilot::data {
namespace {

// libjpeg reports errors through error_exit, which must not return: it longjmps back to
// DecodeJpegCrop. Warnings (corrupt data, premature end) count as errors too, as the
// TurboJPEG path's TJFLAG_STOPONWARNING makes them: a truncated file is a bad sample, not
// an image with a grey bottom.
struct ErrorJump {
  jpeg_error_mgr manager;  // first: libjpeg sees a jpeg_error_mgr*
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void OnError(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorJump*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void OnMessage(j_common_ptr cinfo, int level) {
  if (level < 0) OnError(cinfo);  // a warning; trace messages (level >= 0) are dropped
}

// One decompressor per thread, made on first use and kept until the thread ends
// (jpeg_create_decompress allocates its pools; the loader decodes thousands of images per
// second). jpeg_abort_decompress after every image, failed or not, leaves it reusable.
class Decompressor {
 public:
  Decompressor() {
    cinfo_.err = jpeg_std_error(&err_.manager);
    err_.manager.error_exit = OnError;
    err_.manager.emit_message = OnMessage;
    jpeg_create_decompress(&cinfo_);
  }
  ~Decompressor() { jpeg_destroy_decompress(&cinfo_); }
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;

  jpeg_decompress_struct* cinfo() { return &cinfo_; }
  ErrorJump& err() { return err_; }

 private:
  ErrorJump err_{};
  jpeg_decompress_struct cinfo_{};
};

Decompressor& ThreadDecompressor() {
  thread_local Decompressor decompressor;
  return decompressor;
}

// The scale at which the crop keeps the output's resolution, by the whole-image decode's
// rule (JpegScaleNum), so both paths resample from the same scale.
int PickScaleNum(int width, int height, const CropBox& box, int out_width, int out_height) {
  int min_width = 0, min_height = 0;
  CropDecodeMinimum(width, height, box, out_width, out_height, &min_width, &min_height);
  return JpegScaleNum(width, height, min_width, min_height);
}

// Rows or columns [first, end) of a side of `size` that bilinear taps of [start, start +
// length) reach, with a margin of two for the taps' rounding and the upsampler's context.
void Span(double start, double length, int size, int* first, int* end) {
  *first = std::clamp(static_cast<int>(std::floor(start)) - 2, 0, size - 1);
  *end = std::clamp(static_cast<int>(std::ceil(start + length)) + 2, *first + 1, size);
}

}  // namespace

bool DecodeJpegCrop(const uint8_t* data, size_t size, const CropBox& box, int out_width,
                    int out_height, DecodedImage* out, CropBox* region_box, std::string* error) {
  Decompressor& decompressor = ThreadDecompressor();
  jpeg_decompress_struct* cinfo = decompressor.cinfo();
  // Between setjmp and a longjmp into it only trivially destructible locals live here:
  // `out`'s vector is the caller's and is only resized, never created.
  if (setjmp(decompressor.err().jump) != 0) {
    *error = std::string("JPEG: ") + decompressor.err().message;
    jpeg_abort_decompress(cinfo);
    return false;
  }
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  const int width = static_cast<int>(cinfo->image_width);
  const int height = static_cast<int>(cinfo->image_height);
  if (width <= 0 || height <= 0 || int64_t{width} * height > kMaxImagePixels) {
    *error = "image of " + std::to_string(width) + "x" + std::to_string(height) +
             " pixels is outside the limit of " + std::to_string(kMaxImagePixels) + " pixels";
    jpeg_abort_decompress(cinfo);
    return false;
  }
  // CMYK/YCCK decode to (Adobe's inverted) CMYK, then to RGB below; the rest straight to RGB.
  const bool cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
  cinfo->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  cinfo->scale_num = static_cast<unsigned>(PickScaleNum(width, height, box, out_width, out_height));
  cinfo->scale_denom = 8;
  jpeg_start_decompress(cinfo);

  const int scaled_width = static_cast<int>(cinfo->output_width);
  const int scaled_height = static_cast<int>(cinfo->output_height);
  const double fx = static_cast<double>(scaled_width) / width;
  const double fy = static_cast<double>(scaled_height) / height;
  int x_first = 0, x_end = 0, y_first = 0, y_end = 0;
  Span(box.x * fx, box.width * fx, scaled_width, &x_first, &x_end);
  Span(box.y * fy, box.height * fy, scaled_height, &y_first, &y_end);
  JDIMENSION x_offset = static_cast<JDIMENSION>(x_first);
  JDIMENSION columns = static_cast<JDIMENSION>(x_end - x_first);
  // Moves x_offset left to an iMCU boundary and widens `columns` to keep the right edge.
  if (columns < cinfo->output_width) jpeg_crop_scanline(cinfo, &x_offset, &columns);
  const int channels = cinfo->output_components;
  const int rows = y_end - y_first;
  const size_t stride = static_cast<size_t>(columns) * channels;
  out->rgb.resize(stride * rows);
  if (y_first > 0) jpeg_skip_scanlines(cinfo, static_cast<JDIMENSION>(y_first));
  while (cinfo->output_scanline < static_cast<JDIMENSION>(y_end)) {
    JSAMPROW row = out->rgb.data() + stride * (cinfo->output_scanline - y_first);
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  // The rows below the crop are never decoded.
  jpeg_abort_decompress(cinfo);

  const size_t pixels = static_cast<size_t>(columns) * rows;
  if (cmyk) {
    // R = C x K / 255, as DecodeImage's CMYK conversion (data/image_decode.cpp).
    uint8_t* p = out->rgb.data();
    for (size_t i = 0; i < pixels; ++i) {
      const unsigned k = p[4 * i + 3];
      for (int c = 0; c < 3; ++c)
        p[3 * i + c] = static_cast<uint8_t>((p[4 * i + c] * k + 127) / 255);
    }
    out->rgb.resize(pixels * 3);
  }
  out->width = static_cast<int>(columns);
  out->height = rows;
  region_box->x = static_cast<float>(box.x * fx - static_cast<double>(x_offset));
  region_box->y = static_cast<float>(box.y * fy - y_first);
  region_box->width = static_cast<float>(box.width * fx);
  region_box->height = static_cast<float>(box.height * fy);
  region_box->flip = box.flip;
  return true;
}

}  // namespace ringpilot::data
