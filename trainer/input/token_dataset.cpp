// data.kind tokens: sequences packed from data.train's mapped token shard
// (data/token_shards.h), sampled per epoch and rank, each with one masking key from
// (seed, epoch, sample): the step masks them on the device (trainer/input/mlm_masking.h).
#include <string>
#include <vector>

#include "data/cifar.h"
#include "data/sampler.h"
#include "data/token_shards.h"
#include "trainer/input/datasets.h"
#include "trainer/input/mlm_masking.h"

namespace ringpilot::trainer::input {
namespace {

class TokenDataset : public Dataset {
 public:
  TokenDataset(const InputOptions& options, int rank, int world, const models::TokenSpec& tokens)
      : options_(options),
        tokens_(tokens),
        count_{data::PackedSequenceCount(data::ReadTokenShardInfo(options.train), options.seq_len),
               1},
        steps_per_epoch_(StepsPerEpochOf(options, world, count_.samples)),
        shard_(options.train),
        sequences_(shard_, tokens.seq_len),
        sampler_(sequences_.size(), world, options.batch_per_rank, options.seed),
        rank_(rank) {}

  DataCount count() const override { return count_; }
  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  std::optional<models::TokenSpec> token_spec() const override { return tokens_; }
  std::unique_ptr<ValidationSet> LoadValidationSet(const models::ImageSpec&, bool) const override {
    if (options_.val.empty()) return nullptr;
    return LoadTokenValidationSet(options_.val, options_.seq_len);
  }

  void Start(int64_t, const models::ImageSpec&, const c10::Device&, telemetry::RankLog&) override {}
  bool masked_on_device() const override { return true; }
  void Fill(int64_t batch, Batch& host) override {
    const int64_t epoch = sampler_.Batch(batch, rank_, &indices_).epoch;
    int64_t* ids = host.input.data_ptr<int64_t>();
    int64_t* keys = host.keys.data_ptr<int64_t>();
    for (size_t i = 0; i < indices_.size(); ++i) {
      sequences_.Fill(indices_[i], ids + static_cast<int64_t>(i) * tokens_.seq_len);
      keys[i] = SequenceKey(options_.seed, epoch, indices_[i]);
    }
  }
  void Resume(int64_t batch, data::SamplePosition position) override {
    sampler_.Resume(batch, position);
  }
  data::SamplePosition PositionOf(int64_t batch) const override {
    return sampler_.PositionOf(batch);
  }

 private:
  const InputOptions options_;
  const models::TokenSpec tokens_;
  const DataCount count_;
  const int64_t steps_per_epoch_;
  const data::TokenShard shard_;
  const data::PackedSequences sequences_;  // reads shard_
  data::EpochSampler sampler_;
  const int rank_;
  std::vector<int64_t> indices_;  // the batch's samples, reused
};

}  // namespace

models::TokenSpec ShardTokenSpec(const InputOptions& options) {
  const data::TokenShardInfo train = data::ReadTokenShardInfo(options.train);
  const data::TokenVocab& v = train.vocab;
  if (!options.val.empty()) {
    const data::TokenShardInfo val = data::ReadTokenShardInfo(options.val);
    const data::TokenVocab& w = val.vocab;
    if (w.size != v.size || w.cls != v.cls || w.sep != v.sep || w.mask != v.mask ||
        w.pad != v.pad) {
      throw data::DataError(data::TokenFilePath(options.val) +
                            ": another vocabulary than data.train's " +
                            data::TokenFilePath(options.train) + " (size or special ids differ)");
    }
  }
  if (options.vocab_size > 0 && options.vocab_size < v.size) {
    throw data::DataError(data::TokenFilePath(options.train) + ": model.vocab_size " +
                          std::to_string(options.vocab_size) +
                          " is smaller than the shard's vocabulary of " + std::to_string(v.size) +
                          " ids (leave it 0 to follow the shards)");
  }
  models::TokenSpec spec;
  spec.vocab = options.vocab_size > 0 ? options.vocab_size : v.size;
  spec.cls = v.cls;
  spec.sep = v.sep;
  spec.mask = v.mask;
  spec.pad = v.pad;
  spec.seq_len = options.seq_len;
  return spec;
}

std::unique_ptr<Dataset> OpenTokenDataset(const InputOptions& options, int rank, int world,
                                          const models::TokenSpec& tokens) {
  return std::make_unique<TokenDataset>(options, rank, world, tokens);
}

}  // namespace ringpilot::trainer::input
