// data.kind image_folder / image_shards: data.train indexed once as a data::ImageSource
// (data/image_source.h); from Start on an ImagePipeline (image_pipeline.h) decodes
// data.prefetch batches ahead on host threads or the GPU, into buffers of its own.
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "data/cifar.h"
#include "data/image_loader.h"
#include "topology/affinity.h"
#include "trainer/input/datasets.h"

namespace ringpilot::trainer::input {
namespace {

// data.train or data.val through `open`; its classes must fit model.num_classes.
std::unique_ptr<data::ImageSource> OpenChecked(const InputOptions& options, const std::string& path,
                                               const ImageSetOpener& open) {
  std::unique_ptr<data::ImageSource> source = open(path);
  if (source->num_classes() > options.num_classes) {
    throw data::DataError(path + ": " + std::to_string(source->num_classes()) +
                          " classes, more than model.num_classes " +
                          std::to_string(options.num_classes));
  }
  return source;
}

class ImageDataset : public Dataset {
 public:
  ImageDataset(const InputOptions& options, int rank, int world, const ImageSetOpener& open,
               const std::function<int64_t(const data::ImageSource&)>& files)
      : options_(options),
        rank_(rank),
        world_(world),
        open_(open),
        train_(OpenChecked(options, options.train, open)),
        count_{train_->size(), files(*train_)},
        steps_per_epoch_(StepsPerEpochOf(options, world, train_->size())) {}

  DataCount count() const override { return count_; }
  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  std::optional<models::TokenSpec> token_spec() const override { return std::nullopt; }
  const data::ImageSource* images() const override { return train_.get(); }
  std::unique_ptr<ValidationSet> LoadValidationSet(const models::ImageSpec& image,
                                                   bool cuda) const override {
    if (options_.val.empty()) return nullptr;
    return MakeImageValidationSet(
        options_, OpenChecked(options_, options_.val, open_), image,
        DecodeWorkersFor(options_.images, topology::BoundCpuCount(), cuda));
  }

  void Start(int64_t batches, const models::ImageSpec& image, const c10::Device& device,
             telemetry::RankLog& log) override {
    history::ImageDecode route;
    pipeline_ =
        MakeImagePipeline(options_, *train_, image, {rank_, world_, batches, device}, &route);
    log.Info("input: " + route.decision);
    route_ = std::move(route);
  }
  std::optional<history::ImageDecode> image_decode() const override { return route_; }
  ImagePipeline* pipeline() override { return pipeline_.get(); }
  void Fill(int64_t, Batch&) override {
    throw std::logic_error("image batches come from the dataset's pipeline, not Fill");
  }
  // The pipeline samples (after Start).
  void Resume(int64_t batch, data::SamplePosition position) override {
    pipeline_->Resume(batch, position);
  }
  data::SamplePosition PositionOf(int64_t batch) const override {
    return pipeline_->PositionOf(batch);
  }
  std::vector<int64_t> bad_files() const override { return pipeline_->bad_files(); }

 private:
  const InputOptions options_;
  const int rank_;
  const int world_;
  const ImageSetOpener open_;
  const std::unique_ptr<data::ImageSource> train_;
  const DataCount count_;
  const int64_t steps_per_epoch_;
  std::unique_ptr<ImagePipeline> pipeline_;    // from Start
  std::optional<history::ImageDecode> route_;  // from Start
};

}  // namespace

std::unique_ptr<Dataset> OpenImageDataset(
    const InputOptions& options, int rank, int world, const ImageSetOpener& open,
    const std::function<int64_t(const data::ImageSource& train)>& files) {
  return std::make_unique<ImageDataset>(options, rank, world, open, files);
}

}  // namespace ringpilot::trainer::input
