// trainer/input/input_options.h: the image loaders' options, made of the room's options and
// the rank's runtime facts (cores, the model's image size, the device).
#include "trainer/input/input_options.h"

#include <gtest/gtest.h>

namespace ringpilot::trainer::input {
namespace {

TEST(InputOptions, ImageLoadersCarryTheDecodeOptions) {
  InputOptions options;
  options.batch_per_rank = 48;
  options.seed = 99;
  options.images.max_bad_fraction = 0.05;
  options.images.worker_nice = 7;
  models::ImageSpec image;
  image.height = 160;
  image.width = 128;
  const data::ImageLoaderOptions o =
      ImageLoaderOptionsFor(options, 40, image, data::ImageTransform::kEval, 6);
  EXPECT_EQ(o.batch, 40);
  EXPECT_EQ(o.out_height, 160);
  EXPECT_EQ(o.out_width, 128);
  EXPECT_EQ(o.transform, data::ImageTransform::kEval);
  EXPECT_EQ(o.seed, 99u);
  EXPECT_EQ(o.workers, 6);
  EXPECT_DOUBLE_EQ(o.max_bad_fraction, 0.05);
  EXPECT_EQ(o.worker_nice, 7);
#ifdef RINGPILOT_WITH_NVJPEG
  options.images.prefetch = 3;
  options.images.gpu_threads = 5;
  const data::cuda::ImagePipelineOptions g = GpuImagePipelineOptionsFor(options, image, 1);
  EXPECT_EQ(g.batch, 48);
  EXPECT_EQ(g.out_height, 160);
  EXPECT_EQ(g.out_width, 128);
  EXPECT_EQ(g.prefetch, 3);
  EXPECT_EQ(g.threads, 5);
  EXPECT_EQ(g.device, 1);
  EXPECT_TRUE(g.train);
  EXPECT_EQ(g.seed, 99u);
  EXPECT_DOUBLE_EQ(g.host_share, 0);
#endif
}

TEST(InputOptions, DecodeThreadsFollowTheCores) {
  ImageDecodeOptions images;  // data.workers 0: from the cores
  EXPECT_EQ(DecodeWorkersFor(images, 16, /*cuda=*/true), 15);
  EXPECT_EQ(DecodeWorkersFor(images, 16, /*cuda=*/false), 4);
  EXPECT_EQ(DecodeWorkersFor(images, 1, /*cuda=*/true), 1);
  EXPECT_EQ(DecodeWorkersFor(images, 2, /*cuda=*/false), 1);
  images.workers = 3;
  EXPECT_EQ(DecodeWorkersFor(images, 16, /*cuda=*/true), 3);
  EXPECT_EQ(DecodeWorkersFor(images, 16, /*cuda=*/false), 3);
}

}  // namespace
}  // namespace ringpilot::trainer::input
