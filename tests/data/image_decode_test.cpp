// data/image_decode.h and data/image_transform.h: JPEG (RGB, grey, CMYK) and PNG (RGB, grey,
// alpha) decoding, DCT-scaled decode, broken input as errors, crop boxes and resampling.
#include <turbojpeg.h>

#include <cstdio>  // jpeglib.h needs FILE

#include <jpeglib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include <gtest/gtest.h>

#include "data/image_decode.h"
#include "data/image_transform.h"

namespace ringpilot::data {
namespace {

// A smooth colour image (JPEG keeps it within a few levels).
std::vector<uint8_t> Gradient(int width, int height) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>(255 * x / std::max(1, width - 1));
      p[1] = static_cast<uint8_t>(255 * y / std::max(1, height - 1));
      p[2] = static_cast<uint8_t>(128 + 64 * std::sin(x * 0.05 + y * 0.03));
    }
  }
  return rgb;
}

double MeanAbsDiff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += std::abs(int{a[i]} - int{b[i]});
  return sum / static_cast<double>(a.size());
}

std::vector<uint8_t> TurboCompress(const std::vector<uint8_t>& pixels, int width, int height,
                                   int format, int subsamp) {
  tjhandle h = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(tjCompress2(h, pixels.data(), width, 0, height, format, &buf, &size, subsamp, 95, 0), 0)
      << tjGetErrorStr2(h);
  std::vector<uint8_t> out(buf, buf + size);
  tjFree(buf);
  tjDestroy(h);
  return out;
}

TEST(ImageDecode, JpegRgbRoundTrip) {
  const std::vector<uint8_t> rgb = Gradient(64, 48);
  std::vector<uint8_t> jpeg;
  std::string error;
  ASSERT_TRUE(EncodeJpeg(rgb.data(), 64, 48, 95, &jpeg, &error)) << error;
  EXPECT_EQ(SniffImageFormat(jpeg.data(), jpeg.size()), ImageFormat::kJpeg);
  int w = 0, h = 0;
  ASSERT_TRUE(ReadImageSize(jpeg.data(), jpeg.size(), &w, &h, &error)) << error;
  EXPECT_EQ(w, 64);
  EXPECT_EQ(h, 48);
  DecodedImage img;
  ASSERT_TRUE(DecodeImage(jpeg.data(), jpeg.size(), &img, &error)) << error;
  ASSERT_EQ(img.width, 64);
  ASSERT_EQ(img.height, 48);
  ASSERT_EQ(img.rgb.size(), rgb.size());
  EXPECT_LT(MeanAbsDiff(img.rgb, rgb), 3.0);
}

TEST(ImageDecode, JpegGreyAndCmykBecomeRgb) {
  const int w = 40, h = 32;
  std::vector<uint8_t> grey(static_cast<size_t>(w) * h);
  for (size_t i = 0; i < grey.size(); ++i) grey[i] = static_cast<uint8_t>(i * 7 % 200 + 20);
  std::string error;
  DecodedImage img;
  const std::vector<uint8_t> grey_jpeg = TurboCompress(grey, w, h, TJPF_GRAY, TJSAMP_GRAY);
  ASSERT_TRUE(DecodeImage(grey_jpeg.data(), grey_jpeg.size(), &img, &error)) << error;
  ASSERT_EQ(img.rgb.size(), grey.size() * 3);
  for (size_t i = 0; i < grey.size(); ++i) {
    ASSERT_EQ(img.rgb[3 * i], img.rgb[3 * i + 1]);
    ASSERT_EQ(img.rgb[3 * i], img.rgb[3 * i + 2]);
  }

  // Adobe-style inverted CMYK of a colour image (libjpeg-turbo's rgb_to_cmyk).
  const std::vector<uint8_t> rgb = Gradient(w, h);
  std::vector<uint8_t> cmyk(static_cast<size_t>(w) * h * 4);
  for (size_t i = 0; i < static_cast<size_t>(w) * h; ++i) {
    const double c = 1 - rgb[3 * i] / 255.0, m = 1 - rgb[3 * i + 1] / 255.0,
                 y = 1 - rgb[3 * i + 2] / 255.0;
    const double k = std::min({c, m, y});
    const double d = k < 1 ? 1 - k : 1;
    cmyk[4 * i] = static_cast<uint8_t>(std::lround(255 - (c - k) / d * 255));
    cmyk[4 * i + 1] = static_cast<uint8_t>(std::lround(255 - (m - k) / d * 255));
    cmyk[4 * i + 2] = static_cast<uint8_t>(std::lround(255 - (y - k) / d * 255));
    cmyk[4 * i + 3] = static_cast<uint8_t>(std::lround(255 - k * 255));
  }
  const std::vector<uint8_t> cmyk_jpeg = TurboCompress(cmyk, w, h, TJPF_CMYK, TJSAMP_444);
  ASSERT_TRUE(DecodeImage(cmyk_jpeg.data(), cmyk_jpeg.size(), &img, &error)) << error;
  ASSERT_EQ(img.width, w);
  ASSERT_EQ(img.rgb.size(), rgb.size());
  EXPECT_LT(MeanAbsDiff(img.rgb, rgb), 4.0);
}

