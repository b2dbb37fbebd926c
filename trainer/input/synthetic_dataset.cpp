// data.kind synthetic: every sample a pure function of (train.seed, global sample index)
// (trainer/input/synthetic_data.h), so any split of a global batch over ranks sees the
// same samples and a resumed run sees what an unbroken one would. No epochs, no data.val.
#include <optional>
#include <utility>

#include "trainer/input/datasets.h"

namespace ringpilot::trainer::input {
namespace {

class SyntheticDataset : public Dataset {
 public:
  SyntheticDataset(const InputOptions& options, int rank, int world,
                   std::optional<models::TokenSpec> tokens)
      : seed_(options.seed),
        rank_(rank),
        world_(world),
        batch_(options.batch_per_rank),
        tokens_(std::move(tokens)) {}

  DataCount count() const override { return {}; }
  int64_t steps_per_epoch() const override { return 0; }
  std::optional<models::TokenSpec> token_spec() const override { return tokens_; }
  std::unique_ptr<ValidationSet> LoadValidationSet(const models::ImageSpec&, bool) const override {
    return nullptr;
  }

  void Start(int64_t, const models::ImageSpec& image, const c10::Device&,
             telemetry::RankLog&) override {
    image_ = image;
    if (!tokens_) PrepareImages(seed_, image_);
  }
  void Fill(int64_t batch, Batch& host) override {
    const int64_t first = FirstSampleIndex(batch, rank_, world_, batch_);
    if (tokens_) {
      FillTokens(seed_, first, *tokens_, host);
    } else {
      FillImages(seed_, first, image_, host);
    }
  }
  void Resume(int64_t, data::SamplePosition) override {}
  data::SamplePosition PositionOf(int64_t) const override { return {}; }

 private:
  const uint64_t seed_;
  const int rank_;
  const int world_;
  const int batch_;
  const std::optional<models::TokenSpec> tokens_;  // token models; image models: nullopt
  models::ImageSpec image_;                        // image models, from Start
};

}  // namespace

std::unique_ptr<Dataset> OpenSyntheticDataset(const InputOptions& options, int rank, int world,
                                              std::optional<models::TokenSpec> tokens) {
  return std::make_unique<SyntheticDataset>(options, rank, world, std::move(tokens));
}

}  // namespace ringpilot::trainer::input
