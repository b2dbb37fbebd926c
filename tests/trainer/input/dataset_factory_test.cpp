// trainer/input/dataset_factory.h OpenDataset: each data.kind gives the dataset that reads
// it, with its counts, epochs, token ids, held-out set and batches, on small real sets:
// CIFAR's layout filled with Fashion-MNIST (fixture data_cifar_fashion), an image folder
// and the shards packed from it, a token shard.
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "base/files.h"
#include "data/image_decode.h"
#include "data/image_pack.h"
#include "data/token_shards.h"
#include "trainer/input/dataset_factory.h"
#include "trainer/input/synthetic_data.h"
#include "trainer/telemetry/rank_log.h"

namespace ringpilot::trainer::input {
namespace {

// A fresh folder, removed at scope exit (base::RemoveTree: LibTorch shadows
// std::filesystem, which tests/test_util.h's TempDir uses).
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = "/tmp/ringpilot-dataset-factory-XXXXXX";
    path_ = ::mkdtemp(pattern.data()) ? pattern : "";
  }
  ~ScratchDir() { base::RemoveTree(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string FashionDir() {
  const char* build = std::getenv("RINGPILOT_BUILD_DIR");
  return std::string(build ? build : "build") + "/tests/data/fashion-cifar";
}

std::string ErrorOf(const InputOptions& options, int world) {
  try {
    OpenDataset(options, 0, world);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// ROOT/{ant,cat}/: `per_class` PNGs each, 12 x 10 pixels, shaded by class and file.
std::string MakeImageFolder(const std::string& root, int per_class) {
  const char* classes[] = {"ant", "cat"};
  for (int c = 0; c < 2; ++c) {
    base::MakeDirs(root + "/" + classes[c]);
    for (int i = 0; i < per_class; ++i) {
      std::vector<uint8_t> rgb(12 * 10 * 3, static_cast<uint8_t>(40 + 100 * c + 7 * i));
      std::vector<uint8_t> png;
      std::string error;
      EXPECT_TRUE(data::EncodePng(rgb.data(), 12, 10, 3, &png, &error)) << error;
      base::WriteFileAtomically(root + "/" + classes[c] + "/" + std::to_string(i) + ".png",
                                std::string(png.begin(), png.end()));
    }
  }
  return root;
}

// An image model of 10 classes reading `kind`.
InputOptions ImageInput(config::DataKind kind, const std::string& train, const std::string& val) {
  InputOptions options;
  options.kind = kind;
  options.train = train;
  options.val = val;
  options.batch_per_rank = 2;
  options.model_input = models::InputKind::kImages;
  options.num_classes = 10;
  options.images.prefetch = 2;
  options.images.workers = 1;
  return options;
}

TEST(OpenDataset, SyntheticIsTheSeedsFunctionWithoutEpochs) {
  InputOptions options;  // synthetic, an image model
  options.batch_per_rank = 4;
  options.seed = 7;
  const auto images = OpenDataset(options, /*rank=*/1, /*world=*/2);
  EXPECT_EQ(images->count().samples, -1);
  EXPECT_EQ(images->steps_per_epoch(), 0);
  EXPECT_FALSE(images->token_spec());
  EXPECT_EQ(images->images(), nullptr);
  EXPECT_TRUE(images->LoadValidationSet(models::ImageSpec{}, false) == nullptr);
  telemetry::RankLog log("/dev/null", 1, false, false);
  images->Start(10, models::ImageSpec{}, c10::kCPU, log);
  EXPECT_EQ(images->pipeline(), nullptr);
  Batch got{at::empty({4, 3, 32, 32}, at::kByte), at::empty({4}, at::kLong), {}};
  images->Fill(3, got);
  Batch want{at::empty({4, 3, 32, 32}, at::kByte), at::empty({4}, at::kLong), {}};
  FillImages(options.seed, FirstSampleIndex(3, 1, 2, 4), models::ImageSpec{}, want);
  EXPECT_TRUE(got.input.equal(want.input));
  EXPECT_TRUE(got.target.equal(want.target));
  EXPECT_EQ(images->EpochOf(1000), 0);

  options.model_input = models::InputKind::kTokens;
  options.seq_len = 32;
  options.vocab_size = 4096;
  const auto tokens = OpenDataset(options, 0, 1);
  ASSERT_TRUE(tokens->token_spec());
  EXPECT_EQ(tokens->token_spec()->vocab, 4096);
  EXPECT_EQ(tokens->token_spec()->seq_len, 32);
  EXPECT_FALSE(tokens->masked_on_device());
}

TEST(OpenDataset, CifarCountsSamplesEpochsAndTheTestBatch) {
  InputOptions options = ImageInput(config::DataKind::kCifar, FashionDir(), FashionDir());
  options.batch_per_rank = 100;
  const auto cifar = OpenDataset(options, /*rank=*/1, /*world=*/2);
  EXPECT_EQ(cifar->count().samples, 2000);
  EXPECT_EQ(cifar->count().files, 1);
  EXPECT_EQ(cifar->steps_per_epoch(), 10);  // 2000 / (2 x 100)
  EXPECT_FALSE(cifar->token_spec());
  EXPECT_EQ(cifar->images(), nullptr);
  const std::unique_ptr<ValidationSet> val = cifar->LoadValidationSet(models::ImageSpec{}, false);
  ASSERT_NE(val.get(), nullptr);
  EXPECT_EQ(val->size(), 500);

  Batch host{at::empty({100, 3, 32, 32}, at::kByte), at::empty({100}, at::kLong), {}};
  cifar->Fill(0, host);
  const auto labels = host.target.accessor<int64_t, 1>();
  std::set<int64_t> seen;
  for (int i = 0; i < 100; ++i) seen.insert(labels[i]);
  EXPECT_GT(seen.size(), 5u);  // a shuffled slice of ten garments
  EXPECT_GE(*seen.begin(), 0);
  EXPECT_LT(*seen.rbegin(), 10);
  EXPECT_EQ(cifar->EpochOf(9), 0);
  EXPECT_EQ(cifar->EpochOf(10), 1);
  EXPECT_EQ(cifar->PositionOf(12).offset, 400);  // two global batches into epoch 1
  cifar->Resume(20, {5, 200});
  EXPECT_EQ(cifar->EpochOf(20), 5);
  EXPECT_EQ(cifar->PositionOf(21).offset, 400);

  options.val = "";
  EXPECT_TRUE(OpenDataset(options, 0, 2)->LoadValidationSet(models::ImageSpec{}, false) == nullptr);
  options.batch_per_rank = 1500;  // 2 x 1500 > 2000: not one global batch
  const std::string small = ErrorOf(options, 2);
  EXPECT_EQ(small.rfind(FashionDir() + ": dataset of 2000 samples is smaller than one global "
                                       "batch (2 ranks x 1500)",
                        0),
            0u)
      << small;
}

TEST(OpenDataset, ImageFolderAndShardsIndexTheSameImages) {
  ScratchDir dir;
  const std::string folder = MakeImageFolder(dir.path() + "/train", 5);
  const std::string val = MakeImageFolder(dir.path() + "/val", 2);
  InputOptions options = ImageInput(config::DataKind::kImageFolder, folder, val);
  const auto from_folder = OpenDataset(options, 0, /*world=*/2);
  EXPECT_EQ(from_folder->count().samples, 10);
  EXPECT_EQ(from_folder->count().files, 10);     // a file per image
  EXPECT_EQ(from_folder->steps_per_epoch(), 2);  // 10 / (2 x 2)
  EXPECT_FALSE(from_folder->token_spec());
  ASSERT_NE(from_folder->images(), nullptr);
  EXPECT_EQ(from_folder->images()->num_classes(), 2);
  models::ImageSpec image;
  image.height = 8;
  image.width = 8;
  const std::unique_ptr<ValidationSet> held_out = from_folder->LoadValidationSet(image, false);
  ASSERT_NE(held_out.get(), nullptr);
  EXPECT_EQ(held_out->size(), 4);
  int64_t scored = 0;
  held_out->ForEachBatch(0, 4, 3, [&](const at::Tensor& images, const at::Tensor& labels) {
    EXPECT_EQ(images.size(1), 3);
    EXPECT_EQ(images.size(2), 8);
    EXPECT_EQ(labels.size(0), images.size(0));
    scored += images.size(0);
  });
  EXPECT_EQ(scored, 4);

  const data::PackResult packed = data::PackImageFolder(
      folder, dir.path() + "/shards", {/*shard_samples=*/4, 0, 0, 0, 1}, [](const std::string&) {});
  ASSERT_EQ(packed.shards.size(), 3u);
  options = ImageInput(config::DataKind::kImageShards, dir.path() + "/shards/shard-*.tar", "");
  const auto from_shards = OpenDataset(options, 1, 2);
  EXPECT_EQ(from_shards->count().samples, 10);
  EXPECT_EQ(from_shards->count().files, 3);  // the shards
  EXPECT_EQ(from_shards->steps_per_epoch(), 2);
  EXPECT_TRUE(from_shards->LoadValidationSet(image, false) == nullptr);

  // Batches come from the pipeline that Start makes (decoding on host threads on a CPU rank).
  telemetry::RankLog log("/dev/null", 1, false, false);
  from_shards->Start(4, image, c10::kCPU, log);
  ImagePipeline* pipeline = from_shards->pipeline();
  ASSERT_NE(pipeline, nullptr);
  pipeline->Fill(0);
  Batch device;
  pipeline->CopyToDevice(0, device);
  EXPECT_EQ(device.input.sizes(), (std::vector<int64_t>{2, 3, 8, 8}));
  EXPECT_EQ(from_shards->PositionOf(2).epoch, 1);

  options.num_classes = 1;  // the folders hold two
  const std::string classes = ErrorOf(options, 2);
  EXPECT_NE(classes.find("2 classes, more than model.num_classes 1"), std::string::npos) << classes;
}

TEST(OpenDataset, TokensFollowTheShardAndMaskOnTheDevice) {
  ScratchDir dir;
  for (const char* name : {"train", "val"}) {
    data::TokenShardWriter w(dir.path() + "/" + name, {1200, 5, 6, 7, 0});
    for (int d = 0; d < 40; ++d) w.AddDocument({1000 + d, 1001, 1002, 1003, 1004, 1005});
    w.Finish();
  }
  InputOptions options;
  options.model_input = models::InputKind::kTokens;
  options.seq_len = 16;
  options.kind = config::DataKind::kTokens;
  options.train = dir.path() + "/train";
  options.val = dir.path() + "/val";
  options.batch_per_rank = 2;
  const int64_t sequences =
      data::PackedSequenceCount(data::ReadTokenShardInfo(options.train), options.seq_len);
  ASSERT_GT(sequences, 8);
  const auto tokens = OpenDataset(options, 0, /*world=*/2);
  EXPECT_EQ(tokens->count().samples, sequences);
  EXPECT_EQ(tokens->count().files, 1);
  EXPECT_EQ(tokens->steps_per_epoch(), sequences / 4);
  ASSERT_TRUE(tokens->token_spec());
  EXPECT_EQ(tokens->token_spec()->vocab, 1200);  // model.vocab_size 0: the shard's
  EXPECT_EQ(tokens->token_spec()->cls, 5);
  EXPECT_TRUE(tokens->masked_on_device());
  const std::unique_ptr<ValidationSet> val = tokens->LoadValidationSet(models::ImageSpec{}, false);
  ASSERT_NE(val.get(), nullptr);
  EXPECT_EQ(val->size(), sequences);
  val->ForEachBatch(0, 3, 3, [](const at::Tensor& ids, const at::Tensor& keys) {
    EXPECT_EQ(ids.sizes(), (std::vector<int64_t>{3, 16}));
    EXPECT_EQ(ids[0][0].item<int64_t>(), 5);  // [CLS]
    EXPECT_EQ(keys.size(0), 3);
  });

  Batch host{at::empty({2, 16}, at::kLong), {}, at::empty({2}, at::kLong)};
  tokens->Fill(0, host);
  EXPECT_EQ(host.input[0][0].item<int64_t>(), 5);
  EXPECT_NE(host.keys[0].item<int64_t>(), host.keys[1].item<int64_t>());
}

}  // namespace
}  // namespace ringpilot::trainer::input
