// BERT's masked-LM corruption of real token sequences, drawn on the device each step:
// exactly masked_per_row() positions of every sequence are chosen among its non-special
// tokens (BERT's create_pretraining_data chooses a fixed count per sequence too), and of
// those 80% read [MASK], 10% a random id and 10% keep their token. A fixed count keeps
// every shape static (CUDA graphs) and lets the model find the scored rows without a host
// synchronisation.
//
// The draws are a pure function of a 32-bit key per sequence (SequenceKey: seed, epoch,
// sample, computed on the host with the batch) and the position in the sequence: integer
// hashes in int64 torch ops, exact on every device, so a CPU rank, a CUDA rank and a
// resumed run mask the same positions the same way. The definition (docs/data.md):
//
//   H(x)      = x ^= x >> 16; x = x * 0x45d9f3b mod 2^32; twice, then x ^ (x >> 16)
//   U(k, j, s) = H(k ^ H(4 j + s))                        for key k, position j, salt s
//   priority(j) = 2^45 [token j is special] + 2^13 U(k, j, 1) + j
//   the masked_per_row() positions of smallest priority are masked (ties impossible);
//   at a masked position a = U(k, j, 2) mod 10: a < 8 [MASK], a = 8 the id
//   U(k, j, 3) mod vocab, a = 9 the token itself; its target is the original token.
//
// Special tokens ([CLS] [SEP] [MASK] [PAD]) are masked only in a sequence with fewer than
// masked_per_row() others (a shard's documents are never empty, so packing does not make
// one for masked_per_row() <= (seq_len - 1) / 2).
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "trainer/models/model.h"

namespace ringpilot::trainer::input {

/// Sequences up to this length (positions fit in 13 bits of the priority).
inline constexpr int kMaxMaskedSeqLen = 8192;

/// The masking key of sample `sample` in epoch `epoch` of a run seeded `seed`, in [0, 2^32).
int64_t SequenceKey(uint64_t seed, int64_t epoch, int64_t sample);

/// Evaluation keys use this seed and epoch 0 (not train.seed): every evaluation of every run
/// scores the same positions of data.val.
inline constexpr uint64_t kEvalMaskSeed = 0x5EEDE7A1;

struct MaskedTokens {
  at::Tensor input;   ///< int64 [B, L]: the corrupted sequences the model reads
  at::Tensor target;  ///< int64 [B, L]: the original id at masked positions, -100 elsewhere
};

/// Masks `tokens` (int64 [B, L], L <= kMaxMaskedSeqLen) with one key per row (`keys`, int64
/// [B], on the same device). The vocabulary and special ids come from `spec`
/// (masked_per_row() <= L). Asynchronous torch ops on the tensors' device: no host
/// synchronisation, fixed shapes, capturable in a CUDA graph. Thread-safe.
MaskedTokens MaskTokens(const at::Tensor& tokens, const at::Tensor& keys,
                        const models::TokenSpec& spec);

}  // namespace ringpilot::trainer::input
