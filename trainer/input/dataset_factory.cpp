#include "trainer/input/dataset_factory.h"

#include <optional>
#include <stdexcept>
#include <string>

#include "data/image_source.h"
#include "data/sampler.h"
#include "trainer/input/datasets.h"

namespace ringpilot::trainer::input {

std::string DataCountLine(const DataCount& count) {
  return "data.train: " + std::to_string(count.samples) + " samples in " +
         std::to_string(count.files) + " file" + (count.files == 1 ? "" : "s");
}

int64_t StepsPerEpochOf(const InputOptions& options, int world, int64_t samples) {
  try {
    return data::FullStepsPerEpoch(samples, world, options.batch_per_rank);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(options.train + ": " + e.what());
  }
}

std::unique_ptr<Dataset> OpenDataset(const InputOptions& options, int rank, int world) {
  switch (options.kind) {
    case config::DataKind::kSynthetic:
      return OpenSyntheticDataset(options, rank, world,
                                  options.model_input == models::InputKind::kImages
                                      ? std::nullopt
                                      : std::optional<models::TokenSpec>(TokenSpecFor(options)));
    case config::DataKind::kCifar:
      return OpenCifarDataset(options, rank, world);
    case config::DataKind::kImageFolder:
      return OpenImageDataset(
          options, rank, world, [](const std::string& path) { return data::OpenImageFolder(path); },
          [](const data::ImageSource& train) { return train.size(); });  // a file per image
    case config::DataKind::kImageShards:
      return OpenImageDataset(
          options, rank, world,
          [](const std::string& path) {
            return data::OpenImageShards(data::ExpandShardList(path));
          },
          [&options](const data::ImageSource&) {
            return static_cast<int64_t>(data::ExpandShardList(options.train).size());
          });
    case config::DataKind::kTokens:
      return OpenTokenDataset(options, rank, world, TokenSpecFor(options));
  }
  throw std::logic_error("data.kind " + std::to_string(static_cast<int>(options.kind)));
}

models::TokenSpec TokenSpecFor(const InputOptions& options) {
  switch (options.kind) {
    case config::DataKind::kTokens:
      return ShardTokenSpec(options);
    case config::DataKind::kSynthetic:
    case config::DataKind::kCifar:
    case config::DataKind::kImageFolder:
    case config::DataKind::kImageShards:
      break;
  }
  return SyntheticTokenSpec(
      options.vocab_size > 0 ? options.vocab_size : config::kSyntheticVocabSize, options.seq_len);
}

}  // namespace ringpilot::trainer::input
