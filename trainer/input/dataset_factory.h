// The one place that decides data.kind: which Dataset a job's data.train is read through,
// and the run's token ids.
#pragma once

#include <memory>

#include "trainer/input/dataset.h"
#include "trainer/input/input_options.h"

namespace ringpilot::trainer::input {

/// data.train of `options` as rank `rank` of `world` reads it: synthetic, cifar,
/// image_folder or image_shards (an ImageSource, indexed here once), or tokens. Throws
/// data::DataError naming a bad file (cifar: one cut short, or holding another number of
/// records than its distribution name says; an image set with more classes than
/// model.num_classes; a token shard's bad header, a data.val shard of another vocabulary,
/// or a model.vocab_size below the shards' vocabulary), and std::runtime_error naming
/// data.train when one global batch does not fit in it.
std::unique_ptr<Dataset> OpenDataset(const InputOptions& options, int rank, int world);

/// The run's token ids: data.kind tokens: the vocabulary and special ids of data.train's
/// shard header (data.val's must be the same), with model.vocab_size rows (0: the shards'
/// vocabulary size); other kinds: kSynthetic* ids, vocab_size of them (0: kSyntheticVocabSize).
/// Reads headers only. Throws data::DataError naming the file for a bad header, a data.val shard of
/// another vocabulary, or a model.vocab_size below the shards' vocabulary.
models::TokenSpec TokenSpecFor(const InputOptions& options);

}  // namespace ringpilot::trainer::input