TEST(ImageDecode, PngRgbGreyAndAlphaExactly) {
  const int w = 17, h = 9;
  const std::vector<uint8_t> rgb = Gradient(w, h);
  std::vector<uint8_t> png;
  std::string error;
  DecodedImage img;
  ASSERT_TRUE(EncodePng(rgb.data(), w, h, 3, &png, &error)) << error;
  EXPECT_EQ(SniffImageFormat(png.data(), png.size()), ImageFormat::kPng);
  int rw = 0, rh = 0;
  ASSERT_TRUE(ReadImageSize(png.data(), png.size(), &rw, &rh, &error)) << error;
  EXPECT_EQ(rw, w);
  EXPECT_EQ(rh, h);
  ASSERT_TRUE(DecodeImage(png.data(), png.size(), &img, &error)) << error;
  EXPECT_EQ(img.rgb, rgb);

  std::vector<uint8_t> grey(static_cast<size_t>(w) * h), expect;
  for (size_t i = 0; i < grey.size(); ++i) {
    grey[i] = static_cast<uint8_t>(i * 13);
    expect.insert(expect.end(), 3, grey[i]);
  }
  ASSERT_TRUE(EncodePng(grey.data(), w, h, 1, &png, &error)) << error;
  ASSERT_TRUE(DecodeImage(png.data(), png.size(), &img, &error)) << error;
  EXPECT_EQ(img.rgb, expect);

  std::vector<uint8_t> rgba;
  for (size_t i = 0; i < rgb.size() / 3; ++i) {
    rgba.insert(rgba.end(), {rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2],
                             static_cast<uint8_t>(i % 2 ? 255 : 40)});
  }
  ASSERT_TRUE(EncodePng(rgba.data(), w, h, 4, &png, &error)) << error;
  ASSERT_TRUE(DecodeImage(png.data(), png.size(), &img, &error)) << error;
  EXPECT_EQ(img.rgb, rgb);  // alpha dropped, colour untouched (PIL's convert("RGB"))
}

// CMYK at 4:2:0 as Pillow writes it (`Image.save(..., subsampling=2)`): only the first
// channel has 2x2 sampling factors. TurboJPEG's header reader cannot name that layout
// ("Could not determine subsampling type"), so before libjpeg's API took over such files
// were bad samples (0.45% of the ImageNet-like bench set on the host path).
std::vector<uint8_t> PillowStyleCmyk420(const std::vector<uint8_t>& cmyk, int width, int height) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr jerr;
  cinfo.err = jpeg_std_error(&jerr);
  jpeg_create_compress(&cinfo);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buf, &size);
  cinfo.image_width = static_cast<JDIMENSION>(width);
  cinfo.image_height = static_cast<JDIMENSION>(height);
  cinfo.input_components = 4;
  cinfo.in_color_space = JCS_CMYK;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, 95, TRUE);
  cinfo.comp_info[0].h_samp_factor = 2;
  cinfo.comp_info[0].v_samp_factor = 2;
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row =
        const_cast<uint8_t*>(&cmyk[static_cast<size_t>(cinfo.next_scanline) * width * 4]);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::vector<uint8_t> out(buf, buf + size);
  jpeg_destroy_compress(&cinfo);
  std::free(buf);
  return out;
}

