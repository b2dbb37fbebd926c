// Synthetic training data that is a pure function of (seed, global sample index), so
// any split of a global batch across ranks sees exactly the same samples, and a
// resumed run sees what an uninterrupted one would have.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

#include "trainer/models/model.h"

namespace ringpilot::trainer::input {

using models::ImageSpec;
using models::TokenSpec;

/// One rank's batch. Tensors are on the CPU (pinned when requested).
struct Batch {
  at::Tensor input;   ///< images: uint8 [B,3,H,W]; tokens: int64 [B,L]
  at::Tensor target;  ///< images: int64 [B]; synthetic tokens: int64 [B,L], -100 where not
                      ///< masked; undefined for data.kind tokens (masked on the device)
  at::Tensor keys;    ///< data.kind tokens: int64 [B] masking keys (trainer/mlm_masking.h)
};

/// Global index of this rank's first sample at `step`: samples are laid out step by
/// step, and within a step rank by rank, so world W x batch B and world 1 x batch W*B
/// cover the same indices.
inline int64_t FirstSampleIndex(int64_t step, int rank, int world, int batch_per_rank) {
  return (step * world + rank) * static_cast<int64_t>(batch_per_rank);
}

/// Precomputes what FillImages needs for every class (optional; makes the first steps
/// as fast as the rest). Thread-safe.
void PrepareImages(uint64_t seed, const ImageSpec& spec);

/// Class-conditional images: a smooth per-class pattern plus per-sample noise, so the
/// task is learnable and the loss falls as training proceeds.
void FillImages(uint64_t seed, int64_t first_index, const ImageSpec& spec, Batch& out);

/// Special ids of synthetic sequences (BERT's WordPiece ones); ids from 1000 up are words.
inline constexpr int64_t kSyntheticCls = 101;
inline constexpr int64_t kSyntheticSep = 102;
inline constexpr int64_t kSyntheticMask = 103;
inline constexpr int64_t kSyntheticPad = 0;
inline constexpr int64_t kSyntheticFirstWord = 1000;

/// The TokenSpec of synthetic sequences of `seq_len` ids over `vocab` ids.
TokenSpec SyntheticTokenSpec(int64_t vocab, int seq_len);

/// Masked-LM sequences over spec.vocab ids (> kSyntheticFirstWord): [CLS] + an arithmetic
/// progression of token ids + [SEP], with exactly round(mask_fraction * (seq_len - 2)) positions
/// replaced by [MASK]. A fixed mask count per sequence makes the mean loss of a split batch equal
/// the loss of the whole batch.
void FillTokens(uint64_t seed, int64_t first_index, const TokenSpec& spec, Batch& out);

/// Images as the model sees them: float, normalised to roughly zero mean, unit variance.
at::Tensor NormalizeImages(const at::Tensor& uint8_images, at::ScalarType dtype);

}  // namespace ringpilot::trainer::input
