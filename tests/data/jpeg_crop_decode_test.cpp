// DecodeImageCrop (data/image_decode.h): decoding only the crop's rows and columns gives the
// pixels that decoding the whole image and resampling the same box gives, for every kind
// of JPEG a real set holds and for boxes at every edge; broken files stay errors.
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "data/image_decode.h"
#include "data/image_transform.h"

namespace ringpilot::data {
namespace {

// Detail at every frequency (edges, stripes, a smooth ramp), so that a misplaced row or
// column or a wrong upsampling context shows as a difference far above JPEG's rounding.
std::vector<uint8_t> Texture(int width, int height, int channels) {
  std::vector<uint8_t> px(static_cast<size_t>(width) * height * channels);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &px[(static_cast<size_t>(y) * width + x) * channels];
      const int checker = ((x / 7) + (y / 5)) % 2 ? 60 : 0;
      p[0] = static_cast<uint8_t>((255 * x / std::max(1, width - 1) + checker) % 256);
      if (channels > 1) {
        p[1] = static_cast<uint8_t>(128 + 100 * std::sin(x * 0.31 + y * 0.07));
        p[2] = static_cast<uint8_t>((x * y / 3 + 3 * y) % 256);
      }
      if (channels > 3) p[3] = static_cast<uint8_t>(200 + (x + y) % 50);
    }
  }
  return px;
}

struct Kind {
  const char* name;
  int width, height;
  int subsamp;
  int pixel_format;
  int flags;
};

std::vector<uint8_t> Encode(const Kind& kind) {
  const int channels = tjPixelSize[kind.pixel_format];
  const std::vector<uint8_t> px = Texture(kind.width, kind.height, channels);
  tjhandle h = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(tjCompress2(h, px.data(), kind.width, 0, kind.height, kind.pixel_format, &buf, &size,
                        kind.subsamp, 92, kind.flags),
            0)
      << kind.name << ": " << tjGetErrorStr2(h);
  std::vector<uint8_t> out(buf, buf + size);
  tjFree(buf);
  tjDestroy(h);
  return out;
}

const Kind kKinds[] = {
    {"420", 500, 375, TJSAMP_420, TJPF_RGB, 0},
    {"422 odd size", 333, 251, TJSAMP_422, TJPF_RGB, 0},
    {"444", 301, 402, TJSAMP_444, TJPF_RGB, 0},
    {"440", 257, 190, TJSAMP_440, TJPF_RGB, 0},
    {"progressive 420", 480, 360, TJSAMP_420, TJPF_RGB, TJFLAG_PROGRESSIVE},
    {"grey", 353, 267, TJSAMP_GRAY, TJPF_GRAY, 0},
    {"progressive grey", 290, 310, TJSAMP_GRAY, TJPF_GRAY, TJFLAG_PROGRESSIVE},
    {"cmyk", 244, 183, TJSAMP_444, TJPF_CMYK, 0},
    {"large 420", 2000, 1400, TJSAMP_420, TJPF_RGB, 0},
};

// The reference: the whole image at the crop's DCT scale, the box scaled to it, resampled.
std::vector<uint8_t> WholeThenCrop(const std::vector<uint8_t>& jpeg, const CropBox& box,
                                   int out_side) {
  DecodedImage image;
  CropBox scaled;
  std::string error;
  EXPECT_TRUE(DecodeWholeImageForCrop(jpeg.data(), jpeg.size(), box, out_side, out_side, &image,
                                      &scaled, &error))
      << error;
  std::vector<uint8_t> out(static_cast<size_t>(3) * out_side * out_side);
  ResampleCrop(image.rgb.data(), image.width, image.height, scaled, out_side, out_side, out.data());
  return out;
}

std::vector<uint8_t> CropOnly(const std::vector<uint8_t>& jpeg, const CropBox& box, int out_side,
                              DecodedImage* region) {
  CropBox region_box;
  std::string error;
  EXPECT_TRUE(DecodeImageCrop(jpeg.data(), jpeg.size(), box, out_side, out_side, region,
                              &region_box, &error))
      << error;
  std::vector<uint8_t> out(static_cast<size_t>(3) * out_side * out_side);
  ResampleCrop(region->rgb.data(), region->width, region->height, region_box, out_side, out_side,
               out.data());
  return out;
}

// Up to 2 levels apart at any pixel and 0.05 on average: rounding, not a misplaced row.
void ExpectSamePixels(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  ASSERT_EQ(got.size(), want.size());
  int max_diff = 0;
  double sum = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const int d = std::abs(int{got[i]} - int{want[i]});
    max_diff = std::max(max_diff, d);
    sum += d;
  }
  EXPECT_LE(max_diff, 2);
  EXPECT_LE(sum / static_cast<double>(got.size()), 0.05);
}

