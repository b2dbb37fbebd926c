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

int64_t StepsPerEpochOf(const config::JobConfig& job, int world, int64_t samples) {
  try {
    return data::FullStepsPerEpoch(samples, world, job.data.batch_per_rank);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(job.data.train + ": " + e.what());
  }
}

std::unique_ptr<Dataset> OpenDataset(const config::JobConfig& job, int rank, int world) {
  switch (job.data.kind) {
    case config::DataKind::kSynthetic:
      return OpenSyntheticDataset(job, rank, world,
                                  config::IsImageModel(job.model.name)
                                      ? std::nullopt
                                      : std::optional<models::TokenSpec>(TokenSpecFor(job)));
    case config::DataKind::kCifar:
      return OpenCifarDataset(job, rank, world);
    case config::DataKind::kImageFolder:
      return OpenImageDataset(
          job, rank, world, [](const std::string& path) { return data::OpenImageFolder(path); },
          [](const data::ImageSource& train) { return train.size(); });  // a file per image
    case config::DataKind::kImageShards:
      return OpenImageDataset(
          job, rank, world,
          [](const std::string& path) {
            return data::OpenImageShards(data::ExpandShardList(path));
          },
          [&job](const data::ImageSource&) {
            return static_cast<int64_t>(data::ExpandShardList(job.data.train).size());
          });
    case config::DataKind::kTokens:
      return OpenTokenDataset(job, rank, world, TokenSpecFor(job));
  }
  throw std::logic_error("data.kind " + std::to_string(static_cast<int>(job.data.kind)));
}

models::TokenSpec TokenSpecFor(const config::JobConfig& job) {
  switch (job.data.kind) {
    case config::DataKind::kTokens:
      return ShardTokenSpec(job);
    case config::DataKind::kSynthetic:
    case config::DataKind::kCifar:
    case config::DataKind::kImageFolder:
    case config::DataKind::kImageShards:
      break;
  }
  const int vocab = job.model.vocab_size > 0 ? job.model.vocab_size : config::kSyntheticVocabSize;
  return SyntheticTokenSpec(vocab, job.model.seq_len);
}

}  // namespace ringpilot::trainer::input
