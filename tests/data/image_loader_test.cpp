// data/image_loader.h: batches are a function of (seed, step, rank) whatever the worker
// count or resume point; bad files are replaced by the next sample, warned once, counted;
// past max_bad_fraction the loader reports one fatal line.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "data/image_decode.h"
#include "data/image_loader.h"
#include "data/image_source.h"
#include "data/sampler.h"
#include "tests/test_util.h"

namespace ringpilot::data {
namespace {

using testing::TempDir;
using testing::WriteFile;

constexpr int kBatch = 6, kSide = 16, kSlots = 3;

class SamplerPlan : public StepPlan {
 public:
  SamplerPlan(int64_t size, int rank, int world) : sampler_(size, world, kBatch, 11), rank_(rank) {}
  int64_t Indices(int64_t step, std::vector<int64_t>* indices) override {
    return sampler_.Batch(step, rank_, indices).epoch;
  }
  EpochSampler sampler_;
  const int rank_;
};

// 4 classes x 10 images of varied sizes, JPEG and PNG.
std::string MakeSet(const std::string& root) {
  for (int c = 0; c < 4; ++c) {
    const std::string dir = root + "/class" + std::to_string(c);
    std::filesystem::create_directories(dir);
    for (int i = 0; i < 10; ++i) {
      const int w = 20 + 7 * i, h = 24 + 5 * c;
      std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3);
      for (size_t k = 0; k < rgb.size(); ++k) rgb[k] = static_cast<uint8_t>(k * (c + 3) + i);
      std::vector<uint8_t> bytes;
      std::string error;
      const bool png = i % 2 == 0;
      EXPECT_TRUE(png ? EncodePng(rgb.data(), w, h, 3, &bytes, &error)
                      : EncodeJpeg(rgb.data(), w, h, 90, &bytes, &error));
      WriteFile(dir + "/img" + std::to_string(i) + (png ? ".png" : ".jpg"),
                std::string(bytes.begin(), bytes.end()));
    }
  }
  return root;
}

struct Loaded {
  std::vector<std::vector<uint8_t>> pixels;
  std::vector<std::vector<int64_t>> labels;
  LoaderCounts counts;
  std::vector<std::string> warnings;
  std::vector<int64_t> bad;
  std::string fatal;
};

// Steps first..end-1 of rank `rank` of 2.
Loaded Load(const ImageSource& source, int workers, int64_t first, int64_t end,
            double max_bad = 0.5, int rank = 0) {
  SamplerPlan plan(source.size(), rank, 2);
  if (first > 0) plan.sampler_.Resume(first, plan.sampler_.PositionOf(first));
  std::vector<std::vector<uint8_t>> px(kSlots, std::vector<uint8_t>(kBatch * 3 * kSide * kSide));
  std::vector<std::vector<int64_t>> lb(kSlots, std::vector<int64_t>(kBatch));
  std::vector<BatchSlot> slots;
  for (int i = 0; i < kSlots; ++i) slots.push_back({px[i].data(), lb[i].data()});
  ImageLoaderOptions o;
  o.batch = kBatch;
  o.out_height = kSide;
  o.out_width = kSide;
  o.seed = 5;
  o.workers = workers;
  o.max_bad_fraction = max_bad;
  ImageBatchLoader loader(source, plan, slots, o);
  loader.Start(first, end);
  Loaded r;
  for (int64_t step = first; step < end; ++step) {
    int count = 0;
    const int slot = loader.Wait(step, &count, &r.fatal);
    if (slot < 0) break;
    EXPECT_EQ(count, kBatch);
    r.pixels.push_back(px[slot]);
    r.labels.push_back(lb[slot]);
    loader.Release(step);
  }
  r.counts = loader.counts();
  r.warnings = loader.TakeWarnings();
  r.bad = loader.bad_files();
  return r;
}

TEST(ImageBatchLoader, BatchesDoNotDependOnWorkersOrResume) {
  TempDir tmp;
  const auto source = OpenImageFolder(MakeSet(tmp.path() + "/set"));
  const Loaded one = Load(*source, 1, 0, 8);  // 8 steps: past the first epoch (3 steps of 12)
  const Loaded three = Load(*source, 3, 0, 8);
  ASSERT_EQ(one.pixels.size(), 8u);
  EXPECT_EQ(one.pixels, three.pixels);
  EXPECT_EQ(one.labels, three.labels);
  EXPECT_EQ(one.counts.samples, 8 * kBatch);
  EXPECT_EQ(one.counts.bad_samples, 0);
  EXPECT_TRUE(one.warnings.empty());
  const Loaded resumed = Load(*source, 2, 4, 8);
  for (int s = 4; s < 8; ++s) {
    EXPECT_EQ(resumed.pixels[s - 4], one.pixels[s]) << "step " << s;
    EXPECT_EQ(resumed.labels[s - 4], one.labels[s]);
  }
  // Epochs draw new crops; images are not blank.
  EXPECT_NE(one.pixels[0], one.pixels[3]);
  int nonzero = 0;
  for (uint8_t v : one.pixels[0]) nonzero += v != 0;
  EXPECT_GT(nonzero, static_cast<int>(one.pixels[0].size() / 2));
  // The other rank gets other samples.
  const Loaded other = Load(*source, 2, 0, 1, 0.5, 1);
  EXPECT_NE(other.pixels[0], one.pixels[0]);
}

TEST(ImageBatchLoader, BadFilesAreReplacedWarnedOnceAndCounted) {
  TempDir tmp;
  const std::string root = MakeSet(tmp.path() + "/set");
  WriteFile(root + "/class1/img3.jpg", "this is not a JPEG");  // index 13
  const auto source = OpenImageFolder(root);
  // 4 epochs on both ranks; how often index 13 is drawn comes from the sampler itself.
  int64_t drawn = 0;
  SamplerPlan count_plan(source->size(), 0, 2);
  std::vector<int64_t> idx;
  for (int64_t step = 0; step < 12; ++step) {
    for (int rank = 0; rank < 2; ++rank) {
      count_plan.sampler_.Batch(step, rank, &idx);
      drawn += std::count(idx.begin(), idx.end(), 13);
    }
  }
  ASSERT_GT(drawn, 0);
  int64_t bad_samples = 0;
  for (int rank = 0; rank < 2; ++rank) {
    const Loaded r = Load(*source, 2, 0, 12, 0.5, rank);
    ASSERT_TRUE(r.fatal.empty()) << r.fatal;
    bad_samples += r.counts.bad_samples;
    if (r.counts.bad_samples == 0) continue;
    ASSERT_EQ(r.bad, std::vector<int64_t>{13});
    ASSERT_EQ(r.warnings.size(), 1u);  // once per file, however often it is drawn
    EXPECT_EQ(r.warnings[0],
              "skipping bad sample " + root + "/class1/img3.jpg: not a JPEG or PNG image");
    // The substitute, index 14, is class 1 too: labels as on a clean copy of the set.
    const Loaded clean =
        Load(*OpenImageFolder(MakeSet(tmp.path() + "/clean" + std::to_string(rank))), 2, 0, 12, 0.5,
             rank);
    EXPECT_EQ(r.labels, clean.labels);
    EXPECT_NE(r.pixels, clean.pixels);  // the bad entry holds image 14, not image 13
  }
  EXPECT_EQ(bad_samples, drawn);
}

TEST(ImageBatchLoader, TooManyBadSamplesIsFatal) {
  TempDir tmp;
  const std::string root = MakeSet(tmp.path() + "/set");
  WriteFile(root + "/class0/img1.jpg", "garbage");
  const auto source = OpenImageFolder(root);
  const Loaded r = Load(*source, 2, 0, 12, /*max_bad=*/0.0001);
  EXPECT_NE(r.fatal.find("exceed data.max_bad_fraction 0.000100 (last: " + root +
                         "/class0/img1.jpg: not a JPEG or PNG image)"),
            std::string::npos)
      << r.fatal;
  EXPECT_EQ(r.fatal.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace ringpilot::data