TEST(JpegCropDecode, SamePixelsAsTheWholeImageForEveryKindAndBox) {
  constexpr int kOut = 64;
  for (const Kind& kind : kKinds) {
    const std::vector<uint8_t> jpeg = Encode(kind);
    std::vector<CropBox> boxes;
    for (int64_t sample = 0; sample < 24; ++sample)
      boxes.push_back(TrainCropBox(kind.width, kind.height, 7, 0, sample));
    boxes.push_back(EvalCropBox(kind.width, kind.height));
    const float w = static_cast<float>(kind.width), h = static_cast<float>(kind.height);
    boxes.push_back({0, 0, w, h, false});                          // the whole image
    boxes.push_back({0, 0, w / 5, h / 6, true});                   // top-left corner
    boxes.push_back({w * 4 / 5, h * 5 / 6, w / 5, h / 6, false});  // bottom-right corner
    boxes.push_back({w / 3 + 0.5f, 0, 17, h, false});              // a thin full-height band
    int64_t decoded_pixels = 0, whole_pixels = 0;
    for (const CropBox& box : boxes) {
      SCOPED_TRACE(std::string(kind.name) + " box " + std::to_string(box.x) + "," +
                   std::to_string(box.y) + " " + std::to_string(box.width) + "x" +
                   std::to_string(box.height));
      const std::vector<uint8_t> want = WholeThenCrop(jpeg, box, kOut);
      DecodedImage region;
      const std::vector<uint8_t> got = CropOnly(jpeg, box, kOut, &region);
      // The region's pixels are libjpeg's own; only the box's float arithmetic differs.
      ExpectSamePixels(got, want);
      decoded_pixels += int64_t{region.width} * region.height;
      whole_pixels += int64_t{kind.width} * kind.height;
    }
    // The point of it: far less than the whole image is decoded over the boxes.
    if (kind.width >= 480) {
      EXPECT_LT(decoded_pixels, whole_pixels / 2) << kind.name;
    }
  }
}

// Images smaller than the output (Fashion-MNIST's 28x28, CIFAR-sized crops upscaled to
// 32x32): the crop path must give what a full-resolution decode and the same box give.
TEST(JpegCropDecode, SmallImagesUpscaledAsTheWholeImageIs) {
  constexpr int kOut = 32;
  const Kind kinds[] = {{"tiny grey", 28, 28, TJSAMP_GRAY, TJPF_GRAY, 0},
                        {"tiny 420", 28, 28, TJSAMP_420, TJPF_RGB, 0},
                        {"small 444", 40, 36, TJSAMP_444, TJPF_RGB, 0}};
  for (const Kind& kind : kinds) {
    const std::vector<uint8_t> jpeg = Encode(kind);
    DecodedImage whole;
    std::string error;
    ASSERT_TRUE(DecodeImage(jpeg.data(), jpeg.size(), &whole, &error)) << error;
    ASSERT_EQ(whole.width, kind.width);
    std::vector<CropBox> boxes;
    for (int64_t sample = 0; sample < 40; ++sample)
      boxes.push_back(TrainCropBox(kind.width, kind.height, 3, 1, sample));
    boxes.push_back(EvalCropBox(kind.width, kind.height));
    for (const CropBox& box : boxes) {
      SCOPED_TRACE(std::string(kind.name) + " box " + std::to_string(box.x) + "," +
                   std::to_string(box.y) + " " + std::to_string(box.width) + "x" +
                   std::to_string(box.height));
      std::vector<uint8_t> want(static_cast<size_t>(3) * kOut * kOut);
      ResampleCrop(whole.rgb.data(), whole.width, whole.height, box, kOut, kOut, want.data());
      DecodedImage region;
      const std::vector<uint8_t> got = CropOnly(jpeg, box, kOut, &region);
      ExpectSamePixels(got, want);
    }
  }
}

TEST(JpegCropDecode, BrokenFilesAreErrorsAndTheDecoderStaysUsable) {
  const Kind kind = kKinds[0];
  const std::vector<uint8_t> jpeg = Encode(kind);
  const CropBox box = TrainCropBox(kind.width, kind.height, 1, 0, 3);
  DecodedImage region;
  CropBox region_box;
  std::string error;
  // Cut inside the entropy-coded data: libjpeg's "premature end" warning is an error.
  const std::vector<uint8_t> cut(jpeg.begin(), jpeg.begin() + jpeg.size() / 2);
  const CropBox bottom{0, kind.height * 0.75f, 100, kind.height * 0.25f, false};
  EXPECT_FALSE(
      DecodeImageCrop(cut.data(), cut.size(), bottom, 32, 32, &region, &region_box, &error));
  EXPECT_NE(error.find("JPEG"), std::string::npos) << error;
  // A header cut short.
  error.clear();
  EXPECT_FALSE(DecodeImageCrop(jpeg.data(), 40, box, 32, 32, &region, &region_box, &error));
  EXPECT_FALSE(error.empty());
  // The next good image decodes (the thread's decompressor was reset).
  error.clear();
  EXPECT_TRUE(DecodeImageCrop(jpeg.data(), jpeg.size(), box, 32, 32, &region, &region_box, &error))
      << error;
  EXPECT_GT(region.width, 0);
}

TEST(JpegCropDecode, PngDecodesWholeWithTheBoxUnchanged) {
  const std::vector<uint8_t> px = Texture(40, 30, 3);
  std::vector<uint8_t> png;
  std::string error;
  ASSERT_TRUE(EncodePng(px.data(), 40, 30, 3, &png, &error)) << error;
  const CropBox box{3, 4, 20, 10, true};
  DecodedImage image;
  CropBox region_box;
  ASSERT_TRUE(DecodeImageCrop(png.data(), png.size(), box, 8, 8, &image, &region_box, &error))
      << error;
  EXPECT_EQ(image.width, 40);
  EXPECT_EQ(image.height, 30);
  EXPECT_EQ(image.rgb, px);
  EXPECT_EQ(region_box.x, box.x);
  EXPECT_EQ(region_box.width, box.width);
  EXPECT_TRUE(region_box.flip);
}

}  // namespace
}  // namespace ringpilot::data
