// Mean cross-entropy of a linear layer's output, with the gradients computed in the same
// pass as the loss (the MLM decoder over 30522 words: logits, softmax and their gradient
// are one [rows, vocab] buffer instead of log-softmax output, NLL gradient and
// log-softmax gradient buffers, each a full pass over memory). On the CPU the vocabulary
// goes in column chunks small enough for the core's L2: each chunk's logits are
// exponentiated right after its GEMM, and its gradient used by the two weight GEMMs right
// after it is formed (bert-tiny's MLM loss, batch 16 on one core: 110 vs 137 ms).
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

namespace ringpilot::trainer::ops {

struct LinearCrossEntropyOptions {
  /// CPU only: vocabulary columns per chunk; 0 picks about kCpuChunkBytes of logits.
  int64_t cpu_chunk_columns = 0;
  static constexpr int64_t kCpuChunkBytes = 1 << 20;
  static constexpr int64_t kMinCpuChunkColumns = 256;
};

/// mean_i CE(x_i W^T + b, labels_i), differentiable in x, weight and bias: the same value
/// and gradients as at::cross_entropy_loss(at::linear(x, weight, bias), labels) up to
/// float rounding. x [N, K], weight [V, K], bias [V], all float32; labels int64 [N] in
/// [0, V) (no ignore index: the caller passes only the scored rows). The gradients are
/// computed in forward and kept until backward (one weight-sized buffer), which may hand
/// those buffers out as they are: one backward per forward (no retain_graph). No host
/// sync on CUDA. On the CPU a label outside [0, V) throws std::invalid_argument (CUDA's
/// gather reports it as a device-side error). The CPU result is the same maths with a
/// per-chunk softmax shift (exp(l - m_chunk) exp(m_chunk - m)), i.e. the same up to rounding.
at::Tensor LinearCrossEntropy(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                              const at::Tensor& labels,
                              const LinearCrossEntropyOptions& options = {});

/// at::cross_entropy_loss(logits.to(at::kFloat), labels) (mean, ignore index -100) for
/// low-precision logits [N, V] (rows may be strided, columns contiguous), without a float32
/// copy of the logits or of their gradient. On CUDA with bf16/fp16 logits:
/// trainer/ops/cross_entropy_kernels.h, one read of the logits forward, one read and one
/// write backward (BERT-base's MLM head, 1216 x 30528 logits: ~0.5 ms of ATen's
/// log-softmax, NLL and casts a step, 2026-11-30), the float32 maths of the same values up
/// to rounding, the gradient rounded once to the logits' dtype; the logits are saved as
/// they are, so they must not be changed in place before backward. A label outside [0, V)
/// gives a NaN loss there (ATen stops the device). Elsewhere ATen's log-softmax with a
/// float32 result and nll_loss.
at::Tensor CrossEntropyFloat(const at::Tensor& logits, const at::Tensor& labels);

}  // namespace ringpilot::trainer::ops