TEST(ImageDecode, CmykWithOnlyItsFirstChannelSubsampledDecodes) {
  const int w = 64, h = 48;
  // Adobe's inverted CMYK of one colour: R = C x K / 255 (K = 255: no black ink).
  std::vector<uint8_t> cmyk(static_cast<size_t>(w) * h * 4);
  for (size_t i = 0; i < static_cast<size_t>(w) * h; ++i) {
    cmyk[4 * i] = 200;
    cmyk[4 * i + 1] = 100;
    cmyk[4 * i + 2] = 50;
    cmyk[4 * i + 3] = 255;
  }
  const std::vector<uint8_t> jpeg = PillowStyleCmyk420(cmyk, w, h);
  int width = 0, height = 0;
  std::string error;
  ASSERT_TRUE(ReadImageSize(jpeg.data(), jpeg.size(), &width, &height, &error)) << error;
  EXPECT_EQ(width, w);
  EXPECT_EQ(height, h);
  DecodedImage whole, crop;
  ASSERT_TRUE(DecodeImage(jpeg.data(), jpeg.size(), &whole, &error)) << error;
  ASSERT_EQ(whole.width, w);
  ASSERT_EQ(whole.height, h);
  ASSERT_EQ(whole.rgb.size(), static_cast<size_t>(w) * h * 3);
  for (size_t i = 0; i < whole.rgb.size(); i += 3) {
    ASSERT_NEAR(whole.rgb[i], 200, 3) << i;
    ASSERT_NEAR(whole.rgb[i + 1], 100, 3) << i;
    ASSERT_NEAR(whole.rgb[i + 2], 50, 3) << i;
  }
  // At a DCT scale, and as the loader's crop-only decode.
  ASSERT_TRUE(DecodeImage(jpeg.data(), jpeg.size(), &whole, &error, w / 2, h / 2)) << error;
  EXPECT_EQ(whole.width, w / 2);
  CropBox region;
  ASSERT_TRUE(DecodeImageCrop(jpeg.data(), jpeg.size(), CropBox{8, 8, 32, 24}, 16, 12, &crop,
                              &region, &error))
      << error;
  EXPECT_NEAR(crop.rgb[0], 200, 3);
}

TEST(ImageDecode, BrokenInputIsAnError) {
  const std::vector<uint8_t> rgb = Gradient(64, 64);
  std::vector<uint8_t> jpeg, png;
  std::string error;
  ASSERT_TRUE(EncodeJpeg(rgb.data(), 64, 64, 90, &jpeg, &error));
  ASSERT_TRUE(EncodePng(rgb.data(), 64, 64, 3, &png, &error));
  DecodedImage img;

  const std::vector<uint8_t> truncated(jpeg.begin(), jpeg.begin() + jpeg.size() / 2);
  EXPECT_FALSE(DecodeImage(truncated.data(), truncated.size(), &img, &error));
  EXPECT_NE(error.find("JPEG"), std::string::npos) << error;

  const std::string text = "this is a text file, not an image\n";
  const auto* t = reinterpret_cast<const uint8_t*>(text.data());
  error.clear();
  EXPECT_FALSE(DecodeImage(t, text.size(), &img, &error));
  EXPECT_EQ(error, "not a JPEG or PNG image");
  int w = 0, h = 0;
  EXPECT_FALSE(ReadImageSize(t, text.size(), &w, &h, &error));

  std::vector<uint8_t> garbled = jpeg;  // a JPEG marker, then noise
  for (size_t i = 3; i < garbled.size(); ++i) garbled[i] = static_cast<uint8_t>(i * 31 + 7);
  EXPECT_FALSE(DecodeImage(garbled.data(), garbled.size(), &img, &error));

  // Each failure reports its own cause, not the previous image's: noise, then a JPEG cut
  // after its header (libjpeg-turbo's "premature end" warning), then noise again.
  error.clear();
  EXPECT_FALSE(DecodeImage(garbled.data(), garbled.size(), &img, &error));
  const std::string noise_error = error;
  const std::vector<uint8_t> cut(jpeg.begin(), jpeg.begin() + jpeg.size() * 3 / 4);
  error.clear();
  EXPECT_FALSE(DecodeImage(cut.data(), cut.size(), &img, &error));
  EXPECT_NE(error, noise_error);
  EXPECT_NE(error.find("Premature end of JPEG file"), std::string::npos) << error;
  ASSERT_TRUE(DecodeImage(jpeg.data(), jpeg.size(), &img, &error)) << error;

  const std::vector<uint8_t> short_png(png.begin(), png.begin() + png.size() / 2);
  error.clear();
  EXPECT_FALSE(DecodeImage(short_png.data(), short_png.size(), &img, &error));
  EXPECT_NE(error.find("PNG"), std::string::npos) << error;
}

