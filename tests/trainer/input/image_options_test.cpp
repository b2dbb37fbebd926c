// trainer/input/image_options.h: data.* as the image loaders' options.
#include "trainer/input/image_options.h"

#include <gtest/gtest.h>

namespace ringpilot::trainer::input {
namespace {

TEST(ImageOptions, ImageInputCarriesTheDataKeys) {
  config::JobConfig job;
  EXPECT_EQ(job.data.worker_nice, 10);  // the default: decode threads yield to training
  job.data.batch_per_rank = 48;
  job.data.max_bad_fraction = 0.05;
  job.data.worker_nice = 7;
  job.train.seed = 99;
  models::ImageSpec image;
  image.height = 160;
  image.width = 128;
  const data::ImageLoaderOptions o =
      ImageLoaderOptionsFor(job, 40, image, data::ImageTransform::kEval, 6);
  EXPECT_EQ(o.batch, 40);
  EXPECT_EQ(o.out_height, 160);
  EXPECT_EQ(o.out_width, 128);
  EXPECT_EQ(o.transform, data::ImageTransform::kEval);
  EXPECT_EQ(o.seed, 99u);
  EXPECT_EQ(o.workers, 6);
  EXPECT_DOUBLE_EQ(o.max_bad_fraction, 0.05);
  EXPECT_EQ(o.worker_nice, 7);
#ifdef RINGPILOT_WITH_NVJPEG
  job.data.prefetch = 3;
  job.data.workers = 5;
  const data::cuda::ImagePipelineOptions g = GpuImagePipelineOptionsFor(job, image, 1);
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

TEST(ImageOptions, DecodeThreadsFollowTheCores) {
  config::DataConfig data;  // data.workers 0: from the cores
  EXPECT_EQ(DecodeWorkersFor(data, 16, /*cuda=*/true), 15);
  EXPECT_EQ(DecodeWorkersFor(data, 16, /*cuda=*/false), 4);
  EXPECT_EQ(DecodeWorkersFor(data, 1, /*cuda=*/true), 1);
  EXPECT_EQ(GpuDecodeThreadsFor(data), 8);
  data.workers = 3;
  EXPECT_EQ(DecodeWorkersFor(data, 16, /*cuda=*/true), 3);
  EXPECT_EQ(GpuDecodeThreadsFor(data), 3);
}

}  // namespace
}  // namespace ringpilot::trainer::input
