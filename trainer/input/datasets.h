// The Dataset of each data.kind (trainer/input/dataset.h), for OpenDataset
// (dataset_factory.cpp), which alone decides data.kind. Each reads data.train when made and
// throws data::DataError naming a bad file, or std::runtime_error naming data.train when
// one global batch (world x data.batch_per_rank) does not fit in it. Each keeps a copy of
// the options it reads.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "data/image_source.h"
#include "trainer/input/dataset.h"
#include "trainer/input/input_options.h"

namespace ringpilot::trainer::input {

/// Full global batches in one epoch of `samples` (data::FullStepsPerEpoch); throws
/// std::runtime_error naming data.train when not even one fits.
int64_t StepsPerEpochOf(const InputOptions& options, int world, int64_t samples);

/// data.kind synthetic: samples from (train.seed, global index) (synthetic_data.h); token
/// models get `tokens`, image models nullopt.
std::unique_ptr<Dataset> OpenSyntheticDataset(const InputOptions& options, int rank, int world,
                                              std::optional<models::TokenSpec> tokens);

/// data.kind cifar: data.train's batch files in memory, sampled per epoch and rank.
std::unique_ptr<Dataset> OpenCifarDataset(const InputOptions& options, int rank, int world);

/// An image folder or shards at a path (data.train or data.val).
using ImageSetOpener = std::function<std::unique_ptr<data::ImageSource>(const std::string& path)>;
/// Image kinds: data.train through `open` (`files`: what data.train's images are in, given
/// its index), decoded by an ImagePipeline from Start on; data.val through `open` too.
std::unique_ptr<Dataset> OpenImageDataset(
    const InputOptions& options, int rank, int world, const ImageSetOpener& open,
    const std::function<int64_t(const data::ImageSource& train)>& files);

/// data.kind tokens: the run's ids from data.train's shard header (data.val's must be the
/// same), with model.vocab_size rows (0: the shards' vocabulary). Reads headers only.
models::TokenSpec ShardTokenSpec(const InputOptions& options);
/// data.kind tokens: data.train's shard mapped, packed to model.seq_len, sampled per epoch
/// and rank, with the run's ids `tokens`.
std::unique_ptr<Dataset> OpenTokenDataset(const InputOptions& options, int rank, int world,
                                          const models::TokenSpec& tokens);

}  // namespace ringpilot::trainer::input
