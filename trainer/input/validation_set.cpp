#include "trainer/input/validation_set.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "data/image_loader.h"
#include "data/token_shards.h"
#include "trainer/input/mlm_masking.h"

namespace ringpilot::trainer::input {
namespace {

class CifarValidationSet : public ValidationSet {
 public:
  explicit CifarValidationSet(data::CifarSet set) : set_(std::move(set)) {}
  int64_t size() const override { return set_.size(); }
  void ForEachBatch(int64_t first, int64_t last, int batch, const Consumer& consume) override {
    for (int64_t begin = first; begin < last; begin += batch) {
      const int64_t count = std::min<int64_t>(batch, last - begin);
      at::Tensor images = at::empty({count, 3, data::kCifarSide, data::kCifarSide}, at::kByte);
      std::memcpy(images.data_ptr<uint8_t>(), set_.image(begin), count * data::kCifarImageBytes);
      const at::Tensor labels =
          at::from_blob(const_cast<int32_t*>(set_.labels.data() + begin), {count}, at::kInt)
              .to(at::kLong);
      consume(images, labels);
    }
  }

 private:
  data::CifarSet set_;
};

// Contiguous batches of [first, last).
class RangePlan : public data::StepPlan {
 public:
  RangePlan(int64_t first, int64_t last, int batch) : first_(first), last_(last), batch_(batch) {}
  int64_t Indices(int64_t step, std::vector<int64_t>* indices) override {
    const int64_t begin = first_ + step * batch_;
    const int64_t end = std::min(last_, begin + batch_);
    indices->clear();
    for (int64_t i = begin; i < end; ++i) indices->push_back(i);
    return 0;
  }

 private:
  const int64_t first_, last_;
  const int batch_;
};

// Decodes each evaluation's batches with a loader of its own (two batches ahead); bad
// files are replaced as in training, and remembered across evaluations.
class ImageValidationSet : public ValidationSet {
 public:
  ImageValidationSet(const InputOptions& options, std::unique_ptr<data::ImageSource> source,
                     const models::ImageSpec& image, int workers)
      : options_(options), source_(std::move(source)), image_(image), workers_(workers) {}
  int64_t size() const override { return source_->size(); }

  void ForEachBatch(int64_t first, int64_t last, int batch, const Consumer& consume) override {
    if (last <= first) return;
    constexpr int kSlots = 3;
    const int64_t steps = (last - first + batch - 1) / batch;
    std::vector<at::Tensor> images, labels;
    std::vector<data::BatchSlot> slots;
    for (int i = 0; i < kSlots; ++i) {
      images.push_back(at::empty({batch, 3, image_.height, image_.width}, at::kByte));
      labels.push_back(at::empty({batch}, at::kLong));
      slots.push_back({images.back().data_ptr<uint8_t>(), labels.back().data_ptr<int64_t>()});
    }
    RangePlan plan(first, last, batch);
    data::ImageBatchLoader loader(
        *source_, plan, slots,
        ImageLoaderOptionsFor(options_, batch, image_, data::ImageTransform::kEval, workers_));
    loader.Start(0, steps);
    for (int64_t step = 0; step < steps; ++step) {
      int count = 0;
      std::string fatal;
      const int slot = loader.Wait(step, &count, &fatal);
      if (slot < 0) throw data::DataError(fatal);
      consume(images[slot].narrow(0, 0, count), labels[slot].narrow(0, 0, count));
      loader.Release(step);
    }
    for (std::string& w : loader.TakeWarnings()) warnings_.push_back(std::move(w));
    for (int64_t i : loader.bad_files()) bad_.insert(i);
  }
  std::vector<std::string> TakeWarnings() override {
    std::vector<std::string> out;
    out.swap(warnings_);
    return out;
  }
  std::vector<int64_t> bad_files() const override { return {bad_.begin(), bad_.end()}; }

 private:
  const InputOptions options_;
  const std::unique_ptr<data::ImageSource> source_;
  const models::ImageSpec image_;
  const int workers_;
  std::vector<std::string> warnings_;
  std::set<int64_t> bad_;
};

// data.val of data.kind tokens: a mapped shard's sequences packed to model.seq_len, with
// the evaluation's masking keys.
class TokenValidationSet : public ValidationSet {
 public:
  TokenValidationSet(const std::string& prefix, int seq_len)
      : shard_(prefix), sequences_(shard_, seq_len) {}
  int64_t size() const override { return sequences_.size(); }
  void ForEachBatch(int64_t first, int64_t last, int batch, const Consumer& consume) override {
    const int len = sequences_.seq_len();
    for (int64_t begin = first; begin < last; begin += batch) {
      const int64_t count = std::min<int64_t>(batch, last - begin);
      at::Tensor ids = at::empty({count, len}, at::kLong);
      at::Tensor keys = at::empty({count}, at::kLong);
      for (int64_t i = 0; i < count; ++i) {
        sequences_.Fill(begin + i, ids.data_ptr<int64_t>() + i * len);
        keys.data_ptr<int64_t>()[i] = SequenceKey(kEvalMaskSeed, /*epoch=*/0, begin + i);
      }
      consume(ids, keys);
    }
  }

 private:
  const data::TokenShard shard_;
  const data::PackedSequences sequences_;  // reads shard_
};

}  // namespace

std::unique_ptr<ValidationSet> LoadCifarValidationSet(const std::string& path,
                                                      data::CifarVariant variant) {
  return std::make_unique<CifarValidationSet>(
      data::ReadCifar(data::CifarFiles(path, variant, /*train=*/false), variant));
}

std::unique_ptr<ValidationSet> MakeImageValidationSet(const InputOptions& options,
                                                      std::unique_ptr<data::ImageSource> source,
                                                      const models::ImageSpec& image, int workers) {
  return std::make_unique<ImageValidationSet>(options, std::move(source), image, workers);
}

std::unique_ptr<ValidationSet> LoadTokenValidationSet(const std::string& prefix, int seq_len) {
  return std::make_unique<TokenValidationSet>(prefix, seq_len);
}

}  // namespace ringpilot::trainer::input
