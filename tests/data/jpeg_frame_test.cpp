// data/jpeg_frame.h: frame headers of JPEGs libjpeg-turbo writes (4:2:0, 4:4:4, grey,
// progressive), and broken input refused without reading past it.
#include <turbojpeg.h>

#include <vector>

#include <gtest/gtest.h>

#include "data/jpeg_frame.h"

namespace ringpilot::data {
namespace {

std::vector<uint8_t> Compress(int width, int height, int format, int subsamp, int flags = 0) {
  const int channels = format == TJPF_GRAY ? 1 : 3;
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * channels);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 7 % 251);
  tjhandle h = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(
      tjCompress2(h, pixels.data(), width, 0, height, format, &buf, &size, subsamp, 90, flags), 0)
      << tjGetErrorStr2(h);
  std::vector<uint8_t> out(buf, buf + size);
  tjFree(buf);
  tjDestroy(h);
  return out;
}

TEST(JpegFrame, ReadsSizeCodingAndSampling) {
  JpegFrame f;
  std::vector<uint8_t> jpeg = Compress(333, 251, TJPF_RGB, TJSAMP_420);
  ASSERT_TRUE(ReadJpegFrame(jpeg.data(), jpeg.size(), &f));
  EXPECT_FALSE(f.progressive);
  EXPECT_EQ(f.width, 333);
  EXPECT_EQ(f.height, 251);
  ASSERT_EQ(f.components, 3);
  EXPECT_EQ(f.sampling_h[0], 2);
  EXPECT_EQ(f.sampling_v[0], 2);
  EXPECT_EQ(f.sampling_h[1], 1);

  jpeg = Compress(64, 48, TJPF_RGB, TJSAMP_444, TJFLAG_PROGRESSIVE);
  ASSERT_TRUE(ReadJpegFrame(jpeg.data(), jpeg.size(), &f));
  EXPECT_TRUE(f.progressive);
  EXPECT_EQ(f.sampling_h[0], 1);
  EXPECT_EQ(f.sampling_v[0], 1);

  jpeg = Compress(40, 30, TJPF_GRAY, TJSAMP_GRAY);
  ASSERT_TRUE(ReadJpegFrame(jpeg.data(), jpeg.size(), &f));
  EXPECT_EQ(f.components, 1);
  EXPECT_EQ(f.sampling_h[0], 1);
}

TEST(JpegFrame, RefusesWhatIsNotAFrameHeader) {
  JpegFrame f;
  const std::vector<uint8_t> jpeg = Compress(64, 48, TJPF_RGB, TJSAMP_420);
  // Every cut short of the frame header fails, and none reads past its end (ASan build).
  size_t sof = 0;
  for (size_t i = 2; i + 1 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xC0) {
      sof = i;
      break;
    }
  }
  ASSERT_GT(sof, 0u);
  for (size_t n = 0; n < sof + 12; ++n) {
    std::vector<uint8_t> cut(jpeg.begin(), jpeg.begin() + n);
    EXPECT_FALSE(ReadJpegFrame(cut.data(), cut.size(), &f)) << n;
  }
  const uint8_t png[] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  EXPECT_FALSE(ReadJpegFrame(png, sizeof png, &f));
}

}  // namespace
}  // namespace ringpilot::data