// A PNG header claiming 2^32-1 x 2^32-1 pixels: refused for its size, not a signed
// overflow of width x height (found by tests/fuzz/image_decode_fuzzer under UBSan; its
// reproducer is corpus/image_decode/regression-size-overflow).
TEST(ImageDecode, HugeHeaderSizesAreRefusedWithoutOverflow) {
  std::vector<uint8_t> png = {
      0x89, 'P',  'N',  'G',  0x0d, 0x0a, 0x1a, 0x0a,  // signature
      0,    0,    0,    13,   'I',  'H',  'D',  'R',   // IHDR, 13 bytes
      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 8,
      2,    0,    0,    0,    0,    0,    0,    0};  // CRC (unchecked before the size)
  int w = 0, h = 0;
  std::string error;
  EXPECT_FALSE(ReadImageSize(png.data(), png.size(), &w, &h, &error));
  EXPECT_NE(error.find("is larger than the limit of"), std::string::npos) << error;
  DecodedImage img;
  error.clear();
  EXPECT_FALSE(DecodeImage(png.data(), png.size(), &img, &error));
  EXPECT_FALSE(error.empty());
}

// A valid PNG with an ancillary chunk inserted before IHDR: libpng reads past it, the PNG
// specification (and ReadImageSize) does not. Both refuse it, so a decoded image always has
// the size the crop planner read (found by tests/fuzz/image_decode_fuzzer; its reproducer is
// corpus/image_decode/regression-chunk-before-ihdr).
TEST(ImageDecode, PngWithAChunkBeforeIhdrIsRefusedByBothReaders) {
  const std::vector<uint8_t> rgb = Gradient(5, 3);
  std::vector<uint8_t> png;
  std::string error;
  ASSERT_TRUE(EncodePng(rgb.data(), 5, 3, 3, &png, &error)) << error;
  DecodedImage img;
  ASSERT_TRUE(DecodeImage(png.data(), png.size(), &img, &error)) << error;
  // A private ancillary chunk "prVt" (libpng skips unknown ancillary chunks, CRC unchecked).
  const std::vector<uint8_t> chunk = {0, 0, 0, 3, 'p', 'r', 'V', 't', 'k', 0, 'v', 0, 0, 0, 0};
  std::vector<uint8_t> moved(png.begin(), png.begin() + 8);
  moved.insert(moved.end(), chunk.begin(), chunk.end());
  moved.insert(moved.end(), png.begin() + 8, png.end());
  int w = 0, h = 0;
  error.clear();
  EXPECT_FALSE(ReadImageSize(moved.data(), moved.size(), &w, &h, &error));
  EXPECT_EQ(error, "PNG: no IHDR header");
  error.clear();
  EXPECT_FALSE(DecodeImage(moved.data(), moved.size(), &img, &error));
  EXPECT_EQ(error, "PNG: no IHDR header");
}

TEST(ImageDecode, JpegDctScalingKeepsTheAskedResolution) {
  const std::vector<uint8_t> rgb = Gradient(256, 192);
  std::vector<uint8_t> jpeg;
  std::string error;
  ASSERT_TRUE(EncodeJpeg(rgb.data(), 256, 192, 90, &jpeg, &error));
  DecodedImage img;
  ASSERT_TRUE(DecodeImage(jpeg.data(), jpeg.size(), &img, &error, 64, 48)) << error;
  EXPECT_EQ(img.width, 64);  // 2/8
  EXPECT_EQ(img.height, 48);
  ASSERT_TRUE(DecodeImage(jpeg.data(), jpeg.size(), &img, &error, 65, 10)) << error;
  EXPECT_EQ(img.width, 128);  // 4/8: 3/8 would be 96 but has no SIMD inverse DCT
  ASSERT_TRUE(DecodeImage(jpeg.data(), jpeg.size(), &img, &error, 129, 10)) << error;
  EXPECT_EQ(img.width, 256);  // 8/8, not 5/8-7/8
  ASSERT_TRUE(DecodeImage(jpeg.data(), jpeg.size(), &img, &error, 1000, 1000)) << error;
  EXPECT_EQ(img.width, 256);  // never upscaled
  EXPECT_EQ(img.rgb.size(), rgb.size());
}

TEST(ImageDecode, JpegScaleIsTheCoarsestPowerOfTwoEighthThatHoldsTheMinimum) {
  EXPECT_EQ(JpegScaleNum(500, 375, 62, 40), 1);  // 63 x 47 at 1/8
  EXPECT_EQ(JpegScaleNum(500, 375, 63, 47), 1);
  EXPECT_EQ(JpegScaleNum(500, 375, 64, 47), 2);   // 125 x 94 at 2/8
  EXPECT_EQ(JpegScaleNum(500, 375, 126, 10), 4);  // 250 x 188 at 4/8
  EXPECT_EQ(JpegScaleNum(500, 375, 251, 10), 8);  // 5/8 would do; 8/8 has the SIMD IDCT
  EXPECT_EQ(JpegScaleNum(500, 375, 10, 189), 8);
  EXPECT_EQ(JpegScaleNum(500, 375, 900, 900), 8);  // never above 8/8
  EXPECT_EQ(JpegScaleNum(500, 375, 0, 100), 8);    // no minimum: the whole resolution
}

TEST(ImageTransform, TrainCropBoxesAreInsideDeterministicAndVaried) {
  int flips = 0;
  for (int64_t sample = 0; sample < 2000; ++sample) {
    const int w = 100 + static_cast<int>(sample % 300), h = 80 + static_cast<int>(sample % 170);
    const CropBox b = TrainCropBox(w, h, 7, 3, sample);
    ASSERT_GE(b.x, 0);
    ASSERT_GE(b.y, 0);
    ASSERT_GT(b.width, 0);
    ASSERT_GT(b.height, 0);
    ASSERT_LE(b.x + b.width, w);
    ASSERT_LE(b.y + b.height, h);
    ASSERT_EQ(b.x, std::floor(b.x));  // torchvision's integer boxes
    const double area = b.width * b.height / (static_cast<double>(w) * h);
    ASSERT_GE(area, 0.07);
    const double ratio = b.width / b.height;
    ASSERT_GE(ratio, 0.7);
    ASSERT_LE(ratio, 1.45);
    const CropBox again = TrainCropBox(w, h, 7, 3, sample);
    ASSERT_EQ(again.x, b.x);
    ASSERT_EQ(again.width, b.width);
    ASSERT_EQ(again.flip, b.flip);
    flips += b.flip;
  }
  EXPECT_GT(flips, 900);
  EXPECT_LT(flips, 1100);
  const CropBox e0 = TrainCropBox(500, 375, 7, 0, 42), e1 = TrainCropBox(500, 375, 7, 1, 42);
  EXPECT_FALSE(e0.x == e1.x && e0.y == e1.y && e0.width == e1.width);
  // A very thin image takes the fallback: the centre crop of the clamped ratio.
  const CropBox thin = TrainCropBox(1000, 10, 1, 0, 0);
  EXPECT_LE(thin.x + thin.width, 1000);
  EXPECT_LE(thin.width, 14);
}

TEST(ImageTransform, EvalCropIsTheCentredSquare) {
  const CropBox b = EvalCropBox(320, 256);
  EXPECT_FLOAT_EQ(b.width, 224);
  EXPECT_FLOAT_EQ(b.height, 224);
  EXPECT_FLOAT_EQ(b.x, 48);
  EXPECT_FLOAT_EQ(b.y, 16);
  EXPECT_FALSE(b.flip);
}

TEST(ImageTransform, ResampleCropCopiesFlipsAndInterpolates) {
  const int w = 8, h = 6;
  const std::vector<uint8_t> rgb = Gradient(w, h);
  std::vector<uint8_t> out(3 * w * h);
  CropBox box{0, 0, w, h, false};
  ResampleCrop(rgb.data(), w, h, box, h, w, out.data());
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        ASSERT_EQ(out[(c * h + y) * w + x], rgb[(y * w + x) * 3 + c]);
      }
    }
  }
  box.flip = true;
  ResampleCrop(rgb.data(), w, h, box, h, w, out.data());
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) ASSERT_EQ(out[y * w + x], rgb[(y * w + (w - 1 - x)) * 3]);
  }
  // A 2x1 image [0, 200] upsampled to 4x1: pixel centres at -0.25, 0.25, 0.75, 1.25.
  const uint8_t two[6] = {0, 0, 0, 200, 200, 200};
  uint8_t four[12];
  ResampleCrop(two, 2, 1, CropBox{0, 0, 2, 1, false}, 1, 4, four);
  EXPECT_EQ(four[0], 0);
  EXPECT_EQ(four[1], 50);
  EXPECT_EQ(four[2], 150);
  EXPECT_EQ(four[3], 200);
}

}  // namespace
}  // namespace ringpilot::data
